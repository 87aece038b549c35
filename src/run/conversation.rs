//! A conversation: what Yuxi's chat-thread routes show of a thread (`/api/chat/thread`): its title,
//! agent, pin, metadata and the runs it had. The thread itself (owner, messages, lock) is kept as
//! before; a conversation is the thread's entry in its owner's list. Bounds: [`MAX_TITLE_CHARS`],
//! [`MAX_METADATA_BYTES`], [`MAX_CONVERSATIONS_PER_USER`].

use serde::{Deserialize, Serialize};

use super::RunStatus;

/// The longest title, in characters (longer ones answer 422 naming `title`).
pub const MAX_TITLE_CHARS: usize = 200;
/// The most bytes a conversation's `metadata` takes as JSON (8 KiB; more answers 413 naming `metadata`).
pub const MAX_METADATA_BYTES: usize = 8 * 1024;
/// The most conversations a user's list keeps; creating one more drops the least recently updated
/// from the list (its thread and messages stay until the store forgets them).
pub const MAX_CONVERSATIONS_PER_USER: usize = 1000;
/// The title of a conversation created without one (Yuxi's default, "new conversation").
pub const DEFAULT_TITLE: &str = "新的对话";

/// One conversation, as the store keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// The thread.
    pub thread_id: String,
    /// Its owner.
    pub uid: String,
    /// The agent it talks to (Yuxi's `agent_id`, a slug).
    pub agent_slug: String,
    /// Its title, at most [`MAX_TITLE_CHARS`].
    pub title: String,
    /// Whether its owner pinned it.
    #[serde(default)]
    pub is_pinned: bool,
    /// The client's metadata, as sent (at most [`MAX_METADATA_BYTES`]); stored as JSON text, as the
    /// store's scripts change conversations.
    #[serde(default, with = "super::record::json_text")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// When it was created, RFC 3339.
    pub created_at: String,
    /// When it was last changed or last had a run, RFC 3339.
    pub updated_at: String,
    /// Its latest run started from the chat.
    #[serde(default)]
    pub last_run_id: Option<String>,
    /// The run its owner last saw the end of (`POST .../viewed`).
    #[serde(default)]
    pub viewed_run_id: Option<String>,
    /// Whether its request queue waits for its owner to continue it (after a run that failed or was
    /// cancelled: [`crate::run::queue::continues_after`]).
    #[serde(default)]
    pub queue_paused: bool,
}

/// One change of a conversation, made in one store step, so that changes made at once all hold (a
/// whole record written back would undo another's change).
#[derive(Clone, Debug, PartialEq)]
pub enum ConversationChange {
    /// A new title.
    Title(String),
    /// Pinned or not.
    Pinned(bool),
    /// Its latest run.
    LastRun(String),
    /// The run whose end its owner has seen.
    Viewed(String),
    /// Its queue paused, or going on.
    QueuePaused(bool),
}

impl ConversationChange {
    /// The field it sets, as the store keeps it.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Title(_) => "title",
            Self::Pinned(_) => "is_pinned",
            Self::LastRun(_) => "last_run_id",
            Self::Viewed(_) => "viewed_run_id",
            Self::QueuePaused(_) => "queue_paused",
        }
    }

    /// The value it sets, as JSON.
    pub fn value(&self) -> serde_json::Value {
        match self {
            Self::Title(s) | Self::LastRun(s) | Self::Viewed(s) => serde_json::Value::from(s.as_str()),
            Self::Pinned(b) | Self::QueuePaused(b) => serde_json::Value::from(*b),
        }
    }

    /// Whether it moves the conversation up its owner's list (and sets `updated_at`).
    pub fn touches(&self) -> bool {
        matches!(self, Self::Title(_) | Self::Pinned(_) | Self::LastRun(_))
    }

    /// Makes the change on `conversation`, at `now` (RFC 3339).
    pub fn apply(&self, conversation: &mut Conversation, now: &str) {
        match self {
            Self::Title(title) => conversation.title = title.clone(),
            Self::Pinned(pinned) => conversation.is_pinned = *pinned,
            Self::LastRun(run) => conversation.last_run_id = Some(run.clone()),
            Self::Viewed(run) => conversation.viewed_run_id = Some(run.clone()),
            Self::QueuePaused(paused) => conversation.queue_paused = *paused,
        }
        if self.touches() {
            conversation.updated_at = now.to_string();
        }
    }
}

/// A conversation's state in the sidebar (Yuxi's `thread_status`): `loading` while its latest run is
/// unfinished, `ready` when it has ended, or waits for its user's decisions, unseen (Yuxi's interrupted
/// run is no longer loading), `done` otherwise.
pub fn thread_status(conversation: &Conversation, last_run_status: Option<RunStatus>) -> &'static str {
    match (&conversation.last_run_id, last_run_status) {
        (None, _) | (Some(_), None) => "done",
        (Some(_), Some(status)) if !status.is_terminal() && status != RunStatus::Waiting => "loading",
        (Some(run), Some(_)) if conversation.viewed_run_id.as_deref() == Some(run.as_str()) => "done",
        _ => "ready",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(last: Option<&str>, viewed: Option<&str>) -> Conversation {
        Conversation {
            thread_id: "t1".into(),
            uid: "u".into(),
            agent_slug: "a".into(),
            title: DEFAULT_TITLE.into(),
            is_pinned: false,
            metadata: Default::default(),
            created_at: "2026-12-02T00:00:00Z".into(),
            updated_at: "2026-12-02T00:00:00Z".into(),
            last_run_id: last.map(String::from),
            viewed_run_id: viewed.map(String::from),
            queue_paused: false,
        }
    }

    #[test]
    fn a_conversation_is_loading_while_its_run_goes_ready_when_it_ended_unseen_and_done_once_seen() {
        assert_eq!(thread_status(&conversation(None, None), None), "done");
        assert_eq!(thread_status(&conversation(Some("r"), None), Some(RunStatus::Running)), "loading");
        assert_eq!(thread_status(&conversation(Some("r"), None), Some(RunStatus::Completed)), "ready");
        assert_eq!(thread_status(&conversation(Some("r"), Some("r")), Some(RunStatus::Completed)), "done");
        assert_eq!(thread_status(&conversation(Some("r2"), Some("r")), Some(RunStatus::Failed)), "ready");
        assert_eq!(thread_status(&conversation(Some("r"), None), None), "done", "a forgotten run is done");
        assert_eq!(thread_status(&conversation(Some("r"), None), Some(RunStatus::Waiting)), "ready");
        assert_eq!(thread_status(&conversation(Some("r"), Some("r")), Some(RunStatus::Waiting)), "done");
    }
}
