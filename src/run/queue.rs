//! A thread's queue of requests (Yuxi's `enqueue` and `steer` policies): a start that found its
//! thread busy waits here, first in first out (a steered request first), until the thread's run ends;
//! then the facade starts it as the thread's next run. Bounded by [`MAX_QUEUED_PER_THREAD`]; a queue
//! pauses after a run that failed or was cancelled, until its owner continues it.

use serde::{Deserialize, Serialize};

use super::RunRecord;
use crate::access::Identity;

/// The most requests one thread's queue holds (one more answers 429 naming `max_queued_per_thread`).
pub const MAX_QUEUED_PER_THREAD: usize = 10;
/// How long a request is kept after it was queued, in seconds (one day): a queue that never moves
/// forgets its requests.
pub const REQUEST_TTL_SECONDS: i64 = 24 * 3600;

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestStatus {
    /// Waiting in its thread's queue.
    Queued,
    /// Started: `run_id` names its run.
    Dispatched,
    /// Taken off the queue by its owner.
    Cancelled,
    /// Could not be started (its agent went, or a limit held it too long): `error` says why.
    Failed,
}

impl RequestStatus {
    /// The status as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Dispatched => "dispatched",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }
}

/// One queued start, with all it needs to start later: who asked, and the run it will be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueuedRequest {
    /// The request id (the client's `meta.request_id`, or one the facade made).
    pub request_id: String,
    /// Who asked: the run is started with their rights at dispatch.
    pub identity: Identity,
    /// The run it becomes: its record as the start checked it (`run_id` is made at dispatch).
    pub record: RunRecord,
    /// What the user asked.
    pub query: String,
    /// Whether it was steered to the front.
    pub steer: bool,
    /// Where it is.
    pub status: RequestStatus,
    /// Its run, once dispatched.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<String>,
    /// When it was queued, RFC 3339.
    pub created_at: String,
}

/// Whether a queue goes on by itself after a run of its thread ended with `status`: after a run that
/// completed, or that the system interrupted (a restart: nothing the user did asks the queue to stop);
/// not after one that failed or that the user cancelled (as Yuxi, so that a user who stopped a run is
/// not surprised by the next one starting). Yuxi also pauses after `interrupted`, which there means a
/// run waiting for the user's answer; here that state is not terminal.
pub fn continues_after(status: super::RunStatus) -> bool {
    matches!(status, super::RunStatus::Completed | super::RunStatus::Interrupted)
}
