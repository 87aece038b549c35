//! The Redis backend of the run store: every operation of [`Store`](super::Store) as Redis commands on
//! the keys of [`super::keys`] (DESIGN.md section 6). Used in a cluster, and by the local mode when it is
//! given a Redis. What must happen in one step (a run's creation, a status change, renewing or releasing
//! a lease only for its holder) is a transaction or a Lua script, so two roles racing on the same run
//! cannot interleave.

use std::time::Duration;

use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use serde_json::Value;

use super::{StoreError, keys};
use crate::run::message::Message;
use crate::run::{Created, Envelope, EventKind, RunLimit, RunLimits, RunRecord, RunResult, RunStatus, StoredEvent};

/// Extends the lease in `KEYS[1]` to `ARGV[2]` milliseconds if `ARGV[1]` holds it; returns 1 if it did.
const RENEW_LEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

/// Deletes the lease in `KEYS[1]` if `ARGV[1]` holds it.
const RELEASE_LEASE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

/// Creates a run. `KEYS`: the record, the thread's lock, the start key (`''` for none), the thread's
/// owner, the parent's children (`''` for none), the user's unfinished runs, everyone's unfinished runs.
/// `ARGV`: the run id, the record's JSON, the start key's time to live, the uid, the children's time to
/// live, the per-user and total limits of unfinished runs, the state's time to live, then the terminal
/// statuses. Returns
/// `{outcome, run_id}`; `{'limited', 'user' | 'total'}` when a limit is reached. The sets of unfinished
/// runs are pruned of ended and vanished runs first, so a run that ended however it ended stops counting.
const CREATE_RUN: &str = r"
    if KEYS[3] ~= '' then
      local existing = redis.call('GET', KEYS[3])
      if existing then return {'existing', existing} end
    end
    local active = redis.call('GET', KEYS[2])
    if active then return {'busy', active} end
    local function live(set)
      local n = 0
      for _, id in ipairs(redis.call('SMEMBERS', set)) do
        local raw = redis.call('GET', 'yuxi:run:' .. id .. ':record')
        local ended = true
        if raw then
          ended = false
          local s = cjson.decode(raw).status
          for i = 9, #ARGV do
            if s == ARGV[i] then ended = true end
          end
        end
        if ended then redis.call('SREM', set, id) else n = n + 1 end
      end
      return n
    end
    if live(KEYS[6]) >= tonumber(ARGV[6]) then return {'limited', 'user'} end
    if live(KEYS[7]) >= tonumber(ARGV[7]) then return {'limited', 'total'} end
    redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[8])
    redis.call('SET', KEYS[2], ARGV[1])
    redis.call('SET', KEYS[4], ARGV[4], 'NX')
    redis.call('EXPIRE', KEYS[4], ARGV[8])
    if KEYS[3] ~= '' then redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[3]) end
    if KEYS[5] ~= '' then
      redis.call('SADD', KEYS[5], ARGV[1])
      redis.call('EXPIRE', KEYS[5], ARGV[5])
    end
    redis.call('SADD', KEYS[6], ARGV[1])
    redis.call('SADD', KEYS[7], ARGV[1])
    return {'started', ARGV[1]}
    ";

/// Ends a run that has not ended, in one step: its record's status and error, its thread's lock released,
/// its result (unless the runner wrote one) and one `end` event on its stream. `KEYS`: the record, the
/// thread's lock, the result, the event stream. `ARGV`: the status, the error (`''` for none), the
/// result's JSON, the `end` envelope's JSON, the stream's length bound, its time to live, the result's time
/// to live, then the terminal statuses. Returns 1 if it ended the run, 0 if it had ended already.
const END_RUN: &str = r"
    local raw = redis.call('GET', KEYS[1])
    if not raw then return 0 end
    local record = cjson.decode(raw)
    for i = 8, #ARGV do
      if record.status == ARGV[i] then return 0 end
    end
    record.status = ARGV[1]
    if ARGV[2] ~= '' then record.error = ARGV[2] end
    redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
    if redis.call('GET', KEYS[2]) == record.run_id then redis.call('DEL', KEYS[2]) end
    redis.call('SET', KEYS[3], ARGV[3], 'NX', 'EX', ARGV[7])
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'event', 'end', 'data', ARGV[4])
    redis.call('EXPIRE', KEYS[4], ARGV[6])
    return 1
    ";

