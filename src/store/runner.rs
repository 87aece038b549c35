//! The runner's side of the run store: [`RunnerStoreClient`], exactly the operations a runner makes on
//! its run (its lease, its thread's history, its events, its cancel request, its result), on whichever
//! backend the runner reaches. A runner holds this type rather than a [`Store`], so an operation the
//! store socket does not carry cannot be called by a runner: that is settled when the code compiles.
//!
//! ```
//! # async fn run(store: yuxi_operator::store::RunnerStoreClient) {
//! let _ = store.is_cancel_requested("run-1").await;
//! # }
//! ```
//!
//! ```compile_fail,E0599
//! # async fn run(store: yuxi_operator::store::RunnerStoreClient) {
//! let _ = store.read_events("run-1", "0-0", 10).await; // the facade's, not the runner's
//! # }
//! ```
//!
//! ```compile_fail,E0599
//! # async fn run(store: yuxi_operator::store::RunnerStoreClient) {
//! let _ = store.request_cancel("run-1").await; // the facade's, not the runner's
//! # }
//! ```
//!
//! ```compile_fail,E0599
//! # async fn run(store: yuxi_operator::store::RunnerStoreClient) {
//! let _ = store.run_record("run-1").await; // the facade's, not the runner's
//! # }
//! ```

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::run::message::Message;
use crate::run::{EventKind, RunResult};
use crate::store::Store;
use crate::store::socket::SocketStore;
use crate::store::types::{StoreAuth, StoreError};

/// The run store as a runner reaches it. Each operation is the [`Store`] method of the same name, and
/// returns what it returns; over the socket, it can also fail with [`StoreError::Socket`].
#[derive(Clone)]
pub enum RunnerStoreClient {
    /// The store itself: Redis (a runner in a cluster, or of a local mode with Redis), or this process's
    /// in-process store (a runner inside the process that keeps the runs, as in tests).
    Direct(Store),
    /// The in-process store of the local mode that started this runner subprocess, over the store socket
    /// that local mode serves.
    Socket(SocketStore),
}

impl From<Store> for RunnerStoreClient {
    fn from(store: Store) -> Self {
        RunnerStoreClient::Direct(store)
    }
}

impl RunnerStoreClient {
    /// Connects to Redis at `url` as a runner process does (see [`Store::connect_redis_for_runner`]).
    ///
    /// Errors: [`StoreError::Redis`] when Redis cannot be reached or does not answer;
    /// [`StoreError::Unauthenticated`] as [`Store::connect_redis`] says.
    pub async fn connect_redis(url: &str, auth: StoreAuth) -> Result<RunnerStoreClient, StoreError> {
        Ok(RunnerStoreClient::Direct(Store::connect_redis_for_runner(url, auth).await?))
    }

    /// Connects to the store served on the Unix socket at `path` (see [`super::socket`]).
    ///
    /// Errors: [`StoreError::Socket`] when nothing accepts connections there.
    pub async fn connect_socket(path: &Path) -> Result<RunnerStoreClient, StoreError> {
        Ok(RunnerStoreClient::Socket(SocketStore::connect(path).await?))
    }

