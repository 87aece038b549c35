//! A person's decisions on a paused run's tool calls: `POST /api/agent/runs` with `resume: {run_id,
//! decisions}` (Yuxi's `resume` field) continues the same run from its checkpoint
//! (docs/concepts/approvals.md). Only the run's user or an administrator decides; another user's run
//! answers 404 as a missing one; a run that is not waiting, or a decision for a call that is not
//! waiting, answers 409.

use serde::{Deserialize, Serialize};

use super::started::StartedParentRun;
use crate::access::{Identity, Role};
use crate::facade::http::error::ApiError;
use crate::facade::services::run_starts::launch_resumed;
use crate::facade::services::state::FacadeState;
use crate::run::approval::{Decision, DecisionError, check_decisions};
use crate::run::thread_id::is_valid_id;
use crate::run::{RunRecord, RunStatus};

/// The most decisions one resume carries.
pub const MAX_DECISIONS: usize = 64;

/// `resume` of `POST /api/agent/runs`: the decisions on the calls a waiting run asks about.
#[derive(Clone, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    /// The waiting run.
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 253)]
    pub run_id: String,
    /// One decision for each waiting call (`approve`, `edit` with `arguments`, `reject` with a
    /// `message`), at most 64.
    #[schema(max_items = 64)]
    pub decisions: Vec<Decision>,
}

/// The waiting run `run_id` when `who` may decide on it: its user's, or any for an administrator.
async fn decidable(state: &FacadeState, who: &Identity, run_id: &str) -> Result<RunRecord, ApiError> {
    let store = state.store()?;
    let missing = || ApiError::NotFound(format!("run {run_id:?} does not exist"));
    if !is_valid_id(run_id) {
        return Err(missing());
    }
    let record = store.run_record(run_id).await?.ok_or_else(missing)?;
    if record.uid == who.uid || who.role >= Role::Admin { Ok(record) } else { Err(missing()) }
}

/// Resumes the waiting run `resume.run_id` with the person's decisions: checked against what it waits
/// for, stored with its checkpoint, and its runner started again (the same run, the same event stream).
///
/// Errors: 404 for a run the caller may not decide on; 409 for a run that is not waiting, or a decision
/// for a call that is not waiting; 422 naming `resume.decisions` for a waiting call left undecided, or
/// the field of a decision that lacks what it needs.
pub async fn resume(state: &FacadeState, who: &Identity, resume: ResumeBody) -> Result<StartedParentRun, ApiError> {
    let store = state.store()?;
    if resume.decisions.len() > MAX_DECISIONS {
        return Err(ApiError::invalid("resume.decisions", format!("at most {MAX_DECISIONS} decisions")));
    }
    let record = decidable(state, who, &resume.run_id).await?;
    let not_waiting = |record: &RunRecord| {
        ApiError::Conflict(format!("run {} is {}; only a waiting run is resumed", record.run_id, record.status))
    };
    if record.status != RunStatus::Waiting {
        return Err(not_waiting(&record));
    }
    let checkpoint = store.run_checkpoint(&record.run_id).await?.ok_or_else(|| not_waiting(&record))?;
    check_decisions(&checkpoint.pending, &resume.decisions).map_err(|err| match err {
        DecisionError::NotPending(_) => ApiError::Conflict(err.to_string()),
        DecisionError::Incomplete(message) => ApiError::invalid("resume.decisions", message),
        DecisionError::Invalid { field, message } => ApiError::invalid(field, message),
    })?;
    let agent = state.agents.get(&record.agent_slug).await?.ok_or_else(|| {
        ApiError::Conflict(format!("agent {:?} of run {} no longer exists", record.agent_slug, record.run_id))
    })?;
    if !store.resume_run(&record.run_id, &resume.decisions).await? {
        return Err(ApiError::Conflict(format!("run {} is no longer waiting", record.run_id)));
    }
    let record = RunRecord { status: RunStatus::Pending, waiting: None, ..record };
    // The run acts for its own user again, with fresh credentials (its earlier ones may have expired
    // while it waited). An administrator deciding on another user's run gives it that user's uid only.
    let acting = if who.uid == record.uid {
        who.clone()
    } else {
        Identity { uid: record.uid.clone(), role: Role::User, department_id: None }
    };
    launch_resumed(state, &acting, agent, &record, checkpoint.input);
    Ok(StartedParentRun::running(&record, Default::default()))
}
