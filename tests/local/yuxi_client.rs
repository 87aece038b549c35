//! The Yuxi web client's requests, replayed against the local mode: each file of `tests/yuxi-client/`
//! is a scenario of requests as the client sends them and the shapes of the answers it reads (written
//! from Yuxi's reference facts and its public client code, `web/src/apis` and `web/src/composables`).
//! Every scenario runs against a local mode with the test Redis and one with no Redis.
//!
//! A fixture is `{name, from, steps}`; a step is
//! `{request: {method, path, token, json?, form?, multipart?}, status, response?, save?, until?, events?}`:
//! - `response` is matched as a shape: an object matches when each of its keys does (others may be
//!   there), an array element by element (a last element `"..."` allows more), `"<string>"`,
//!   `"<number>"`, `"<bool>"`, `"<object>"`, `"<array>"`, `"<null>"`, `"<any>"`, `"<absent>"` and
//!   `"<a|b>"` by type, anything else by equality;
//! - `save` names JSON pointers into the answer whose values later steps quote as `{{name}}`;
//! - `until` repeats the request (up to 30 s) until the answer matches it;
//! - `events` reads the answer as server-sent events to the end (within `within` seconds, 60 unless
//!   told) and matches each expected `{event, data}` against a later event than the one before (a
//!   subsequence); `no_events` lists `{event?, data}` that no event of the stream may match (an entry
//!   without `event` matches events of any name).
//!
//! A `multipart` request is one part: `{field, file_name, content_type?, content | content_base64}`
//! (`text/plain` by default; `content_base64` for bytes that are not text).
//! `YUXI_CLIENT_FIXTURES=13,14` runs only the fixtures whose file names start with one of those.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tempfile::TempDir;

use crate::support::extra_agents::{main_agent, start_with};
use crate::support::local_mode::{Local, LocalStore};
use crate::support::repository::root;

crate::with_each_store!(every_fixture_of_the_yuxi_client_passes);

/// A main agent that answers after 2 s: long enough for a second message to find its thread busy.
const SLOW_CHAT_SCRIPT: &str = "- delay_ms: 2000\n  content: a slow answer\n";

async fn every_fixture_of_the_yuxi_client_passes(store: LocalStore) {
    let agent = main_agent("slow-chat");
    let (local, _manifests) =
        start_with(store, TempDir::new().expect("dir"), &[("slow-chat", &agent)], &[("slow-chat", SLOW_CHAT_SCRIPT)])
            .await;
    let dir = root().join("tests/yuxi-client");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "the fixtures are in {}", dir.display());
    if let Ok(only) = std::env::var("YUXI_CLIENT_FIXTURES") {
        let prefixes: Vec<&str> = only.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
        files.retain(|f| {
            let name = f.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
            prefixes.iter().any(|p| name.starts_with(p))
        });
    }
    for file in files {
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("reads")).expect("JSON");
        let name = format!("{}: {}", file.file_name().expect("name").to_string_lossy(), fixture["name"]);
        let mut saved = Map::new();
        for (at, step) in fixture["steps"].as_array().expect("steps").iter().enumerate() {
            run_step(&local, step, &mut saved)
                .await
                .unwrap_or_else(|e| panic!("{name}, step {at}: {e}\n{}", local.log()));
        }
    }
}

/// `text` with each `{{name}}` replaced by the saved value (a string as it is, anything else as JSON).
fn quote(text: &str, saved: &Map<String, Value>) -> String {
    let mut out = text.to_string();
    for (name, value) in saved {
        let with = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out = out.replace(&format!("{{{{{name}}}}}"), &with);
    }
    out
}

/// `value` with every string quoted ([`quote`]); a string that is only `{{name}}` becomes the saved value.
fn quote_all(value: &Value, saved: &Map<String, Value>) -> Value {
    match value {
        Value::String(s) => {
            let name = s.strip_prefix("{{").and_then(|r| r.strip_suffix("}}"));
            match name.and_then(|n| saved.get(n)) {
                Some(v) => v.clone(),
                None => Value::String(quote(s, saved)),
            }
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| quote_all(v, saved)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), quote_all(v, saved))).collect()),
        other => other.clone(),
    }
}