/// Moves a run to a status. `KEYS`: the record, the thread's lock. `ARGV`: the new status, the error
/// (`''` for none), `'1'` to release the thread's lock, the status the run must be in (`''` for any), then
/// the terminal statuses ([`RunStatus::TERMINAL`]), which a run never leaves. Returns 1 if it changed.
const SET_RUN_STATUS: &str = r"
    local raw = redis.call('GET', KEYS[1])
    if not raw then return 0 end
    local record = cjson.decode(raw)
    local s = record.status
    for i = 5, #ARGV do
      if s == ARGV[i] then return 0 end
    end
    if ARGV[4] ~= '' and s ~= ARGV[4] then return 0 end
    record.status = ARGV[1]
    if ARGV[2] ~= '' then record.error = ARGV[2] end
    redis.call('SET', KEYS[1], cjson.encode(record))
    if ARGV[3] == '1' and redis.call('GET', KEYS[2]) == record.run_id then redis.call('DEL', KEYS[2]) end
    return 1
    ";

/// Whether the Redis at `info`'s address answers `PING` from a client that gives no credentials (a
/// second, short-lived connection with the same address and TLS settings). A server that cannot be
/// reached this way within 5 s counts as not answering.
pub async fn admits_anonymous(info: &redis::ConnectionInfo) -> bool {
    let anonymous = info.clone().set_redis_settings(redis::RedisConnectionInfo::default());
    let Ok(client) = redis::Client::open(anonymous) else { return false };
    let probe = async {
        let mut connection = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut connection).await.ok()
    };
    matches!(tokio::time::timeout(Duration::from_secs(5), probe).await, Ok(Some(_)))
}

/// The Redis store: one multiplexed connection that reconnects by itself, and the client for pub/sub.
/// Its operations are those of [`Store`](super::Store), documented there.
#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    connection: ConnectionManager,
}

