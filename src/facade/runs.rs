//! A user's runs as Yuxi's client starts and follows them: `POST /api/agent/runs`,
//! `GET /api/agent/runs/{run_id}` (`{run: ...}`), `.../result`, `POST .../cancel` and
//! `GET /api/agent/thread/{thread_id}/active_run`. A run of another user answers as a missing one. The
//! event stream is in [`super::run_events`].

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use serde_json::Value;

use crate::access::{Identity, Role};
use crate::facade::http::auth::Caller;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::run_queue::{self, QueuePolicy, QueuedStart};
use crate::facade::services::run_starts::{check_quotas, launch_parent};
use crate::facade::services::state::FacadeState;
use crate::run::queue::RequestStatus;
use crate::run::thread_id::is_valid_id;
use crate::run::{RunRecord, RunStatus};
use crate::store::Store;

/// The run, when it belongs to `who` (a superadmin sees every run).
pub(super) async fn mine(store: &Store, who: &Identity, run_id: &str) -> Result<RunRecord, ApiError> {
    let missing = || ApiError::NotFound(format!("run {run_id:?} does not exist"));
    if !is_valid_id(run_id) {
        return Err(missing());
    }
    let record = store.run_record(run_id).await?.ok_or_else(missing)?;
    if record.uid == who.uid || who.role == Role::Superadmin { Ok(record) } else { Err(missing()) }
}

/// The answer of `POST /api/agent/runs` (Yuxi's run submission answer).
#[derive(Serialize, utoipa::ToSchema)]
pub struct StartedParentRun {
    /// The run; `null` while the request waits in the thread's queue.
    pub run_id: Option<String>,
    /// Its conversation.
    pub thread_id: String,
    /// `pending` at first; `queued` while the request waits.
    pub status: String,
    /// The request id (`meta.request_id`, or one the facade made).
    pub request_id: String,
    /// How a busy thread was met.
    pub queue_policy: QueuePolicy,
    /// The request's place in the thread's queue, from 1; 0 once it runs.
    pub queue_position: usize,
    /// Where the run's events stream: `/api/agent/runs/<run_id>/events`; `null` while queued.
    pub stream_url: Option<String>,
    /// Where a queued request is followed: `/api/agent/requests/<request_id>`; `null` once it runs.
    pub request_events_url: Option<String>,
}

