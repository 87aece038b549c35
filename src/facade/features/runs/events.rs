//! A run's event stream, `GET /api/agent/runs/{run_id}/events` (server-sent events, resumable with
//! `after_seq` or `Last-Event-ID`, with heartbeats while idle, payloads in Yuxi's shapes or flat), and a
//! thread's messages, `GET /api/threads/{thread_id}/messages`. A run or thread of another user answers
//! as a missing one.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, KeepAliveStream, Sse};
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

use super::wire::EventFormat;
use crate::access::Role;
use crate::delegation::tree::TreeCursor;
use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::owned_runs::mine;
use crate::facade::services::state::FacadeState;
use crate::run::thread_id::is_valid_id;
use crate::run::{EventKind, RunStatus};

/// The first pause before reading a failing store again (doubling each second of the outage).
const EVENT_POLL: Duration = Duration::from_millis(250);
/// How long an event stream waits out a failing store before it closes (the client resumes with
/// `Last-Event-ID`).
const STREAM_OUTAGE_LIMIT: Duration = Duration::from_secs(60);
/// The longest pause between reads of a failing store.
const EVENT_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How often an idle event stream sends a heartbeat comment.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// `GET .../events` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Resume after this stream id, or, with `tree`, this tree cursor (`Last-Event-ID` wins when both
    /// are given).
    #[serde(default)]
    #[param(value_type = String, pattern = "^([0-9]{1,19}-[0-9]{1,19}|t1\\.[A-Za-z0-9_-]*)$")]
    after_seq: Option<String>,
    /// `true`: the events of the run and of every run it started, and theirs, each naming its run
    /// (`run_id`, `parent_run_id`, `parent_tool_call_id`); the SSE `id` is then a tree cursor.
    #[serde(default)]
    tree: Option<bool>,
    /// Yuxi's web client sends `verbose=false`; every event is streamed in full either way.
    #[serde(default, rename = "verbose")]
    _verbose: Option<bool>,
    /// `yuxi` (the default: Yuxi's `payload.items[]` and `payload.chunk`) or `flat` (the payloads as
    /// the runner wrote them).
    #[serde(default)]
    #[param(inline)]
    event_format: Option<EventFormat>,
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
/// as the SSE `id`, from `Last-Event-ID` (or `after_seq`, or the start) to the `end` event; in Yuxi's
/// form, the stream of a run that waits for a person ends with an `end` `{status: interrupted}` of its
/// own (no `id`, not stored: the run goes on once resumed, in the same stream). With
/// `tree=true`, the events of the whole run tree, each SSE `id` a tree cursor, until every run of the
/// tree has ended.
#[utoipa::path(
    get,
    path = "/api/agent/runs/{run_id}/events",
    operation_id = "stream_run_events",
    tag = "runs",
    params(("run_id" = String, Path, description = "the run id"), EventsQuery, ("Last-Event-ID" = Option<String>, Header, nullable = false, description = "resume after this stream id (with `tree`, this tree cursor)", pattern = "^([0-9]{1,19}-[0-9]{1,19}|t1\\.[A-Za-z0-9_-]*)$")),
    responses(
        (status = 200, description = "server-sent events: `id` is the stream id (with `tree`, a tree cursor), `event` the event name, `data` the envelope as JSON (with the run's `request_id`, and with `tree` the `parent_run_id` and `parent_tool_call_id` of the event's run; payloads in Yuxi's shapes unless `event_format=flat`); the stream ends after `end` (with `tree`, once every run of the tree has ended)", content_type = "text/event-stream", body = crate::run::Envelope),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn events(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(run_id): Path<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<EventsQuery>,
) -> Result<Sse<KeepAliveStream<BoxStream<'static, Result<Event, Infallible>>>>, ApiError> {
    let store = state.store()?.clone();
    let record = mine(&store, &who, &run_id).await?;
    let format = query.event_format.unwrap_or_default();
    let request = record.request.clone();
    let resume = headers.get("last-event-id").map(|v| v.to_str().unwrap_or_default().to_string());
    let field = if resume.is_some() { "header.Last-Event-ID" } else { "query.after_seq" };
    let cursor = resume.or(query.after_seq).unwrap_or_else(|| "0-0".into());
    if query.tree == Some(true) {
        let cursor =
            TreeCursor::parse(&cursor, &record.run_id).map_err(|err| ApiError::invalid(field, err.to_string()))?;
        let permit = state.streams.open(&who.uid, &record.run_id, &state.limits)?;
        let stream = tree_stream(store, record, cursor, format, permit);
        return Ok(Sse::new(stream.boxed()).keep_alive(KeepAlive::new().interval(HEARTBEAT)));
    }
    if !crate::delegation::wire::is_stream_id(&cursor) {
        return Err(ApiError::invalid(field, format!("{cursor:?} is not a stream id such as 0-0")));
    }
    // Held as long as the stream lives: its place is given back when the stream ends or its client goes.
    let permit = state.streams.open(&who.uid, &record.run_id, &state.limits)?;
    let stream = futures::stream::unfold(
        (store, record.run_id, cursor, false),
        move |(store, run_id, cursor, ended)| {
            let _held = &permit;
            let request = request.clone();
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
                            // An interrupt asks (Yuxi's approval chunk) only while its run waits for it.
                            let waiting = if format == EventFormat::Yuxi
                                && page.iter().any(|e| e.envelope.event == EventKind::Interrupt)
                            {
                                store.run_record(&run_id).await.ok().flatten().and_then(|r| r.waiting)
                            } else {
                                None
                            };
                            let events: Vec<Result<Event, Infallible>> = page
                                .into_iter()
                                .map(|e| {
                                    let name = e.envelope.event.as_str();
                                    let data = super::wire::event_data(e.envelope, &request, format, waiting.as_ref());
                                    Ok(Event::default().id(e.seq).event(name).data(data.to_string()))
                                })
                                .collect();
                            return Some((futures::stream::iter(events), (store, run_id, next, ended)));
                        }
                        Ok(_) => {
                            // Nothing after the cursor: a run that has ended will write nothing more; in
                            // Yuxi's form, the stream of a run that waits for a person ends `interrupted`
                            // (the client resumes it, and streams it again).
                            if let Ok(Some(record)) = store.run_record(&run_id).await
                                && (record.status.is_terminal()
                                    || (format == EventFormat::Yuxi && record.status == RunStatus::Waiting))
                                && store.read_events(&run_id, &cursor, 1).await.is_ok_and(|page| page.is_empty())
                            {
                                let waiting = record.waiting.as_ref().filter(|_| !record.status.is_terminal())?;
                                let data = super::wire::interrupted_end(&record, waiting).to_string();
                                let end = vec![Ok(Event::default().event("end").data(data))];
                                return Some((futures::stream::iter(end), (store, run_id, cursor, true)));
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
    Ok(Sse::new(stream.flatten().boxed()).keep_alive(KeepAlive::new().interval(HEARTBEAT)))
}

/// The events of the tree rooted at `root` after `cursor`, each SSE `id` the tree cursor after it, until
/// every run of the tree has ended and its events are read; a failing store is waited out as for one
/// run's stream.
fn tree_stream(
    store: crate::store::Store,
    root: crate::run::RunRecord,
    cursor: TreeCursor,
    format: EventFormat,
    permit: crate::facade::http::limits::StreamPermit,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    use crate::facade::services::run_tree::{any_changed, drained, read_page, tree_runs};
    enum Step {
        Page(Vec<crate::facade::services::run_tree::TreeEvent>),
        Done,
        Wait(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>),
    }
    // The root's request id beside every event; the rest of a request is the root's own.
    let request = crate::run::RunRequest { request_id: root.request.request_id.clone(), ..Default::default() };
    let stream = futures::stream::unfold((store, root, cursor), move |(store, root, mut cursor)| {
        let _held = &permit;
        let request = request.clone();
        async move {
            let mut failing_since: Option<tokio::time::Instant> = None;
            loop {
                let step: Result<Step, crate::store::StoreError> = async {
                    let tree = tree_runs(&store, root.clone(), &root.uid).await?;
                    // Taken before the read: a write after it wakes the stream at once.
                    let changed = any_changed(&store, &tree, crate::store::notices::RunWatch::SAFETY_NET);
                    let page = read_page(&store, &tree, &mut cursor, 100).await?;
                    if !page.is_empty() {
                        return Ok(Step::Page(page));
                    }
                    if drained(&store, &tree, &cursor).await? {
                        return Ok(Step::Done);
                    }
                    Ok(Step::Wait(changed))
                }
                .await;
                match step {
                    Ok(Step::Page(page)) => {
                        let events: Vec<Result<Event, Infallible>> = page
                            .into_iter()
                            .map(|e| {
                                let name = e.event.envelope.event.as_str();
                                let mut data = super::wire::event_data(e.event.envelope, &request, format, None);
                                data["parent_run_id"] = serde_json::json!(e.parent_run_id);
                                data["parent_tool_call_id"] = serde_json::json!(e.parent_tool_call_id);
                                Ok(Event::default().id(e.cursor).event(name).data(data.to_string()))
                            })
                            .collect();
                        return Some((futures::stream::iter(events), (store, root, cursor)));
                    }
                    Ok(Step::Done) => return None,
                    Ok(Step::Wait(changed)) => {
                        failing_since = None;
                        changed.await;
                    }
                    Err(err) => {
                        let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
                        if since.elapsed() >= STREAM_OUTAGE_LIMIT {
                            tracing::warn!(run_id = %root.run_id, error = %err, "the run store fails for too long; closing the tree stream");
                            return None;
                        }
                        tracing::warn!(run_id = %root.run_id, error = %err, "cannot read the run tree's events; retrying");
                        let backoff =
                            (EVENT_POLL * 2u32.saturating_pow(since.elapsed().as_secs() as u32)).min(EVENT_BACKOFF_MAX);
                        tokio::time::sleep(backoff).await;
                    }
                }
            }
        }
    });
    stream.flatten()
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
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn thread_messages(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<ThreadMessages>, ApiError> {
    let store = state.store()?;
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