async fn send(local: &Local, request: &Value) -> Result<reqwest12::Response, String> {
    let method = request["method"].as_str().ok_or("request.method")?;
    let path = request["path"].as_str().ok_or("request.path")?;
    let url = format!("{}{path}", local.base);
    let mut builder = local.client.request(method.parse().map_err(|e| format!("method: {e}"))?, &url);
    if let Some(token) = request["token"].as_str() {
        builder = builder.bearer_auth(token);
    }
    if let Some(headers) = request["headers"].as_object() {
        for (name, value) in headers {
            builder = builder.header(name, value.as_str().unwrap_or_default());
        }
    }
    if let Some(body) = request.get("json") {
        builder = builder.json(body);
    } else if let Some(form) = request["form"].as_object() {
        let pairs: Vec<(String, String)> =
            form.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect();
        builder = builder.form(&pairs);
    } else if let Some(part) = request["multipart"].as_object() {
        let boundary = "yuxi-client-boundary";
        let content = match part.get("content_base64").and_then(Value::as_str) {
            Some(encoded) => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|e| format!("content_base64: {e}"))?
            }
            None => part.get("content").and_then(Value::as_str).unwrap_or_default().as_bytes().to_vec(),
        };
        let mut body = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"; filename=\"{}\"\r\nContent-Type: {}\r\n\r\n",
            part.get("field").and_then(Value::as_str).unwrap_or("file"),
            part.get("file_name").and_then(Value::as_str).unwrap_or_default(),
            part.get("content_type").and_then(Value::as_str).unwrap_or("text/plain"),
        )
        .into_bytes();
        body.extend_from_slice(&content);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        builder = builder.header("content-type", format!("multipart/form-data; boundary={boundary}")).body(body);
    }
    builder.send().await.map_err(|e| format!("{method} {path}: {e}"))
}

async fn run_step(local: &Local, step: &Value, saved: &mut Map<String, Value>) -> Result<(), String> {
    let request = quote_all(&step["request"], saved);
    let status = step["status"].as_u64().unwrap_or(200) as u16;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = send(local, &request).await?;
        let got = response.status().as_u16();
        if let Some(expected) = step.get("events") {
            if got != status {
                return Err(format!("status {got}, expected {status}: {}", response.text().await.unwrap_or_default()));
            }
            let within = step["within"].as_u64().unwrap_or(60);
            let text = tokio::time::timeout(Duration::from_secs(within), response.text())
                .await
                .map_err(|_| format!("the event stream did not end within {within} s"))?
                .map_err(|e| e.to_string())?;
            let events = sse(&text);
            match_events(&events, &quote_all(expected, saved))?;
            return match step.get("no_events") {
                Some(refused) => no_events(&events, &quote_all(refused, saved)),
                None => Ok(()),
            };
        }
        let text = response.text().await.map_err(|e| e.to_string())?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        if let Some(until) = step.get("until") {
            if got == status && shape(&body, &quote_all(until, saved), "").is_ok() {
                save(step, &body, saved)?;
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("never matched `until` in 30 s; last {got}: {body}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        if got != status {
            return Err(format!("status {got}, expected {status}: {body}"));
        }
        if let Some(expected) = step.get("response") {
            shape(&body, &quote_all(expected, saved), "").map_err(|e| format!("{e}\nin {body}"))?;
        }
        return save(step, &body, saved);
    }
}

fn save(step: &Value, body: &Value, saved: &mut Map<String, Value>) -> Result<(), String> {
    if let Some(names) = step["save"].as_object() {
        for (name, pointer) in names {
            let pointer = pointer.as_str().ok_or("save: a JSON pointer")?;
            let value = body.pointer(pointer).ok_or_else(|| format!("save {name}: no {pointer} in {body}"))?;
            saved.insert(name.clone(), value.clone());
        }
    }
    Ok(())
}

/// The events of an SSE text: `(event, data as JSON)`.
fn sse(text: &str) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let mut event = "message".to_string();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(name) = line.strip_prefix("event:") {
                event = name.trim().to_string();
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.trim_start());
            }
        }
        if !data.is_empty() {
            events.push((event, serde_json::from_str(&data).unwrap_or(Value::String(data))));
        }
    }
    events
}

