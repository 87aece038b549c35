//! A user's conversations (Yuxi's chat threads) as the store keeps them: whose one is
//! ([`owned`]), how a run started in one is noted in it ([`note_run`]), and the ids of its history's
//! messages ([`message_id`], [`final_message_id`]).

use serde_json::Map;

use crate::access::{Identity, Role};
use crate::facade::http::error::ApiError;
use crate::run::RunRecord;
use crate::run::conversation::{Conversation, ConversationChange};
use crate::run::message::Message;
use crate::run::thread_id::is_valid_id;
use crate::store::Store;

/// The caller's conversation of `thread_id` (a superadmin's reach is every user's); 404 when it is
/// missing, another user's, or deleted.
pub async fn owned(store: &Store, who: &Identity, thread_id: &str) -> Result<Conversation, ApiError> {
    let missing = || ApiError::NotFound(format!("thread {thread_id:?} does not exist"));
    if !is_valid_id(thread_id) {
        return Err(missing());
    }
    let conversation = store.conversation(thread_id).await?.ok_or_else(missing)?;
    if conversation.uid == who.uid || who.role == Role::Superadmin { Ok(conversation) } else { Err(missing()) }
}

/// Records that `record` (a parent run just created, not yet launched) runs in its thread: the
/// thread's conversation is made on its first run (titled after the query) and points at its latest
/// run, and the query is stored in the thread at once ([`Store::put_run_input`]).
pub async fn note_run(store: &Store, record: &RunRecord, query: &str) -> Result<(), ApiError> {
    note_conversation(store, record, query).await?;
    store.put_run_input(&record.run_id, &record.thread_id, query).await?;
    Ok(())
}

/// The most characters of a title made from a conversation's first question.
pub const MAX_QUESTION_TITLE_CHARS: usize = 120;

/// A conversation's title made from its first question: whitespace folded to single spaces, at most
/// [`MAX_QUESTION_TITLE_CHARS`] characters (a list shows as much of it as fits).
pub fn first_words(question: &str) -> String {
    crate::run::record::folded_start(question, MAX_QUESTION_TITLE_CHARS).0
}

/// The conversation part of [`note_run`].
async fn note_conversation(store: &Store, record: &RunRecord, query: &str) -> Result<(), ApiError> {
    if store.change_conversation(&record.thread_id, &ConversationChange::LastRun(record.run_id.clone())).await? {
        return Ok(());
    }
    let now = jiff::Timestamp::now().to_string();
    let conversation = Conversation {
        thread_id: record.thread_id.clone(),
        uid: record.uid.clone(),
        agent_slug: record.agent_slug.clone(),
        title: first_words(query),
        is_pinned: false,
        metadata: Map::new(),
        created_at: now.clone(),
        updated_at: now.clone(),
        last_run_id: Some(record.run_id.clone()),
        viewed_run_id: None,
        queue_paused: false,
    };
    store.put_conversation(&conversation).await?;
    Ok(())
}

/// The history id of the final answer of `record`, when it is its thread's latest run: the last
/// assistant message with text.
pub async fn final_message_id(store: &Store, record: &RunRecord) -> Result<Option<String>, ApiError> {
    let latest = store.conversation(&record.thread_id).await?.and_then(|c| c.last_run_id);
    if latest.as_deref() != Some(record.run_id.as_str()) {
        return Ok(None);
    }
    let messages = store.thread_messages(&record.thread_id).await?;
    Ok(messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { content: Some(text), .. } if !text.is_empty()))
        .map(message_id))
}

/// The id of the message at `index` of a thread's history: its place, from 1.
pub fn message_id(index: usize) -> String {
    (index + 1).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_from_a_question_keeps_its_words_on_one_line_within_its_bound() {
        assert_eq!(
            first_words("  Which solid\n\nelectrolytes   conduct lithium best?  "),
            "Which solid electrolytes conduct lithium best?"
        );
        let long = "word ".repeat(100);
        assert_eq!(first_words(&long).chars().count(), MAX_QUESTION_TITLE_CHARS);
        assert_eq!(first_words("\n  \t"), "");
    }
}
