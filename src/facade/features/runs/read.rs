//! A user's runs as Yuxi's client follows them: `GET /api/agent/runs/{run_id}` (`{run: ...}`),
//! `.../result`, `POST .../cancel` and `GET /api/agent/thread/{thread_id}/active_run`. A run of another
//! user answers as a missing one. The start is in [`super::start`], the event stream in
//! [`super::events`].

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use serde_json::Value;

use crate::facade::http::auth::Caller;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::conversations::{final_message_id, owned};
use crate::facade::services::owned_runs::mine;
use crate::facade::services::state::FacadeState;
use crate::run::{RunRecord, RunStatus};

/// A run as Yuxi's client reads it (`{run: ...}`): Yuxi's field names (`id`, `conversation_thread_id`,
/// `run_type`, `error_type`, `error_message`) beside this system's (`run_id`, `thread_id`, `error`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct RunItem {
    /// The run id.
    pub id: String,
    /// The run id, again, as the rest of this API names it.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Its thread, as Yuxi names it.
    pub conversation_thread_id: String,
    /// The agent.
    pub agent_slug: String,
    /// Its user.
    pub uid: String,
    /// `pending`, `running`, `cancel_requested`, `waiting`, `completed`, `failed`, `cancelled` or
    /// `interrupted`.
    pub status: RunStatus,
    /// `chat` for a run a user started, `subagent` for a delegated one.
    pub run_type: &'static str,
    /// Where it came from: `chat` or `subagent`.
    pub source: &'static str,
    /// The request id of its start; `null` for a delegated run.
    pub request_id: Option<String>,
    /// The run of the same thread it follows.
    pub created_by_run_id: Option<String>,
    /// The delegating parent, for a subagent run.
    pub parent: Option<crate::resources::ParentRef>,
    /// What its start asked beyond the query: `meta`, `model_spec`, `tool_approval_mode` (the mode the
    /// run has), `tool_approval_mode_asked` (the mode asked for, when the agent's lock kept its own).
    #[schema(value_type = Object)]
    pub input_payload: Value,
    /// `run_failed` when it failed; `null` otherwise.
    pub error_type: Option<&'static str>,
    /// Why it failed.
    pub error_message: Option<String>,
    /// Why it failed (this system's name).
    pub error: Option<String>,
    /// When it was created, RFC 3339.
    pub created_at: String,
    /// The start of its input (the question, or the task of a subagent run), at most 200 characters;
    /// `null` for a run recorded without one.
    pub summary: Option<String>,
    /// When it ended, RFC 3339; `null` while it goes on.
    pub ended_at: Option<String>,
    /// The decisions people made on its calls, oldest first (who, what, when).
    pub approvals: Vec<crate::run::approval::ApprovalRecord>,
    /// While it waits for a person (`status: waiting`): the calls waiting (`action_requests`) and when
    /// the decisions are due (`expires_at`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::run::approval::Waiting>,
}

impl RunItem {
    /// The item of `record`.
    pub fn of(record: RunRecord) -> RunItem {
        let subagent = record.parent.is_some();
        let created_by_run_id =
            record.request.created_by_run_id.clone().or_else(|| record.parent.as_ref().map(|p| p.run_id.clone()));
        let input_payload = serde_json::json!({
            "meta": record.request.meta,
            "model_spec": record.request.model_spec,
            "tool_approval_mode": record.request.tool_approval_mode,
            "tool_approval_mode_asked": record.request.tool_approval_mode_asked,
        });
        RunItem {
            id: record.run_id.clone(),
            conversation_thread_id: record.thread_id.clone(),
            run_type: if subagent { "subagent" } else { "chat" },
            source: if subagent { "subagent" } else { "chat" },
            request_id: record.request.request_id,
            created_by_run_id,
            input_payload,
            error_type: (record.status == RunStatus::Failed).then_some("run_failed"),
            error_message: record.error.clone(),
            run_id: record.run_id,
            thread_id: record.thread_id,
            agent_slug: record.agent_slug,
            uid: record.uid,
            status: record.status,
            parent: record.parent,
            error: record.error,
            created_at: record.created_at,
            summary: record.request.summary,
            approvals: record.approvals,
            ended_at: record.ended_at,
            waiting: record.waiting,
        }
    }
}

/// `{run: ...}`: the answer of `GET /api/agent/runs/{run_id}`, and of `.../active_run` (where `run` is
/// `null` when the thread has no unfinished run).
#[derive(Serialize, utoipa::ToSchema)]
pub struct RunAnswer {
    /// The run.
    pub run: Option<RunItem>,
}

