//! A user's runs: `GET /api/agent/runs/{run_id}`, `.../result`, `POST .../cancel`, `GET .../events`
//! (server-sent events, resumable with `after_seq` or `Last-Event-ID`, with heartbeats while idle), and
//! `GET /api/threads/{thread_id}/messages`. A run of another user answers as a missing one.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::FacadeState;
use super::auth::Caller;
use super::body::QueryParams;
use super::error::ApiError;
use crate::access::{Identity, Role};
use crate::run::RunRecord;
use crate::run::thread_id::is_valid_id;
use crate::run::{Envelope, EventKind};
use crate::store::Store;

/// The first pause before reading a failing store again (doubling each second of the outage).
const EVENT_POLL: Duration = Duration::from_millis(250);
/// How long an event stream waits out a failing store before it closes (the client resumes with
/// `Last-Event-ID`).
const STREAM_OUTAGE_LIMIT: Duration = Duration::from_secs(60);
/// The longest pause between reads of a failing store.
const EVENT_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How often an idle event stream sends a heartbeat comment.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// The run, when it belongs to `who` (a superadmin sees every run).
async fn mine(store: &Store, who: &Identity, run_id: &str) -> Result<RunRecord, ApiError> {
    let missing = || ApiError::NotFound(format!("run {run_id:?} does not exist"));
    if !is_valid_id(run_id) {
        return Err(missing());
    }
    let record = store.run_record(run_id).await?.ok_or_else(missing)?;
    if record.uid == who.uid || who.role == Role::Superadmin { Ok(record) } else { Err(missing()) }
}

/// `POST /api/agent/runs` body.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// What the user asks: not blank, at most 262,144 characters.
    #[schema(pattern = "\\S", max_length = 262_144)]
    query: String,
    /// The agent: an ordinary agent the caller may see (subagents run through the tools).
    agent_slug: String,
    /// Continue this conversation (one of the caller's threads); a new one when absent. An id without
    /// `_sub_` (which marks a subagent's thread).
    #[serde(default)]
    #[schema(pattern = "^(?!.*_sub_)[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 176)]
    thread_id: Option<String>,
}

/// The answer of `POST /api/agent/runs`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct StartedParentRun {
    /// The run.
    pub run_id: String,
    /// Its conversation.
    pub thread_id: String,
    /// `pending` at first.
    pub status: crate::run::RunStatus,
    /// Where its events stream: `/api/agent/runs/<run_id>/events`.
    pub stream_url: String,
}

