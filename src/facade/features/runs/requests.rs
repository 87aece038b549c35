//! Yuxi's request routes over the queued requests of [`crate::facade::services::run_queue`]:
//! `GET /api/agent/requests/{request_id}` (and its `/events`), `POST .../cancel`, `POST .../steer`,
//! `GET /api/agent/thread/{thread_id}/requests` and `POST .../requests/continue`. A run started at once
//! is its owner's request too, `dispatched` ([`crate::facade::services::run_queue::note_dispatched`]). A
//! request of another user answers as a missing one.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::access::Identity;
use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::conversations::owned;
use crate::facade::services::request_fields::MAX_REQUEST_ID_LEN;
use crate::facade::services::run_queue::{
    CLAIM_TTL, QueuePolicy, REQUEST_STREAM_LIMIT, ensure_pump, set_paused, steer_active,
};
use crate::facade::services::state::FacadeState;
use crate::run::queue::{QueuedRequest, RequestStatus};
use crate::run::thread_id::is_valid_id;
use crate::store::Store;

/// A request as the request routes show it (Yuxi's request item).
#[derive(Serialize, utoipa::ToSchema)]
pub struct RequestView {
    /// The request id.
    pub request_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The agent.
    pub agent_slug: String,
    /// `queued`, `dispatched`, `cancelled` or `failed`.
    pub status: RequestStatus,
    /// `enqueue` or `steer`.
    pub queue_policy: QueuePolicy,
    /// Its place in the queue from 1 while it waits; 0 otherwise.
    pub queue_position: usize,
    /// What the user asked.
    pub content: String,
    /// Its run, once dispatched.
    pub run_id: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// Where it came from: always `chat`.
    pub source: &'static str,
    /// When it was queued, RFC 3339.
    pub created_at: String,
}

fn request_view(request: QueuedRequest, position: usize) -> RequestView {
    RequestView {
        thread_id: request.record.thread_id,
        agent_slug: request.record.agent_slug,
        status: request.status,
        queue_policy: if request.steer { QueuePolicy::Steer } else { QueuePolicy::Enqueue },
        queue_position: if request.status == RequestStatus::Queued { position } else { 0 },
        content: request.query,
        run_id: request.run_id,
        error: request.error,
        source: "chat",
        created_at: request.created_at,
        request_id: request.request_id,
    }
}

/// The caller's request of this id; 404 when missing or another user's.
async fn my_request(store: &Store, who: &Identity, request_id: &str) -> Result<QueuedRequest, ApiError> {
    let missing = || ApiError::NotFound(format!("request {request_id:?} does not exist"));
    if !is_valid_id(request_id) || request_id.len() > MAX_REQUEST_ID_LEN {
        return Err(missing());
    }
    store.queued_request(&who.uid, request_id).await?.ok_or_else(missing)
}

/// Its place in its thread's queue, from 1 (0 when it no longer waits).
async fn position_of(store: &Store, request: &QueuedRequest) -> Result<usize, ApiError> {
    let waiting = store.thread_requests(&request.record.thread_id, &request.identity.uid).await?;
    Ok(waiting.iter().position(|r| r.request_id == request.request_id).map_or(0, |at| at + 1))
}

/// `{request: ...}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct RequestAnswer {
    /// The request.
    pub request: RequestView,
}

/// `GET /api/agent/requests/{request_id}`: one of the caller's requests.
#[utoipa::path(
    get,
    path = "/api/agent/requests/{request_id}",
    operation_id = "get_request",
    tag = "runs",
    params(("request_id" = String, Path, description = "the request id")),
    responses(
        (status = 200, description = "the request", body = RequestAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get_request(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(request_id): Path<String>,
) -> Result<Json<RequestAnswer>, ApiError> {
    let store = state.store()?;
    let request = my_request(store, &who, &request_id).await?;
    let position = position_of(store, &request).await?;
    Ok(Json(RequestAnswer { request: request_view(request, position) }))
}

/// `.../requests` and `.../requests/continue` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct QueueQuery {
    /// The agent of the thread's requests.
    #[param(min_length = 1, max_length = 80)]
    agent_slug: String,
}

/// 422 naming `agent_slug` unless it is 1 to 80 characters.
fn check_agent_slug(slug: &str) -> Result<(), ApiError> {
    if slug.is_empty() || slug.chars().count() > 80 {
        return Err(ApiError::invalid("agent_slug", "must be 1 to 80 characters"));
    }
    Ok(())
}

/// The state of a thread's queue.
#[derive(Serialize, utoipa::ToSchema)]
pub struct QueueState {
    /// `idle` (nothing waits), `running` (requests wait for the thread's run), `paused` (they wait for
    /// their owner to continue).
    pub status: &'static str,
    /// How many requests wait.
    pub queued_count: usize,
}

/// The answer of `GET /api/agent/thread/{thread_id}/requests`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ThreadRequests {
    /// The waiting requests, next first.
    pub requests: Vec<RequestView>,
    /// The queue.
    pub queue: QueueState,
}