/// `POST /api/agent/runs`: starts a run of an ordinary agent for the caller. The run gets its own
/// credentials: through them its model may delegate to the subagents the agent allows the caller, and
/// act on its own child runs only. A thread with an unfinished run answers 409 `run_busy`.
#[utoipa::path(
    post,
    path = "/api/agent/runs",
    operation_id = "start_run",
    tag = "runs",
    request_body = super::run_request::StartRun,
    responses(
        (status = 200, description = "the run started", body = StartedParentRun),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 409, description = "`run_busy`: the thread has an unfinished run", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn start(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    crate::facade::http::body::JsonBody(body): crate::facade::http::body::JsonBody<super::run_request::StartRun>,
) -> Result<Json<StartedParentRun>, ApiError> {
    let store = state.store()?;
    if let Some(resume) = body.resume {
        // The run goes on as it started: a field that would start it otherwise is refused, not
        // ignored. (`query`, `agent_slug`, `thread_id` and `meta`, which Yuxi's client repeats, are
        // ignored.)
        let starts_otherwise = [
            ("tool_approval_mode", body.tool_approval_mode.is_some()),
            ("budget", body.budget.is_some()),
            ("model_spec", body.model_spec.as_deref().is_some_and(|m| !m.is_empty())),
            ("queue_policy", body.queue_policy.is_some()),
            ("created_by_run_id", body.created_by_run_id.is_some()),
            ("image_content", body.image_content.as_deref().is_some_and(|i| !i.is_empty())),
        ];
        if let Some((field, _)) = starts_otherwise.iter().find(|(_, given)| *given) {
            return Err(ApiError::invalid(*field, "does not apply to a resume: the run goes on as it started"));
        }
        return super::approvals::resume(&state, &who, resume).await.map(Json);
    }
    if body.query.trim().is_empty() {
        return Err(ApiError::invalid("query", "is empty"));
    }
    let agent = crate::facade::services::agent_views::visible(
        state.agents.get(&body.agent_slug).await?,
        &who,
        &body.agent_slug,
    )?;
    if agent.spec.is_subagent() {
        return Err(ApiError::invalid(
            "agent_slug",
            format!("{:?} is a subagent: subagents run when a main agent delegates to them", body.agent_slug),
        ));
    }
    let thread_id = match &body.thread_id {
        None => format!("t-{}", uuid::Uuid::new_v4().simple()),
        Some(thread) if !is_parent_thread_id(thread) => {
            return Err(ApiError::invalid(
                "thread_id",
                format!(
                    "{thread:?} is not a conversation thread id (letters, digits, '.', '_', '-'; at most {} characters)",
                    crate::run::thread_id::MAX_PARENT_THREAD_ID_LEN
                ),
            ));
        }
        Some(thread) => thread.clone(),
    };
    let earlier = match body.created_by_run_id.as_deref().filter(|id| !id.is_empty()) {
        Some(id) => mine(store, &who, id).await.ok(),
        None => None,
    };
    let request = super::run_request::checked(&body, &who, &agent, &thread_id, earlier.as_ref())?;
    let max_tokens = super::run_request::budget_of(body.budget, &agent, &who)?;
    check_quotas(&state, &who.uid).await?;
    let record = RunRecord {
        run_id: uuid::Uuid::new_v4().simple().to_string(),
        thread_id: thread_id.clone(),
        agent_slug: body.agent_slug.clone(),
        uid: who.uid.clone(),
        parent: None,
        status: RunStatus::Pending,
        error: None,
        created_at: jiff::Timestamp::now().to_string(),
        request,
        max_tokens,
        waiting: None,
    };
    crate::facade::services::launch::check_startable(&record, &body.query, "query")?;
    // The thread is the caller's, or nobody's yet and now the caller's: one atomic step, so a thread of
    // another user answers as a missing one, and its runs are never named. Claimed only by a request that
    // has passed every check.
    if !store.claim_thread(&thread_id, &who.uid).await? {
        return Err(ApiError::NotFound(format!("thread {thread_id:?} does not exist")));
    }
    let policy = body.queue_policy.unwrap_or_default();
    match store.create_run(&record, None, state.limits.runs).await? {
        crate::run::Created::Started => {}
        crate::run::Created::Limited(limit) => {
            return Err(crate::facade::http::limits::run_limited(limit, &state.limits.runs));
        }
        crate::run::Created::Busy(active) | crate::run::Created::Existing(active) => {
            if policy != QueuePolicy::Reject {
                let queued = run_queue::enqueue(&state, &who, record, body.query, policy, &active).await?;
                return Ok(Json(StartedParentRun::queued(queued, policy)));
            }
            let status = store.run_record(&active).await?.map(|r| r.status);
            return Err(ApiError::RunBusy {
                thread_id,
                active_run_id: active,
                active_run_status: status.unwrap_or(RunStatus::Running).as_str().into(),
                agent_slug: body.agent_slug,
            });
        }
    }
    crate::facade::services::conversations::note_run(store, &record, &body.query).await?;
    launch_parent(&state, &who, agent, &record, body.query);
    Ok(Json(StartedParentRun::running(&record, policy)))
}

/// Whether `thread` can name a conversation: an id, not a child thread, within the length.
fn is_parent_thread_id(thread: &str) -> bool {
    is_valid_id(thread) && !thread.contains("_sub_") && thread.len() <= crate::run::thread_id::MAX_PARENT_THREAD_ID_LEN
}

impl StartedParentRun {
    /// The answer for a run that was recorded and is launched.
    pub(super) fn running(record: &RunRecord, policy: QueuePolicy) -> StartedParentRun {
        StartedParentRun {
            run_id: Some(record.run_id.clone()),
            thread_id: record.thread_id.clone(),
            status: record.status.as_str().to_string(),
            request_id: record.request.request_id.clone().unwrap_or_default(),
            queue_policy: policy,
            queue_position: 0,
            stream_url: Some(crate::delegation::wire::events_url(&record.run_id)),
            request_events_url: None,
        }
    }

    /// The answer for a start that waits in its thread's queue.
    pub(super) fn queued(queued: QueuedStart, policy: QueuePolicy) -> StartedParentRun {
        let request_id = queued.request_id;
        StartedParentRun {
            run_id: None,
            thread_id: queued.thread_id,
            status: RequestStatus::Queued.as_str().into(),
            request_events_url: Some(format!("/api/agent/requests/{request_id}/events")),
            request_id,
            queue_policy: policy,
            queue_position: queued.position,
            stream_url: None,
        }
    }
}

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
    /// What its start asked beyond the query: `meta`, `model_spec`, `tool_approval_mode`.
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
    let conversation = crate::facade::services::conversations::owned(store, &who, &thread_id).await?;
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
        crate::facade::services::conversations::final_message_id(store, &record).await?
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
