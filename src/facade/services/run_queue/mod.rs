//! Starts that wait for their thread (`queue_policy: enqueue | steer`): queuing them, and starting them
//! when their thread is free. Yuxi's request routes over them are the runs feature's
//! (`features/runs/requests.rs`); the threads this process pumps are in [`pumps`].
//!
//! A queued request is started by a pump: one task per thread with waiting requests in each facade
//! process, woken when the thread's run ends. It claims the queue's head (two facades never start the
//! same request), starts it like `POST /api/agent/runs` would, for the identity that queued it, with
//! the agent's share rules checked again then, and waits for that run. After a run that failed or
//! was cancelled the queue pauses until its owner continues it. Every few seconds each facade looks for queues without a pump (after a
//! restart, or a facade that went), so nothing that waits is forgotten while the store keeps it.

pub mod pumps;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::state::FacadeState;
use crate::access::Identity;
use crate::facade::http::error::ApiError;
use crate::run::queue::{MAX_QUEUED_PER_THREAD, QueuedRequest, RequestStatus, continues_after};
use crate::run::{Created, RunRecord, RunStatus};
use crate::store::queues::Enqueued;
use crate::store::{Store, StoreError};

/// How often each facade looks for queues that have no pump.
const DISPATCH_SWEEP: Duration = Duration::from_secs(5);
/// How long a pump waits before trying again a start that a limit of unfinished runs held back.
const LIMITED_RETRY: Duration = Duration::from_secs(2);
/// How long a request's event stream stays open at most (the client opens it again).
pub const REQUEST_STREAM_LIMIT: Duration = Duration::from_secs(30 * 60);

/// What a start does when the thread already has an unfinished run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueuePolicy {
    /// Answer 409 `run_busy` (the default when the body does not say: no hidden queueing).
    #[default]
    Reject,
    /// Wait for the thread's run to end, in the thread's queue (bounded), then start.
    Enqueue,
    /// Like `enqueue`, first in the queue: the next run of the thread.
    Steer,
}

/// A start queued behind its thread's unfinished run: where it waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedStart {
    /// Its thread.
    pub thread_id: String,
    /// Its request id.
    pub request_id: String,
    /// Its place in the thread's queue, from 1.
    pub position: usize,
}

/// Queues the start `record` (whose thread has the unfinished run `active`) for `who`: at the back,
/// or at the front for `steer`. Errors: 429 naming `max_queued_per_thread` when the queue is full; 409
/// when the caller already has a request of this id.
pub async fn enqueue(
    state: &FacadeState,
    who: &Identity,
    record: RunRecord,
    query: String,
    policy: QueuePolicy,
    active: &str,
) -> Result<QueuedStart, ApiError> {
    let store = state.store()?;
    let request_id = record.request.request_id.clone().unwrap_or_default();
    let thread_id = record.thread_id.clone();
    let request = QueuedRequest {
        request_id: request_id.clone(),
        identity: who.clone(),
        record,
        query,
        steer: policy == QueuePolicy::Steer,
        status: RequestStatus::Queued,
        run_id: None,
        error: None,
        created_at: jiff::Timestamp::now().to_string(),
    };
    match store.enqueue_request(&request, MAX_QUEUED_PER_THREAD).await? {
        Enqueued::Full => Err(ApiError::Limited {
            limit: "max_queued_per_thread".into(),
            message: format!("thread {thread_id:?} has {MAX_QUEUED_PER_THREAD} requests waiting, the most allowed"),
            retry_after: 5,
        }),
        Enqueued::Taken => {
            Err(ApiError::Conflict(format!("meta.request_id: {request_id:?} already names one of your requests")))
        }
        Enqueued::At(position) => {
            tracing::debug!(thread_id = %thread_id, active_run_id = %active, position, "a start waits for its thread");
            if policy == QueuePolicy::Steer {
                steer_active(store, active).await?;
            }
            ensure_pump(state, &thread_id);
            Ok(QueuedStart { thread_id, request_id, position })
        }
    }
}

