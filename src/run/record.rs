//! The run record: one per run (who started it, for which parent, in which thread, its status), what
//! creating one did, and the idempotency key of a start (Yuxi's request id). The run store keeps them and
//! the thread lock that allows one non-terminal run per thread.

use serde::{Deserialize, Serialize};

use super::status::RunStatus;
use crate::resources::ParentRef;

/// One run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunRecord {
    /// The run id.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The agent it runs.
    pub agent_slug: String,
    /// The user it runs for.
    pub uid: String,
    /// The delegating parent run, for a subagent run.
    pub parent: Option<ParentRef>,
    /// Where it is.
    pub status: RunStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// When it was created, RFC 3339.
    pub created_at: String,
}

/// What creating a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// A new run was recorded and holds its thread.
    Started,
    /// The same tool call already started this run.
    Existing(String),
    /// The thread already has this non-terminal run.
    Busy(String),
    /// A limit of unfinished runs is reached; nothing was recorded.
    Limited(RunLimit),
}

/// Which limit of unfinished runs stopped a start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunLimit {
    /// The user's own ([`RunLimits::per_user`]).
    PerUser,
    /// Everyone's together ([`RunLimits::total`]).
    Total,
}

/// How many unfinished runs (pending, running, cancel requested) the store admits: per user, and in
/// total. Checked in the same step that records a run, so a burst cannot overshoot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// Unfinished runs of one user at most (`--max-runs-per-user`; default 20).
    pub per_user: usize,
    /// Unfinished runs of all users at most (`--max-runs`; default 200).
    pub total: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self { per_user: 20, total: 200 }
    }
}

/// The idempotency key of a start: the caller's uid, the parent run, the thread scope and the parent's
/// tool call (Yuxi: request id = hash(creator_run:child_thread:tool_call_id), with the caller added so
/// that a retry finds only the caller's own run), as a hex SHA-256 digest.
pub fn start_key(uid: &str, parent_run_id: &str, thread_scope: &str, tool_call_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in [uid, parent_run_id, thread_scope, tool_call_id] {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
