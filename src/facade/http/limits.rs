//! The facade's abuse limits, each configurable and each answered with 429 (`Retry-After`) naming its
//! setting (docs/reference/limits.md): unfinished runs per user and in total (counted by the run store,
//! in the step that records a run), open event streams per user and per run (counted by this facade
//! replica), agents a user owns; and the bounds of every request body ([`MAX_BODY_BYTES`],
//! [`BODY_READ_TIMEOUT`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::error::ApiError;
use crate::run::{RunLimit, RunLimits};

/// The largest request body, in bytes, except a knowledge base document's upload.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// How long a client may take to send a request's whole body, from its headers on (answered 408 after):
/// a total deadline, which a body trickled a byte at a time cannot reset.
pub const BODY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The request bodies a facade holds in memory at once, in bytes, by default
/// (`--max-body-bytes-in-flight`, 64 MiB).
pub const DEFAULT_BODY_BYTES_IN_FLIGHT: usize = 64 * 1024 * 1024;

/// Seconds a client is told to wait before a limited start or stream is tried again.
pub const RETRY_AFTER_SECONDS: u64 = 5;

/// Every limit of the facade.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Unfinished runs per user and in total.
    pub runs: RunLimits,
    /// Open event streams (`GET /api/agent/runs/{id}/events`) of one user on one facade replica
    /// (`--max-streams-per-user`; default 16).
    pub streams_per_user: usize,
    /// Open event streams of one run on one facade replica (`--max-streams-per-run`; default 8).
    pub streams_per_run: usize,
    /// Agents one user owns (`--max-agents-per-user`; default 100).
    pub agents_per_user: usize,
    /// Knowledge bases one user owns (`--max-knowledge-bases-per-user`; default 20).
    pub knowledge_bases_per_user: usize,
    /// MCP sessions one user (or their runs) holds open on one facade replica
    /// (`--max-mcp-sessions-per-user`; default 8).
    pub mcp_sessions_per_user: usize,
    /// MCP sessions open on one facade replica (`--max-mcp-sessions`; default 512).
    pub mcp_sessions: usize,
    /// How long a client may take to send a request's whole body (`--body-timeout-seconds`; default
    /// [`BODY_READ_TIMEOUT`], 30 s); 408 after.
    pub body_timeout: std::time::Duration,
    /// The bytes of request bodies this facade holds in memory at once (`--max-body-bytes-in-flight`;
    /// default [`DEFAULT_BODY_BYTES_IN_FLIGHT`], 64 MiB); 429 `max_body_bytes_in_flight`
    /// beyond.
    pub body_bytes_in_flight: usize,
    /// The daily token quotas a start is checked against (`--max-tokens-per-user-per-day`,
    /// `--max-tokens-per-namespace-per-day`; none by default).
    pub quotas: crate::run::budget::DailyQuotas,
    /// The namespace the facade's runs are counted in (its own; `default` in the local mode).
    pub namespace: String,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            runs: RunLimits::default(),
            streams_per_user: 16,
            streams_per_run: 8,
            agents_per_user: 100,
            knowledge_bases_per_user: 20,
            mcp_sessions_per_user: 8,
            mcp_sessions: 512,
            body_timeout: BODY_READ_TIMEOUT,
            body_bytes_in_flight: DEFAULT_BODY_BYTES_IN_FLIGHT,
            quotas: Default::default(),
            namespace: crate::resources::manifest_set::DEFAULT_NAMESPACE.to_string(),
        }
    }
}

/// The 429 of a start refused by a run limit.
pub fn run_limited(limit: RunLimit, limits: &RunLimits) -> ApiError {
    let (setting, message) = match limit {
        RunLimit::PerUser => (
            "max_runs_per_user",
            format!("you have {} unfinished runs, the most allowed; await or cancel one", limits.per_user),
        ),
        RunLimit::Total => {
            ("max_runs", format!("{} runs are unfinished, the most this system runs at once", limits.total))
        }
    };
    ApiError::Limited { limit: setting.into(), message, retry_after: RETRY_AFTER_SECONDS }
}

/// Open streams by user, and by run.
type StreamCounts = (HashMap<String, usize>, HashMap<String, usize>);

/// Counts of open streams by user and by run on this replica. A [`StreamPermit`] holds a place in both
/// and gives it back when dropped (when the stream ends or its client goes away).
#[derive(Clone, Debug, Default)]
pub struct OpenStreams {
    counts: Arc<Mutex<StreamCounts>>,
}

