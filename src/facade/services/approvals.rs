//! A person's decisions on a paused run's tool calls: `POST /api/agent/runs` with `resume` (Yuxi's
//! field), or an A2A message to an `input-required` task, continues the same run from its checkpoint (docs/concepts/approvals.md). Two forms of it:
//! this API's, `{resume: {run_id, decisions: [{tool_call_id, decision, arguments?, message?}]}}`, and
//! Yuxi's web client's, which names the run in `created_by_run_id` and gives LangChain's decisions, one
//! per waiting call in their order, `{resume: {decisions: [{type, edited_action?, message?}]}}`
//! ([`crate::run::hitl`]). Only the run's user decides, or a superadmin, whose decision on another
//! user's run is written into that run's events and the audit log; another user's run answers 404 as a
//! missing one, to an administrator too (an edit would run its arguments in that user's sandbox with
//! their files). A run that is not waiting, or a decision for a call that is not waiting, answers 409;
//! decisions that come after the approval's deadline end the run as the sweeper would
//! (`ApprovalTimeout`) and answer 409.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::access::{Identity, Role};
use crate::facade::http::error::ApiError;
use crate::facade::services::run_starts::launch_resumed;
use crate::facade::services::state::FacadeState;
use crate::run::EventKind;
use crate::run::approval::{APPROVAL_TIMEOUT, ActionRequest, Decision, DecisionError, DecisionKind, check_decisions};
use crate::run::hitl::{EditedAction, PositionalDecision, in_order};
use crate::run::thread_id::is_valid_id;
use crate::run::{RunRecord, RunStatus};

/// The most decisions one resume carries.
pub const MAX_DECISIONS: usize = 64;

/// `resume` of `POST /api/agent/runs`: the decisions on the calls a waiting run asks about.
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    /// The waiting run. Absent in Yuxi's form, where the body's `created_by_run_id` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 253)]
    pub run_id: Option<String>,
    /// One decision for each waiting call, at most 64, all in one of two forms: by id
    /// (`{tool_call_id, decision: approve | edit | reject, arguments?, message?}`), or by place, as
    /// LangChain and Yuxi's client spell them (`{type: approve | edit | reject, edited_action?: {name,
    /// args}, message?}`, the n-th for the n-th waiting call).
    #[schema(max_items = 64)]
    pub decisions: Vec<DecisionBody>,
}

/// One decision of a resume, in either form (see [`ResumeBody::decisions`]).
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// By id: the waiting call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// By id: `approve`, `edit` or `reject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionKind>,
    /// By id, for `edit`: the arguments to run the call with (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Value>,
    /// By place: `approve`, `edit` or `reject`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<DecisionKind>,
    /// By place, for `edit`: the call to run, the same tool with other `args`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_action: Option<EditedAction>,
    /// For `reject`: what the model reads instead of a result (at most 4096 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub message: Option<String>,
}

/// What the rest of the start's body says about the resume (Yuxi's client repeats these).
pub struct ResumeContext<'a> {
    /// `created_by_run_id`: in Yuxi's form, the waiting run.
    pub created_by_run_id: Option<&'a str>,
    /// `thread_id`: the waiting run's thread, when given.
    pub thread_id: Option<&'a str>,
}

/// The waiting run `run_id` when `who` may decide on it: its user's, or any for a superadmin. An
/// administrator decides only on their own runs: deciding is acting in the run's sandbox.
async fn decidable(state: &FacadeState, who: &Identity, run_id: &str) -> Result<RunRecord, ApiError> {
    let store = state.store()?;
    let missing = || ApiError::NotFound(format!("run {run_id:?} does not exist"));
    if !is_valid_id(run_id) {
        return Err(missing());
    }
    let record = store.run_record(run_id).await?.ok_or_else(missing)?;
    if record.uid == who.uid || who.role == Role::Superadmin { Ok(record) } else { Err(missing()) }
}

