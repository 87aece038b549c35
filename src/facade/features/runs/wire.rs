//! The run events as Yuxi's web client reads them. The runner writes flat payloads
//! (`{type: message_delta | tool_call | tool_result, ...}`, docs/concepts/runs.md); Yuxi's client renders
//! only Yuxi's shapes: a `messages` payload carries `items`, a list of chunks
//! `{status: "loading", run_id, request_id, stream_event: {type, message_id, content, ...}}` for model
//! output and `{status: "stream_event", event: {method: "tools", data: {event: "tool-finished", ...}}}`
//! for a tool's result; `error` and `end` carry a `chunk` with `status: error | finished`; `metadata`
//! carries the `init` chunk with the run's question as a human message (and a `warning` chunk when the
//! run kept its agent's locked approval mode), and the `interrupt` of a run that still waits carries the
//! `human_approval_required` chunk with LangChain's `approval` ([`crate::run::hitl`]); Yuxi ends the
//! stream of a run that waits with `end` `{status: interrupted}` ([`interrupted_end`]). The facade
//! translates at read time, so the stored stream, `subagent_events` and `subagent_status` keep the flat
//! form, and `GET .../events?event_format=flat` streams it unchanged.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::run::approval::Waiting;
use crate::run::hitl::approval_chunk;
use crate::run::{Envelope, EventKind, RunRecord, RunRequest};

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
/// (of `request`, what its start asked) beside it (Yuxi's client reads `data.request_id`). `waiting` is
/// what the run waits for now, if it waits: an `interrupt` asks the person (carries its chunk) only
/// while its run waits for it. Takes the envelope: the flat form moves its payload rather than copying
/// it.
pub fn event_data(
    mut envelope: Envelope,
    request: &RunRequest,
    format: EventFormat,
    waiting: Option<&Waiting>,
) -> Value {
    let request_id = request.request_id.as_deref();
    if format == EventFormat::Yuxi {
        envelope.payload = yuxi_payload(&envelope, request, waiting);
    }
    let mut data = serde_json::to_value(envelope).expect("an envelope serializes");
    if let Some(request_id) = request_id {
        data["request_id"] = json!(request_id);
    }
    data
}

/// The SSE `data` of the `end` `{status: "interrupted", chunk}` that closes Yuxi's stream of a run
/// waiting for `waiting`'s decisions (the run is not over: its stream goes on once it is resumed; the
/// event is not stored and has no id).
pub fn interrupted_end(record: &RunRecord, waiting: &Waiting) -> Value {
    let mut chunk = approval_chunk(&record.run_id, &record.thread_id, waiting);
    if let Some(request_id) = &record.request.request_id {
        chunk["request_id"] = json!(request_id);
    }
    json!({
        "schema_version": crate::run::event::SCHEMA_VERSION,
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "event": "end",
        "payload": {"status": "interrupted", "reason": waiting.reason, "chunk": chunk},
        "created_at": jiff::Timestamp::now().to_string(),
        "request_id": record.request.request_id,
    })
}

/// Whether the `interrupt` `payload` asks for what the run waits for now (`waiting`): the same calls,
/// due at the same time. An earlier pause, answered since, asks nothing.
fn asks_now(payload: &Value, waiting: &Waiting) -> bool {
    let ids = |requests: Option<&Vec<Value>>| -> Vec<String> {
        requests
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("tool_call_id").and_then(Value::as_str).map(String::from))
            .collect()
    };
    let waiting_ids: Vec<String> = waiting.action_requests.iter().map(|r| r.tool_call_id.clone()).collect();
    payload.get("expires_at").and_then(Value::as_str) == Some(waiting.expires_at.as_str())
        && ids(payload.get("action_requests").and_then(Value::as_array)) == waiting_ids
}

/// What a run that kept its agent's locked approval mode says ([`crate::run::approval::run_mode`]).
fn kept_mode(agent: &str, request: &RunRequest) -> Option<String> {
    let asked = request.tool_approval_mode_asked?;
    let mode = |m: Option<crate::resources::yuxi::YuxiApprovalMode>| serde_json::to_value(m).unwrap_or_default();
    Some(format!(
        "agent {agent:?} keeps its approval mode {} (an administrator locked it): this run does not use {}",
        mode(request.tool_approval_mode),
        mode(Some(asked))
    ))
}

