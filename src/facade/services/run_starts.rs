//! What every start of a run goes through, whoever starts it (`POST /api/agent/runs`, the thread's queue,
//! a resume, `subagent_start`): the daily token quotas ([`check_quotas`]), the run's own credentials
//! ([`run_token`]) and its launch with them ([`launch_parent`], [`launch_resumed`]).

use super::state::FacadeState;
use crate::access::Identity;
use crate::facade::http::error::ApiError;
use crate::run::RunRecord;

/// Refuses a start for `uid` when a daily token quota is used up: 429 naming
/// `max_tokens_per_user_per_day` or `max_tokens_per_namespace_per_day`, with the seconds to the next UTC
/// day as `Retry-After`. Errors: 503 when the store cannot say.
pub async fn check_quotas(state: &FacadeState, uid: &str) -> Result<(), ApiError> {
    use crate::run::budget::{day_of, seconds_to_next_day};
    let quotas = state.limits.quotas;
    if !quotas.any() {
        return Ok(());
    }
    let store = state.store()?;
    let now = jiff::Timestamp::now();
    let (user, namespace) = store.usage_today(&day_of(now), &state.limits.namespace, uid).await?;
    match quotas.used_up(user, namespace) {
        None => Ok(()),
        Some(used_up) => Err(ApiError::Limited {
            limit: used_up.limit.into(),
            message: used_up.message(),
            retry_after: seconds_to_next_day(now),
        }),
    }
}

/// The credentials of `record`'s run for `who`, working in `file_thread_id`'s files: good until the
/// run's deadline (the default timeout) and the pod's grace after it; refused as soon as the run ends.
pub fn run_token(state: &FacadeState, who: &Identity, record: &RunRecord, file_thread_id: &str) -> String {
    let grant = crate::run::RunGrant {
        run_id: record.run_id.clone(),
        thread_id: record.thread_id.clone(),
        file_thread_id: file_thread_id.to_string(),
        agent: record.agent_slug.clone(),
        uid: who.uid.clone(),
        role: who.role,
        department_id: who.department_id,
    };
    let expires = crate::run::grant::token_expiry(
        jiff::Timestamp::now().as_second(),
        crate::run::inputs::DEFAULT_TIMEOUT_SECONDS,
    );
    state.run_tokens.sign(&grant, expires)
}

/// Launches again the parent run `record` of `agent` that a person's decisions resumed, for `who`, with
/// fresh credentials: its runner goes on from the run's checkpoint.
pub fn launch_resumed(
    state: &FacadeState,
    who: &Identity,
    mut agent: crate::resources::Agent,
    record: &RunRecord,
    input: String,
) {
    let Some(runs) = state.runs.as_ref() else { return };
    if let Some(mode) = record.request.tool_approval_mode {
        agent.spec.context.get_or_insert_with(Default::default).tool_approval_mode = Some(mode.into());
    }
    let token = run_token(state, who, record, &record.thread_id);
    runs.launcher.resume(runs.store.clone(), record.clone(), agent, input, token);
}

/// Launches the recorded parent run `record` of `agent` for `who`, with credentials of its own: through
/// them its model may delegate to the subagents the agent allows the caller, and act on its own child
/// runs only. The run's `model_spec` and `tool_approval_mode` replace the agent's.
pub fn launch_parent(
    state: &FacadeState,
    who: &Identity,
    mut agent: crate::resources::Agent,
    record: &RunRecord,
    query: String,
) {
    let Some(runs) = state.runs.as_ref() else { return };
    if let Some(mode) = record.request.tool_approval_mode {
        agent.spec.context.get_or_insert_with(Default::default).tool_approval_mode = Some(mode.into());
    }
    let token = run_token(state, who, record, &record.thread_id);
    state.metrics.run_started(&agent, false);
    runs.launcher.launch(runs.store.clone(), record.clone(), agent, query, Some(token));
}
