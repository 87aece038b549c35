//! Human approval of tool calls (docs/concepts/approvals.md): which calls of a run a person must
//! approve, what a paused run keeps (its [`Checkpoint`]), the `interrupt` event that asks, and the
//! person's [`Decision`]s checked against what is pending. Pure.
//!
//! A main agent in `Default` approval mode pauses before `write_file`, `edit_file`, `execute` and the
//! tools its `context.approvalRequired` names (a tool name, or `<server>/*` for every tool of an MCP
//! server); `AlwaysTrust` pauses for nothing. A subagent never pauses: no person watches it, and in
//! `Default` mode it has none of those three tools ([`crate::resources::ToolApprovalMode`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::message::{Message, ToolCall};
use crate::resources::{AgentSpec, TokenUsage, ToolApprovalMode};

/// How long a paused run waits for decisions when its Agent says nothing, in seconds (a day).
pub const DEFAULT_APPROVAL_TIMEOUT_SECONDS: u32 = 86_400;

/// The reason of a run paused for approval, and of its AgentRun's `Waiting` phase.
pub const APPROVAL_REQUIRED: &str = "ApprovalRequired";

/// The reason of a run that ended because no decision came in time.
pub const APPROVAL_TIMEOUT: &str = "ApprovalTimeout";

/// The built-in tools a person approves in `Default` mode.
pub const SENSITIVE: [&str; 3] = ["write_file", "edit_file", "execute"];

/// What a person may answer about a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Run the call as the model made it.
    Approve,
    /// Run it with the person's arguments.
    Edit,
    /// Do not run it; the model reads the person's message as its result.
    Reject,
}

/// The most approval records a run keeps ([`crate::run::RunRecord::approvals`]).
pub const MAX_APPROVALS_KEPT: usize = 200;

/// A decision a person made on a call of a run, as the run keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApprovalRecord {
    /// The call.
    pub tool_call_id: String,
    /// Its tool.
    pub name: String,
    /// What was decided.
    pub decision: DecisionKind,
    /// Who decided (the run's user, or a superadmin).
    pub decided_by: String,
    /// When, RFC 3339.
    pub decided_at: String,
}

/// The records of `decisions` on the calls of `pending`, decided by `uid` now.
pub fn records_of(pending: &[ActionRequest], decisions: &[Decision], uid: &str) -> Vec<ApprovalRecord> {
    let now = jiff::Timestamp::now().to_string();
    decisions
        .iter()
        .map(|d| ApprovalRecord {
            tool_call_id: d.tool_call_id.clone(),
            name: pending
                .iter()
                .find(|p| p.tool_call_id == d.tool_call_id)
                .map_or_else(String::new, |p| p.name.clone()),
            decision: d.decision,
            decided_by: uid.to_string(),
            decided_at: now.clone(),
        })
        .collect()
}

/// `kept` followed by `new`, keeping at most [`MAX_APPROVALS_KEPT`] (the oldest go first): what a run's
/// record holds after a resume (the store appends in the same step as the resume).
pub fn appended(kept: &[ApprovalRecord], new: &[ApprovalRecord]) -> Vec<ApprovalRecord> {
    let mut out: Vec<ApprovalRecord> = kept.iter().chain(new).cloned().collect();
    let over = out.len().saturating_sub(MAX_APPROVALS_KEPT);
    out.drain(..over);
    out
}

/// Which calls of an agent's runs a person approves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalRule {
    /// Whether any call is approved (a main agent in `Default` mode).
    pub active: bool,
    /// The names `approvalRequired` adds (tool names, `<server>/*`, `<server>/<tool>`).
    pub also: Vec<String>,
    /// The MCP tools their servers mark destructive (`destructiveHint`): each call waits too.
    pub destructive: Vec<String>,
}

