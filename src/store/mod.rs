//! Where runs keep their state: the event stream, the thread history, the result, the cancel request,
//! the run record and its thread's lock, the runner's lease, and run credentials (DESIGN.md section 6;
//! key names in [`keys`]).
//!
//! One contract, [`Store`], with two backends: Redis ([`redis`]), used in a cluster and by the local mode
//! when it is given one; and an in-process store ([`memory`]), the local mode's store without Redis. A
//! runner reaches the store through the narrower [`RunnerStoreClient`] ([`runner`]): the same Redis, or,
//! for a runner subprocess of the local mode without Redis, that process's in-process store over a Unix
//! socket ([`socket`]).
//!
//! This file holds the contract's core, a run's life: its events, lease, creation, end, cancel and the
//! sweep. The other concerns add their operations to [`Store`] in files of their own, each with the Redis
//! scripts it needs: `conversations.rs`, [`queues`], `approvals.rs`, [`usage`] and `children.rs`. Each
//! backend is a folder split the same way. The types every file names ([`StoreError`], [`RunView`],
//! [`StoreAuth`], [`queues::Enqueued`]) are in `types.rs`, which names nothing else of the store.

mod approvals;
mod children;
mod claims;
mod conversations;
pub mod keys;
pub mod memory;
pub mod notices;
pub mod queues;
pub mod redis;
pub mod run_list;
pub mod run_totals;
pub mod runner;
pub mod socket;
mod types;
pub mod usage;

use std::time::Duration;

use serde_json::Value;

pub use self::redis::admits_anonymous;
use crate::run::message::Message;
use crate::run::{Created, EventKind, RunLimits, RunRecord, RunResult, RunStatus, StoredEvent};
pub use memory::{MemoryStore, Retention};
pub use redis::RedisStore;
pub use runner::RunnerStoreClient;
pub use socket::SocketStore;
pub use types::{RunView, StoreAuth, StoreError};

/// The error of a run ended because it was abandoned.
pub const ABANDONED: &str =
    "the run's runner is gone (its lease lapsed with nobody keeping the run): it was ended by the sweeper";

/// The run state store, as the facade, the controller and the local mode use it: every operation, on
/// either backend. The in-process store never fails; Redis fails with [`StoreError::Redis`] when it
/// cannot be reached, and with [`StoreError::Corrupt`] when a key holds something this version cannot
/// read.
#[derive(Clone)]
pub enum Store {
    /// Redis.
    Redis(RedisStore),
    /// In this process.
    Memory(MemoryStore),
}

impl Store {
    /// Connects to Redis at `url` (`redis://[:password@]host:port[/db]`), checks that it answers, and
    /// checks that it refuses a client without credentials (a second connection that sends `PING` with no
    /// `AUTH`).
    ///
    /// Errors: [`StoreError::Redis`] when it cannot be reached or refuses the URL's credentials;
    /// [`StoreError::Unauthenticated`] when it answers anonymous clients and `auth` is
    /// [`StoreAuth::Required`] (with [`StoreAuth::AllowAnonymous`], a warning is logged instead).
    pub async fn connect_redis(url: &str, auth: StoreAuth) -> Result<Store, StoreError> {
        Ok(Store::Redis(RedisStore::connect(url, auth, redis::Listens::AllRuns).await?))
    }

    /// [`Store::connect_redis`] for a runner process: it listens to the cancel of its own run alone
    /// ([`redis::Listens::OwnCancels`]), and to no other run's notices.
    pub async fn connect_redis_for_runner(url: &str, auth: StoreAuth) -> Result<Store, StoreError> {
        Ok(Store::Redis(RedisStore::connect(url, auth, redis::Listens::OwnCancels).await?))
    }

    /// An empty in-process store, with the default [`Retention`].
    pub fn memory() -> Store {
        Store::Memory(MemoryStore::default())
    }

    /// An empty in-process store that keeps what `retention` allows.
    pub fn memory_with(retention: Retention) -> Store {
        Store::Memory(MemoryStore::with_retention(retention))
    }

