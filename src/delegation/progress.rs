//! The progress summary `subagent_status` and `subagent_await` show: the last readable messages of a run,
//! from its latest events (Yuxi: the last 3 of the last 100 events, each cut to its last 800 characters).
//! Pure: the facade reads the events, this shapes them.

use super::wire::{Progress, ProgressKind, ProgressMessage};
use crate::run::{EventKind, StoredEvent};

/// How many of the run's latest events the summary looks at (Yuxi: 100).
pub const PROGRESS_SCAN: usize = 100;
/// How many readable messages the summary keeps (Yuxi: 3).
pub const PROGRESS_MESSAGES: usize = 3;
/// How many characters of each message the summary keeps, the last ones (Yuxi: 800).
pub const PROGRESS_CHARS: usize = 800;

/// The last readable messages among `events` (oldest first): text deltas of one message joined, tool
/// calls as `name(arguments)`, each cut to its last [`PROGRESS_CHARS`] characters with a `...` prefix;
/// at most [`PROGRESS_MESSAGES`]. `last_seq` is the last event's stream id, `0-0` when there is none.
pub fn summarize(events: &[StoredEvent]) -> Progress {
    let mut messages: Vec<ProgressMessage> = Vec::new();
    for event in events.iter().filter(|e| e.envelope.event == EventKind::Messages) {
        let payload = &event.envelope.payload;
        let (kind, id, text) = match payload["type"].as_str() {
            Some("message_delta") => (
                ProgressKind::AssistantMessage,
                payload["message_id"].clone(),
                payload["content"].as_str().unwrap_or_default().to_string(),
            ),
            Some("tool_call") => (
                ProgressKind::ToolCall,
                payload["tool_call_id"].clone(),
                format!(
                    "{}({})",
                    payload["name"].as_str().unwrap_or_default(),
                    payload["args"].as_str().unwrap_or_default()
                ),
            ),
            _ => continue,
        };
        match messages.last_mut() {
            Some(last) if kind == ProgressKind::AssistantMessage && last.kind == kind && last.message_id == id => {
                last.content.push_str(&text);
                last.seq = event.seq.clone();
            }
            _ => messages.push(ProgressMessage { seq: event.seq.clone(), kind, message_id: id, content: text }),
        }
    }
    let keep = messages.len().saturating_sub(PROGRESS_MESSAGES);
    let mut messages = messages.split_off(keep);
    for message in &mut messages {
        let count = message.content.chars().count();
        if count > PROGRESS_CHARS {
            let tail: String = message.content.chars().skip(count - PROGRESS_CHARS).collect();
            message.content = format!("...{tail}");
        }
    }
    Progress { last_seq: events.last().map(|e| e.seq.clone()).unwrap_or_else(|| "0-0".into()), messages }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::run::Envelope;

    fn event(seq: u64, payload: Value) -> StoredEvent {
        let envelope = Envelope::new("r", "t", EventKind::Messages, payload, "2026-12-01T00:00:00Z".into());
        StoredEvent { seq: format!("{seq}-0"), envelope }
    }

    #[test]
    fn deltas_of_one_message_join_and_only_the_last_three_messages_stay_cut_to_their_tails() {
        let mut events = vec![
            event(1, json!({"type": "message_delta", "message_id": "m1", "content": "Hel"})),
            event(2, json!({"type": "message_delta", "message_id": "m1", "content": "lo"})),
            event(3, json!({"type": "tool_call", "tool_call_id": "c1", "name": "ls", "args": "{}"})),
            event(4, json!({"type": "tool_result", "tool_call_id": "c1", "content": "x"})),
            event(5, json!({"type": "message_delta", "message_id": "m2", "content": "y".repeat(900)})),
        ];
        let progress = summarize(&events);
        assert_eq!(progress.last_seq, "5-0");
        let kinds: Vec<_> = progress.messages.iter().map(|m| (m.kind, m.seq.as_str())).collect();
        assert_eq!(
            kinds,
            [
                (ProgressKind::AssistantMessage, "2-0"),
                (ProgressKind::ToolCall, "3-0"),
                (ProgressKind::AssistantMessage, "5-0")
            ]
        );
        assert_eq!(progress.messages[0].content, "Hello");
        assert_eq!(progress.messages[1].content, "ls({})");
        assert_eq!(progress.messages[2].content, format!("...{}", "y".repeat(PROGRESS_CHARS)));
        events.insert(0, event(0, json!({"type": "tool_call", "tool_call_id": "c0", "name": "first", "args": ""})));
        assert_eq!(summarize(&events).messages.len(), PROGRESS_MESSAGES, "the oldest message drops out");
        assert_eq!(summarize(&[]).last_seq, "0-0");
    }
}
