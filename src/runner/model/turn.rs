//! What a model call yields, whichever the provider: the pieces of a turn as they stream, the whole turn,
//! and why a call failed.

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

/// Why a model call failed. Transient failures (rate limits, server errors, time-outs, broken
/// connections) are retried; the others end the run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
pub enum ModelError {
    /// Worth retrying: HTTP 408, 429 or 5xx, a time-out, a refused or broken connection.
    #[error("{0}")]
    Transient(String),
    /// Not worth retrying: a bad request, a refused key, an unknown model, a malformed answer.
    #[error("{0}")]
    Fatal(String),
}

impl ModelError {
    /// Whether the call may succeed if tried again.
    pub fn is_transient(&self) -> bool {
        matches!(self, ModelError::Transient(_))
    }
}
