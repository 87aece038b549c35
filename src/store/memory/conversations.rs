//! The conversations in process, kept with their threads (and forgotten with them); the conversation
//! operations of the store, for both backends, are in [`crate::store::conversations`].

use super::MemoryStore;

impl MemoryStore {
    /// Stores a run's question in its thread, once ([`Store::put_run_input`](crate::store::Store::put_run_input)).
    pub(in crate::store) fn put_run_input(
        &self,
        run_id: &str,
        thread_id: &str,
        message: crate::run::message::Message,
    ) -> bool {
        let mut state = self.state();
        if !state.records.contains_key(run_id) || state.results.contains_key(run_id) {
            return false;
        }
        if !state.inputs_stored.insert(run_id.to_string()) {
            return true;
        }
        state.touch_thread(thread_id);
        let history = state.threads.entry(thread_id.to_string()).or_default();
        history.push(message);
        if history.len() > crate::store::keys::MAX_THREAD_MESSAGES {
            let excess = history.len() - crate::store::keys::MAX_THREAD_MESSAGES;
            history.drain(..excess);
        }
        true
    }

    pub(in crate::store) fn run_input_stored(&self, run_id: &str) -> bool {
        self.state().inputs_stored.contains(run_id)
    }

    pub(in crate::store) fn put_conversation(&self, conversation: &crate::run::conversation::Conversation) {
        let mut state = self.state();
        state.conversations.insert(conversation.thread_id.clone(), conversation.clone());
        state.touch_thread(&conversation.thread_id);
    }

    pub(in crate::store) fn change_conversation(
        &self,
        thread_id: &str,
        change: &crate::run::conversation::ConversationChange,
        now: &str,
    ) -> bool {
        let mut state = self.state();
        let Some(conversation) = state.conversations.get_mut(thread_id) else { return false };
        change.apply(conversation, now);
        if change.touches() {
            state.touch_thread(thread_id);
        }
        true
    }

    pub(in crate::store) fn conversation(&self, thread_id: &str) -> Option<crate::run::conversation::Conversation> {
        self.state().conversations.get(thread_id).cloned()
    }

    /// The user's conversations, most recently written first (a scan: the retention bounds them all).
    pub(in crate::store) fn user_conversations(
        &self,
        uid: &str,
        offset: usize,
        limit: usize,
    ) -> Vec<crate::run::conversation::Conversation> {
        let state = self.state();
        let mut mine: Vec<_> = state
            .conversations
            .values()
            .filter(|c| c.uid == uid)
            .map(|c| (state.thread_writes.get(&c.thread_id).map_or(0, |(at, _, _)| *at), c))
            .collect();
        mine.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        mine.into_iter()
            .take(crate::run::conversation::MAX_CONVERSATIONS_PER_USER)
            .skip(offset)
            .take(limit)
            .map(|(_, c)| c.clone())
            .collect()
    }

    pub(in crate::store) fn delete_conversation(&self, conversation: &crate::run::conversation::Conversation) {
        let mut state = self.state();
        state.conversations.remove(&conversation.thread_id);
        state.threads.remove(&conversation.thread_id);
    }
}