/// Records the run `record`, started at once for `who` with `query`, as its owner's dispatched request
/// (Yuxi keeps a request for every chat run): `GET /api/agent/requests/{request_id}` then answers for it
/// as for a request that waited. A request id the owner already used keeps its request.
pub async fn note_dispatched(
    store: &Store,
    who: &Identity,
    record: &RunRecord,
    query: &str,
    policy: QueuePolicy,
) -> Result<(), StoreError> {
    let Some(request_id) = record.request.request_id.clone() else { return Ok(()) };
    let request = QueuedRequest {
        request_id,
        identity: who.clone(),
        record: record.clone(),
        query: query.to_string(),
        steer: policy == QueuePolicy::Steer,
        status: RequestStatus::Dispatched,
        run_id: Some(record.run_id.clone()),
        error: None,
        created_at: record.created_at.clone(),
    };
    store.put_new_request(&request).await?;
    Ok(())
}

/// Asks the thread's unfinished run `active` to end at its next model turn, so the steered request,
/// first in the queue, starts then. A delegated run is not steered (it is its parent's).
pub async fn steer_active(store: &Store, active: &str) -> Result<(), StoreError> {
    if store.run_record(active).await?.is_some_and(|r| r.parent.is_none() && !r.status.is_terminal()) {
        store.request_steer(active).await?;
    }
    Ok(())
}

/// Starts a pump for `thread_id` in this process unless one runs.
pub fn ensure_pump(state: &FacadeState, thread_id: &str) {
    if !state.queues.claim(thread_id) {
        return;
    }
    let (state, thread_id) = (state.clone(), thread_id.to_string());
    tokio::spawn(async move {
        if let Err(err) = pump(&state, &thread_id).await {
            tracing::warn!(thread_id = %thread_id, error = %err, "the thread's queue stopped; it is taken up again shortly");
        }
        state.queues.release(&thread_id);
    });
}

/// Looks, every [`DISPATCH_SWEEP`], for threads whose queue waits without a pump, and starts one.
pub fn spawn_dispatcher(state: FacadeState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(DISPATCH_SWEEP);
        loop {
            tick.tick().await;
            let Some(runs) = state.runs.as_ref() else { return };
            match runs.store.queued_threads().await {
                Ok(threads) => {
                    for thread in threads {
                        if serves(&state, &runs.store, &thread).await.unwrap_or(false) {
                            ensure_pump(&state, &thread);
                        }
                    }
                }
                Err(err) => tracing::debug!(error = %err, "cannot list the queued threads"),
            }
        }
    })
}

/// Whether this facade should pump the thread's queue: it is not paused, and this facade knows the agent
/// of its next request (a facade with other agents, on the same store, leaves it to those that know it).
async fn serves(state: &FacadeState, store: &Store, thread_id: &str) -> Result<bool, StoreError> {
    if is_paused(store, thread_id).await? {
        return Ok(false);
    }
    let (Some(owner), Some(head)) = (store.thread_owner(thread_id).await?, store.queue_head(thread_id).await?) else {
        return Ok(false);
    };
    let Some(request) = store.queued_request(&owner, &head).await? else { return Ok(true) };
    Ok(state.agents.get(&request.record.agent_slug).await.ok().flatten().is_some())
}

pub async fn is_paused(store: &Store, thread_id: &str) -> Result<bool, StoreError> {
    Ok(store.conversation(thread_id).await?.is_some_and(|c| c.queue_paused))
}

/// Pauses the thread's queue, or lets it go on.
pub async fn set_paused(store: &Store, thread_id: &str, paused: bool) -> Result<(), StoreError> {
    store.change_conversation(thread_id, &crate::run::conversation::ConversationChange::QueuePaused(paused)).await?;
    Ok(())
}

/// How long a facade holds the claim of a request it starts (more than a start takes; a facade that
/// dies holding it leaves the request to the next after this).
pub const CLAIM_TTL: Duration = Duration::from_secs(60);

/// Starts the thread's waiting requests one after the other, each once the run before it has ended,
/// until the queue is empty or pauses.
async fn pump(state: &FacadeState, thread_id: &str) -> Result<(), StoreError> {
    let Some(runs) = state.runs.as_ref() else { return Ok(()) };
    let store = &runs.store;
    let Some(owner) = store.thread_owner(thread_id).await? else { return Ok(()) };
    loop {
        // The thread is free first: a request stays where it is, its place visible, until it can start.
        if let Some(active) = store.thread_active_run(thread_id).await? {
            let ended = wait_for_end(store, &active).await?;
            if !continues_after(ended) {
                set_paused(store, thread_id, true).await?;
                return Ok(());
            }
        }
        if is_paused(store, thread_id).await? {
            return Ok(());
        }
        let Some(request_id) = store.queue_head(thread_id).await? else { return Ok(()) };
        if !store.claim_request(&owner, &request_id, CLAIM_TTL).await? {
            // Another facade starts it: its run then holds the thread.
            tokio::time::sleep(crate::store::notices::RunWatch::SAFETY_NET).await;
            continue;
        }
        let started = start_request(state, store, thread_id, &owner, &request_id).await;
        store.release_request(&owner, &request_id).await?;
        if started? == Start::Later {
            tokio::time::sleep(LIMITED_RETRY).await;
        }
    }
}