/// `GET /api/agent/runs/{run_id}`: `{run: ...}`.
#[utoipa::path(
    get,
    path = "/api/agent/runs/{run_id}",
    operation_id = "get_run",
    tag = "runs",
    params(("run_id" = String, Path, description = "the run id")),
    responses(
        (status = 200, description = "the run", body = RunAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
) -> Result<Json<RunAnswer>, ApiError> {
    let record = mine(state.store()?, &who, &run_id).await?;
    Ok(Json(RunAnswer { run: Some(RunItem::of(record)) }))
}

/// `GET /api/agent/thread/{thread_id}/active_run`: `{run: ...}`, the thread's unfinished run, or
/// `{run: null}` when it has none. A thread of another user answers 404, like a missing one.
#[utoipa::path(
    get,
    path = "/api/agent/thread/{thread_id}/active_run",
    operation_id = "get_thread_active_run",
    tag = "runs",
    params(("thread_id" = String, Path, description = "the thread id")),
    responses(
        (status = 200, description = "the thread's unfinished run, or `{run: null}`", body = RunAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn active_run(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<RunAnswer>, ApiError> {
    let store = state.store()?;
    let conversation = owned(store, &who, &thread_id).await?;
    let Some(last) = conversation.last_run_id else { return Ok(Json(RunAnswer { run: None })) };
    let run = store.run_record(&last).await?.filter(|r| !r.status.is_terminal() || r.status == RunStatus::Interrupted);
    Ok(Json(RunAnswer { run: run.map(RunItem::of) }))
}

/// Token counts, snake_case (Yuxi's result `token_usage`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct TokenCounts {
    /// Tokens of the prompts.
    pub prompt_tokens: i64,
    /// Tokens the model wrote.
    pub completion_tokens: i64,
    /// Both together.
    pub total_tokens: i64,
}

impl From<&crate::resources::TokenUsage> for TokenCounts {
    fn from(usage: &crate::resources::TokenUsage) -> Self {
        TokenCounts {
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
        }
    }
}

/// The answer of `GET /api/agent/runs/{run_id}/result` (Yuxi's run result).
#[derive(Serialize, utoipa::ToSchema)]
pub struct ResultAnswer {
    /// `completed`, `failed`, `cancelled` or `interrupted`.
    pub status: RunStatus,
    /// The final assistant text; empty unless completed.
    pub output: String,
    /// Why it failed.
    pub error: Option<String>,
    /// The agent.
    pub agent_slug: String,
    /// The run.
    pub run_id: String,
    /// The run, as Yuxi names it.
    pub agent_run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Its thread, as Yuxi names its conversation.
    pub conversation_id: String,
    /// The request id of its start (`null` for a delegated run).
    pub request_id: Option<String>,
    /// The id of the final answer in the thread's history (`GET /api/chat/thread/{id}/history`), when
    /// the run completed with one.
    pub final_message_id: Option<String>,
    /// Tokens used, summed over its model calls.
    pub token_usage: TokenCounts,
    /// A CamelCase word saying why a rule ended it (`BudgetExceeded`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// On the root of a run tree: the tokens the whole tree used, its own and every descendant's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree_token_usage: Option<TokenCounts>,
    /// The token budget of its tree, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    /// On the root of a run tree: what the whole tree's model calls cost, priced by their Models, one
    /// `{currency, amount}` per currency; absent when nothing was priced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tree_cost: Vec<CostCount>,
}

/// An amount of money, as results show it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CostCount {
    /// The ISO 4217 currency code (`USD`, `CNY`).
    pub currency: String,
    /// The amount, a decimal string of 6 to 12 places (`"0.001580"`): exact, never a float.
    pub amount: String,
}

/// `GET /api/agent/runs/{run_id}/result`: the result once the run has ended (409 before).
#[utoipa::path(
    get,
    path = "/api/agent/runs/{run_id}/result",
    operation_id = "get_run_result",
    tag = "runs",
    params(("run_id" = String, Path, description = "the run id")),
    responses(
        (status = 200, description = "the run's result", body = ResultAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 409, description = "conflict", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn result(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
) -> Result<Json<ResultAnswer>, ApiError> {
    let store = state.store()?;
    let record = mine(store, &who, &run_id).await?;
    let Some(result) = store.run_result(&record.run_id).await? else {
        return Err(ApiError::Conflict(format!("run {run_id:?} is {}; it has no result yet", record.status.as_str())));
    };
    let final_message_id = if result.status == RunStatus::Completed && record.parent.is_none() {
        final_message_id(store, &record).await?
    } else {
        None
    };
    Ok(Json(ResultAnswer {
        status: result.status,
        output: result.output,
        error: result.error,
        agent_slug: record.agent_slug,
        agent_run_id: record.run_id.clone(),
        run_id: record.run_id,
        conversation_id: record.thread_id.clone(),
        thread_id: record.thread_id,
        request_id: record.request.request_id,
        final_message_id,
        token_usage: TokenCounts::from(&result.token_usage),
        reason: result.reason,
        tree_token_usage: result.tree_token_usage.as_ref().map(TokenCounts::from),
        max_tokens: record.max_tokens,
        tree_cost: result.tree_cost.into_iter().map(|c| CostCount { currency: c.currency, amount: c.amount }).collect(),
    }))
}

/// `POST /api/agent/runs/{run_id}/cancel`.
#[utoipa::path(
    post,
    path = "/api/agent/runs/{run_id}/cancel",
    operation_id = "cancel_run",
    tag = "runs",
    params(("run_id" = String, Path, description = "the run id")),
    responses(
        (status = 200, description = "the run after the cancel", body = crate::delegation::wire::CancelAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn cancel(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
) -> Result<Json<crate::delegation::wire::CancelAnswer>, ApiError> {
    let store = state.store()?;
    let record = mine(store, &who, &run_id).await?;
    let record = store.cancel_run(&record.run_id).await?.unwrap_or(record);
    // Cancelling a parent cancels the children it started.
    store.cancel_children(&record.run_id).await?;
    Ok(Json(crate::delegation::wire::CancelAnswer::of(record)))
}
