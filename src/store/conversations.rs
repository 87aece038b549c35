//! The conversations of [`Store`]: a thread's entry in its owner's list, as Yuxi's chat-thread routes
//! show it ([`Conversation`]). The in-process store keeps them with their threads (and forgets them
//! together); Redis keeps each under [`keys::thread_conversation`] and a list per user under
//! [`keys::user_conversations`], both forgotten 30 days after their last write.

use super::{Store, StoreError, keys};
use crate::run::conversation::{Conversation, ConversationChange, MAX_CONVERSATIONS_PER_USER};

/// Changes one field of a conversation, if it exists: KEYS = conversation, its owner's list; ARGV =
/// field, its value as JSON, time to live, `updated_at` (empty: not touched), list score, thread id.
/// Returns whether the conversation exists. Its JSON holds no list or object Lua could not tell apart
/// (`metadata` is JSON text).
const CHANGE: &str = r"
local text = redis.call('GET', KEYS[1])
if not text then return 0 end
local conversation = cjson.decode(text)
conversation[ARGV[1]] = cjson.decode(ARGV[2])
if ARGV[4] ~= '' then
  conversation['updated_at'] = ARGV[4]
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
end
redis.call('SET', KEYS[1], cjson.encode(conversation), 'EX', ARGV[3])
return 1
";

impl Store {
    /// Writes `conversation` (new or changed) and puts it first in its owner's list.
    pub async fn put_conversation(&self, conversation: &Conversation) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.put_conversation(conversation).await,
            Store::Memory(memory) => {
                memory.put_conversation(conversation);
                Ok(())
            }
        }
    }

    /// Makes `change` to the thread's conversation in one step (two changes at once both hold); whether
    /// the conversation exists.
    pub async fn change_conversation(&self, thread_id: &str, change: &ConversationChange) -> Result<bool, StoreError> {
        let now = jiff::Timestamp::now();
        match self {
            Store::Memory(memory) => Ok(memory.change_conversation(thread_id, change, &now.to_string())),
            Store::Redis(redis) => {
                let Some(owner) = redis.thread_owner(thread_id).await? else { return Ok(false) };
                let touched = if change.touches() { now.to_string() } else { String::new() };
                let changed: i64 = redis
                    .run_script(
                        CHANGE,
                        &[&keys::thread_conversation(thread_id), &keys::user_conversations(&owner)],
                        &[
                            change.field(),
                            &change.value().to_string(),
                            &keys::STATE_TTL_SECONDS.to_string(),
                            &touched,
                            &now.as_microsecond().to_string(),
                            thread_id,
                        ],
                    )
                    .await?;
                Ok(changed == 1)
            }
        }
    }

    /// The thread's conversation, if it has one.
    pub async fn conversation(&self, thread_id: &str) -> Result<Option<Conversation>, StoreError> {
        match self {
            Store::Redis(redis) => redis.get_conversation(thread_id).await,
            Store::Memory(memory) => Ok(memory.conversation(thread_id)),
        }
    }

    /// The user's conversations, most recently updated first, `limit` of them after the first `offset`.
    pub async fn user_conversations(
        &self,
        uid: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        match self {
            Store::Redis(redis) => redis.user_conversations(uid, offset, limit).await,
            Store::Memory(memory) => Ok(memory.user_conversations(uid, offset, limit)),
        }
    }

    /// Removes the thread's conversation and its messages, and takes it off its owner's list. The thread
    /// stays its owner's (nobody else may take its id).
    pub async fn delete_conversation(&self, conversation: &Conversation) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => redis.delete_conversation(conversation).await,
            Store::Memory(memory) => {
                memory.delete_conversation(conversation);
                Ok(())
            }
        }
    }
}

impl super::redis::RedisStore {
    pub(super) async fn put_conversation(&self, conversation: &Conversation) -> Result<(), StoreError> {
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

    pub(super) async fn get_conversation(&self, thread_id: &str) -> Result<Option<Conversation>, StoreError> {
        self.get_json(keys::thread_conversation(thread_id)).await
    }

    pub(super) async fn user_conversations(
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

    pub(super) async fn delete_conversation(&self, conversation: &Conversation) -> Result<(), StoreError> {
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
