//! A run read as an A2A task: its status as the task's state ([`task_state`]), its events as the
//! task's streamed updates ([`update_of`]), a waiting run's question ([`input_request`]) and the
//! client's answer to it ([`decisions_in`]); and a remote task's state as a run's status
//! ([`run_status`]).

use serde_json::{Value, json};

use super::wire::{Message, Part, TaskState, TaskStatus, TaskStatusUpdateEvent};
use crate::run::approval::{ActionRequest, Decision, DecisionKind};
use crate::run::{Envelope, EventKind, RunStatus};

/// The end reason of a run that a rule refused before it did any work: the task was `rejected`.
pub const REJECTED_REASONS: [&str; 1] = [crate::run::budget::QUOTA_EXCEEDED];

/// The state of a task whose run is `status`, ended for `reason` when a rule ended it.
pub fn task_state(status: RunStatus, reason: Option<&str>) -> TaskState {
    match status {
        RunStatus::Pending => TaskState::Submitted,
        RunStatus::Running | RunStatus::CancelRequested => TaskState::Working,
        RunStatus::Waiting => TaskState::InputRequired,
        RunStatus::Completed => TaskState::Completed,
        RunStatus::Failed if reason.is_some_and(|r| REJECTED_REASONS.contains(&r)) => TaskState::Rejected,
        RunStatus::Failed | RunStatus::Interrupted => TaskState::Failed,
        RunStatus::Cancelled => TaskState::Canceled,
    }
}

/// The status a child run reports for a remote task in `state`: `None` while it goes on.
pub fn run_status(state: TaskState) -> Option<RunStatus> {
    match state {
        TaskState::Completed => Some(RunStatus::Completed),
        TaskState::Failed | TaskState::Rejected => Some(RunStatus::Failed),
        TaskState::Canceled => Some(RunStatus::Cancelled),
        TaskState::Unspecified
        | TaskState::Submitted
        | TaskState::Working
        | TaskState::InputRequired
        | TaskState::AuthRequired => None,
    }
}

/// What a waiting run asks its client: a text naming each call and how to answer, and the calls as
/// data (`{"type": "approval_required", "action_requests": [...], "expires_at"}`).
pub fn input_request(requests: &[ActionRequest], expires_at: &str) -> Vec<Part> {
    let calls: Vec<String> = requests
        .iter()
        .map(|r| format!("- {} ({}): {} {}", r.tool_call_id, r.description, r.name, r.arguments))
        .collect();
    let text = format!(
        "The run waits for a decision on {} tool call(s) until {expires_at}:\n{}\nAnswer in this task with \
         `approve` or `reject` (for every call), or a data part {{\"decisions\": [{{\"tool_call_id\", \
         \"decision\": \"approve\" | \"edit\" | \"reject\", \"arguments\"?, \"message\"?}}]}}.",
        requests.len(),
        calls.join("\n")
    );
    let data = json!({"type": "approval_required", "action_requests": requests, "expires_at": expires_at});
    vec![Part::text(text), Part::data(data)]
}

/// The decisions a client's message gives on the calls `pending`: a data part `{"decisions": [...]}`
/// (each `{tool_call_id, decision, arguments?, message?}`), or a text that is one word, `approve` (also
/// `approved`, `yes`) or `reject` (also `rejected`, `no`), for every call. Errors name the field.
pub fn decisions_in(message: &Message, pending: &[ActionRequest]) -> Result<Vec<Decision>, (String, String)> {
    if let Some((at, data)) = message.parts.iter().enumerate().find_map(|(i, p)| p.data.as_ref().map(|d| (i, d))) {
        let field = format!("message.parts[{at}].data.decisions");
        let decisions = data.get("decisions").cloned().unwrap_or(Value::Null);
        return serde_json::from_value::<Vec<Decision>>(decisions).map_err(|e| (field, e.to_string()));
    }
    let text = message.text();
    let word = text.trim().trim_end_matches(['.', '!']).to_lowercase();
    let kind = match word.as_str() {
        "approve" | "approved" | "yes" => DecisionKind::Approve,
        "reject" | "rejected" | "no" => DecisionKind::Reject,
        _ => {
            return Err((
                "message.parts".into(),
                format!(
                    "the task waits for decisions: answer `approve` or `reject`, or a data part with `decisions` (got {:?})",
                    text.chars().take(80).collect::<String>()
                ),
            ));
        }
    };
    Ok(pending
        .iter()
        .map(|r| Decision { tool_call_id: r.tool_call_id.clone(), decision: kind, arguments: None, message: None })
        .collect())
}

