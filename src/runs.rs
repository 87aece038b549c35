//! The run registry: one record per run (who started it, for which parent, in which thread, its status),
//! the thread lock that keeps one non-terminal run per thread, and idempotent starts keyed by the
//! parent's tool call (DESIGN.md sections 4 and 6).

use serde::{Deserialize, Serialize};

use crate::resources::ParentRef;

/// Where a run is, as the facade reports it (Yuxi's run states).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Created, not yet executing.
    Pending,
    /// Executing.
    Running,
    /// A cancel was asked for; the runner is stopping.
    CancelRequested,
    /// Finished with an answer.
    Completed,
    /// Finished with an error.
    Failed,
    /// Stopped by a cancel.
    Cancelled,
    /// Stopped by something outside the run (its process or pod went away).
    Interrupted,
}

impl RunStatus {
    /// Whether the run has ended.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled | Self::Interrupted)
    }

    /// The status as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::CancelRequested => "cancel_requested",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }
}

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
}

/// The idempotency key of a start: the parent run, the thread scope and the parent's tool call (Yuxi:
/// request id = hash(creator_run:child_thread:tool_call_id)), as a hex SHA-256 digest.
pub fn start_key(parent_run_id: &str, thread_scope: &str, tool_call_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in [parent_run_id, thread_scope, tool_call_id] {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What a run's credentials stand for: the run acting as a parent, for its user. The facade takes the
/// parent of a tool call from these, never from the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunGrant {
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The conversation whose uploads and outputs it works in.
    pub file_thread_id: String,
    /// Its agent.
    pub agent: String,
    /// The user it runs for.
    pub uid: String,
    /// That user's role when the run started.
    pub role: crate::access::Role,
    /// That user's department.
    pub department_id: Option<i64>,
}

/// The prefix of run tokens, so a run token is never sent to TokenReview.
pub const RUN_TOKEN_PREFIX: &str = "yxr_";

/// A new run token: the prefix and 256 random bits in hex.
pub fn new_run_token() -> String {
    let bits = uuid::Uuid::new_v4().simple().to_string() + &uuid::Uuid::new_v4().simple().to_string();
    format!("{RUN_TOKEN_PREFIX}{bits}")
}

/// The hex SHA-256 of a token: the key its grant is stored under.
pub fn token_digest(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}