/// A place in [`OpenStreams`].
#[derive(Debug)]
pub struct StreamPermit {
    streams: OpenStreams,
    uid: String,
    run_id: String,
}

impl OpenStreams {
    /// A place for a stream of `run_id` opened by `uid`. Errors: 429 naming `max_streams_per_user` or
    /// `max_streams_per_run` when either is full.
    pub fn open(&self, uid: &str, run_id: &str, limits: &Limits) -> Result<StreamPermit, ApiError> {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (users, runs) = &mut *counts;
        let limited = |limit: &str, message: String| ApiError::Limited {
            limit: limit.into(),
            message,
            retry_after: RETRY_AFTER_SECONDS,
        };
        if users.get(uid).copied().unwrap_or(0) >= limits.streams_per_user {
            return Err(limited(
                "max_streams_per_user",
                format!("you have {} event streams open, the most allowed", limits.streams_per_user),
            ));
        }
        if runs.get(run_id).copied().unwrap_or(0) >= limits.streams_per_run {
            return Err(limited(
                "max_streams_per_run",
                format!("run {run_id} has {} event streams open, the most allowed", limits.streams_per_run),
            ));
        }
        *users.entry(uid.to_string()).or_default() += 1;
        *runs.entry(run_id.to_string()).or_default() += 1;
        Ok(StreamPermit { streams: self.clone(), uid: uid.to_string(), run_id: run_id.to_string() })
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut counts = self.streams.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (users, runs) = &mut *counts;
        for (map, key) in [(users, &self.uid), (runs, &self.run_id)] {
            if let Some(n) = map.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    map.remove(key);
                }
            }
        }
    }
}

/// Requests of one kind under way, by user, on this replica: an [`InFlightPermit`] holds a place and
/// gives it back when dropped.
#[derive(Clone, Debug, Default)]
pub struct InFlight {
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

/// A place in [`InFlight`].
#[derive(Debug)]
pub struct InFlightPermit {
    in_flight: InFlight,
    uid: String,
}

impl InFlight {
    /// A place for one more request of `uid`. Errors: 429 naming `limit` when `uid` has `max` under way.
    pub fn enter(&self, uid: &str, max: usize, limit: &str) -> Result<InFlightPermit, ApiError> {
        let mut counts = self.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(uid.to_string()).or_default();
        if *count >= max {
            return Err(ApiError::Limited {
                limit: limit.into(),
                message: format!("you have {max} such requests under way, the most allowed"),
                retry_after: RETRY_AFTER_SECONDS,
            });
        }
        *count += 1;
        Ok(InFlightPermit { in_flight: self.clone(), uid: uid.to_string() })
    }
}

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        let mut counts = self.in_flight.counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_counted_per_user_and_per_run_and_given_back() {
        let limits = Limits { streams_per_user: 2, streams_per_run: 1, ..Limits::default() };
        let streams = OpenStreams::default();
        let first = streams.open("alice", "r1", &limits).expect("first");
        let per_run = streams.open("alice", "r1", &limits).expect_err("one per run");
        assert!(matches!(&per_run, ApiError::Limited { limit, .. } if limit == "max_streams_per_run"), "{per_run}");
        let _second = streams.open("alice", "r2", &limits).expect("another run");
        let per_user = streams.open("alice", "r3", &limits).expect_err("two per user");
        assert!(matches!(&per_user, ApiError::Limited { limit, .. } if limit == "max_streams_per_user"), "{per_user}");
        streams.open("bob", "r3", &limits).expect("bob has his own count");
        drop(first);
        streams.open("alice", "r1", &limits).expect("given back when the stream ends");
    }

    #[test]
    fn requests_under_way_are_counted_per_user_and_given_back() {
        let calls = InFlight::default();
        let first = calls.enter("alice", 1, "max_chat_calls_per_user").expect("first");
        let refused = calls.enter("alice", 1, "max_chat_calls_per_user").expect_err("one at a time");
        assert!(matches!(&refused, ApiError::Limited { limit, .. } if limit == "max_chat_calls_per_user"), "{refused}");
        calls.enter("bob", 1, "max_chat_calls_per_user").expect("bob has his own count");
        drop(first);
        calls.enter("alice", 1, "max_chat_calls_per_user").expect("given back");
    }
}
