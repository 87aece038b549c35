//! A task's stream (`SendStreamingMessage`, `SubscribeToTask`) as server-sent events, each `data` a
//! JSON-RPC answer of the request: first the task as it is, then a `working` status update for each
//! event of its run (what it said, each tool call and result, each custom event), and at its end the
//! artifacts (the answer, the output files) and the final state; or, when the run stops to wait for a
//! person, the `input-required` state with the question. The stream ends there, as the protocol has
//! it; a client follows an answered task again with `SubscribeToTask`. A failing run store is waited
//! out (with backoff) for up to a minute, then the stream ends with an internal error. Each stream
//! holds one of the caller's places for event streams (429 naming the limit when none is left), taken
//! before the task starts and given back as soon as the client goes.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc;

use super::view::{Reading, context_of, task_of};
use crate::delegation::a2a::map::update_of;
use crate::delegation::a2a::rpc::{Code, RpcError, error_response, response};
use crate::delegation::a2a::wire::{StreamResponse, TaskArtifactUpdateEvent, TaskStatusUpdateEvent};
use crate::facade::http::error::ApiError;
use crate::facade::services::state::FacadeState;
use crate::run::{EventKind, RunRecord, RunStatus};

/// How often an idle stream sends a heartbeat comment.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// How long a stream waits out a failing run store before it ends.
const OUTAGE_LIMIT: Duration = Duration::from_secs(60);
/// Items a stream holds for a slow client before its reader waits.
const BUFFER: usize = 16;

/// The stream of the task of `record` for the request `id`, from the run's events after `cursor`
/// (`0-0` for a run just started; its latest event for a run followed again).
pub fn follow(
    state: FacadeState,
    record: RunRecord,
    cursor: String,
    id: Value,
    reading: Reading,
    permit: crate::facade::http::limits::StreamPermit,
) -> Response {
    let (sender, receiver) = mpsc::channel::<Result<Event, Infallible>>(BUFFER);
    tokio::spawn(async move {
        let _held = permit;
        let send = |item: &StreamResponse| {
            let data = response(&id, item).to_string();
            let sender = sender.clone();
            async move { sender.send(Ok(Event::default().data(data))).await.is_ok() }
        };
        // A client that goes ends the stream at once, and gives its place back, even while the run
        // writes nothing.
        let outcome = tokio::select! {
            outcome = run(&state, &record, cursor, &reading, &send) => outcome,
            () = sender.closed() => Ok(()),
        };
        if let Err(error) = outcome {
            let data = error_response(&id, &error).to_string();
            let _ = sender.send(Ok(Event::default().data(data))).await;
        }
    });
    let stream =
        futures::stream::unfold(
            receiver,
            |mut receiver| async move { receiver.recv().await.map(|item| (item, receiver)) },
        );
    Sse::new(stream).keep_alive(KeepAlive::new().interval(HEARTBEAT)).into_response()
}

/// Sends the stream's items until the task ends or waits for a person; `Ok` also when the client went.
async fn run<F, Fut>(
    state: &FacadeState,
    record: &RunRecord,
    mut cursor: String,
    reading: &Reading,
    send: &F,
) -> Result<(), RpcError>
where
    F: Fn(&StreamResponse) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let internal = |e: ApiError| RpcError::new(Code::Internal, e.to_string());
    let store = state.store().map_err(internal)?.clone();
    let first = task_of(state, record, &Reading { artifacts: false, ..reading.clone() }).await.map_err(internal)?;
    let settled = first.status.state.is_terminal() || first.status.state.is_interrupted();
    if !send(&StreamResponse::Task(first)).await {
        return Ok(());
    }
    if settled && cursor != "0-0" {
        return finish(state, record, reading, send).await;
    }
    let mut failing_since: Option<tokio::time::Instant> = None;
    loop {
        let watch = store.watch(&record.run_id);
        let changed = watch.changed(crate::store::notices::RunWatch::SAFETY_NET);
        let page = match store.read_events(&record.run_id, &cursor, 100).await {
            Ok(page) => {
                failing_since = None;
                page
            }
            Err(err) => {
                let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= OUTAGE_LIMIT {
                    return Err(RpcError::new(
                        Code::Internal,
                        format!("the run store fails: {err}; follow the task again with SubscribeToTask"),
                    ));
                }
                tokio::time::sleep(
                    Duration::from_millis(250) * 2u32.saturating_pow(since.elapsed().as_secs().min(3) as u32),
                )
                .await;
                continue;
            }
        };
        if page.is_empty() {
            // Nothing new: a run that ended or waits has written all it will for now.
            let now = store.run_record(&record.run_id).await.ok().flatten();
            if now.as_ref().is_some_and(|r| r.status.is_terminal() || r.status == RunStatus::Waiting)
                && store.read_events(&record.run_id, &cursor, 1).await.is_ok_and(|p| p.is_empty())
            {
                return finish(state, record, reading, send).await;
            }
            changed.await;
            continue;
        }
        for event in page {
            cursor = event.seq.clone();
            if matches!(event.envelope.event, EventKind::End | EventKind::Interrupt) {
                return finish(state, record, reading, send).await;
            }
            if let Some(mut update) = update_of(&event.envelope, &event.seq) {
                // The context as the task's client named it.
                update.context_id = context_of(record);
                if let Some(message) = update.status.message.as_mut() {
                    message.context_id = Some(update.context_id.clone());
                }
                if !send(&StreamResponse::StatusUpdate(update)).await {
                    return Ok(());
                }
            }
        }
    }
}

/// The stream's last items: the task's artifacts, each whole, then its state (with its question or
/// its error).
async fn finish<F, Fut>(state: &FacadeState, record: &RunRecord, reading: &Reading, send: &F) -> Result<(), RpcError>
where
    F: Fn(&StreamResponse) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let internal = |e: ApiError| RpcError::new(Code::Internal, e.to_string());
    let store = state.store().map_err(internal)?;
    let now = store.run_record(&record.run_id).await.map_err(|e| internal(e.into()))?.unwrap_or_else(|| record.clone());
    let task = task_of(state, &now, &Reading { history_length: Some(0), ..reading.clone() }).await.map_err(internal)?;
    for artifact in task.artifacts {
        let update = TaskArtifactUpdateEvent {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            artifact,
            append: false,
            last_chunk: true,
            metadata: None,
        };
        if !send(&StreamResponse::ArtifactUpdate(update)).await {
            return Ok(());
        }
    }
    let status = TaskStatusUpdateEvent {
        task_id: task.id,
        context_id: task.context_id,
        status: task.status,
        metadata: task.metadata,
    };
    send(&StreamResponse::StatusUpdate(status)).await;
    Ok(())
}
