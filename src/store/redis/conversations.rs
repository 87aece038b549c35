//! The conversations on Redis: each under [`keys::thread_conversation`] and a list per user under
//! [`keys::user_conversations`]; the conversation operations of the store, for both backends, are in
//! [`crate::store::conversations`].

use super::RedisStore;
use crate::run::conversation::{Conversation, MAX_CONVERSATIONS_PER_USER};
use crate::store::keys;
use crate::store::types::StoreError;

impl RedisStore {
    pub(in crate::store) async fn put_conversation(&self, conversation: &Conversation) -> Result<(), StoreError> {
        let text = serde_json::to_string(conversation).expect("a conversation serializes");
        let list = keys::user_conversations(&conversation.uid);
        let score = jiff::Timestamp::now().as_microsecond();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .set_ex(keys::thread_conversation(&conversation.thread_id), text, keys::STATE_TTL_SECONDS as u64)
            .ignore()
            .zadd(&list, &conversation.thread_id, score)
            .ignore()
            .zremrangebyrank(&list, 0, -(MAX_CONVERSATIONS_PER_USER as isize) - 1)
            .ignore()
            .expire(&list, keys::STATE_TTL_SECONDS)
            .ignore();
        self.write(&pipe).await
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