impl ApprovalRule {
    /// The rule of runs of `spec`, in `mode` (the run's own mode when it has one, else the Agent's).
    pub fn of(spec: &AgentSpec, mode: ToolApprovalMode) -> Self {
        let context = spec.context();
        ApprovalRule {
            active: !spec.is_subagent() && mode == ToolApprovalMode::Default,
            also: context.approval_required.clone().unwrap_or_default(),
            destructive: Vec::new(),
        }
    }

    /// Whether a call of `tool` (of the MCP server `server`, for an MCP tool) waits for a person.
    pub fn needs_approval(&self, tool: &str, server: Option<&str>) -> bool {
        let named = |entry: &String| {
            entry == tool
                || server
                    .is_some_and(|s| entry.strip_suffix("/*") == Some(s) || entry.rsplit_once('/') == Some((s, tool)))
        };
        self.active
            && (SENSITIVE.contains(&tool) || self.destructive.iter().any(|d| d == tool) || self.also.iter().any(named))
    }
}

/// The approval mode a run of an agent gets when its start asks for `asked` (Yuxi's per-run
/// `tool_approval_mode`, which every user may send). A run may always be stricter than its agent
/// (`Default` where the agent trusts); it may be more trusting only when the agent's mode is not locked
/// (`toolApprovalModeLocked`, set by administrators), or for an administrator. Otherwise the run keeps
/// the agent's mode: the start is not refused (the person's message is not lost), and the run says so.
///
/// | agent | locked | asked | by | the run's mode |
/// |---|---|---|---|---|
/// | any | any | the agent's | anyone | the agent's |
/// | `AlwaysTrust` | any | `Default` | anyone | `Default` (stricter) |
/// | `Default` | no | `AlwaysTrust` | anyone | `AlwaysTrust` |
/// | `Default` | yes | `AlwaysTrust` | a user | `Default` (kept: [`RunMode::Kept`]) |
/// | `Default` | yes | `AlwaysTrust` | an administrator | `AlwaysTrust` |
pub fn run_mode(agent: ToolApprovalMode, locked: bool, asked: ToolApprovalMode, admin: bool) -> RunMode {
    let more_trusting = asked == ToolApprovalMode::AlwaysTrust && agent == ToolApprovalMode::Default;
    if more_trusting && locked && !admin { RunMode::Kept(agent) } else { RunMode::Given(asked) }
}

/// What [`run_mode`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunMode {
    /// The run has the mode it asked for.
    Given(ToolApprovalMode),
    /// The run keeps its agent's locked mode.
    Kept(ToolApprovalMode),
}

/// One call waiting for a person.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ActionRequest {
    /// The model's tool call id.
    pub tool_call_id: String,
    /// The tool.
    pub name: String,
    /// The arguments the model gave (a JSON value; the text as a string when it is not JSON).
    pub arguments: Value,
    /// What the person may answer.
    pub allowed_decisions: Vec<DecisionKind>,
    /// What the call does, for the person.
    pub description: String,
}

impl ActionRequest {
    /// The request for `call`.
    pub fn of(call: &ToolCall) -> Self {
        let arguments = serde_json::from_str(&call.function.arguments)
            .unwrap_or_else(|_| Value::String(call.function.arguments.clone()));
        ActionRequest {
            tool_call_id: call.id.clone(),
            name: call.function.name.clone(),
            arguments,
            allowed_decisions: vec![DecisionKind::Approve, DecisionKind::Edit, DecisionKind::Reject],
            description: format!("The agent asks to call {} with these arguments.", call.function.name),
        }
    }
}

/// The payload of the `interrupt` event a paused run writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InterruptPayload {
    /// Always `approval_required`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The calls waiting, in the order the model made them.
    pub action_requests: Vec<ActionRequest>,
    /// When the run stops waiting (RFC 3339): it then ends with reason `ApprovalTimeout`.
    pub expires_at: String,
}