    /// A watch of the run: [`notices::RunWatch::changed`] resolves as soon as the run writes an event,
    /// ends, changes status or is asked to stop (pushed: a notice in process, a pub/sub message with
    /// Redis), and after [`notices::RunWatch::SAFETY_NET`] at the latest.
    pub fn watch(&self, run_id: &str) -> notices::RunWatch {
        match self {
            Store::Redis(redis) => redis.watch(run_id),
            Store::Memory(memory) => memory.watch(run_id),
        }
    }

    /// Checks that the store answers (Redis `PING`); the in-process store always does.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.ping().await,
            Store::Memory(_) => Ok(()),
        }
    }

    /// Appends an event to the run's stream (refreshing the stream's time to live) and returns its id.
    ///
    /// Errors: [`StoreError::RunEnded`] once the run has its result: nothing follows its `end`, so a
    /// runner that has not yet seen its run ended elsewhere (a stopping local mode, a sweeper) cannot
    /// write after it.
    pub async fn append_event(
        &self,
        run_id: &str,
        thread_id: &str,
        event: EventKind,
        payload: Value,
    ) -> Result<String, StoreError> {
        match self {
            Store::Redis(redis) => redis.append_event(run_id, thread_id, event, payload).await,
            Store::Memory(memory) => memory.append_event(run_id, thread_id, event, payload),
        }
    }

    /// Up to `limit` events of the run after the cursor `after_seq` (`0-0` for the start), oldest first.
    pub async fn read_events(
        &self,
        run_id: &str,
        after_seq: &str,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        match self {
            Store::Redis(redis) => redis.read_events(run_id, after_seq, limit).await,
            Store::Memory(memory) => Ok(memory.read_events(run_id, after_seq, limit)),
        }
    }

    /// The last `count` events of the run's stream, oldest first: what a progress summary reads, without
    /// reading the whole stream.
    pub async fn recent_events(&self, run_id: &str, count: usize) -> Result<Vec<StoredEvent>, StoreError> {
        match self {
            Store::Redis(redis) => redis.recent_events(run_id, count).await,
            Store::Memory(memory) => Ok(memory.recent_events(run_id, count)),
        }
    }

    /// The thread's messages, oldest first; empty for a new thread.
    pub async fn thread_messages(&self, thread_id: &str) -> Result<Vec<Message>, StoreError> {
        match self {
            Store::Redis(redis) => redis.thread_messages(thread_id).await,
            Store::Memory(memory) => Ok(memory.thread_messages(thread_id)),
        }
    }

    /// Ends the run as its runner reports it, in one step: the new messages appended to the thread, the
    /// result, an `error` event when `result.error` is set, exactly one `end` event, the record's terminal
    /// status (`result.status`; `failed` for a status that is not terminal) and its thread's lock
    /// released. Returns `false`, having written nothing, when the run had ended already (a sweeper, a
    /// cancel of a run nobody executed, or the controller ended it first): one terminal truth, whoever
    /// writes first.
    pub async fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
    ) -> Result<bool, StoreError> {
        let status = if result.status.is_terminal() { result.status } else { RunStatus::Failed };
        let now = jiff::Timestamp::now().to_string();
        let error_event = result.error.as_ref().map(|message| {
            let failure = crate::run::ErrorPayload { message: message.clone(), retryable: false };
            let payload = serde_json::to_value(failure).expect("an error payload serializes");
            crate::run::Envelope::new(run_id, thread_id, EventKind::Error, payload, now.clone())
        });
        let end = crate::run::EndPayload { status, error: result.error.clone(), reason: result.reason.clone() };
        let end = serde_json::to_value(end).expect("an end payload serializes");
        let end = crate::run::Envelope::new(run_id, thread_id, EventKind::End, end, now);
        match self {
            Store::Redis(redis) => {
                redis.finish_run(run_id, thread_id, new_messages, result, status, error_event.as_ref(), &end).await
            }
            Store::Memory(memory) => {
                Ok(memory.finish_run(run_id, thread_id, new_messages, result, status, error_event, end))
            }
        }
    }

    /// The run's result, once it has finished.
    pub async fn run_result(&self, run_id: &str) -> Result<Option<RunResult>, StoreError> {
        match self {
            Store::Redis(redis) => redis.run_result(run_id).await,
            Store::Memory(memory) => Ok(memory.run_result(run_id)),
        }
    }

    /// Asks the run to stop: sets its cancel key and announces it on the cancel channel.
    pub async fn request_cancel(&self, run_id: &str) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.request_cancel(run_id).await,
            Store::Memory(memory) => {
                memory.request_cancel(run_id);
                Ok(())
            }
        }
    }

    /// Asks the run to end at its next model turn (completed, with what it has said): a request steered
    /// to the front of its thread's queue waits for it.
    pub async fn request_steer(&self, run_id: &str) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.request_steer(run_id).await,
            Store::Memory(memory) => {
                memory.request_steer(run_id);
                Ok(())
            }
        }
    }

    /// Whether the run was asked to end at its next model turn ([`Store::request_steer`]).
    pub async fn is_steer_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => redis.read(::redis::cmd("EXISTS").arg(keys::run_steer(run_id))).await,
            Store::Memory(memory) => Ok(memory.is_steer_requested(run_id)),
        }
    }

    /// Takes the run's runner lease for `holder` for `ttl`, or renews it when `holder` has it. Returns
    /// whether `holder` holds it now.
    pub async fn hold_run_lease(&self, run_id: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => redis.hold_run_lease(run_id, holder, ttl).await,
            Store::Memory(memory) => Ok(memory.hold_run_lease(run_id, holder, ttl)),
        }
    }

    /// Gives up the run's runner lease if `holder` has it.
    pub async fn release_run_lease(&self, run_id: &str, holder: &str) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.release_run_lease(run_id, holder).await,
            Store::Memory(memory) => {
                memory.release_run_lease(run_id, holder);
                Ok(())
            }
        }
    }

    /// Records a new run, atomically: when `start_key` already started a run, that run is `Existing`; when
    /// the record's thread has a non-terminal run that is not abandoned (see [`Store::sweep`]), it is
    /// `Busy` (an abandoned one is ended `interrupted` first); when a limit of unfinished runs is reached,
    /// `Limited`; otherwise the record is stored, takes the thread's lock, remembers `start_key`, and gets
    /// a keeper for [`keys::START_GRACE_SECONDS`] (its launcher renews it with [`Store::keep_run`]).
    pub async fn create_run(
        &self,
        record: &RunRecord,
        start_key: Option<&str>,
        limits: RunLimits,
    ) -> Result<Created, StoreError> {
        let create = async || match self {
            Store::Redis(redis) => redis.create_run(record, start_key, limits).await,
            Store::Memory(memory) => Ok(memory.create_run(record, start_key, limits)),
        };
        match create().await? {
            // The lock expires with its run's lease: an abandoned holder is ended, and the thread is free.
            Created::Busy(active) if self.end_abandoned(&active).await? => create().await,
            created => Ok(created),
        }
    }

    /// The thread's unfinished run, as its lock names it (a run that ended has given the lock back).
    pub async fn thread_active_run(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        match self {
            Store::Redis(redis) => redis.read(::redis::cmd("GET").arg(keys::thread_active_run(thread_id))).await,
            Store::Memory(memory) => Ok(memory.thread_active_run(thread_id)),
        }
    }

    /// The user whose runs use the thread.
    pub async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        match self {
            Store::Redis(redis) => redis.thread_owner(thread_id).await,
            Store::Memory(memory) => Ok(memory.thread_owner(thread_id)),
        }
    }

    /// Makes `uid` the owner of `thread_id` unless somebody owns it already; returns whether `uid` owns it
    /// now. One atomic step, so two users racing for a new thread cannot both win.
    pub async fn claim_thread(&self, thread_id: &str, uid: &str) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => redis.claim_thread(thread_id, uid).await,
            Store::Memory(memory) => Ok(memory.claim_thread(thread_id, uid)),
        }
    }

    /// The run's record, its result (once it has one) and its last `recent` events (oldest first), in one
    /// round trip: what a status read needs. `None` for an unknown run.
    pub async fn run_view(&self, run_id: &str, recent: usize) -> Result<Option<RunView>, StoreError> {
        match self {
            Store::Redis(redis) => redis.run_view(run_id, recent).await,
            Store::Memory(memory) => Ok(memory.run_view(run_id, recent)),
        }
    }

    /// The run's record.
    pub async fn run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        match self {
            Store::Redis(redis) => redis.run_record(run_id).await,
            Store::Memory(memory) => Ok(memory.run_record(run_id)),
        }
    }

    /// Ends a run that has not ended, whoever ends it (its runner gone, a sweeper, a cancel), in one step:
    /// the record's status (`status`, terminal) and `error`, the thread's lock released, a result (kept if
    /// the runner wrote one) and exactly one `end` event, so the stream ends and `/result` answers. Returns
    /// whether it ended the run (`false`: unknown, or ended already, and nothing was written).
    pub async fn end_run(&self, run_id: &str, status: RunStatus, error: Option<&str>) -> Result<bool, StoreError> {
        self.end(run_id, status, error, None, false).await
    }

    /// [`Store::end_run`] with a CamelCase `reason` in the result and the `end` event (`ApprovalTimeout`).
    pub async fn end_with_reason(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
        reason: Option<&str>,
    ) -> Result<bool, StoreError> {
        self.end(run_id, status, error, reason, false).await
    }

    /// [`Store::end_run`] as `interrupted`, only if the run is abandoned: not terminal, and neither a
    /// runner's lease nor a keeper is held for it (checked in the same step). A run whose cancel was
    /// asked for ends `cancelled`. Returns whether it ended the run.
    pub async fn end_abandoned(&self, run_id: &str) -> Result<bool, StoreError> {
        let Some(record) = self.run_record(run_id).await? else { return Ok(false) };
        let (status, error) = match record.status {
            // A run waiting for a person runs nowhere by design; its time-out ends it.
            RunStatus::Waiting => return Ok(false),
            RunStatus::CancelRequested => (RunStatus::Cancelled, None),
            _ => (RunStatus::Interrupted, Some(ABANDONED)),
        };
        self.end(run_id, status, error, None, true).await
    }

    async fn end(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
        reason: Option<&str>,
        only_if_abandoned: bool,
    ) -> Result<bool, StoreError> {
        debug_assert!(status.is_terminal());
        let Some(record) = self.run_record(run_id).await? else { return Ok(false) };
        if record.status.is_terminal() {
            return Ok(false);
        }
        let result = RunResult {
            status,
            output: String::new(),
            error: error.map(String::from),
            agent_slug: record.agent_slug.clone(),
            run_id: record.run_id.clone(),
            thread_id: record.thread_id.clone(),
            token_usage: Default::default(),
            reason: reason.map(String::from),
            tree_token_usage: None,
            tree_cost: Vec::new(),
        };
        let payload = serde_json::to_value(crate::run::EndPayload {
            status,
            error: error.map(String::from),
            reason: reason.map(String::from),
        })
        .expect("an end payload serializes");
        let end = crate::run::Envelope::new(
            run_id,
            &record.thread_id,
            EventKind::End,
            payload,
            jiff::Timestamp::now().to_string(),
        );
        match self {
            Store::Redis(redis) => redis.end_run(&record, status, error, &result, &end, only_if_abandoned).await,
            Store::Memory(memory) => Ok(memory.end_run(run_id, status, error, &result, end, only_if_abandoned)),
        }
    }

    /// Says that `holder` will start or is watching the run, for `ttl` (renewed before it lapses): the
    /// local mode's launcher while the run waits for a runner and while its runner lives, the controller
    /// while the run's AgentRun exists. A run with neither a keeper nor a lease is abandoned.
    pub async fn keep_run(&self, run_id: &str, holder: &str, ttl: Duration) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.keep_run(run_id, holder, ttl).await,
            Store::Memory(memory) => {
                memory.keep_run(run_id, ttl);
                Ok(())
            }
        }
    }

    /// The runs that have not ended, as far as the store counts them (the set [`keys::ACTIVE_RUNS`];
    /// in-process, every record that is not terminal).
    pub async fn unfinished_runs(&self) -> Result<Vec<String>, StoreError> {
        match self {
            Store::Redis(redis) => redis.unfinished_runs().await,
            Store::Memory(memory) => Ok(memory.unfinished_runs()),
        }
    }

    /// Ends every abandoned run (see [`Store::end_abandoned`]): runs that are not terminal while nobody
    /// holds their lease or keeps them, because their runner, its launcher or their pod went away.
    /// Returns how many it ended. Safe to run from several processes at once, and beside live runs of
    /// other processes on the same store: a run that is held or kept is never touched. The in-process
    /// store also forgets what its [`Retention`] no longer allows.
    pub async fn sweep(&self) -> Result<usize, StoreError> {
        if let Store::Memory(memory) = self {
            memory.forget_expired();
        }
        let mut ended = self.expire_waiting(jiff::Timestamp::now()).await?;
        for run_id in self.unfinished_runs().await? {
            if self.end_abandoned(&run_id).await? {
                tracing::warn!(run_id = %run_id, "ended an abandoned run: its runner is gone");
                ended += 1;
            }
        }
        Ok(ended)
    }

    /// Moves the run to `status`, with `error` when given: never out of a terminal status, and to
    /// `running` only from `pending` (a cancel asked for while the run was starting stays asked for). A
    /// terminal status releases the thread's lock. Returns whether the record changed.
    pub async fn set_run_status(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => redis.set_run_status(run_id, status, error).await,
            Store::Memory(memory) => Ok(memory.set_run_status(run_id, status, error)),
        }
    }

    /// Cancels a run that has not ended: a run that has not started, or whose runner is gone, ends
    /// `cancelled` at once (with its result and `end`); a running one goes `cancel_requested` and its
    /// runner is told to stop (Yuxi's cancel). Returns the record as it
    /// is afterwards; `None` for an unknown run.
    pub async fn cancel_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let Some(record) = self.run_record(run_id).await? else { return Ok(None) };
        if !record.status.is_terminal() {
            self.request_cancel(run_id).await?;
            // Nobody executes it (not started, or its runner is gone): it ends now, with its result and
            // its `end`. Otherwise its runner is told, and it ends when the runner stops.
            let ended = match record.status {
                // Nobody executes a pending or a waiting run: it ends now (a waiting one keeping what it
                // said).
                RunStatus::Pending => self.end_run(run_id, RunStatus::Cancelled, None).await?,
                RunStatus::Waiting => self.end_waiting(run_id, RunStatus::Cancelled, None, None).await?,
                _ => self.end(run_id, RunStatus::Cancelled, None, None, true).await?,
            };
            if !ended {
                self.set_run_status(run_id, RunStatus::CancelRequested, None).await?;
            }
        }
        Ok(self.run_record(run_id).await?.or(Some(record)))
    }

    /// Whether a cancel was requested for the run.
    pub async fn is_cancel_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => redis.is_cancel_requested(run_id).await,
            Store::Memory(memory) => Ok(memory.is_cancel_requested(run_id)),
        }
    }

    /// Resolves when a cancel is requested for the run: at once on the pub/sub notice (Redis) or the
    /// in-process notice, and by checking the key every `poll` in case a notice was missed.
    pub async fn cancelled(&self, run_id: &str, poll: Duration) {
        match self {
            Store::Redis(redis) => redis.cancelled(run_id, poll).await,
            Store::Memory(memory) => memory.cancelled(run_id, poll).await,
        }
    }
}
