//! Human approval in the shapes of LangChain's human-in-the-loop middleware, which Yuxi's web client
//! speaks: the pending calls as an `approval` of two lists of the same length (`action_requests`
//! `[{name, args, description}]` and `review_configs` `[{action_name, allowed_decisions}]`), and the
//! person's answer as one decision per pending call, in their order (`{type: approve}`,
//! `{type: edit, edited_action: {name, args}}`, `{type: reject, message?}`), made into this system's
//! [`Decision`]s ([`crate::run::approval`]). Pure.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::approval::{ActionRequest, Decision, DecisionError, DecisionKind, Waiting};

/// The `status` of Yuxi's chunk that asks a person to approve tool calls.
pub const APPROVAL_STATUS: &str = "human_approval_required";

/// `approval` for `requests`: `{action_requests: [{name, args, description, tool_call_id}],
/// review_configs: [{action_name, allowed_decisions}]}`, the two lists in the same order.
pub fn approval(requests: &[ActionRequest]) -> Value {
    let action_requests: Vec<Value> = requests
        .iter()
        .map(|r| json!({"name": r.name, "args": r.arguments, "description": r.description, "tool_call_id": r.tool_call_id}))
        .collect();
    let review_configs: Vec<Value> =
        requests.iter().map(|r| json!({"action_name": r.name, "allowed_decisions": r.allowed_decisions})).collect();
    json!({"action_requests": action_requests, "review_configs": review_configs})
}

/// Yuxi's chunk asking for `waiting`'s decisions on the run `run_id` of `thread_id`:
/// `{status: "human_approval_required", run_id, thread_id, approval, expires_at}`.
pub fn approval_chunk(run_id: &str, thread_id: &str, waiting: &Waiting) -> Value {
    json!({
        "status": APPROVAL_STATUS,
        "run_id": run_id,
        "thread_id": thread_id,
        "approval": approval(&waiting.action_requests),
        "expires_at": waiting.expires_at,
    })
}

/// The call a person's `edit` runs instead: the same tool, with these arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EditedAction {
    /// The tool: the pending call's own (an edit does not call another tool).
    pub name: String,
    /// The arguments to run it with (a JSON object).
    #[schema(value_type = Object)]
    pub args: Value,
}

/// One decision as LangChain spells it, taken for the pending call at its place.
#[derive(Clone, Debug, PartialEq)]
pub struct PositionalDecision {
    /// `approve`, `edit` or `reject`.
    pub kind: DecisionKind,
    /// For `edit`: the call to run.
    pub edited_action: Option<EditedAction>,
    /// For `reject`: what the model reads instead of a result.
    pub message: Option<String>,
}

