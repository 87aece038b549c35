//! The store's plain types, which every other file of the store names: its error ([`StoreError`]), a
//! run as a status read sees it ([`RunView`]), whether an anonymous Redis may serve ([`StoreAuth`]),
//! and what queueing a request did ([`Enqueued`]). A leaf: it names nothing else of the store. Outside
//! the store they are named as [`crate::store::StoreError`] and so on (and
//! [`crate::store::queues::Enqueued`]).

use std::path::PathBuf;

use crate::run::{RunRecord, RunResult, StoredEvent};

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
    /// The run has ended (its result and `end` are written), so nothing more is added to its stream.
    #[error("run {run_id} has ended; its stream takes no more events")]
    RunEnded {
        /// The run.
        run_id: String,
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

/// A run as a status read sees it ([`Store::run_view`](super::Store::run_view)).
#[derive(Clone, Debug)]
pub struct RunView {
    /// Its record.
    pub record: RunRecord,
    /// Its result, once it has one.
    pub result: Option<RunResult>,
    /// Its last events, oldest first.
    pub recent: Vec<StoredEvent>,
}

impl StoreError {
    /// Whether the operation certainly never reached the store (the connection was refused), so sending it again cannot do it twice: what a runner retries its event writes on while the
    /// store is briefly away.
    pub fn is_unsent(&self) -> bool {
        match self {
            StoreError::Redis(err) => err.is_connection_refusal(),
            _ => false,
        }
    }
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

/// What [`Store::enqueue_request`](super::Store::enqueue_request) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    /// Queued at this place, from 1.
    At(usize),
    /// The queue holds its most already.
    Full,
    /// The user has a request of this id already.
    Taken,
}
