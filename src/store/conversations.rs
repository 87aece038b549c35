//! The conversations of [`Store`]: a thread's entry in its owner's list, as Yuxi's chat-thread routes
//! show it ([`Conversation`]), and a run's question, kept in its thread from the run's start
//! ([`Store::put_run_input`]). The in-process store keeps them with their threads (and forgets them
//! together); Redis keeps each under [`keys::thread_conversation`] and a list per user under
//! [`keys::user_conversations`], both forgotten 30 days after their last write.

use crate::run::conversation::{Conversation, ConversationChange};
use crate::run::message::Message;
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

/// Stores a run's question once: KEYS = the run's record, its result, its question's marker, the
/// thread's messages; ARGV = the message's JSON, the most messages a thread keeps, the state's time to
/// live. Returns 1 when the question is in the thread (now, or before: the marker), 0 for a run without
/// a record or that has ended (nothing written).
const PUT_RUN_INPUT: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if not redis.call('SET', KEYS[3], '1', 'NX', 'EX', ARGV[3]) then return 1 end
redis.call('RPUSH', KEYS[4], ARGV[1])
redis.call('LTRIM', KEYS[4], -tonumber(ARGV[2]), -1)
redis.call('EXPIRE', KEYS[4], ARGV[3])
return 1
";

impl Store {
    /// Stores the question `input` of the run `run_id` in its thread `thread_id`, once, when the run
    /// starts (the facade, before its runner; or its runner, for a run started otherwise): the thread's
    /// messages end with it from then on, so a reload or a second client shows it while the run goes on.
    /// The runner then leaves it out of the messages it adds at its end. Returns `true` when the question
    /// is in the thread (stored now or before); `false`, writing nothing, for a run without a record or
    /// that has ended.
    pub async fn put_run_input(&self, run_id: &str, thread_id: &str, input: &str) -> Result<bool, StoreError> {
        let message = Message::User { content: input.to_string() };
        match self {
            Store::Memory(memory) => Ok(memory.put_run_input(run_id, thread_id, message)),
            Store::Redis(redis) => {
                let stored: i64 = redis
                    .run_script(
                        PUT_RUN_INPUT,
                        &[
                            &keys::run_record(run_id),
                            &keys::run_result(run_id),
                            &keys::run_input(run_id),
                            &keys::thread_messages(thread_id),
                        ],
                        &[
                            &serde_json::to_string(&message).expect("a message serializes"),
                            &keys::MAX_THREAD_MESSAGES.to_string(),
                            &keys::STATE_TTL_SECONDS.to_string(),
                        ],
                    )
                    .await?;
                Ok(stored == 1)
            }
        }
    }

    /// Whether the run's question is in its thread ([`Store::put_run_input`]).
    pub async fn run_input_stored(&self, run_id: &str) -> Result<bool, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.run_input_stored(run_id)),
            Store::Redis(redis) => redis.read(::redis::cmd("EXISTS").arg(keys::run_input(run_id))).await,
        }
    }

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
