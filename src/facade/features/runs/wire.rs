//! The run events as Yuxi's web client reads them. The runner writes flat payloads
//! (`{type: message_delta | tool_call | tool_result, ...}`, docs/concepts/runs.md); Yuxi's client renders
//! only Yuxi's shapes: a `messages` payload carries `items`, a list of chunks
//! `{status: "loading", run_id, request_id, stream_event: {type, message_id, content, ...}}` for model
//! output and `{status: "stream_event", event: {method: "tools", data: {event: "tool-finished", ...}}}`
//! for a tool's result; `error` and `end` carry a `chunk` with `status: error | finished`. The facade
//! translates at read time, so the stored stream, `subagent_events` and `subagent_status` keep the flat
//! form, and `GET .../events?event_format=flat` streams it unchanged.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::run::{Envelope, EventKind};

/// Which shape the event stream's payloads take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventFormat {
    /// Yuxi's shapes (the default): `payload.items[]` and `payload.chunk`.
    #[default]
    Yuxi,
    /// The payloads as the runner wrote them.
    Flat,
}

/// The SSE `data` of one event: the envelope with its payload in `format`, and the run's `request_id`
/// beside it (Yuxi's client reads `data.request_id`). Takes the envelope: the flat form moves its
/// payload rather than copying it.
pub fn event_data(mut envelope: Envelope, request_id: Option<&str>, format: EventFormat) -> Value {
    if format == EventFormat::Yuxi {
        envelope.payload = yuxi_payload(&envelope, request_id);
    }
    let mut data = serde_json::to_value(envelope).expect("an envelope serializes");
    if let Some(request_id) = request_id {
        data["request_id"] = json!(request_id);
    }
    data
}

/// The payload of `envelope` in Yuxi's shape. A payload of a kind this facade does not know is passed
/// through unchanged.
pub fn yuxi_payload(envelope: &Envelope, request_id: Option<&str>) -> Value {
    let payload = &envelope.payload;
    match envelope.event {
        EventKind::Metadata => {
            let mut out = payload.as_object().cloned().unwrap_or_default();
            let subagent = out.get("parent").is_some_and(|p| !p.is_null());
            out.entry("run_type").or_insert_with(|| json!(if subagent { "subagent" } else { "chat" }));
            out.entry("source").or_insert_with(|| json!("chat"));
            Value::Object(out)
        }
        EventKind::Messages => match message_chunk(payload, &envelope.run_id, request_id) {
            Some(chunk) => json!({"items": [chunk]}),
            None => payload.clone(),
        },
        EventKind::Error => {
            let mut out = payload.as_object().cloned().unwrap_or_default();
            let message = payload.get("message").cloned().unwrap_or(Value::Null);
            out.insert(
                "chunk".into(),
                json!({"status": "error", "run_id": envelope.run_id, "message": message, "error_type": "run_failed",
                       "retryable": payload.get("retryable").cloned().unwrap_or(json!(false))}),
            );
            Value::Object(out)
        }
        EventKind::End => {
            let mut out = payload.as_object().cloned().unwrap_or_default();
            if payload.get("status").and_then(Value::as_str) == Some("completed") {
                out.insert("chunk".into(), json!({"status": "finished", "run_id": envelope.run_id}));
            }
            Value::Object(out)
        }
        EventKind::Custom | EventKind::Interrupt => payload.clone(),
    }
}

