//! Attacks on the local mode's facade, each measured by the facade process's own numbers (its peak
//! resident memory from `/proc/<pid>/status`), never by timings.

use serde_json::{Value, json};

use crate::support::local_mode::{Local, LocalStore, start};

/// The facade's peak resident memory so far (`VmHWM`), in KiB.
fn peak_kib(local: &Local) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", local.child.id())).expect("the facade's status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

async fn call(local: &Local, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = local
        .client
        .request(method.parse().expect("method"), format!("{}{path}", local.base))
        .bearer_auth("alice-token");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("reaches the facade");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

async fn upload(local: &Local, slug: &str, name: &str, bytes: &[u8]) -> (u16, Value) {
    let boundary = "yuxi-attack-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: text/markdown\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let response = local
        .client
        .post(format!("{}/api/knowledge/{slug}/documents", local.base))
        .bearer_auth("alice-token")
        .header("content-type", format!("multipart/form-data; boundary={boundary}"))
        .body(body)
        .send()
        .await
        .expect("reaches the facade");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// Six heading lines of 200 four-byte characters, then `x` paragraphs up to `bytes`.
fn deep_headings_then_tiny_paragraphs(bytes: usize) -> Vec<u8> {
    let mut text = String::new();
    for level in 1..=6 {
        text.push_str(&format!("{} {}\n", "#".repeat(level), "𝔸".repeat(200)));
    }
    while text.len() + 3 <= bytes {
        text.push_str("x\n\n");
    }
    text.into_bytes()
}

#[tokio::test]
async fn a_markdown_of_deep_headings_and_tiny_paragraphs_is_indexed_within_a_bounded_memory() {
    let local = start(LocalStore::InProcess, "scripted/echo", "[{content: unused}]").await;
    let (status, made) =
        call(&local, "POST", "/api/knowledge", Some(json!({"name": "Attack", "slug": "attack"}))).await;
    assert_eq!(status, 201, "{made}");
    // A first document loads what every indexing uses (the word segmenter's dictionary, a writer).
    let (status, answer) =
        upload(&local, "attack", "first.md", b"# Leases\n\nA lease is renewed every ten seconds.\n").await;
    assert_eq!(status, 201, "{answer}");
    let before = peak_kib(&local);
    // 256 KiB once took the facade from 114 MB to 609 MB; 1 MiB to 2 GB.
    for (name, size) in [("quarter.md", 256 * 1024), ("whole.md", 1024 * 1024)] {
        let (status, answer) = upload(&local, "attack", name, &deep_headings_then_tiny_paragraphs(size)).await;
        assert_eq!(status, 201, "{name}: {answer}");
        assert!(answer["document"]["chunks"].as_u64().unwrap_or(0) > 0, "{answer}");
    }
    let grown = peak_kib(&local).saturating_sub(before);
    eprintln!("the facade's peak memory grew by {grown} KiB");
    assert!(grown < 64 * 1024, "the facade's peak memory grew by {grown} KiB for 1.25 MiB of Markdown");
    let (status, found) =
        call(&local, "POST", "/api/knowledge/attack/search", Some(json!({"query": "x", "top_k": 1}))).await;
    assert_eq!(status, 200, "{found}");
    let location = found["results"][0]["location"].as_str().unwrap_or_default();
    assert!(location.contains('𝔸'), "the passage keeps its heading: {found}");
}