/// The run a resume names: `resume.run_id`, or Yuxi's `created_by_run_id`; 422 naming
/// `resume.run_id` when neither is given, or `created_by_run_id` when it names another run.
fn run_named(resume: &ResumeBody, context: &ResumeContext<'_>) -> Result<String, ApiError> {
    let created_by = context.created_by_run_id.filter(|id| !id.is_empty());
    match (resume.run_id.as_deref(), created_by) {
        (Some(run), Some(other)) if run != other => Err(ApiError::invalid(
            "created_by_run_id",
            format!("names run {other:?}, and resume.run_id names {run:?}: a resume continues one run"),
        )),
        (Some(run), _) | (None, Some(run)) => Ok(run.to_string()),
        (None, None) => Err(ApiError::invalid(
            "resume.run_id",
            "the waiting run is missing: resume.run_id, or created_by_run_id as Yuxi's client sends it",
        )),
    }
}

/// `decisions` as this system's decisions on `pending`: by id as they are, by place in `pending`'s
/// order. Errors: 422 naming the decision that mixes the two forms, or lacks what its form needs, and
/// [`DecisionError`]s of the by-place rules.
fn decisions_of(decisions: &[DecisionBody], pending: &[ActionRequest]) -> Result<Vec<Decision>, ApiError> {
    let by_place = decisions.first().is_some_and(|d| d.kind.is_some() || d.edited_action.is_some());
    let mut by_id = Vec::new();
    let mut placed = Vec::new();
    for (i, d) in decisions.iter().enumerate() {
        let field = |name: &str| format!("resume.decisions[{i}]{name}");
        let id_form = d.tool_call_id.is_some() || d.decision.is_some() || d.arguments.is_some();
        let place_form = d.kind.is_some() || d.edited_action.is_some();
        if id_form == place_form || place_form != by_place {
            return Err(ApiError::invalid(
                field(""),
                "give every decision in one form: {tool_call_id, decision, arguments?, message?} or {type, edited_action?, message?}",
            ));
        }
        if by_place {
            let kind = d.kind.ok_or_else(|| ApiError::invalid(field(".type"), "missing: approve, edit or reject"))?;
            placed.push(PositionalDecision {
                kind,
                edited_action: d.edited_action.clone(),
                message: d.message.clone(),
            });
        } else {
            let missing = |name: &str| ApiError::invalid(field(&format!(".{name}")), "missing");
            by_id.push(Decision {
                tool_call_id: d.tool_call_id.clone().ok_or_else(|| missing("tool_call_id"))?,
                decision: d.decision.ok_or_else(|| missing("decision"))?,
                arguments: d.arguments.clone(),
                message: d.message.clone(),
            });
        }
    }
    if by_place { in_order(pending, &placed).map_err(refusal) } else { Ok(by_id) }
}

/// The answer to a [`DecisionError`]: 409 for a call that is not waiting, 422 naming the field otherwise.
fn refusal(err: DecisionError) -> ApiError {
    match err {
        DecisionError::NotPending(_) => ApiError::Conflict(err.to_string()),
        DecisionError::Incomplete(message) => ApiError::invalid("resume.decisions", message),
        DecisionError::Invalid { field, message } => ApiError::invalid(field, message),
    }
}

