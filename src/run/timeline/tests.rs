use serde_json::json;

use super::*;
use crate::run::{Envelope, RunStatus};

fn record(run_id: &str, slug: &str) -> RunRecord {
    RunRecord {
        run_id: run_id.into(),
        thread_id: format!("t-{run_id}"),
        agent_slug: slug.into(),
        uid: "alice".into(),
        parent: None,
        status: RunStatus::Running,
        error: None,
        created_at: "2026-12-05T10:00:00Z".into(),
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    }
}

fn event(n: usize, kind: EventKind, payload: Value, at: &str) -> StoredEvent {
    StoredEvent { seq: format!("{n}-0"), envelope: Envelope::new("r1", "t-r1", kind, payload, at.into()) }
}

fn model_call(at: &str, ms: u64, input: i64) -> Value {
    serde_json::to_value(ModelCallEvent {
        kind: MODEL_CALL_EVENT.into(),
        started_at: at.into(),
        duration_ms: ms,
        time_to_first_token_ms: Some(40),
        model: "gpt-x".into(),
        provider: "openai".into(),
        input_tokens: input,
        output_tokens: 7,
        cost: Some("0.001 USD".into()),
        finish_reason: Some("tool_calls".into()),
        ..Default::default()
    })
    .expect("json")
}

#[test]
fn a_run_has_its_model_calls_and_tool_calls_with_their_times_and_its_end() {
    let events = vec![
        event(1, EventKind::Metadata, json!({}), "2026-12-05T10:00:00.010Z"),
        event(2, EventKind::Custom, model_call("2026-12-05T10:00:00.020Z", 300, 100), "2026-12-05T10:00:00.320Z"),
        event(
            3,
            EventKind::Messages,
            json!({"type": "tool_call", "tool_call_id": "c1", "name": "subagent_start", "args": "{}"}),
            "2026-12-05T10:00:00.330Z",
        ),
        event(
            4,
            EventKind::Custom,
            json!({"type": "subagent_run", "tool_call_id": "c1", "run_id": "child-1"}),
            "2026-12-05T10:00:00.340Z",
        ),
        event(
            5,
            EventKind::Messages,
            json!({"type": "tool_result", "tool_call_id": "c1", "name": "subagent_start", "content": "12345", "is_error": false}),
            "2026-12-05T10:00:00.530Z",
        ),
        event(6, EventKind::Custom, model_call("2026-12-05T10:00:00.540Z", 100, 150), "2026-12-05T10:00:00.640Z"),
        // A later call that waited for the child names it too; the child stays under its start.
        event(
            7,
            EventKind::Messages,
            json!({"type": "tool_call", "tool_call_id": "c2", "name": "subagent_await"}),
            "2026-12-05T10:00:00.650Z",
        ),
        event(
            8,
            EventKind::Messages,
            json!({"type": "tool_result", "tool_call_id": "c2", "content": "", "child_run_id": "child-1"}),
            "2026-12-05T10:00:00.700Z",
        ),
        event(9, EventKind::End, json!({"status": "completed", "error": null}), "2026-12-05T10:00:01Z"),
    ];
    let (spans, children) = run_spans(&record("r1", "deep-research"), &events, None);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "invoke_agent deep-research",
            "chat gpt-x",
            "execute_tool subagent_start",
            "chat gpt-x",
            "execute_tool subagent_await"
        ]
    );
    let run = &spans[0];
    assert_eq!((run.status.as_str(), run.duration_ms, run.parent_span_id.clone()), ("completed", Some(1000), None));
    assert_eq!(run.attributes["gen_ai.usage.input_tokens"], 250);
    let chat = &spans[1];
    assert_eq!(chat.end.as_deref(), Some("2026-12-05T10:00:00.32Z"));
    assert_eq!(chat.attributes["yuxi.cost"], "0.001 USD");
    assert_eq!(chat.parent_span_id.as_deref(), Some("r1"));
    let tool = &spans[2];
    assert_eq!((tool.status.as_str(), tool.duration_ms), ("ok", Some(200)));
    assert_eq!(tool.attributes["yuxi.tool.result_bytes"], 5);
    assert_eq!(children.get("child-1").map(String::as_str), Some("r1/tool/c1"));
}

#[test]
fn a_run_under_way_and_a_tool_call_without_a_result_are_still_running() {
    let events = vec![event(
        1,
        EventKind::Messages,
        json!({"type": "tool_call", "tool_call_id": "c1", "name": "read_file"}),
        "2026-12-05T10:00:00.5Z",
    )];
    let (spans, _) = run_spans(&record("r1", "a"), &events, Some("p/tool/x".into()));
    assert_eq!((spans[0].status.as_str(), spans[0].end.clone()), ("running", None));
    assert_eq!(spans[0].parent_span_id.as_deref(), Some("p/tool/x"));
    assert_eq!((spans[1].status.as_str(), spans[1].duration_ms), ("running", None));
}

#[test]
fn a_failed_model_call_and_a_failed_tool_call_are_errors_and_a_malformed_record_is_skipped() {
    let mut failed = model_call("2026-12-05T10:00:00Z", 10, 0);
    failed["error"] = json!("transient");
    let events = vec![
        event(1, EventKind::Custom, failed, "2026-12-05T10:00:00.01Z"),
        event(2, EventKind::Custom, json!({"type": "model_call", "started_at": 5}), "2026-12-05T10:00:00.02Z"),
        event(
            3,
            EventKind::Messages,
            json!({"type": "tool_call", "tool_call_id": "c", "name": "x"}),
            "2026-12-05T10:00:01Z",
        ),
        event(
            4,
            EventKind::Messages,
            json!({"type": "tool_result", "tool_call_id": "c", "content": "Error: no", "is_error": true}),
            "2026-12-05T10:00:02Z",
        ),
    ];
    let (spans, _) = run_spans(&record("r1", "a"), &events, None);
    let statuses: Vec<&str> = spans.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(statuses, ["running", "error", "error"]);
    assert_eq!(spans[1].attributes["error.type"], "transient");
}
