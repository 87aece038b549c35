//! A run's events: the envelope every entry of its stream carries, the event kinds, and the payloads
//! whose shape other roles read (docs/concepts/runs.md; Yuxi's run stream). The `messages` and `custom`
//! payloads are the runner's to shape and are passed through as JSON.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::status::RunStatus;

/// The version of the event envelope.
pub const SCHEMA_VERSION: u32 = 1;

/// What an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The run's first event: who it is, which agent, which parent.
    Metadata,
    /// Message deltas, tool calls and tool results.
    Messages,
    /// Anything else a run reports (a retried model call, a started child run).
    Custom,
    /// Why the run failed ([`ErrorPayload`]).
    Error,
    /// The run's last event, exactly one per run ([`EndPayload`]).
    End,
    /// The run paused for a person's decisions on tool calls
    /// ([`crate::run::approval::InterruptPayload`]).
    Interrupt,
}

impl EventKind {
    /// The kind as the stream spells it: `metadata`, `messages`, `custom`, `error`, `end`, `interrupt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Metadata => "metadata",
            Self::Messages => "messages",
            Self::Custom => "custom",
            Self::Error => "error",
            Self::End => "end",
            Self::Interrupt => "interrupt",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of a run's event stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Envelope {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: String,
    /// The run's thread.
    pub thread_id: String,
    /// What the event is.
    pub event: EventKind,
    /// The event's data.
    pub payload: Value,
    /// When the event was written, RFC 3339.
    pub created_at: String,
}

impl Envelope {
    /// The envelope of an event written at `created_at` (RFC 3339).
    pub fn new(run_id: &str, thread_id: &str, event: EventKind, payload: Value, created_at: String) -> Envelope {
        Envelope {
            schema_version: SCHEMA_VERSION,
            run_id: run_id.to_string(),
            thread_id: thread_id.to_string(),
            event,
            payload,
            created_at,
        }
    }
}

/// An event as read back: its stream id (the `after_seq` cursor) and its envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// The stream entry id, such as `1764464400000-0`.
    pub seq: String,
    /// The event.
    pub envelope: Envelope,
}

/// The payload of the `end` event: how the run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndPayload {
    /// A terminal status.
    pub status: RunStatus,
    /// Why it failed; `null` otherwise.
    pub error: Option<String>,
    /// A CamelCase word saying why it ended so, when a rule ended it (`BudgetExceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The payload of the `error` event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorPayload {
    /// What went wrong, for a person.
    pub message: String,
    /// Whether trying again may help (always `false` today: a run ends on its error).
    pub retryable: bool,
}

/// A payload as stream JSON. Serializing these plain structs cannot fail.
pub fn payload<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("an event payload serializes")
}

impl PartialEq<&str> for EventKind {
    /// Whether the kind is spelt `other` in the stream.
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// The most bytes of a tool's result that go to the model and into the run's events (64 KiB); the rest is
/// cut ([`cap_text`]).
pub const MAX_TOOL_RESULT_BYTES: usize = 64 * 1024;

/// `text` cut to at most `max_bytes` (at a character boundary), followed by a marker that says how many
/// bytes were cut; `text` itself when it fits.
pub fn cap_text(text: String, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[... {} more bytes cut: this result is limited to {max_bytes} bytes]", &text[..end], text.len() - end)
}

#[cfg(test)]
mod cap_tests {
    use super::cap_text;

    #[test]
    fn a_long_text_is_cut_with_a_marker_saying_how_much_was_cut() {
        assert_eq!(cap_text("short".into(), 10), "short");
        let cut = cap_text("é".repeat(10), 5);
        assert_eq!(cut, "éé\n[... 16 more bytes cut: this result is limited to 5 bytes]");
    }
}