/// The streamed update an event of a run makes, when it makes one: `working` with what the run said or
/// did (a message's text, a tool call or result as data, a custom event as data). The run's question
/// (`interrupt`) and its end are the caller's to shape ([`input_request`]; the final state with its
/// artifacts), as they need the run's record; an `error` event is told by the end.
pub fn update_of(event: &Envelope, seq: &str) -> Option<TaskStatusUpdateEvent> {
    let payload = &event.payload;
    let parts = match event.event {
        EventKind::Metadata => Vec::new(),
        EventKind::Messages => match payload["type"].as_str() {
            Some("message_delta") => vec![Part::text(payload["content"].as_str().unwrap_or_default())],
            Some("tool_call") => vec![Part::data(json!({
                "type": "tool_call",
                "tool_call_id": payload["tool_call_id"],
                "name": payload["name"],
                "args": payload["args"],
            }))],
            Some("tool_result") => vec![Part::data(json!({
                "type": "tool_result",
                "tool_call_id": payload["tool_call_id"],
                "content": payload["content"],
            }))],
            _ => return None,
        },
        EventKind::Custom => vec![Part::data(payload.clone())],
        EventKind::Error | EventKind::End | EventKind::Interrupt => return None,
    };
    let message = (!parts.is_empty())
        .then(|| Message::agent(format!("{}-{seq}", event.run_id), &event.run_id, &event.thread_id, parts));
    Some(TaskStatusUpdateEvent {
        task_id: event.run_id.clone(),
        context_id: event.thread_id.clone(),
        status: TaskStatus { state: TaskState::Working, message, timestamp: Some(event.created_at.clone()) },
        metadata: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delegation::a2a::wire::Role;

    #[test]
    fn run_statuses_read_as_task_states_and_back() {
        assert_eq!(task_state(RunStatus::Pending, None), TaskState::Submitted);
        assert_eq!(task_state(RunStatus::CancelRequested, None), TaskState::Working);
        assert_eq!(task_state(RunStatus::Waiting, Some("ApprovalRequired")), TaskState::InputRequired);
        assert_eq!(task_state(RunStatus::Failed, Some("QuotaExceeded")), TaskState::Rejected);
        assert_eq!(task_state(RunStatus::Failed, Some("BudgetExceeded")), TaskState::Failed);
        assert_eq!(task_state(RunStatus::Interrupted, None), TaskState::Failed);
        assert_eq!(task_state(RunStatus::Cancelled, None), TaskState::Canceled);
        for status in RunStatus::ALL {
            let state = task_state(status, None);
            assert_eq!(state.is_terminal(), status.is_terminal(), "{status:?}");
            if let Some(back) = run_status(state) {
                assert!(back.is_terminal(), "{status:?} reads back as an end");
            }
        }
        assert_eq!(run_status(TaskState::Rejected), Some(RunStatus::Failed));
        assert_eq!(run_status(TaskState::InputRequired), None);
    }

    #[test]
    fn states_read_both_spellings_and_write_the_protocols() {
        let state: TaskState = serde_json::from_value(json!("input-required")).expect("0.3 spelling");
        assert_eq!(state, TaskState::InputRequired);
        let state: TaskState = serde_json::from_value(json!("TASK_STATE_CANCELED")).expect("1.0 spelling");
        assert_eq!(serde_json::to_value(state).expect("writes"), json!("TASK_STATE_CANCELED"));
    }

    fn pending() -> Vec<ActionRequest> {
        ["c1", "c2"]
            .iter()
            .map(|id| ActionRequest {
                tool_call_id: id.to_string(),
                name: "write_file".into(),
                arguments: json!({"path": "a"}),
                allowed_decisions: vec![DecisionKind::Approve, DecisionKind::Reject],
                description: "writes a file".into(),
            })
            .collect()
    }

    fn said(parts: Vec<Part>) -> Message {
        Message {
            message_id: "m".into(),
            context_id: None,
            task_id: Some("r".into()),
            role: Role::User,
            parts,
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    #[test]
    fn a_word_decides_every_waiting_call_and_a_data_part_each_one() {
        let all = decisions_in(&said(vec![Part::text("Approve.")]), &pending()).expect("one word");
        assert_eq!(all.len(), 2);
        assert!(all.iter().all(|d| d.decision == DecisionKind::Approve));
        let each = said(vec![Part::data(json!({"decisions": [
            {"tool_call_id": "c1", "decision": "approve"},
            {"tool_call_id": "c2", "decision": "reject", "message": "not that one"},
        ]}))]);
        let each = decisions_in(&each, &pending()).expect("by id");
        assert_eq!(each[1].decision, DecisionKind::Reject);
        let (field, _) = decisions_in(&said(vec![Part::text("maybe later")]), &pending()).expect_err("not a decision");
        assert_eq!(field, "message.parts");
        let (field, _) =
            decisions_in(&said(vec![Part::data(json!({"decisions": "all"}))]), &pending()).expect_err("not a list");
        assert_eq!(field, "message.parts[0].data.decisions");
    }

    #[test]
    fn events_stream_as_working_updates_and_the_end_is_left_to_the_caller() {
        let event = |kind, payload| Envelope::new("r1", "t1", kind, payload, "2026-12-05T00:00:00Z".into());
        let delta = update_of(&event(EventKind::Messages, json!({"type": "message_delta", "content": "Hi"})), "1-0")
            .expect("a delta");
        assert_eq!(delta.status.state, TaskState::Working);
        let message = delta.status.message.expect("what was said");
        assert_eq!((message.text().as_str(), message.message_id.as_str()), ("Hi", "r1-1-0"));
        let call = json!({"type": "tool_call", "tool_call_id": "c", "name": "ls", "args": "{}"});
        let call = update_of(&event(EventKind::Messages, call), "2-0").expect("a call");
        assert_eq!(call.status.message.expect("data").parts[0].data.as_ref().expect("data")["name"], "ls");
        assert!(update_of(&event(EventKind::End, json!({})), "3-0").is_none());
        assert!(update_of(&event(EventKind::Interrupt, json!({})), "3-0").is_none());
        let started = update_of(&event(EventKind::Metadata, json!({})), "0-1").expect("started");
        assert!(started.status.message.is_none());
    }
}
