//! The subagent tools for parent agents (SEED-subagents.md "同步调用与异步调用"): `GET /api/tools` and
//! `POST /api/tools/{task, subagent_start, subagent_status, subagent_events, subagent_cancel,
//! subagent_await, subagent_wait_any}`, each a thin handler over
//! [`crate::facade::services::subagents`], which `/mcp` calls too.
//!
//! Every body names the calling parent. A run-id tool answers a run created by another parent run, or for
//! another user, exactly as a run that does not exist.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;

use crate::delegation::wire::{
    CancelAnswer, EventsAnswer, EventsBody, RunBody, Snapshot, StartAnswer, StartBody, TaskAnswer, ToolsAnswer,
    WaitAnyAnswer, WaitAnyBody,
};
use crate::facade::http::auth::ParentCaller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::state::FacadeState;
use crate::facade::services::subagents::{self, start, wait};

/// `GET /api/tools` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ToolsQuery {
    /// The agent whose tools are asked for.
    pub agent: String,
}

/// `GET /api/tools?agent=<slug>`: the subagent tools' schemas and the prompt section listing the
/// subagents this agent may call for the caller, so any agent runtime can mount them. A subagent, or an
/// agent with no allowed subagent, gets no tools.
#[utoipa::path(
    get,
    path = "/api/tools",
    operation_id = "list_tools",
    tag = "tools",
    params(ToolsQuery),
    responses(
        (status = 200, description = "the tools and the prompt section", body = ToolsAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list_tools(
    State(state): State<FacadeState>,
    ParentCaller { who, .. }: ParentCaller,
    crate::facade::http::body::QueryParams(query): crate::facade::http::body::QueryParams<ToolsQuery>,
) -> Result<Json<ToolsAnswer>, ApiError> {
    subagents::list_tools(&state, &who, query.agent).await.map(Json)
}

/// `POST /api/tools/subagent_start`.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_start",
    operation_id = "subagent_start",
    tag = "tools",
    request_body = StartBody,
    responses(
        (status = 200, description = "started, existing or busy", body = StartAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 409, description = "the parent run has ended: only a running run starts subagents", body = ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_start(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<StartBody>,
) -> Result<Json<StartAnswer>, ApiError> {
    start::start(&state, &caller, &body).await.map(Json)
}

/// `POST /api/tools/subagent_status`.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_status",
    operation_id = "subagent_status",
    tag = "tools",
    request_body = RunBody,
    responses(
        (status = 200, description = "the run and its latest messages", body = Snapshot),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_status(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<RunBody>,
) -> Result<Json<Snapshot>, ApiError> {
    subagents::status(&state, &caller, &body).await.map(Json)
}

/// `POST /api/tools/subagent_await`: the terminal result, or the current snapshot with
/// `wait_timed_out: true`.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_await",
    operation_id = "subagent_await",
    tag = "tools",
    request_body = RunBody,
    responses(
        (status = 200, description = "the ended run, or the current snapshot with `wait_timed_out`", body = Snapshot),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_await(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<RunBody>,
) -> Result<Json<Snapshot>, ApiError> {
    wait::await_run(&state, &caller, &body).await.map(Json)
}

/// `POST /api/tools/subagent_cancel`.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_cancel",
    operation_id = "subagent_cancel",
    tag = "tools",
    request_body = RunBody,
    responses(
        (status = 200, description = "the run after the cancel", body = CancelAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_cancel(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<RunBody>,
) -> Result<Json<CancelAnswer>, ApiError> {
    subagents::cancel(&state, &caller, &body).await.map(Json)
}

/// `POST /api/tools/subagent_events`: up to `limit` (1..50) events after `after_seq`, in stream order.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_events",
    operation_id = "subagent_events",
    tag = "tools",
    request_body = EventsBody,
    responses(
        (status = 200, description = "a page of events", body = EventsAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_events(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<EventsBody>,
) -> Result<Json<EventsAnswer>, ApiError> {
    subagents::events(&state, &caller, body).await.map(Json)
}

/// `POST /api/tools/subagent_wait_any`: waits until the first of `run_ids` (runs this parent started)
/// ends, for `timeout_seconds` at most (0: answers at once), and answers it with its result.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_wait_any",
    operation_id = "subagent_wait_any",
    tag = "tools",
    request_body = WaitAnyBody,
    responses(
        (status = 200, description = "the first run to end, or the runs still going with `wait_timed_out`", body = WaitAnyAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "a run is unknown, or invisible to the caller", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_wait_any(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<WaitAnyBody>,
) -> Result<Json<WaitAnyAnswer>, ApiError> {
    wait::wait_any(&state, &caller, &body).await.map(Json)
}

/// `POST /api/tools/task`: starts the subagent and blocks until it ends; `content` is what the parent's
/// model reads.
#[utoipa::path(
    post,
    path = "/api/tools/task",
    operation_id = "task",
    tag = "tools",
    request_body = StartBody,
    responses(
        (status = 200, description = "the subagent's answer, its error, or how to follow it", body = TaskAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 409, description = "the parent run has ended: only a running run starts subagents", body = ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn task(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<StartBody>,
) -> Result<Json<TaskAnswer>, ApiError> {
    wait::task(&state, &caller, &body).await.map(Json)
}