    /// Appends an event to the run's stream and returns its id ([`Store::append_event`]; over the socket,
    /// the serving process stamps the envelope).
    pub async fn append_event(
        &self,
        run_id: &str,
        thread_id: &str,
        event: EventKind,
        payload: Value,
    ) -> Result<String, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.append_event(run_id, thread_id, event, payload).await,
            RunnerStoreClient::Socket(socket) => socket.append_event(run_id, thread_id, event, payload).await,
        }
    }

    /// The thread's messages, oldest first ([`Store::thread_messages`]).
    pub async fn thread_messages(&self, thread_id: &str) -> Result<Vec<Message>, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.thread_messages(thread_id).await,
            RunnerStoreClient::Socket(socket) => socket.thread_messages(thread_id).await,
        }
    }

    /// Stores the run's question in its thread once ([`Store::put_run_input`]); whether it is there.
    pub async fn put_run_input(&self, run_id: &str, thread_id: &str, input: &str) -> Result<bool, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.put_run_input(run_id, thread_id, input).await,
            RunnerStoreClient::Socket(socket) => socket.put_run_input(run_id, thread_id, input).await,
        }
    }

    /// Ends the run as the runner reports it, in one step: messages, result, `error` and `end` events,
    /// record ([`Store::finish_run`]); `false` when it had ended already and nothing was written.
    pub async fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
    ) -> Result<bool, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.finish_run(run_id, thread_id, new_messages, result).await,
            RunnerStoreClient::Socket(socket) => socket.finish_run(run_id, thread_id, new_messages, result).await,
        }
    }

    /// Takes this pod's claim, waiting at most `wait` ([`Store::take_claim`]). Only a pod's runner has a
    /// claim: over the local mode's socket there is none to take.
    ///
    /// Errors: [`StoreError::Socket`] over the socket.
    pub async fn take_claim(&self, pod_uid: &str, wait: Duration) -> Result<Option<String>, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.take_claim(pod_uid, wait).await,
            RunnerStoreClient::Socket(socket) => Err(StoreError::Socket {
                path: socket.path().to_path_buf(),
                message: "a warm pod's claim comes from Redis, not from the local mode's socket".into(),
            }),
        }
    }

    /// The run's result, once it has finished ([`Store::run_result`]).
    pub async fn run_result(&self, run_id: &str) -> Result<Option<RunResult>, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.run_result(run_id).await,
            RunnerStoreClient::Socket(socket) => socket.run_result(run_id).await,
        }
    }

    /// Whether a cancel was requested for the run ([`Store::is_cancel_requested`]).
    pub async fn is_cancel_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.is_cancel_requested(run_id).await,
            RunnerStoreClient::Socket(socket) => socket.is_cancel_requested(run_id).await,
        }
    }

    /// Whether the run was asked to end at its next model turn ([`Store::is_steer_requested`]).
    pub async fn is_steer_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.is_steer_requested(run_id).await,
            RunnerStoreClient::Socket(socket) => socket.is_steer_requested(run_id).await,
        }
    }

    /// Resolves when a cancel is requested for the run ([`Store::cancelled`]); over the socket there is
    /// no notice, so it checks every `poll`.
    pub async fn cancelled(&self, run_id: &str, poll: Duration) {
        match self {
            RunnerStoreClient::Direct(store) => store.cancelled(run_id, poll).await,
            RunnerStoreClient::Socket(socket) => socket.cancelled(run_id, poll).await,
        }
    }

    /// Takes or renews the run's runner lease for `holder` for `ttl`; returns whether `holder` holds it
    /// now ([`Store::hold_run_lease`]).
    pub async fn hold_run_lease(&self, run_id: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.hold_run_lease(run_id, holder, ttl).await,
            RunnerStoreClient::Socket(socket) => socket.hold_run_lease(run_id, holder, ttl).await,
        }
    }

    /// Adds one model call's tokens and cost to the run's tree and to the day's counts of its namespace and user
    /// ([`Store::record_usage`]); answers the tree's count and budget.
    pub async fn record_usage(
        &self,
        target: &crate::run::budget::UsageTarget,
        call: &crate::run::budget::ModelCall,
        day: &str,
    ) -> Result<crate::run::budget::TreeUsage, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.record_usage(target, call, day).await,
            RunnerStoreClient::Socket(socket) => socket.record_usage(target, call, day).await,
        }
    }

    /// Adds the run `run_id`'s end to its agent's run totals ([`Store::record_run_end`]).
    pub async fn record_run_end(&self, run_id: &str, end: &crate::run::metrics::RunEnd) -> Result<(), StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.record_run_end(end).await,
            RunnerStoreClient::Socket(socket) => socket.record_run_end(run_id, end).await,
        }
    }

    /// The count and budget of the run tree rooted at `root_run_id` ([`Store::tree_usage`]).
    pub async fn tree_usage(&self, root_run_id: &str) -> Result<crate::run::budget::TreeUsage, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.tree_usage(root_run_id).await,
            RunnerStoreClient::Socket(socket) => socket.tree_usage(root_run_id).await,
        }
    }

    /// Pauses the running run for a person ([`Store::pause_run`]); `false` when it is not running.
    pub async fn pause_run(
        &self,
        run_id: &str,
        thread_id: &str,
        checkpoint: &crate::run::approval::Checkpoint,
        waiting: &crate::run::approval::Waiting,
        payload: Value,
        keep: Duration,
    ) -> Result<bool, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => {
                store.pause_run(run_id, thread_id, checkpoint, waiting, payload, keep).await
            }
            RunnerStoreClient::Socket(socket) => {
                socket.pause_run(run_id, thread_id, checkpoint, waiting, payload, keep).await
            }
        }
    }

    /// Takes, once, a resumed run's checkpoint and decisions ([`Store::take_resumption`]).
    pub async fn take_resumption(
        &self,
        run_id: &str,
    ) -> Result<Option<(crate::run::approval::Checkpoint, Vec<crate::run::approval::Decision>)>, StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.take_resumption(run_id).await,
            RunnerStoreClient::Socket(socket) => socket.take_resumption(run_id).await,
        }
    }

    /// Gives up the run's runner lease if `holder` has it ([`Store::release_run_lease`]).
    pub async fn release_run_lease(&self, run_id: &str, holder: &str) -> Result<(), StoreError> {
        match self {
            RunnerStoreClient::Direct(store) => store.release_run_lease(run_id, holder).await,
            RunnerStoreClient::Socket(socket) => socket.release_run_lease(run_id, holder).await,
        }
    }
}