/// `POST /api/agent/runs`: starts a run of an ordinary agent for the caller. The run gets its own
/// credentials: through them its model may delegate to the subagents the agent allows the caller, and
/// act on its own child runs only. A thread with an unfinished run answers 409 `run_busy`.
#[utoipa::path(
    post,
    path = "/api/agent/runs",
    operation_id = "start_run",
    tag = "runs",
    request_body = StartRun,
    responses(
        (status = 200, description = "the run started", body = StartedParentRun),
        (status = 400, description = "malformed body or query", body = super::error::ErrorBody),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 409, description = "`run_busy`: the thread has an unfinished run", body = super::error::ErrorBody),
        (status = 413, description = "body too large", body = super::error::ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = super::error::ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = super::error::ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn start(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    super::body::JsonBody(body): super::body::JsonBody<StartRun>,
) -> Result<Json<StartedParentRun>, ApiError> {
    let store = super::tools::runs(&state)?;
    if body.query.trim().is_empty() {
        return Err(ApiError::invalid("query", "is empty"));
    }
    let agent = state
        .agents
        .get(&body.agent_slug)
        .await?
        .filter(|a| crate::access::permission(&who, a) >= crate::access::Permission::Read)
        .ok_or_else(|| ApiError::NotFound(format!("agent {:?} does not exist", body.agent_slug)))?;
    if agent.spec.is_subagent() {
        return Err(ApiError::invalid(
            "agent_slug",
            format!("{:?} is a subagent: subagents run when a main agent delegates to them", body.agent_slug),
        ));
    }
    let thread_id = match &body.thread_id {
        None => format!("t-{}", uuid::Uuid::new_v4().simple()),
        Some(thread)
            if !is_valid_id(thread)
                || thread.contains("_sub_")
                || thread.len() > crate::run::thread_id::MAX_PARENT_THREAD_ID_LEN =>
        {
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
    let record = RunRecord {
        run_id: uuid::Uuid::new_v4().simple().to_string(),
        thread_id: thread_id.clone(),
        agent_slug: body.agent_slug.clone(),
        uid: who.uid.clone(),
        parent: None,
        status: crate::run::RunStatus::Pending,
        error: None,
        created_at: jiff::Timestamp::now().to_string(),
    };
    super::launch::check_startable(&record, &body.query, "query")?;
    // The thread is the caller's, or nobody's yet and now the caller's: one atomic step, so a thread of
    // another user answers as a missing one, and its runs are never named. Claimed only by a request that
    // has passed every check.
    if !store.claim_thread(&thread_id, &who.uid).await? {
        return Err(ApiError::NotFound(format!("thread {thread_id:?} does not exist")));
    }
    match store.create_run(&record, None, state.limits.runs).await? {
        crate::run::Created::Started => {}
        crate::run::Created::Limited(limit) => return Err(super::limits::run_limited(limit, &state.limits.runs)),
        crate::run::Created::Busy(active) | crate::run::Created::Existing(active) => {
            let status = store.run_record(&active).await?.map(|r| r.status);
            return Err(ApiError::RunBusy {
                thread_id,
                active_run_id: active,
                active_run_status: status.unwrap_or(crate::run::RunStatus::Running).as_str().into(),
                agent_slug: body.agent_slug,
            });
        }
    }
    let grant = crate::run::RunGrant {
        run_id: record.run_id.clone(),
        thread_id: thread_id.clone(),
        file_thread_id: thread_id.clone(),
        agent: body.agent_slug.clone(),
        uid: who.uid.clone(),
        role: who.role,
        department_id: who.department_id,
    };
    // Good until the run's deadline (a parent run has the default timeout) and the pod's grace after it;
    // refused as soon as the run ends.
    let expires = crate::run::grant::token_expiry(
        jiff::Timestamp::now().as_second(),
        crate::run::inputs::DEFAULT_TIMEOUT_SECONDS,
    );
    let token = state.run_tokens.sign(&grant, expires);
    let launcher = &state.runs.as_ref().ok_or_else(|| ApiError::Unavailable("no run store".into()))?.launcher;
    launcher.launch(store.clone(), record.clone(), agent, body.query, Some(token));
    state.metrics.run_started(&body.agent_slug, false);
    Ok(Json(StartedParentRun {
        stream_url: format!("/api/agent/runs/{}/events", record.run_id),
        run_id: record.run_id,
        thread_id,
        status: record.status,
    }))
}

/// `GET /api/agent/runs/{run_id}`.
#[utoipa::path(
    get,
    path = "/api/agent/runs/{run_id}",
    operation_id = "get_run",
    tag = "runs",
    params(("run_id" = String, Path, description = "the run id")),
    responses(
        (status = 200, description = "the run", body = RunRecord),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
) -> Result<Json<RunRecord>, ApiError> {
    Ok(Json(mine(super::tools::runs(&state)?, &who, &run_id).await?))
}

/// `GET /api/agent/runs/{run_id}/result`: the result once the run has ended (409 before).
#[utoipa::path(
    get,
    path = "/api/agent/runs/{run_id}/result",
    operation_id = "get_run_result",
    tag = "runs",
    params(("run_id" = String, Path, description = "the run id")),
    responses(
        (status = 200, description = "the run's result: `{status, output, error, ...}`", body = Object),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 409, description = "conflict", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn result(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let store = super::tools::runs(&state)?;
    let record = mine(store, &who, &run_id).await?;
    match store.run_result(&record.run_id).await? {
        Some(result) => Ok(Json(serde_json::to_value(result).expect("a result serializes"))),
        None => Err(ApiError::Conflict(format!("run {run_id:?} is {}; it has no result yet", record.status.as_str()))),
    }
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
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn cancel(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
) -> Result<Json<crate::delegation::wire::CancelAnswer>, ApiError> {
    let store = super::tools::runs(&state)?;
    let record = mine(store, &who, &run_id).await?;
    let record = store.cancel_run(&record.run_id).await?.unwrap_or(record);
    // Cancelling a parent cancels the children it started.
    store.cancel_children(&record.run_id).await?;
    Ok(Json(crate::delegation::wire::CancelAnswer {
        status: record.status,
        run_id: record.run_id,
        thread_id: record.thread_id,
    }))
}

/// `GET .../events` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this stream id (`Last-Event-ID` wins when both are given).
    #[serde(default)]
    #[param(value_type = String, pattern = "^[0-9]{1,19}-[0-9]{1,19}$")]
    after_seq: Option<String>,
    /// Yuxi's web client sends `verbose=false`; every event is streamed in full either way.
    #[serde(default, rename = "verbose")]
    _verbose: Option<bool>,
}

/// The answer of `GET /api/threads/{thread_id}/messages`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ThreadMessages {
    /// The thread.
    pub thread_id: String,
    /// Its messages, oldest first, as the chat-completions API shapes them.
    pub messages: Vec<crate::run::message::Message>,
}

/// `GET /api/agent/runs/{run_id}/events`: the run's events as server-sent events, each with its stream id
/// as the SSE `id`, from `Last-Event-ID` (or `after_seq`, or the start) to the `end` event.
#[utoipa::path(
    get,
    path = "/api/agent/runs/{run_id}/events",
    operation_id = "stream_run_events",
    tag = "runs",
    params(("run_id" = String, Path, description = "the run id"), EventsQuery, ("Last-Event-ID" = Option<String>, Header, nullable = false, description = "resume after this stream id", pattern = "^[0-9]{1,19}-[0-9]{1,19}$")),
    responses(
        (status = 200, description = "server-sent events: `id` is the stream id, `event` the event name, `data` the envelope as JSON; the stream ends after `end`", content_type = "text/event-stream", body = Envelope),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = super::error::ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = super::error::ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn events(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let store = super::tools::runs(&state)?.clone();
    let record = mine(&store, &who, &run_id).await?;
    let resume = headers.get("last-event-id").map(|v| v.to_str().unwrap_or_default().to_string());
    let field = if resume.is_some() { "header.Last-Event-ID" } else { "query.after_seq" };
    let cursor = resume.or(query.after_seq).unwrap_or_else(|| "0-0".into());
    if !crate::delegation::wire::is_stream_id(&cursor) {
        return Err(ApiError::invalid(field, format!("{cursor:?} is not a stream id such as 0-0")));
    }
    // Held as long as the stream lives: its place is given back when the stream ends or its client goes.
    let permit = state.streams.open(&who.uid, &record.run_id, &state.limits)?;
    let stream = futures::stream::unfold(
        (store, record.run_id, cursor, false),
        move |(store, run_id, cursor, ended)| {
            let _held = &permit;
            async move {
                if ended {
                    return None;
                }
                // A store that fails is waited out with backoff; a failure longer than
                // STREAM_OUTAGE_LIMIT closes the stream, and the client resumes from its last event id.
                let mut failing_since: Option<tokio::time::Instant> = None;
                let watch = store.watch(&run_id);
                loop {
                    // Taken before the read: an event appended after it wakes the stream at once.
                    let changed = watch.changed(crate::store::notices::RunWatch::SAFETY_NET);
                    match store.read_events(&run_id, &cursor, 100).await {
                        Ok(page) if !page.is_empty() => {
                            let ended = page.iter().any(|e| e.envelope.event == EventKind::End);
                            let next = page.last().map(|e| e.seq.clone()).unwrap_or(cursor);
                            let events: Vec<Result<Event, Infallible>> = page
                                .into_iter()
                                .map(|e| {
                                    let data = serde_json::to_string(&e.envelope).unwrap_or_default();
                                    Ok(Event::default().id(e.seq).event(e.envelope.event.as_str()).data(data))
                                })
                                .collect();
                            return Some((futures::stream::iter(events), (store, run_id, next, ended)));
                        }
                        Ok(_) => {
                            // Nothing after the cursor: a run that has ended will write nothing more.
                            if let Ok(Some(record)) = store.run_record(&run_id).await
                                && record.status.is_terminal()
                                && store.read_events(&run_id, &cursor, 1).await.is_ok_and(|page| page.is_empty())
                            {
                                return None;
                            }
                            changed.await
                        }
                        Err(err) => {
                            let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
                            if since.elapsed() >= STREAM_OUTAGE_LIMIT {
                                tracing::warn!(run_id = %run_id, error = %err, "the run store fails for too long; closing the stream");
                                return None;
                            }
                            tracing::warn!(run_id = %run_id, error = %err, "cannot read the run's events; retrying");
                            let backoff = (EVENT_POLL * 2u32.saturating_pow(since.elapsed().as_secs() as u32))
                                .min(EVENT_BACKOFF_MAX);
                            tokio::time::sleep(backoff).await;
                        }
                    }
                }
            }
        },
    );
    Ok(Sse::new(futures::StreamExt::flatten(stream)).keep_alive(KeepAlive::new().interval(HEARTBEAT)))
}

/// `GET /api/threads/{thread_id}/messages`: a thread's persisted messages, when one of the caller's runs
/// used it.
#[utoipa::path(
    get,
    path = "/api/threads/{thread_id}/messages",
    operation_id = "get_thread_messages",
    tag = "runs",
    params(("thread_id" = String, Path, description = "the thread id")),
    responses(
        (status = 200, description = "the thread's persisted messages", body = ThreadMessages),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn thread_messages(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<ThreadMessages>, ApiError> {
    let store = super::tools::runs(&state)?;
    let missing = || ApiError::NotFound(format!("thread {thread_id:?} does not exist"));
    if !is_valid_id(&thread_id) {
        return Err(missing());
    }
    let owner = store.thread_owner(&thread_id).await?;
    if owner.as_deref() != Some(who.uid.as_str()) && who.role != Role::Superadmin {
        return Err(missing());
    }
    let messages = store.thread_messages(&thread_id).await?;
    Ok(Json(ThreadMessages { thread_id, messages }))
}