/// Resumes the waiting run `resume` names with the person's decisions: checked against what it waits
/// for, stored with its checkpoint, and its runner started again (the same run, the same event stream).
/// Returns the run as it goes on (`pending`).
///
/// Errors: 404 for a run the caller may not decide on, or not of `context.thread_id`; 409 for a run
/// that is not waiting, or a decision for a call that is not waiting; 422 naming `resume.run_id` or
/// `created_by_run_id` when the run is not named once, `resume.decisions` for a waiting call left
/// undecided, or the field of a decision that lacks what it needs.
pub async fn resume(
    state: &FacadeState,
    who: &Identity,
    resume: ResumeBody,
    context: ResumeContext<'_>,
) -> Result<RunRecord, ApiError> {
    let store = state.store()?;
    if resume.decisions.len() > MAX_DECISIONS {
        return Err(ApiError::invalid("resume.decisions", format!("at most {MAX_DECISIONS} decisions")));
    }
    let run_id = run_named(&resume, &context)?;
    let record = decidable(state, who, &run_id).await?;
    if context.thread_id.is_some_and(|thread| thread != record.thread_id) {
        return Err(ApiError::NotFound(format!("run {run_id:?} does not exist in thread {:?}", context.thread_id)));
    }
    let not_waiting = |record: &RunRecord| {
        ApiError::Conflict(format!("run {} is {}; only a waiting run is resumed", record.run_id, record.status))
    };
    if record.status != RunStatus::Waiting {
        return Err(not_waiting(&record));
    }
    if record.waiting.as_ref().is_some_and(|w| w.overdue(jiff::Timestamp::now())) {
        store.expire_waiting_run(&record).await?;
        return Err(ApiError::Conflict(format!(
            "run {} waited past its approval's deadline ({}): it ended with reason {APPROVAL_TIMEOUT}",
            record.run_id,
            record.waiting.as_ref().map_or("", |w| w.expires_at.as_str()),
        )));
    }
    let checkpoint = store.run_checkpoint(&record.run_id).await?.ok_or_else(|| not_waiting(&record))?;
    let decisions = decisions_of(&resume.decisions, &checkpoint.pending)?;
    check_decisions(&checkpoint.pending, &decisions).map_err(refusal)?;
    let agent = state.agents.get(&record.agent_slug).await?.ok_or_else(|| {
        ApiError::Conflict(format!("agent {:?} of run {} no longer exists", record.agent_slug, record.run_id))
    })?;
    let decided = crate::run::approval::records_of(&checkpoint.pending, &decisions, &who.uid);
    if !store.resume_run(&record.run_id, &decisions, &decided).await? {
        return Err(ApiError::Conflict(format!("run {} is no longer waiting", record.run_id)));
    }
    if who.uid != record.uid {
        audit_decision(state, who, &record, &decisions).await;
    }
    let approvals = crate::run::approval::appended(&record.approvals, &decided);
    let record = RunRecord { status: RunStatus::Pending, waiting: None, approvals, ..record };
    // The run acts for its own user again, with fresh credentials (its earlier ones may have expired
    // while it waited). A superadmin deciding on another user's run gives it that user's uid only.
    let acting = if who.uid == record.uid { who.clone() } else { Identity::new(record.uid.clone(), Role::User, None) };
    launch_resumed(state, &acting, agent, &record, checkpoint.input);
    Ok(record)
}

/// Records a superadmin's decisions on another user's run: a `custom` event of type `decided_by` in
/// the run's stream (so its user sees who decided, and what), and a line in the audit log (tracing
/// target `yuxi::audit`). The decisions stand if the event cannot be written; the log says so.
async fn audit_decision(state: &FacadeState, who: &Identity, record: &RunRecord, decisions: &[Decision]) {
    let calls: Vec<_> = decisions
        .iter()
        .map(|d| serde_json::json!({"tool_call_id": d.tool_call_id, "decision": d.decision, "edited": d.arguments.is_some()}))
        .collect();
    tracing::warn!(
        target: "yuxi::audit",
        decided_by = %who.uid,
        run_id = %record.run_id,
        run_uid = %record.uid,
        decisions = %serde_json::Value::from(calls.clone()),
        "a superadmin decided on another user's waiting run"
    );
    let payload = serde_json::json!({"type": "decided_by", "uid": who.uid, "role": "superadmin", "decisions": calls});
    if let Ok(store) = state.store()
        && let Err(error) = store.append_event(&record.run_id, &record.thread_id, EventKind::Custom, payload).await
    {
        tracing::warn!(target: "yuxi::audit", run_id = %record.run_id, %error, "could not write the decided_by event");
    }
}