/// What a run's record says while it waits: the calls and the deadline of the decisions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Waiting {
    /// `ApprovalRequired`.
    pub reason: String,
    /// The calls waiting.
    pub action_requests: Vec<ActionRequest>,
    /// When the decisions are due (RFC 3339).
    pub expires_at: String,
}

impl Waiting {
    /// Whether the decisions are overdue at `now` (`expires_at` at or before it). A deadline that does
    /// not parse is never overdue.
    pub fn overdue(&self, now: jiff::Timestamp) -> bool {
        self.expires_at.parse::<jiff::Timestamp>().is_ok_and(|due| due <= now)
    }
}

/// A person's answer about one pending call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// The pending call.
    pub tool_call_id: String,
    /// `approve`, `edit` or `reject`.
    pub decision: DecisionKind,
    /// For `edit`: the arguments to run it with (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Value>,
    /// For `reject`: what the model reads instead of a result (at most 4096 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub message: Option<String>,
}

/// What a paused run keeps to go on where it stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The messages the run added to its thread so far (the last one the assistant turn whose calls
    /// wait, followed by the results of the calls of that turn run before the pause).
    pub added: Vec<Message>,
    /// The model calls made.
    pub steps: u32,
    /// The tokens used.
    pub usage: TokenUsage,
    /// The turn's calls not yet run, in order (the waiting ones among them).
    pub remaining: Vec<ToolCall>,
    /// The calls waiting for a person.
    pub pending: Vec<ActionRequest>,
    /// What is left of the run's deadline, in seconds (it does not run while the run waits).
    pub remaining_seconds: u64,
    /// The person's decisions, once a resume gave them.
    #[serde(default)]
    pub decisions: Vec<Decision>,
    /// The run's input (the first user message), to start its runner again.
    pub input: String,
}

/// Why decisions cannot be taken.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    /// A decision names a call that is not waiting (409).
    #[error("tool call {0:?} is not waiting for a decision")]
    NotPending(String),
    /// A waiting call has no decision, or one call has two (422 naming `resume.decisions`).
    #[error("{0}")]
    Incomplete(String),
    /// A decision is not one its call allows, or lacks what it needs (422 naming the field).
    #[error("{field}: {message}")]
    Invalid {
        /// The field, such as `resume.decisions[0].arguments`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// The most characters of a rejection's message.
pub const MAX_MESSAGE_CHARS: usize = 4096;

/// Checks `decisions` against `pending`: one decision for each waiting call and none for another; an
/// `edit` with a JSON object of arguments; a `reject` message of at most [`MAX_MESSAGE_CHARS`].
pub fn check_decisions(pending: &[ActionRequest], decisions: &[Decision]) -> Result<(), DecisionError> {
    for (i, decision) in decisions.iter().enumerate() {
        let Some(request) = pending.iter().find(|r| r.tool_call_id == decision.tool_call_id) else {
            return Err(DecisionError::NotPending(decision.tool_call_id.clone()));
        };
        if decisions[..i].iter().any(|d| d.tool_call_id == decision.tool_call_id) {
            return Err(DecisionError::Incomplete(format!("tool call {:?} has two decisions", decision.tool_call_id)));
        }
        let field = |name: &str| format!("resume.decisions[{i}].{name}");
        if !request.allowed_decisions.contains(&decision.decision) {
            return Err(DecisionError::Invalid {
                field: field("decision"),
                message: "is not allowed for this call".into(),
            });
        }
        if decision.decision == DecisionKind::Edit && !decision.arguments.as_ref().is_some_and(Value::is_object) {
            return Err(DecisionError::Invalid {
                field: field("arguments"),
                message: "an edit needs the arguments to run the call with, as a JSON object".into(),
            });
        }
        if decision.message.as_ref().is_some_and(|m| m.chars().count() > MAX_MESSAGE_CHARS) {
            return Err(DecisionError::Invalid {
                field: field("message"),
                message: format!("is longer than {MAX_MESSAGE_CHARS} characters"),
            });
        }
    }
    if let Some(missing) = pending.iter().find(|r| !decisions.iter().any(|d| d.tool_call_id == r.tool_call_id)) {
        return Err(DecisionError::Incomplete(format!(
            "tool call {:?} ({}) is waiting and has no decision; decide every waiting call",
            missing.tool_call_id, missing.name
        )));
    }
    Ok(())
}

/// What becomes of one call once decided: run (with these arguments), or answered with this text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Run the call with these arguments (JSON text).
    Run(String),
    /// Do not run it: the model reads this as its result.
    Answer(String),
}