impl RedisStore {
    /// Connects to Redis at `url` (`redis://[:password@]host:port[/db]`), checks that it answers and,
    /// by `auth`, that it refuses anonymous clients ([`super::Store::connect_redis`]).
    pub(super) async fn connect(url: &str, auth: super::StoreAuth) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(url)?;
        let mut connection = ConnectionManager::new(client.clone()).await?;
        let _: String = redis::cmd("PING").query_async(&mut connection).await?;
        if admits_anonymous(client.get_connection_info()).await {
            let addr = client.get_connection_info().addr().to_string();
            match auth {
                super::StoreAuth::Required => return Err(StoreError::Unauthenticated { addr }),
                super::StoreAuth::AllowAnonymous => tracing::warn!(
                    %addr,
                    "the run store's Redis answers clients without a password (--allow-unauthenticated-store): anything that reaches it on the network can read every conversation and forge run state"
                ),
            }
        }
        Ok(RedisStore { client, connection })
    }

    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        let _: String = redis::cmd("PING").query_async(&mut self.connection.clone()).await?;
        Ok(())
    }

    pub(super) async fn append_event(
        &self,
        run_id: &str,
        thread_id: &str,
        event: EventKind,
        payload: Value,
    ) -> Result<String, StoreError> {
        let key = keys::run_events(run_id);
        let envelope = Envelope::new(run_id, thread_id, event, payload, jiff::Timestamp::now().to_string());
        let data = serde_json::to_string(&envelope).expect("an envelope serializes");
        let mut connection = self.connection.clone();
        let (seq,): (String,) = redis::pipe()
            .atomic()
            .cmd("XADD")
            .arg(&key)
            .arg("MAXLEN")
            .arg("~")
            .arg(keys::EVENTS_MAX_LEN)
            .arg("*")
            .arg("event")
            .arg(event.as_str())
            .arg("data")
            .arg(data)
            .cmd("EXPIRE")
            .arg(&key)
            .arg(keys::EVENTS_TTL_SECONDS)
            .ignore()
            .query_async(&mut connection)
            .await?;
        Ok(seq)
    }

    pub(super) async fn recent_events(&self, run_id: &str, count: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let key = keys::run_events(run_id);
        let mut connection = self.connection.clone();
        let reply: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
            .arg(&key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(count)
            .query_async(&mut connection)
            .await?;
        let mut events = Self::decode_events(&key, reply)?;
        events.reverse();
        Ok(events)
    }

    pub(super) async fn read_events(
        &self,
        run_id: &str,
        after_seq: &str,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let key = keys::run_events(run_id);
        let mut connection = self.connection.clone();
        let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(&key)
            .arg(format!("({after_seq}"))
            .arg("+")
            .arg("COUNT")
            .arg(limit)
            .query_async(&mut connection)
            .await?;
        Self::decode_events(&key, reply)
    }

    /// The events of a range reply of the stream `key`. Errors: [`StoreError::Corrupt`].
    fn decode_events(key: &str, reply: redis::streams::StreamRangeReply) -> Result<Vec<StoredEvent>, StoreError> {
        reply
            .ids
            .into_iter()
            .map(|entry| {
                let data: String = entry.get("data").unwrap_or_default();
                let envelope = serde_json::from_str(&data)
                    .map_err(|source| StoreError::Corrupt { key: key.to_string(), source })?;
                Ok(StoredEvent { seq: entry.id, envelope })
            })
            .collect()
    }

    pub(super) async fn thread_messages(&self, thread_id: &str) -> Result<Vec<Message>, StoreError> {
        let key = keys::thread_messages(thread_id);
        let mut connection = self.connection.clone();
        let items: Vec<String> = connection.lrange(&key, 0, -1).await?;
        items
            .iter()
            .map(|item| serde_json::from_str(item).map_err(|source| StoreError::Corrupt { key: key.clone(), source }))
            .collect()
    }

    pub(super) async fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
    ) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        let thread_key = keys::thread_messages(thread_id);
        for message in new_messages {
            pipe.rpush(&thread_key, serde_json::to_string(message).expect("a message serializes")).ignore();
        }
        // Bounded, and forgotten when nobody continues the thread.
        pipe.ltrim(&thread_key, -(keys::MAX_THREAD_MESSAGES as isize), -1).ignore();
        pipe.expire(&thread_key, keys::STATE_TTL_SECONDS).ignore();
        let result = serde_json::to_string(result).expect("a result serializes");
        pipe.set_ex(keys::run_result(run_id), result, keys::RESULT_TTL_SECONDS as u64).ignore();
        let mut connection = self.connection.clone();
        pipe.query_async::<()>(&mut connection).await?;
        Ok(())
    }

    pub(super) async fn run_result(&self, run_id: &str) -> Result<Option<RunResult>, StoreError> {
        self.get_json(keys::run_result(run_id)).await
    }

    pub(super) async fn request_cancel(&self, run_id: &str) -> Result<(), StoreError> {
        let key = keys::run_cancel(run_id);
        let mut connection = self.connection.clone();
        redis::pipe()
            .set_ex(&key, "1", keys::CANCEL_TTL_SECONDS as u64)
            .ignore()
            .publish(&key, "cancel")
            .ignore()
            .query_async::<()>(&mut connection)
            .await?;
        Ok(())
    }

    pub(super) async fn hold_run_lease(&self, run_id: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let key = keys::run_lease(run_id);
        let mut connection = self.connection.clone();
        let millis = ttl.as_millis().max(1) as u64;
        let taken: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(holder)
            .arg("NX")
            .arg("PX")
            .arg(millis)
            .query_async(&mut connection)
            .await?;
        if taken.is_some() {
            return Ok(true);
        }
        // Renew only our own lease: compare and extend in one step.
        let renewed: i64 =
            redis::Script::new(RENEW_LEASE).key(&key).arg(holder).arg(millis).invoke_async(&mut connection).await?;
        Ok(renewed == 1)
    }

    pub(super) async fn release_run_lease(&self, run_id: &str, holder: &str) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        redis::Script::new(RELEASE_LEASE)
            .key(keys::run_lease(run_id))
            .arg(holder)
            .invoke_async::<i64>(&mut connection)
            .await?;
        Ok(())
    }

    pub(super) async fn create_run(
        &self,
        record: &RunRecord,
        start_key: Option<&str>,
        limits: RunLimits,
    ) -> Result<Created, StoreError> {
        let mut connection = self.connection.clone();
        let (outcome, run_id): (String, String) = redis::Script::new(CREATE_RUN)
            .key(keys::run_record(&record.run_id))
            .key(keys::thread_active_run(&record.thread_id))
            .key(start_key.map(keys::start).unwrap_or_default())
            .arg(&record.run_id)
            .arg(serde_json::to_string(record).expect("a record serializes"))
            .arg(keys::START_TTL_SECONDS)
            .key(keys::thread_owner(&record.thread_id))
            .arg(&record.uid)
            .key(record.parent.as_ref().map(|p| keys::run_children(&p.run_id)).unwrap_or_default())
            .arg(keys::RESULT_TTL_SECONDS)
            .key(keys::user_active_runs(&record.uid))
            .key(keys::ACTIVE_RUNS)
            .arg(limits.per_user)
            .arg(limits.total)
            .arg(keys::STATE_TTL_SECONDS)
            .arg(RunStatus::TERMINAL.map(RunStatus::as_str).as_slice())
            .invoke_async(&mut connection)
            .await?;
        Ok(match outcome.as_str() {
            "existing" => Created::Existing(run_id),
            "busy" => Created::Busy(run_id),
            "limited" if run_id == "user" => Created::Limited(RunLimit::PerUser),
            "limited" => Created::Limited(RunLimit::Total),
            _ => Created::Started,
        })
    }

    pub(super) async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        let mut connection = self.connection.clone();
        Ok(connection.get(keys::thread_owner(thread_id)).await?)
    }

    pub(super) async fn claim_thread(&self, thread_id: &str, uid: &str) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        let key = keys::thread_owner(thread_id);
        let _: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(uid)
            .arg("NX")
            .arg("EX")
            .arg(keys::STATE_TTL_SECONDS)
            .query_async(&mut connection)
            .await?;
        let owner: Option<String> = connection.get(&key).await?;
        Ok(owner.as_deref() == Some(uid))
    }

    pub(super) async fn run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.get_json(keys::run_record(run_id)).await
    }

    pub(super) async fn end_run(
        &self,
        record: &RunRecord,
        status: RunStatus,
        error: Option<&str>,
        result: &RunResult,
        end: &Envelope,
    ) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        let script = redis::Script::new(END_RUN);
        let mut invocation = script.key(keys::run_record(&record.run_id));
        invocation
            .key(keys::thread_active_run(&record.thread_id))
            .key(keys::run_result(&record.run_id))
            .key(keys::run_events(&record.run_id))
            .arg(status.as_str())
            .arg(error.unwrap_or_default())
            .arg(serde_json::to_string(result).expect("a result serializes"))
            .arg(serde_json::to_string(end).expect("an envelope serializes"))
            .arg(keys::EVENTS_MAX_LEN)
            .arg(keys::EVENTS_TTL_SECONDS)
            .arg(keys::RESULT_TTL_SECONDS);
        for terminal in RunStatus::TERMINAL {
            invocation.arg(terminal.as_str());
        }
        let ended: i64 = invocation.invoke_async(&mut connection).await?;
        Ok(ended == 1)
    }

    pub(super) async fn set_run_status(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        let Some(record) = self.run_record(run_id).await? else { return Ok(false) };
        let mut connection = self.connection.clone();
        let script = redis::Script::new(SET_RUN_STATUS);
        let mut invocation = script.key(keys::run_record(run_id));
        invocation
            .key(keys::thread_active_run(&record.thread_id))
            .arg(status.as_str())
            .arg(error.unwrap_or_default())
            .arg(if status.is_terminal() { "1" } else { "0" })
            // To `running` only from `pending`: a cancel asked for while the run was starting stays asked for.
            .arg(if status == RunStatus::Running { RunStatus::Pending.as_str() } else { "" });
        for terminal in RunStatus::TERMINAL {
            invocation.arg(terminal.as_str());
        }
        let changed: i64 = invocation.invoke_async(&mut connection).await?;
        Ok(changed == 1)
    }

    pub(super) async fn is_cancel_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        Ok(connection.exists(keys::run_cancel(run_id)).await?)
    }

    /// Resolves when a cancel is requested for the run: at once on its pub/sub notice, and by checking the
    /// key every `poll` in case a notice was missed (or, without a pub/sub connection, polling only).
    pub(super) async fn cancelled(&self, run_id: &str, poll: Duration) {
        let mut notices = match self.client.get_async_pubsub().await {
            Ok(mut pubsub) => match pubsub.subscribe(keys::run_cancel(run_id)).await {
                Ok(()) => Some(pubsub),
                Err(err) => {
                    tracing::warn!(error = %err, "cannot subscribe to cancel notices; polling only");
                    None
                }
            },
            Err(err) => {
                tracing::warn!(error = %err, "cannot open a pub/sub connection; polling only");
                None
            }
        };
        let mut messages = notices.as_mut().map(|p| p.on_message());
        loop {
            if self.is_cancel_requested(run_id).await.unwrap_or(false) {
                return;
            }
            let notice = async {
                match &mut messages {
                    Some(messages) => {
                        if messages.next().await.is_none() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = notice => {}
                () = tokio::time::sleep(poll) => {}
            }
        }
    }

    pub(super) async fn children(&self, parent_run_id: &str) -> Result<Vec<String>, StoreError> {
        let mut connection = self.connection.clone();
        Ok(connection.smembers(keys::run_children(parent_run_id)).await?)
    }

    /// The JSON value at `key`, if there is one.
    ///
    /// Errors: [`StoreError::Corrupt`] naming the key when it holds something else.
    async fn get_json<T: serde::de::DeserializeOwned>(&self, key: String) -> Result<Option<T>, StoreError> {
        let mut connection = self.connection.clone();
        let text: Option<String> = connection.get(&key).await?;
        text.map(|t| serde_json::from_str(&t).map_err(|source| StoreError::Corrupt { key, source })).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_create_script_names_records_as_the_keys_module_does() {
        // CREATE_RUN prunes the sets of unfinished runs by reading each member's record, whose key it
        // builds itself: it must be `keys::run_record`.
        assert_eq!(keys::run_record("ID"), "yuxi:run:ID:record");
        assert!(CREATE_RUN.contains("'yuxi:run:' .. id .. ':record'"));
    }
}