fn match_events(events: &[(String, Value)], expected: &Value) -> Result<(), String> {
    let mut from = 0;
    for (at, want) in expected.as_array().ok_or("events: a list")?.iter().enumerate() {
        let name = want["event"].as_str().unwrap_or("message");
        let found = events[from..]
            .iter()
            .position(|(event, data)| event == name && shape(data, &want["data"], "").is_ok())
            .ok_or_else(|| {
                let seen: Vec<_> = events.iter().map(|(e, d)| format!("{e}: {d}")).collect();
                format!(
                    "no `{name}` event matches events[{at}] = {want} after event {from}; the stream:\n{}",
                    seen.join("\n")
                )
            })?;
        from += found + 1;
    }
    Ok(())
}

/// Fails naming the first event that matches one of `refused` (`{event?, data}`).
fn no_events(events: &[(String, Value)], refused: &Value) -> Result<(), String> {
    for want in refused.as_array().ok_or("no_events: a list")? {
        let name = want["event"].as_str();
        if let Some((event, data)) = events
            .iter()
            .find(|(event, data)| name.is_none_or(|n| n == event) && shape(data, &want["data"], "").is_ok())
        {
            return Err(format!("the event `{event}: {data}` matches no_events {want}"));
        }
    }
    Ok(())
}

/// Whether `got` has the shape `want` (see the module); the error names the first path that differs.
fn shape(got: &Value, want: &Value, path: &str) -> Result<(), String> {
    let differs = || format!("{}: {got} does not match {want}", if path.is_empty() { "." } else { path });
    match want {
        Value::String(s) if s.starts_with('<') && s.ends_with('>') => {
            let ok = s[1..s.len() - 1].split('|').any(|kind| match kind {
                "string" => got.is_string(),
                "number" => got.is_number(),
                "bool" => got.is_boolean(),
                "object" => got.is_object(),
                "array" => got.is_array(),
                "null" => got.is_null(),
                "any" => true,
                _ => false,
            });
            if ok { Ok(()) } else { Err(differs()) }
        }
        Value::Object(fields) => {
            let Some(object) = got.as_object() else { return Err(differs()) };
            for (key, want) in fields {
                let at = format!("{path}.{key}");
                match (object.get(key), want) {
                    (None, Value::String(s)) if s == "<absent>" => {}
                    (None, _) => return Err(format!("{at}: missing in {got}")),
                    (Some(_), Value::String(s)) if s == "<absent>" => return Err(format!("{at}: should be absent")),
                    (Some(value), want) => shape(value, want, &at)?,
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            let Some(array) = got.as_array() else { return Err(differs()) };
            let open = items.last() == Some(&json!("..."));
            let items = if open { &items[..items.len() - 1] } else { &items[..] };
            if array.len() < items.len() || (!open && array.len() != items.len()) {
                return Err(format!(
                    "{path}: {} items, expected {}{}",
                    array.len(),
                    items.len(),
                    if open { " or more" } else { "" }
                ));
            }
            for (i, (value, want)) in array.iter().zip(items).enumerate() {
                shape(value, want, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if got == want => Ok(()),
        _ => Err(differs()),
    }
}

#[test]
fn a_shape_matches_by_type_subset_and_prefix_and_names_what_differs() {
    let got = json!({"a": "x", "b": [1, 2, 3], "c": null, "d": {"e": true}});
    assert!(
        shape(&got, &json!({"a": "<string>", "b": [1, "..."], "c": "<string|null>", "d": {"e": "<bool>"}}), "").is_ok()
    );
    assert!(shape(&got, &json!({"z": "<absent>"}), "").is_ok());
    assert_eq!(shape(&got, &json!({"b": [1, 2]}), "").unwrap_err(), ".b: 3 items, expected 2");
    assert_eq!(
        shape(&got, &json!({"d": {"e": "<string>"}}), "").unwrap_err(),
        ".d.e: true does not match \"<string>\""
    );
    assert!(shape(&got, &json!({"a": "<absent>"}), "").is_err());
}
