//! The conversations on Redis: each under [`keys::thread_conversation`] and a list per user under
//! [`keys::user_conversations`]; the conversation operations of the store, for both backends, are in
//! [`crate::store::conversations`].

use super::RedisStore;
use crate::run::conversation::{Conversation, MAX_CONVERSATIONS_PER_USER};
use crate::store::keys;
use crate::store::types::StoreError;

/// Writes a conversation and keeps its owner's list to the latest [`MAX_CONVERSATIONS_PER_USER`]:
/// KEYS = the conversation, its owner's list; ARGV = its JSON, the time to live, its list score, its
/// thread, the most kept, then the prefix and suffix of a thread's conversation, messages and active-run
/// keys ([`keys`]). A conversation pushed off the list is forgotten with its messages (as the in-process
/// store forgets a user's least recently written threads), unless a run holds its thread: then it stays
/// listed until that run ends. One user's conversations never push out another's.
const PUT: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
for _, thread in ipairs(redis.call('ZRANGE', KEYS[2], 0, -tonumber(ARGV[5]) - 1)) do
  if redis.call('EXISTS', ARGV[10] .. thread .. ARGV[11]) == 0 then
    redis.call('DEL', ARGV[6] .. thread .. ARGV[7], ARGV[8] .. thread .. ARGV[9])
    redis.call('ZREM', KEYS[2], thread)
  end
end
redis.call('EXPIRE', KEYS[2], ARGV[2])
";

/// The text of a thread's key before and after its thread id, for a script that names other threads'
/// keys.
fn around_thread(key: fn(&str) -> String) -> (String, String) {
    let marked = key("\u{1}");
    let (before, after) = marked.split_once('\u{1}').expect("the key holds the thread id");
    (before.to_string(), after.to_string())
}

impl RedisStore {
    pub(in crate::store) async fn put_conversation(&self, conversation: &Conversation) -> Result<(), StoreError> {
        let text = serde_json::to_string(conversation).expect("a conversation serializes");
        let score = jiff::Timestamp::now().as_microsecond().to_string();
        let (conversation_before, conversation_after) = around_thread(keys::thread_conversation);
        let (messages_before, messages_after) = around_thread(keys::thread_messages);
        let (active_before, active_after) = around_thread(keys::thread_active_run);
        self.run_script::<()>(
            PUT,
            &[&keys::thread_conversation(&conversation.thread_id), &keys::user_conversations(&conversation.uid)],
            &[
                &text,
                &keys::STATE_TTL_SECONDS.to_string(),
                &score,
                &conversation.thread_id,
                &MAX_CONVERSATIONS_PER_USER.to_string(),
                &conversation_before,
                &conversation_after,
                &messages_before,
                &messages_after,
                &active_before,
                &active_after,
            ],
        )
        .await
    }

    pub(in crate::store) async fn get_conversation(&self, thread_id: &str) -> Result<Option<Conversation>, StoreError> {
        self.get_json(keys::thread_conversation(thread_id)).await
    }

    pub(in crate::store) async fn user_conversations(
        &self,
        uid: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let list = keys::user_conversations(uid);
        let ids: Vec<String> =
            self.read(redis::cmd("ZREVRANGE").arg(&list).arg(offset).arg(offset + limit - 1)).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| keys::thread_conversation(id)).collect();
        let texts: Vec<Option<String>> = self.read(redis::cmd("MGET").arg(&keys)).await?;
        let mut found = Vec::with_capacity(ids.len());
        let mut gone = Vec::new();
        for ((id, key), text) in ids.iter().zip(keys).zip(texts) {
            match text {
                None => gone.push(id.clone()),
                Some(text) => found.push(
                    serde_json::from_str::<Conversation>(&text)
                        .map_err(|source| StoreError::Corrupt { key, source })?,
                ),
            }
        }
        // Conversations that expired leave their list entry behind: dropped as they are met.
        if !gone.is_empty() {
            let mut pipe = redis::pipe();
            pipe.zrem(&list, gone).ignore();
            self.write(&pipe).await?;
        }
        // Only the owner's own (a thread id is the owner's once claimed, but a list never shows another's).
        found.retain(|c| c.uid == uid);
        Ok(found)
    }

    pub(in crate::store) async fn delete_conversation(&self, conversation: &Conversation) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .del(keys::thread_conversation(&conversation.thread_id))
            .ignore()
            .del(keys::thread_messages(&conversation.thread_id))
            .ignore()
            .zrem(keys::user_conversations(&conversation.uid), &conversation.thread_id)
            .ignore();
        self.write(&pipe).await
    }
}
