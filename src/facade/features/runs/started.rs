//! The answer of `POST /api/agent/runs` ([`StartedParentRun`]): a run that was started, or a start that
//! waits in its thread's queue.

use serde::Serialize;

use crate::facade::services::run_queue::{QueuePolicy, QueuedStart};
use crate::run::RunRecord;
use crate::run::queue::RequestStatus;

/// The answer of `POST /api/agent/runs` (Yuxi's run submission answer).
#[derive(Serialize, utoipa::ToSchema)]
pub struct StartedParentRun {
    /// The run; `null` while the request waits in the thread's queue.
    pub run_id: Option<String>,
    /// Its conversation.
    pub thread_id: String,
    /// `pending` at first; `queued` while the request waits.
    pub status: String,
    /// The request id (`meta.request_id`, or one the facade made).
    pub request_id: String,
    /// How a busy thread was met.
    pub queue_policy: QueuePolicy,
    /// The request's place in the thread's queue, from 1; 0 once it runs.
    pub queue_position: usize,
    /// Where the run's events stream: `/api/agent/runs/<run_id>/events`; `null` while queued.
    pub stream_url: Option<String>,
    /// Where a queued request is followed: `/api/agent/requests/<request_id>`; `null` once it runs.
    pub request_events_url: Option<String>,
}

impl StartedParentRun {
    /// The answer for a run that was recorded and is launched.
    pub(super) fn running(record: &RunRecord, policy: QueuePolicy) -> StartedParentRun {
        StartedParentRun {
            run_id: Some(record.run_id.clone()),
            thread_id: record.thread_id.clone(),
            status: record.status.as_str().to_string(),
            request_id: record.request.request_id.clone().unwrap_or_default(),
            queue_policy: policy,
            queue_position: 0,
            stream_url: Some(crate::delegation::wire::events_url(&record.run_id)),
            request_events_url: None,
        }
    }

    /// The answer for a start that waits in its thread's queue.
    pub(super) fn queued(queued: QueuedStart, policy: QueuePolicy) -> StartedParentRun {
        let request_id = queued.request_id;
        StartedParentRun {
            run_id: None,
            thread_id: queued.thread_id,
            status: RequestStatus::Queued.as_str().into(),
            request_events_url: Some(format!("/api/agent/requests/{request_id}/events")),
            request_id,
            queue_policy: policy,
            queue_position: queued.position,
            stream_url: None,
        }
    }
}