/// `GET /api/agent/thread/{thread_id}/requests`: the requests waiting in one of the caller's threads.
#[utoipa::path(
    get,
    path = "/api/agent/thread/{thread_id}/requests",
    operation_id = "list_thread_requests",
    tag = "runs",
    params(("thread_id" = String, Path, description = "the thread id"), QueueQuery),
    responses(
        (status = 200, description = "the waiting requests", body = ThreadRequests),
        (status = 400, description = "malformed query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 422, description = "`agent_slug` is not 1 to 80 characters", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn thread_requests(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
    QueryParams(query): QueryParams<QueueQuery>,
) -> Result<Json<ThreadRequests>, ApiError> {
    let store = state.store()?;
    check_agent_slug(&query.agent_slug)?;
    let conversation = owned(store, &who, &thread_id).await?;
    let waiting: Vec<_> = store
        .thread_requests(&thread_id, &conversation.uid)
        .await?
        .into_iter()
        .filter(|r| r.record.agent_slug == query.agent_slug && r.status == RequestStatus::Queued)
        .collect();
    let status = match (waiting.is_empty(), conversation.queue_paused) {
        (true, _) => "idle",
        (false, true) => "paused",
        (false, false) => "running",
    };
    let queued_count = waiting.len();
    let requests = waiting.into_iter().enumerate().map(|(at, r)| request_view(r, at + 1)).collect();
    Ok(Json(ThreadRequests { requests, queue: QueueState { status, queued_count } }))
}

/// The answer of `POST .../requests/continue`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Continued {
    /// `dispatched`.
    pub status: &'static str,
    /// The request that starts next.
    pub request_id: String,
}

