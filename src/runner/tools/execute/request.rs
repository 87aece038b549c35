//! One `execute` command as it travels: the request, its outcome, why it cannot run, and the limits every
//! request is clamped to, whoever sent it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The default time-out of a command, in seconds.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 120;
/// The longest time-out a call may ask for, in seconds.
pub const MAX_TIMEOUT_SECONDS: u64 = 600;
/// The most output a command returns to the model, in bytes (stdout and stderr together).
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// The largest request line the sandbox accepts, in bytes.
pub(super) const MAX_REQUEST_BYTES: u64 = 1024 * 1024;

/// One command to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// A shell command line, run by `/bin/sh -c`.
    pub command: String,
    /// How long it may run, in seconds; then its whole process group is killed.
    pub timeout_seconds: u64,
    /// The most output bytes to return; the rest is counted, not kept.
    pub max_output_bytes: usize,
}

/// What a command did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecOutcome {
    /// The exit code; `None` when it was killed by a signal or timed out.
    pub exit_code: Option<i32>,
    /// Its stdout and stderr, interleaved, cut to `max_output_bytes` (lossy UTF-8).
    pub output: String,
    /// Output bytes left out.
    pub truncated_bytes: u64,
    /// Whether the time-out killed it.
    pub timed_out: bool,
}

/// A command cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The command's process cannot be started.
    #[error("cannot start the command: {source}")]
    Start {
        /// Why.
        source: std::io::Error,
    },
    /// The sandbox's socket cannot be connected to, written or read.
    #[error("cannot reach the sandbox at {}: {source}", socket.display())]
    Unreachable {
        /// The sandbox's socket.
        socket: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The request cannot be written as JSON.
    #[error("{source}")]
    Request {
        /// Why.
        source: serde_json::Error,
    },
    /// Commands cannot be confined here, and running them unconfined was not allowed.
    #[error("execute is refused: {reason}")]
    Unconfined {
        /// Why the sandbox cannot confine commands, and how an operator may allow them anyway.
        reason: String,
    },
    /// The sandbox answered a line that is not an [`ExecOutcome`].
    #[error("the sandbox answered something that is not an outcome ({source})")]
    NotAnOutcome {
        /// The sandbox's socket.
        socket: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

/// Clamps a request to the limits, whoever sent it.
pub(super) fn bounded(mut request: ExecRequest) -> ExecRequest {
    request.timeout_seconds = request.timeout_seconds.clamp(1, MAX_TIMEOUT_SECONDS);
    request.max_output_bytes = request.max_output_bytes.min(MAX_OUTPUT_BYTES);
    request
}
