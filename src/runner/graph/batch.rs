//! A model turn's text deltas, batched before they are written as events: at most every
//! [`BATCH_INTERVAL`], or sooner when [`BATCH_CHARS`] characters wait, so a fast model does not write an
//! event per token.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::runner::model::ModelDelta;

/// Text deltas are sent at most this often...
pub(super) const BATCH_INTERVAL: Duration = Duration::from_millis(100);
/// ...or when this many characters are waiting.
pub(super) const BATCH_CHARS: usize = 512;

/// Deltas waiting to be sent.
#[derive(Default)]
pub(super) struct Batch {
    content: String,
    reasoning: String,
    since: Option<Instant>,
}

impl Batch {
    pub(super) fn push(&mut self, delta: ModelDelta) {
        match delta {
            ModelDelta::Content(text) => self.content.push_str(&text),
            ModelDelta::Reasoning(text) => self.reasoning.push_str(&text),
        }
        self.since.get_or_insert_with(Instant::now);
    }

    pub(super) fn chars(&self) -> usize {
        self.content.chars().count() + self.reasoning.chars().count()
    }

    pub(super) fn flush_at(&self) -> Option<Instant> {
        self.since.map(|since| since + BATCH_INTERVAL)
    }

    pub(super) fn take(&mut self, message_id: &str) -> Option<Value> {
        self.since = None;
        if self.content.is_empty() && self.reasoning.is_empty() {
            return None;
        }
        let mut payload =
            json!({"type": "message_delta", "message_id": message_id, "content": std::mem::take(&mut self.content)});
        if !self.reasoning.is_empty() {
            payload["reasoning_content"] = Value::String(std::mem::take(&mut self.reasoning));
        }
        Some(payload)
    }
}
