//! Where runs keep their state: the event stream, the thread history, the result, the cancel request,
//! the run record and its thread's lock, the runner's lease, and run credentials (DESIGN.md section 6;
//! key names in [`keys`]).
//!
//! One contract, [`Store`], with two backends: Redis ([`redis`]), used in a cluster and by the local mode
//! when it is given one; and an in-process store ([`memory`]), the local mode's store without Redis. A
//! runner reaches the store through the narrower [`RunnerStoreClient`] ([`runner`]): the same Redis, or,
//! for a runner subprocess of the local mode without Redis, that process's in-process store over a Unix
//! socket ([`socket`]).

pub mod keys;
pub mod memory;
pub mod redis;
pub mod runner;
pub mod socket;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

pub use self::redis::admits_anonymous;
use crate::run::message::Message;
use crate::run::{Created, EventKind, RunLimits, RunRecord, RunResult, RunStatus, StoredEvent};
pub use memory::MemoryStore;
pub use redis::RedisStore;
pub use runner::RunnerStoreClient;
pub use socket::SocketStore;

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis answered with an error or could not be reached.
    #[error("redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// Stored data could not be read back.
    #[error("stored data for {key} is not valid: {source}")]
    Corrupt {
        /// The key.
        key: String,
        /// The decoding error.
        source: serde_json::Error,
    },
    /// The store socket could not be reached, broke off, or answered with an error.
    #[error("store socket {path}: {message}")]
    Socket {
        /// The socket's path.
        path: PathBuf,
        /// What went wrong, or the error the serving store answered.
        message: String,
    },
    /// The Redis answers clients that give no credentials, so anything that reaches it on the network
    /// (code a model wrote, in a sandbox) could read and write every run.
    #[error(
        "the Redis at {addr} answers clients without a password: anything that reaches it could read every conversation and forge run state; give it a password (requirepass or ACL users) and put it in the URL (redis://:<password>@host:port), or pass --allow-unauthenticated-store to accept the risk"
    )]
    Unauthenticated {
        /// The server's address, without credentials.
        addr: String,
    },
}

/// Whether a Redis that answers clients without credentials may be used as the run store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoreAuth {
    /// Refuse one ([`StoreError::Unauthenticated`]): the default of every role.
    #[default]
    Required,
    /// Use it, with a warning naming the risk (`--allow-unauthenticated-store`, for a Redis nothing
    /// untrusted can reach).
    AllowAnonymous,
}

impl StoreAuth {
    /// [`StoreAuth::AllowAnonymous`] when `allow` (the `--allow-unauthenticated-store` flag).
    pub fn from_flag(allow: bool) -> Self {
        if allow { Self::AllowAnonymous } else { Self::Required }
    }
}

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
        Ok(Store::Redis(RedisStore::connect(url, auth).await?))
    }

    /// An empty in-process store.
    pub fn memory() -> Store {
        Store::Memory(MemoryStore::default())
    }

    /// Checks that the store answers (Redis `PING`); the in-process store always does.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.ping().await,
            Store::Memory(_) => Ok(()),
        }
    }

    /// Appends an event to the run's stream (refreshing the stream's time to live) and returns its id.
    pub async fn append_event(
        &self,
        run_id: &str,
        thread_id: &str,
        event: EventKind,
        payload: Value,
    ) -> Result<String, StoreError> {
        match self {
            Store::Redis(redis) => redis.append_event(run_id, thread_id, event, payload).await,
            Store::Memory(memory) => Ok(memory.append_event(run_id, thread_id, event, payload)),
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

    /// Appends the run's new messages to its thread and records its result, in one transaction.
    pub async fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
    ) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.finish_run(run_id, thread_id, new_messages, result).await,
            Store::Memory(memory) => {
                memory.finish_run(run_id, thread_id, new_messages, result);
                Ok(())
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
    /// the record's thread has a non-terminal run, it is `Busy`; otherwise the record is stored, takes the
    /// thread's lock, and remembers `start_key`.
    pub async fn create_run(
        &self,
        record: &RunRecord,
        start_key: Option<&str>,
        limits: RunLimits,
    ) -> Result<Created, StoreError> {
        match self {
            Store::Redis(redis) => redis.create_run(record, start_key, limits).await,
            Store::Memory(memory) => Ok(memory.create_run(record, start_key, limits)),
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
        debug_assert!(status.is_terminal());
        let Some(record) = self.run_record(run_id).await? else { return Ok(false) };
        let result = RunResult {
            status,
            output: String::new(),
            error: error.map(String::from),
            agent_slug: record.agent_slug.clone(),
            run_id: record.run_id.clone(),
            thread_id: record.thread_id.clone(),
            token_usage: Default::default(),
        };
        let payload = serde_json::to_value(crate::run::EndPayload { status, error: error.map(String::from) })
            .expect("an end payload serializes");
        let end = crate::run::Envelope::new(
            run_id,
            &record.thread_id,
            EventKind::End,
            payload,
            jiff::Timestamp::now().to_string(),
        );
        match self {
            Store::Redis(redis) => redis.end_run(&record, status, error, &result, &end).await,
            Store::Memory(memory) => Ok(memory.end_run(run_id, status, error, &result, end)),
        }
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

    /// Cancels a run that has not ended: a run that has not started ends `cancelled` at once, a running
    /// one goes `cancel_requested` and its runner is told to stop (Yuxi's cancel). Returns the record as it
    /// is afterwards; `None` for an unknown run.
    pub async fn cancel_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let Some(record) = self.run_record(run_id).await? else { return Ok(None) };
        if !record.status.is_terminal() {
            self.request_cancel(run_id).await?;
            let next =
                if record.status == RunStatus::Pending { RunStatus::Cancelled } else { RunStatus::CancelRequested };
            self.set_run_status(run_id, next, None).await?;
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

/// Parents and credentials: what the facade keeps for the runs it starts.
impl Store {
    /// The runs `parent_run_id` started, in no particular order.
    pub async fn children(&self, parent_run_id: &str) -> Result<Vec<String>, StoreError> {
        match self {
            Store::Redis(redis) => redis.children(parent_run_id).await,
            Store::Memory(memory) => Ok(memory.children(parent_run_id)),
        }
    }

    /// Cancels every unfinished run `parent_run_id` started (see [`Store::cancel_run`]); returns how many
    /// were unfinished.
    pub async fn cancel_children(&self, parent_run_id: &str) -> Result<usize, StoreError> {
        let mut cancelled = 0;
        for child in self.children(parent_run_id).await? {
            if let Some(record) = self.run_record(&child).await?
                && !record.status.is_terminal()
            {
                self.cancel_run(&child).await?;
                cancelled += 1;
            }
        }
        Ok(cancelled)
    }
}