/// The payload of `envelope` in Yuxi's shape. A payload of a kind this facade does not know is passed
/// through unchanged.
pub fn yuxi_payload(envelope: &Envelope, request: &RunRequest, waiting: Option<&Waiting>) -> Value {
    let payload = &envelope.payload;
    let request_id = request.request_id.as_deref();
    let with_ids = |mut chunk: Value| {
        chunk["run_id"] = json!(envelope.run_id);
        chunk["thread_id"] = json!(envelope.thread_id);
        if let Some(request_id) = request_id {
            chunk["request_id"] = json!(request_id);
        }
        chunk
    };
    match envelope.event {
        EventKind::Metadata => {
            let mut out = payload.as_object().cloned().unwrap_or_default();
            let subagent = out.get("parent").is_some_and(|p| !p.is_null());
            out.entry("run_type").or_insert_with(|| json!(if subagent { "subagent" } else { "chat" }));
            out.entry("source").or_insert_with(|| json!("chat"));
            // The run's question, first (Yuxi's `init` chunk), and what its start was not given.
            let mut items = Vec::new();
            if let Some(input) = payload.get("input").and_then(Value::as_str) {
                let msg = json!({"role": "user", "type": "human", "content": input, "message_type": "text",
                                 "extra_metadata": {"request_id": request_id, "run_id": envelope.run_id}});
                items.push(with_ids(json!({"status": "init", "msg": msg})));
            }
            let agent = payload.get("agent_slug").and_then(Value::as_str).unwrap_or_default();
            if let Some(message) = kept_mode(agent, request) {
                items.push(with_ids(json!({"status": "warning", "message": message})));
            }
            if !items.is_empty() {
                out.insert("items".into(), Value::Array(items));
            }
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
        EventKind::Custom => payload.clone(),
        EventKind::Interrupt => {
            let mut out = payload.as_object().cloned().unwrap_or_default();
            out.insert("reason".into(), json!("human_approval"));
            if let Some(waiting) = waiting.filter(|w| asks_now(payload, w)) {
                out.insert("chunk".into(), with_ids(approval_chunk(&envelope.run_id, &envelope.thread_id, waiting)));
            }
            Value::Object(out)
        }
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

    fn q1() -> RunRequest {
        RunRequest { request_id: Some("q1".into()), ..RunRequest::default() }
    }

    fn envelope(event: EventKind, payload: Value) -> Envelope {
        Envelope::new("r1", "t1", event, payload, "2026-12-02T00:00:00Z".into())
    }

    #[test]
    fn a_message_delta_becomes_a_loading_chunk_with_its_stream_event() {
        let flat = json!({"type": "message_delta", "message_id": "m1", "content": "Hel"});
        let data = event_data(envelope(EventKind::Messages, flat.clone()), &q1(), EventFormat::Yuxi, None);
        assert_eq!(
            data["payload"],
            json!({"items": [{"status": "loading", "run_id": "r1", "request_id": "q1",
                "stream_event": {"type": "message_delta", "message_id": "m1", "content": "Hel"}}]})
        );
        assert_eq!(data["request_id"], "q1");
        let flat_data =
            event_data(envelope(EventKind::Messages, flat.clone()), &RunRequest::default(), EventFormat::Flat, None);
        assert_eq!(flat_data["payload"], flat, "the flat form is the stored payload");
    }

    #[test]
    fn a_tool_call_keeps_its_id_name_args_and_index_and_a_result_is_a_finished_tool_event() {
        let call = json!({"type": "tool_call", "message_id": "m1", "tool_call_id": "c1", "name": "ls", "args": "{}"});
        let chunk = &yuxi_payload(&envelope(EventKind::Messages, call), &RunRequest::default(), None)["items"][0];
        assert_eq!(
            chunk["stream_event"],
            json!({"type": "tool_call", "message_id": "m1", "tool_call_id": "c1", "name": "ls", "args": "{}"})
        );
        let result =
            json!({"type": "tool_result", "tool_call_id": "c1", "name": "ls", "content": "a\nb", "is_error": false});
        let chunk = &yuxi_payload(&envelope(EventKind::Messages, result), &RunRequest::default(), None)["items"][0];
        assert_eq!(chunk["status"], "stream_event");
        assert_eq!(chunk["event"]["method"], "tools");
        assert_eq!(chunk["event"]["data"]["event"], "tool-finished");
        assert_eq!(chunk["event"]["data"]["output"]["tool_call_id"], "c1");
        assert_eq!(chunk["event"]["data"]["output"]["content"], "a\nb");
    }

    #[test]
    fn an_end_of_a_completed_run_carries_a_finished_chunk_and_an_error_an_error_chunk() {
        let end = yuxi_payload(
            &envelope(EventKind::End, json!({"status": "completed", "error": null})),
            &RunRequest::default(),
            None,
        );
        assert_eq!(end["status"], "completed");
        assert_eq!(end["chunk"]["status"], "finished");
        let failed = yuxi_payload(
            &envelope(EventKind::End, json!({"status": "failed", "error": "x"})),
            &RunRequest::default(),
            None,
        );
        assert!(failed.get("chunk").is_none(), "only a completed run finishes: {failed}");
        let error = yuxi_payload(
            &envelope(EventKind::Error, json!({"message": "boom", "retryable": false})),
            &RunRequest::default(),
            None,
        );
        assert_eq!(error["chunk"]["status"], "error");
        assert_eq!(error["chunk"]["message"], "boom");
        assert_eq!(error["retryable"], false);
    }

    #[test]
    fn metadata_carries_the_question_as_an_init_chunk_and_a_kept_mode_as_a_warning() {
        let metadata = json!({"agent_slug": "notes", "input": "hi", "parent": null});
        let request = RunRequest { request_id: Some("q1".into()), ..RunRequest::default() };
        let out = yuxi_payload(&envelope(EventKind::Metadata, metadata.clone()), &request, None);
        assert_eq!(out["items"][0]["status"], "init");
        assert_eq!(out["items"][0]["request_id"], "q1");
        assert_eq!(
            out["items"][0]["msg"],
            json!({"role": "user", "type": "human", "content": "hi", "message_type": "text",
                   "extra_metadata": {"request_id": "q1", "run_id": "r1"}})
        );
        assert_eq!(out["items"].as_array().map(Vec::len), Some(1));
        use crate::resources::yuxi::YuxiApprovalMode;
        let kept = RunRequest {
            tool_approval_mode: Some(YuxiApprovalMode::Default),
            tool_approval_mode_asked: Some(YuxiApprovalMode::AlwaysTrust),
            ..request
        };
        let out = yuxi_payload(&envelope(EventKind::Metadata, metadata), &kept, None);
        assert_eq!(out["items"][1]["status"], "warning");
        assert!(out["items"][1]["message"].as_str().unwrap_or_default().contains("\"always_trust\""), "{out}");
        let other = json!({"type": "model_retry", "attempt": 1});
        assert_eq!(yuxi_payload(&envelope(EventKind::Custom, other.clone()), &RunRequest::default(), None), other);
    }

    #[test]
    fn an_interrupt_asks_with_its_approval_chunk_only_while_its_run_waits_for_it() {
        let call = crate::run::message::ToolCall::new("call_0_0", "write_file", r#"{"path":"/a"}"#);
        let requests = vec![crate::run::approval::ActionRequest::of(&call)];
        let payload =
            json!({"type": "approval_required", "action_requests": requests, "expires_at": "2026-12-05T00:00:00Z"});
        let waiting = Waiting {
            reason: "ApprovalRequired".into(),
            action_requests: requests.clone(),
            expires_at: "2026-12-05T00:00:00Z".into(),
        };
        let asks = yuxi_payload(&envelope(EventKind::Interrupt, payload.clone()), &q1(), Some(&waiting));
        assert_eq!(asks["chunk"]["status"], "human_approval_required");
        assert_eq!(asks["chunk"]["run_id"], "r1");
        assert_eq!(asks["chunk"]["approval"]["action_requests"][0]["name"], "write_file");
        assert_eq!(asks["chunk"]["approval"]["review_configs"][0]["action_name"], "write_file");
        assert_eq!(asks["reason"], "human_approval");
        let answered = yuxi_payload(&envelope(EventKind::Interrupt, payload.clone()), &RunRequest::default(), None);
        assert!(answered.get("chunk").is_none(), "{answered}");
        let later = Waiting { expires_at: "2026-12-06T00:00:00Z".into(), ..waiting };
        assert!(
            yuxi_payload(&envelope(EventKind::Interrupt, payload), &RunRequest::default(), Some(&later))
                .get("chunk")
                .is_none()
        );
    }

    #[test]
    fn metadata_says_whether_the_run_is_a_chat_or_a_subagent_run() {
        let main = yuxi_payload(
            &envelope(EventKind::Metadata, json!({"agent_slug": "a", "parent": null})),
            &RunRequest::default(),
            None,
        );
        assert_eq!(main["run_type"], "chat");
        let sub = yuxi_payload(
            &envelope(EventKind::Metadata, json!({"parent": {"run_id": "p"}})),
            &RunRequest::default(),
            None,
        );
        assert_eq!(sub["run_type"], "subagent");
    }
}
