//! What a model call yields, whichever the provider: the pieces of a turn as they stream, the whole turn,
//! and why a call failed.

use std::time::Duration;

use serde::Serialize;

use crate::resources::TokenUsage;
use crate::run::message::ToolCall;

/// A piece of a model turn, as it streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelDelta {
    /// Answer text.
    Content(String),
    /// Reasoning text, from models that expose it (`reasoning_content`).
    Reasoning(String),
}

/// One complete model turn.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelTurn {
    /// The answer text (empty when the turn only calls tools).
    pub content: String,
    /// The tools the model asked to call, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used by this call, when the endpoint reports them.
    pub usage: Option<TokenUsage>,
}

/// Why a model call failed, whichever the provider. Transient failures (rate limits, overload, server
/// errors, time-outs, broken connections and streams) are retried by the graph; the others end the run.
/// A message never holds a credential or a header value (the clients remove them before building one).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum ModelError {
    /// Worth retrying: HTTP 408, 429 or 5xx (Anthropic's 529 included), a provider's throttling or
    /// unavailability, a time-out, a refused or broken connection, a stream that ended early.
    #[error("{message}")]
    Transient {
        /// What failed, for people.
        message: String,
        /// How long the provider asked to wait before trying again (`retry-after`, `retry-after-ms`,
        /// Gemini's `RetryInfo`), when it said; the graph waits at least this long, up to a cap.
        retry_after: Option<Duration>,
    },
    /// Not worth retrying: a bad request (a conversation longer than the context window included), a
    /// refused key, an unknown model, a malformed answer.
    #[error("{0}")]
    Fatal(String),
}

impl ModelError {
    /// A transient failure without a wait asked for.
    pub fn transient(message: impl Into<String>) -> Self {
        ModelError::Transient { message: message.into(), retry_after: None }
    }

    /// A fatal failure.
    pub fn fatal(message: impl Into<String>) -> Self {
        ModelError::Fatal(message.into())
    }

    /// Whether the call may succeed if tried again.
    pub fn is_transient(&self) -> bool {
        matches!(self, ModelError::Transient { .. })
    }

    /// How long the provider asked to wait before the next try, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::Transient { retry_after, .. } => *retry_after,
            ModelError::Fatal(_) => None,
        }
    }
}