/// `decisions`, one per call of `pending` in its order, as this system's decisions. The rules of
/// LangChain's middleware: as many decisions as pending calls, each of a kind its call allows; an
/// `edit` needs `edited_action` with the call's own tool and a JSON object of `args`. (Yuxi's server
/// also refuses an empty list, and takes only `approve` and `reject`: the calls of its sensitive tools
/// allow no edit; here a call's `allowed_decisions` say.) Field names are those of the request body,
/// from `resume.decisions`.
pub fn in_order(pending: &[ActionRequest], decisions: &[PositionalDecision]) -> Result<Vec<Decision>, DecisionError> {
    if decisions.len() != pending.len() {
        return Err(DecisionError::Incomplete(format!(
            "{} call{} wait{} ({}) and {} decision{} came: one decision for each waiting call, in their order",
            pending.len(),
            if pending.len() == 1 { "" } else { "s" },
            if pending.len() == 1 { "s" } else { "" },
            pending.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "),
            decisions.len(),
            if decisions.len() == 1 { "" } else { "s" },
        )));
    }
    let mut out = Vec::with_capacity(decisions.len());
    for (i, (request, decision)) in pending.iter().zip(decisions).enumerate() {
        let invalid = |name: &str, message: &str| DecisionError::Invalid {
            field: format!("resume.decisions[{i}].{name}"),
            message: message.to_string(),
        };
        if !request.allowed_decisions.contains(&decision.kind) {
            return Err(invalid("type", &format!("is not allowed for the call of {}", request.name)));
        }
        let arguments = match (decision.kind, &decision.edited_action) {
            (DecisionKind::Edit, None) => return Err(invalid("edited_action", "an edit needs the call to run")),
            (DecisionKind::Edit, Some(action)) if action.name != request.name => {
                return Err(invalid(
                    "edited_action.name",
                    &format!(
                        "is {:?}: an edit runs the waiting call of {}, with other arguments",
                        action.name, request.name
                    ),
                ));
            }
            (DecisionKind::Edit, Some(action)) if !action.args.is_object() => {
                return Err(invalid("edited_action.args", "must be a JSON object"));
            }
            (DecisionKind::Edit, Some(action)) => Some(action.args.clone()),
            (_, Some(_)) => return Err(invalid("edited_action", "is for an edit only")),
            (_, None) => None,
        };
        out.push(Decision {
            tool_call_id: request.tool_call_id.clone(),
            decision: decision.kind,
            arguments,
            message: decision.message.clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::message::ToolCall;

    fn pending() -> Vec<ActionRequest> {
        vec![
            ActionRequest::of(&ToolCall::new("call_0_0", "write_file", r#"{"path":"/a","content":"x"}"#)),
            ActionRequest::of(&ToolCall::new("call_0_1", "execute", r#"{"command":"rm -rf /"}"#)),
        ]
    }

    fn decision(kind: DecisionKind) -> PositionalDecision {
        PositionalDecision { kind, edited_action: None, message: None }
    }

    #[test]
    fn the_approval_lists_the_calls_and_their_review_configs_in_the_same_order() {
        let approval = approval(&pending());
        assert_eq!(approval["action_requests"][1]["name"], "execute");
        assert_eq!(approval["action_requests"][1]["args"], json!({"command": "rm -rf /"}));
        assert_eq!(approval["action_requests"][0]["tool_call_id"], "call_0_0");
        assert_eq!(approval["review_configs"][1]["action_name"], "execute");
        assert_eq!(approval["review_configs"][1]["allowed_decisions"], json!(["approve", "edit", "reject"]));
    }

    #[test]
    fn decisions_in_order_answer_the_pending_calls_by_their_place() {
        let reject = PositionalDecision { message: Some("not that".into()), ..decision(DecisionKind::Reject) };
        let edit = PositionalDecision {
            edited_action: Some(EditedAction { name: "write_file".into(), args: json!({"path": "/b"}) }),
            ..decision(DecisionKind::Edit)
        };
        let decided = in_order(&pending(), &[edit, reject]).expect("decided");
        assert_eq!(
            (decided[0].tool_call_id.as_str(), decided[0].decision, decided[0].arguments.clone()),
            ("call_0_0", DecisionKind::Edit, Some(json!({"path": "/b"})))
        );
        assert_eq!(
            (decided[1].tool_call_id.as_str(), decided[1].decision, decided[1].message.as_deref()),
            ("call_0_1", DecisionKind::Reject, Some("not that"))
        );
    }

    #[test]
    fn decisions_that_do_not_fit_name_their_field() {
        let field = |result: Result<Vec<Decision>, DecisionError>| match result {
            Err(DecisionError::Invalid { field, .. }) => field,
            Err(DecisionError::Incomplete(_)) => "resume.decisions".into(),
            other => panic!("{other:?}"),
        };
        let approve = || decision(DecisionKind::Approve);
        assert_eq!(field(in_order(&pending(), &[approve()])), "resume.decisions");
        assert_eq!(field(in_order(&pending(), &[])), "resume.decisions");
        assert_eq!(
            field(in_order(&pending(), &[decision(DecisionKind::Edit), approve()])),
            "resume.decisions[0].edited_action"
        );
        let other_tool = PositionalDecision {
            edited_action: Some(EditedAction { name: "execute".into(), args: json!({}) }),
            ..decision(DecisionKind::Edit)
        };
        assert_eq!(field(in_order(&pending(), &[other_tool, approve()])), "resume.decisions[0].edited_action.name");
        let not_object = PositionalDecision {
            edited_action: Some(EditedAction { name: "write_file".into(), args: json!("x") }),
            ..decision(DecisionKind::Edit)
        };
        assert_eq!(field(in_order(&pending(), &[not_object, approve()])), "resume.decisions[0].edited_action.args");
        let mut only_approve = pending();
        only_approve[1].allowed_decisions = vec![DecisionKind::Approve];
        assert_eq!(
            field(in_order(&only_approve, &[approve(), decision(DecisionKind::Reject)])),
            "resume.decisions[1].type"
        );
    }
}