/// What trying to start a queued request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// Started, or dropped (gone, cancelled, its agent gone): the queue goes on.
    Done,
    /// The thread was taken meanwhile: the request waits on.
    Busy,
    /// A limit of unfinished runs, or an agent catalog that does not answer, holds it back: tried again
    /// shortly.
    Later,
}

/// Starts the claimed head `request_id` of the thread like `POST /api/agent/runs` would, with the rights
/// its owner has now; takes it off the queue once its run is recorded (or when it cannot be started).
async fn start_request(
    state: &FacadeState,
    store: &Store,
    thread_id: &str,
    owner: &str,
    request_id: &str,
) -> Result<Start, StoreError> {
    let Some(mut request) =
        store.queued_request(owner, request_id).await?.filter(|r| r.status == RequestStatus::Queued)
    else {
        store.remove_request(thread_id, request_id).await?;
        return Ok(Start::Done);
    };
    request.record.run_id = uuid::Uuid::new_v4().simple().to_string();
    request.record.created_at = jiff::Timestamp::now().to_string();
    request.record.status = RunStatus::Pending;
    // The agent as its user may see it now. A catalog that does not answer is waited out, as a limit is:
    // the request is not failed for it.
    let slug = request.record.agent_slug.clone();
    let found = match state.agents.get(&slug).await {
        Ok(found) => found,
        Err(err) => {
            tracing::warn!(thread_id = %thread_id, error = %err, "cannot read the queued request's agent; trying again");
            return Ok(Start::Later);
        }
    };
    let Ok(agent) = super::agent_views::visible(found, &request.identity, &slug) else {
        store.remove_request(thread_id, request_id).await?;
        request.status = RequestStatus::Failed;
        request.error = Some(format!("agent {slug:?} does not exist"));
        store.put_request(&request).await?;
        return Ok(Start::Done);
    };
    // A queued request spends its owner's tokens as a direct start does: checked when it starts, not
    // only when it was queued.
    match super::run_starts::check_quotas(state, &request.identity.uid).await {
        Ok(()) => {}
        Err(crate::facade::http::error::ApiError::Limited { message, .. }) => {
            store.remove_request(thread_id, request_id).await?;
            request.status = RequestStatus::Failed;
            request.error = Some(message);
            store.put_request(&request).await?;
            return Ok(Start::Done);
        }
        Err(err) => {
            tracing::warn!(thread_id = %thread_id, error = %err, "cannot check the queued request's quotas; trying again");
            return Ok(Start::Later);
        }
    }
    match store.create_run(&request.record, None, state.limits.runs).await? {
        Created::Started => {
            if !store.remove_request(thread_id, request_id).await? {
                // Cancelled while its run was being recorded: the cancel has answered `cancelled`, so the
                // run never starts.
                store.end_run(&request.record.run_id, RunStatus::Cancelled, None).await?;
                return Ok(Start::Done);
            }
            request.status = RequestStatus::Dispatched;
            request.run_id = Some(request.record.run_id.clone());
            store.put_request(&request).await?;
            if let Err(err) = super::conversations::note_run(store, &request.record, &request.query).await {
                tracing::warn!(thread_id = %thread_id, error = %err, "cannot note the run in its conversation");
            }
            super::run_starts::launch_parent(state, &request.identity, agent, &request.record, request.query.clone());
            Ok(Start::Done)
        }
        Created::Busy(_) | Created::Existing(_) => Ok(Start::Busy),
        Created::Limited(_) => Ok(Start::Later),
    }
}

/// Waits until `run_id` has ended (woken by its notices); its terminal status (`completed` for a run
/// the store has forgotten).
async fn wait_for_end(store: &Store, run_id: &str) -> Result<RunStatus, StoreError> {
    loop {
        let watch = store.watch(run_id);
        let changed = watch.changed(crate::store::notices::RunWatch::SAFETY_NET);
        match store.run_record(run_id).await? {
            Some(record) if !record.status.is_terminal() => changed.await,
            Some(record) => return Ok(record.status),
            None => return Ok(RunStatus::Completed),
        }
    }
}
