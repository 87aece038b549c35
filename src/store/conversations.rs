//! The conversations of [`Store`]: a thread's entry in its owner's list, as Yuxi's chat-thread routes
//! show it ([`Conversation`]). The in-process store keeps them with their threads (and forgets them
//! together); Redis keeps each under [`keys::thread_conversation`] and a list per user under
//! [`keys::user_conversations`], both forgotten 30 days after their last write.

use crate::run::conversation::{Conversation, ConversationChange};
use crate::store::types::StoreError;
use crate::store::{Store, keys};

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