/// What `decision` makes of `call`.
pub fn resolve(call: &ToolCall, decision: Option<&Decision>) -> Resolved {
    match decision {
        None => Resolved::Run(call.function.arguments.clone()),
        Some(d) => match d.decision {
            DecisionKind::Approve => Resolved::Run(call.function.arguments.clone()),
            DecisionKind::Edit => Resolved::Run(
                d.arguments.as_ref().map(Value::to_string).unwrap_or_else(|| call.function.arguments.clone()),
            ),
            DecisionKind::Reject => Resolved::Answer(format!(
                "The user rejected this call of {}: {}",
                call.function.name,
                d.message.as_deref().filter(|m| !m.trim().is_empty()).unwrap_or("no reason given")
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_approval_records_name_the_tool_and_keep_the_newest_within_their_bound() {
        let call = ToolCall::new("call_1", "execute", "{}");
        let pending = vec![ActionRequest::of(&call)];
        let reject =
            Decision { tool_call_id: "call_1".into(), decision: DecisionKind::Reject, arguments: None, message: None };
        let mut kept = Vec::new();
        for _ in 0..MAX_APPROVALS_KEPT + 3 {
            kept = appended(&kept, &records_of(&pending, std::slice::from_ref(&reject), "alice"));
        }
        assert_eq!(kept.len(), MAX_APPROVALS_KEPT);
        let last = kept.last().expect("a record");
        assert_eq!(
            (last.name.as_str(), last.decision, last.decided_by.as_str()),
            ("execute", DecisionKind::Reject, "alice")
        );
    }

    fn spec(yaml: &str) -> AgentSpec {
        serde_norway::from_str(yaml).expect("a spec")
    }

    #[test]
    fn a_run_may_be_stricter_than_its_agent_and_more_trusting_unless_the_agent_is_locked() {
        use ToolApprovalMode::{AlwaysTrust, Default};
        for (agent, locked, asked, admin, mode) in [
            (Default, false, Default, false, RunMode::Given(Default)),
            (Default, true, Default, false, RunMode::Given(Default)),
            (AlwaysTrust, false, Default, false, RunMode::Given(Default)),
            (AlwaysTrust, true, Default, false, RunMode::Given(Default)),
            (AlwaysTrust, true, AlwaysTrust, false, RunMode::Given(AlwaysTrust)),
            (Default, false, AlwaysTrust, false, RunMode::Given(AlwaysTrust)),
            (Default, true, AlwaysTrust, false, RunMode::Kept(Default)),
            (Default, true, AlwaysTrust, true, RunMode::Given(AlwaysTrust)),
        ] {
            assert_eq!(
                run_mode(agent, locked, asked, admin),
                mode,
                "{agent:?} locked={locked} asked {asked:?} admin={admin}"
            );
        }
    }

    #[test]
    fn a_rule_naming_one_tool_of_another_namespaces_server_splits_at_the_last_slash() {
        let rule = ApprovalRule::of(
            &spec("backend: ChatbotAgent\ncontext: {approvalRequired: [tools/shared/purge]}"),
            ToolApprovalMode::Default,
        );
        assert!(rule.needs_approval("purge", Some("tools/shared")));
        assert!(!rule.needs_approval("search", Some("tools/shared")));
        assert!(!rule.needs_approval("purge", Some("tools")), "not the server tools's tool shared/purge");
    }

    #[test]
    fn a_main_agent_in_default_mode_waits_for_the_sensitive_and_the_named_tools() {
        let main = spec("backend: ChatbotAgent\ncontext: {approvalRequired: [publish, docs/*, notes/erase]}");
        let mut rule = ApprovalRule::of(&main, ToolApprovalMode::Default);
        rule.destructive = vec!["drop_table".into()];
        for (tool, server, waits) in [
            ("write_file", None, true),
            ("edit_file", None, true),
            ("execute", None, true),
            ("read_file", None, false),
            ("publish", Some("blog"), true),
            ("search", Some("docs"), true),
            ("search", Some("web"), false),
            ("erase", Some("notes"), true),
            ("read", Some("notes"), false),
            ("drop_table", Some("db"), true),
            ("task", None, false),
        ] {
            assert_eq!(rule.needs_approval(tool, server), waits, "{tool} of {server:?}");
        }
        assert!(!ApprovalRule::of(&main, ToolApprovalMode::AlwaysTrust).needs_approval("execute", None));
        let sub = spec("backend: SubAgentBackend\nisSubagent: true\ncontext: {approvalRequired: [publish]}");
        assert!(!ApprovalRule::of(&sub, ToolApprovalMode::Default).needs_approval("publish", None));
    }

    fn pending(ids: &[&str]) -> Vec<ActionRequest> {
        ids.iter()
            .map(|id| ActionRequest::of(&ToolCall::new(id.to_string(), "execute", "{\"command\":\"ls\"}")))
            .collect()
    }

    fn decision(id: &str, kind: DecisionKind) -> Decision {
        Decision { tool_call_id: id.into(), decision: kind, arguments: None, message: None }
    }

    #[test]
    fn decisions_must_answer_every_waiting_call_and_only_those() {
        let waiting = pending(&["a", "b"]);
        let both = [decision("a", DecisionKind::Approve), decision("b", DecisionKind::Reject)];
        assert_eq!(check_decisions(&waiting, &both), Ok(()));
        assert_eq!(
            check_decisions(&waiting, &[decision("c", DecisionKind::Approve)]),
            Err(DecisionError::NotPending("c".into()))
        );
        assert!(
            matches!(check_decisions(&waiting, &both[..1]), Err(DecisionError::Incomplete(m)) if m.contains("\"b\""))
        );
        let twice = [
            decision("a", DecisionKind::Approve),
            decision("a", DecisionKind::Reject),
            decision("b", DecisionKind::Approve),
        ];
        assert!(matches!(check_decisions(&waiting, &twice), Err(DecisionError::Incomplete(_))));
        let bare_edit = [decision("a", DecisionKind::Edit), decision("b", DecisionKind::Approve)];
        assert_eq!(
            check_decisions(&waiting, &bare_edit).map_err(|e| e.to_string()),
            Err("resume.decisions[0].arguments: an edit needs the arguments to run the call with, as a JSON object"
                .into())
        );
    }

    #[test]
    fn an_edit_runs_the_persons_arguments_and_a_rejection_answers_the_model() {
        let call = ToolCall::new("a", "execute", "{\"command\":\"rm -rf /\"}");
        let edit =
            Decision { arguments: Some(serde_json::json!({"command": "ls"})), ..decision("a", DecisionKind::Edit) };
        assert_eq!(resolve(&call, Some(&edit)), Resolved::Run("{\"command\":\"ls\"}".into()));
        assert_eq!(
            resolve(&call, Some(&decision("a", DecisionKind::Approve))),
            Resolved::Run(call.function.arguments.clone())
        );
        let reject = Decision { message: Some("not on my machine".into()), ..decision("a", DecisionKind::Reject) };
        assert_eq!(
            resolve(&call, Some(&reject)),
            Resolved::Answer("The user rejected this call of execute: not on my machine".into())
        );
    }
}