/// `POST /api/agent/thread/{thread_id}/requests/continue`: lets a paused queue go on; its head starts
/// at once when the thread is free. 409 when the queue is empty, not paused, or the thread busy.
#[utoipa::path(
    post,
    path = "/api/agent/thread/{thread_id}/requests/continue",
    operation_id = "continue_thread_requests",
    tag = "runs",
    params(("thread_id" = String, Path, description = "the thread id"), QueueQuery),
    responses(
        (status = 200, description = "the queue goes on", body = Continued),
        (status = 400, description = "malformed query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 409, description = "the queue is empty, not paused, or the thread has an unfinished run", body = ErrorBody),
        (status = 422, description = "`agent_slug` is not 1 to 80 characters", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn continue_queue(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
    QueryParams(query): QueryParams<QueueQuery>,
) -> Result<Json<Continued>, ApiError> {
    let store = state.store()?;
    check_agent_slug(&query.agent_slug)?;
    let conversation = owned(store, &who, &thread_id).await?;
    let head = store
        .thread_requests(&thread_id, &conversation.uid)
        .await?
        .into_iter()
        .find(|r| r.record.agent_slug == query.agent_slug)
        .ok_or_else(|| ApiError::Conflict(format!("queue_empty: no request waits in thread {thread_id:?}")))?;
    if !conversation.queue_paused {
        return Err(ApiError::Conflict(format!(
            "queue_not_paused: the queue of thread {thread_id:?} goes on by itself"
        )));
    }
    if let Some(run) = &conversation.last_run_id
        && store.run_record(run).await?.is_some_and(|r| !r.status.is_terminal())
    {
        return Err(ApiError::Conflict(format!("run_active: thread {thread_id:?} has an unfinished run")));
    }
    set_paused(store, &thread_id, false).await?;
    ensure_pump(&state, &thread_id);
    Ok(Json(Continued { status: "dispatched", request_id: head.request_id }))
}

/// The answer of `POST /api/agent/requests/{request_id}/cancel`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct RequestCancelled {
    /// The request.
    pub request_id: String,
    /// `cancelled`, or the status it had when it no longer waited.
    pub status: RequestStatus,
}

/// `POST /api/agent/requests/{request_id}/cancel`: takes a waiting request off its queue (a request
/// already started is cancelled through its run).
#[utoipa::path(
    post,
    path = "/api/agent/requests/{request_id}/cancel",
    operation_id = "cancel_request",
    tag = "runs",
    params(("request_id" = String, Path, description = "the request id")),
    responses(
        (status = 200, description = "the request after the cancel", body = RequestCancelled),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn cancel_request(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(request_id): Path<String>,
) -> Result<Json<RequestCancelled>, ApiError> {
    let store = state.store()?;
    let mut request = my_request(store, &who, &request_id).await?;
    if store.remove_request(&request.record.thread_id, &request_id).await? {
        request.status = RequestStatus::Cancelled;
        store.put_request(&request).await?;
    }
    Ok(Json(RequestCancelled { request_id, status: request.status }))
}

/// The answer of `POST /api/agent/requests/{request_id}/steer`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Steered {
    /// The request.
    pub request_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Its status.
    pub status: RequestStatus,
    /// `steer`.
    pub queue_policy: QueuePolicy,
    /// 1 while it waits.
    pub queue_position: usize,
    /// Where it is followed.
    pub request_events_url: String,
}

/// `POST /api/agent/requests/{request_id}/steer`: makes a waiting request the next to start. 409 when
/// it no longer waits.
#[utoipa::path(
    post,
    path = "/api/agent/requests/{request_id}/steer",
    operation_id = "steer_request",
    tag = "runs",
    params(("request_id" = String, Path, description = "the request id")),
    responses(
        (status = 200, description = "the request, first in its queue", body = Steered),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 409, description = "the request no longer waits", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn steer_request(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(request_id): Path<String>,
) -> Result<Json<Steered>, ApiError> {
    let store = state.store()?;
    my_request(store, &who, &request_id).await?;
    // Held while the request is changed, so that no facade starts it meanwhile (and has its start
    // written over).
    if !store.claim_request(&who.uid, &request_id, CLAIM_TTL).await? {
        return Err(ApiError::Conflict(format!("request {request_id:?} is starting; it no longer waits")));
    }
    let steered = steer_claimed(store, &who, &request_id).await;
    store.release_request(&who.uid, &request_id).await?;
    let request = steered?;
    if let Some(conversation) = store.conversation(&request.record.thread_id).await?
        && let Some(active) = conversation.last_run_id
    {
        steer_active(store, &active).await?;
    }
    Ok(Json(Steered {
        thread_id: request.record.thread_id,
        status: request.status,
        queue_policy: QueuePolicy::Steer,
        queue_position: 1,
        request_events_url: format!("/api/agent/requests/{request_id}/events"),
        request_id,
    }))
}

/// Moves the claimed waiting request to the front of its queue and marks it steered; 409 when it no
/// longer waits.
async fn steer_claimed(store: &Store, who: &Identity, request_id: &str) -> Result<QueuedRequest, ApiError> {
    let mut request = my_request(store, who, request_id).await?;
    if request.status != RequestStatus::Queued || !store.steer_request(&request.record.thread_id, request_id).await? {
        return Err(ApiError::Conflict(format!(
            "request {request_id:?} is {}; it no longer waits",
            request.status.as_str()
        )));
    }
    request.steer = true;
    store.put_request(&request).await?;
    Ok(request)
}

/// `GET /api/agent/requests/{request_id}/events`: server-sent events of one of the caller's requests:
/// `queued` (`{request_id, position}`, again whenever its place changes), then `run_created`
/// (`{request_id, run_id, thread_id}`) when it starts, or `cancelled` / `failed`; the stream ends then.
#[utoipa::path(
    get,
    path = "/api/agent/requests/{request_id}/events",
    operation_id = "stream_request_events",
    tag = "runs",
    params(("request_id" = String, Path, description = "the request id")),
    responses(
        (status = 200, description = "server-sent events: `queued`, then `run_created`, `cancelled` or `failed`", content_type = "text/event-stream", body = String),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 429, description = "too many event streams open", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn request_events(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(request_id): Path<String>,
) -> Result<Sse<impl futures::Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let store = state.store()?.clone();
    let request = my_request(&store, &who, &request_id).await?;
    let permit = state.streams.open(&who.uid, &format!("request:{request_id}"), &state.limits)?;
    let deadline = tokio::time::Instant::now() + REQUEST_STREAM_LIMIT;
    let stream = futures::stream::unfold((store, request, 0usize, false), move |(store, request, last, done)| {
        let _held = &permit;
        async move {
            if done || tokio::time::Instant::now() >= deadline {
                return None;
            }
            loop {
                let current = match store.queued_request(&request.identity.uid, &request.request_id).await {
                    Ok(Some(current)) => current,
                    Ok(None) | Err(_) => return None,
                };
                let (event, data, done) = match current.status {
                    RequestStatus::Dispatched => (
                        "run_created",
                        json!({"request_id": current.request_id, "run_id": current.run_id, "thread_id": current.record.thread_id}),
                        true,
                    ),
                    RequestStatus::Cancelled => ("cancelled", json!({"request_id": current.request_id}), true),
                    RequestStatus::Failed => {
                        ("failed", json!({"request_id": current.request_id, "error": current.error}), true)
                    }
                    RequestStatus::Queued => {
                        let position = position_of(&store, &current).await.unwrap_or(last);
                        if position != last {
                            ("queued", json!({"request_id": current.request_id, "position": position}), false)
                        } else {
                            // Woken when the thread's run changes (its end is when this request starts),
                            // and each second at the latest.
                            let active = store
                                .conversation(&current.record.thread_id)
                                .await
                                .ok()
                                .flatten()
                                .and_then(|c| c.last_run_id);
                            match active {
                                Some(run) => {
                                    store.watch(&run).changed(crate::store::notices::RunWatch::SAFETY_NET).await
                                }
                                None => tokio::time::sleep(crate::store::notices::RunWatch::SAFETY_NET).await,
                            }
                            if tokio::time::Instant::now() >= deadline {
                                return None;
                            }
                            continue;
                        }
                    }
                };
                let position = if event == "queued" { data["position"].as_u64().unwrap_or(0) as usize } else { last };
                let sse = Event::default().event(event).data(data.to_string());
                return Some((Ok(sse), (store, current, position, done)));
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