/// A flat `messages` payload as one of Yuxi's stream chunks; `None` for a type Yuxi has no chunk for.
fn message_chunk(payload: &Value, run_id: &str, request_id: Option<&str>) -> Option<Value> {
    let kind = payload.get("type").and_then(Value::as_str)?;
    let pick = |keys: &[&str]| -> Map<String, Value> {
        keys.iter()
            .filter_map(|key| payload.get(*key).filter(|v| !v.is_null()).map(|v| (key.to_string(), v.clone())))
            .collect()
    };
    let mut chunk = match kind {
        "message_delta" => {
            let mut event = pick(&["message_id", "content", "reasoning_content"]);
            event.insert("type".into(), json!("message_delta"));
            json!({"status": "loading", "stream_event": event})
        }
        "tool_call" | "tool_call_delta" => {
            let mut event = pick(&["message_id", "tool_call_id", "name", "args", "args_delta", "index"]);
            event.insert("type".into(), json!(kind));
            json!({"status": "loading", "stream_event": event})
        }
        "tool_result" => {
            let tool_call_id = payload.get("tool_call_id").cloned().unwrap_or(Value::Null);
            let name = payload.get("name").cloned().unwrap_or(Value::Null);
            let failed = payload.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            let output = json!({
                "type": "tool",
                "id": tool_call_id,
                "tool_call_id": tool_call_id,
                "name": name,
                "content": payload.get("content").cloned().unwrap_or(json!("")),
                "status": if failed { "error" } else { "success" },
            });
            json!({"status": "stream_event", "event": {"method": "tools", "data": {
                "event": "tool-finished", "tool_call_id": tool_call_id, "tool_name": name, "output": output,
            }}})
        }
        _ => return None,
    };
    chunk["run_id"] = json!(run_id);
    if let Some(request_id) = request_id {
        chunk["request_id"] = json!(request_id);
    }
    Some(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(event: EventKind, payload: Value) -> Envelope {
        Envelope::new("r1", "t1", event, payload, "2026-12-02T00:00:00Z".into())
    }

    #[test]
    fn a_message_delta_becomes_a_loading_chunk_with_its_stream_event() {
        let flat = json!({"type": "message_delta", "message_id": "m1", "content": "Hel"});
        let data = event_data(envelope(EventKind::Messages, flat.clone()), Some("q1"), EventFormat::Yuxi);
        assert_eq!(
            data["payload"],
            json!({"items": [{"status": "loading", "run_id": "r1", "request_id": "q1",
                "stream_event": {"type": "message_delta", "message_id": "m1", "content": "Hel"}}]})
        );
        assert_eq!(data["request_id"], "q1");
        let flat_data = event_data(envelope(EventKind::Messages, flat.clone()), None, EventFormat::Flat);
        assert_eq!(flat_data["payload"], flat, "the flat form is the stored payload");
    }

    #[test]
    fn a_tool_call_keeps_its_id_name_args_and_index_and_a_result_is_a_finished_tool_event() {
        let call = json!({"type": "tool_call", "message_id": "m1", "tool_call_id": "c1", "name": "ls", "args": "{}"});
        let chunk = &yuxi_payload(&envelope(EventKind::Messages, call), None)["items"][0];
        assert_eq!(
            chunk["stream_event"],
            json!({"type": "tool_call", "message_id": "m1", "tool_call_id": "c1", "name": "ls", "args": "{}"})
        );
        let result =
            json!({"type": "tool_result", "tool_call_id": "c1", "name": "ls", "content": "a\nb", "is_error": false});
        let chunk = &yuxi_payload(&envelope(EventKind::Messages, result), None)["items"][0];
        assert_eq!(chunk["status"], "stream_event");
        assert_eq!(chunk["event"]["method"], "tools");
        assert_eq!(chunk["event"]["data"]["event"], "tool-finished");
        assert_eq!(chunk["event"]["data"]["output"]["tool_call_id"], "c1");
        assert_eq!(chunk["event"]["data"]["output"]["content"], "a\nb");
    }

    #[test]
    fn an_end_of_a_completed_run_carries_a_finished_chunk_and_an_error_an_error_chunk() {
        let end = yuxi_payload(&envelope(EventKind::End, json!({"status": "completed", "error": null})), None);
        assert_eq!(end["status"], "completed");
        assert_eq!(end["chunk"]["status"], "finished");
        let failed = yuxi_payload(&envelope(EventKind::End, json!({"status": "failed", "error": "x"})), None);
        assert!(failed.get("chunk").is_none(), "only a completed run finishes: {failed}");
        let error = yuxi_payload(&envelope(EventKind::Error, json!({"message": "boom", "retryable": false})), None);
        assert_eq!(error["chunk"]["status"], "error");
        assert_eq!(error["chunk"]["message"], "boom");
        assert_eq!(error["retryable"], false);
    }

    #[test]
    fn metadata_says_whether_the_run_is_a_chat_or_a_subagent_run() {
        let main = yuxi_payload(&envelope(EventKind::Metadata, json!({"agent_slug": "a", "parent": null})), None);
        assert_eq!(main["run_type"], "chat");
        let sub = yuxi_payload(&envelope(EventKind::Metadata, json!({"parent": {"run_id": "p"}})), None);
        assert_eq!(sub["run_type"], "subagent");
    }
}
