//! Where runs keep their state: the event stream, the thread history, the result and the cancel request
//! (DESIGN.md section 6; key names in [`crate::store::keys`]).
//!
//! Two implementations of one contract: Redis, used in a cluster and by the local mode when it is given
//! one; and an in-process store, the local mode's store without Redis. A third variant, [`socket`], hands
//! a runner subprocess's operations to the in-process store of the local mode that started it.

pub mod keys;
pub mod socket;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use redis::AsyncCommands;
use redis::aio::ConnectionManager;
use serde_json::Value;
use tokio::sync::Notify;

use crate::run::message::Message;
use crate::run::{Created, Envelope, EventKind, RunGrant, RunRecord, RunResult, RunStatus, StoredEvent};
pub use socket::SocketStore;

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis answered with an error or could not be reached.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Stored data could not be read back.
    #[error("stored data for {key} is not valid: {source}")]
    Corrupt {
        /// The key.
        key: String,
        /// The decoding error.
        source: serde_json::Error,
    },
    /// The store socket could not be reached, broke off, or answered with an error.
    #[error("store socket {path}: {message}")]
    Socket {
        /// The socket's path.
        path: PathBuf,
        /// What went wrong, or the error the serving store answered.
        message: String,
    },
    /// The operation is not one the store socket carries (it carries the runner's operations only).
    #[error("the store socket does not carry {operation}: it serves runners only")]
    Unsupported {
        /// The operation, as the method is named.
        operation: &'static str,
    },
}

/// The run state store. Over a socket it carries the runner's operations only; the others answer
/// [`StoreError::Unsupported`] there.
#[derive(Clone)]
pub enum Store {
    /// Redis.
    Redis(RedisStore),
    /// In this process.
    Memory(MemoryStore),
    /// Another process's store, over a Unix socket: a runner subprocess of the local mode.
    Socket(SocketStore),
}

/// The Redis store: one multiplexed connection that reconnects by itself, and the client for pub/sub.
#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    connection: ConnectionManager,
}

/// The in-process store.
#[derive(Clone, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<MemoryState>>,
    cancel_notice: Arc<Notify>,
}

#[derive(Default)]
struct MemoryState {
    events: HashMap<String, Vec<StoredEvent>>,
    last_seq: u64,
    threads: HashMap<String, Vec<Message>>,
    results: HashMap<String, RunResult>,
    cancelled: std::collections::HashSet<String>,
    /// The holder of each run's lease, and when it lapses.
    leases: HashMap<String, (String, Instant)>,
    records: HashMap<String, RunRecord>,
    thread_locks: HashMap<String, String>,
    starts: HashMap<String, String>,
    thread_owners: HashMap<String, String>,
    children: HashMap<String, Vec<String>>,
    grants: HashMap<String, RunGrant>,
}

impl Store {
    /// Connects to Redis at `url` (`redis://[:password@]host:port[/db]`) and checks that it answers.
    pub async fn connect_redis(url: &str) -> Result<Store, StoreError> {
        let client = redis::Client::open(url)?;
        let mut connection = ConnectionManager::new(client.clone()).await?;
        let _: String = redis::cmd("PING").query_async(&mut connection).await?;
        Ok(Store::Redis(RedisStore { client, connection }))
    }

    /// An empty in-process store.
    pub fn memory() -> Store {
        Store::Memory(MemoryStore::default())
    }

    /// Connects to the store served on the Unix socket at `path` (see [`socket`]).
    ///
    /// Errors: [`StoreError::Socket`] when nothing accepts connections there.
    pub async fn connect_socket(path: &Path) -> Result<Store, StoreError> {
        Ok(Store::Socket(SocketStore::connect(path).await?))
    }

    /// Appends an event to the run's stream (refreshing the stream's time to live) and returns its id.
    pub async fn append_event(
        &self,
        run_id: &str,
        thread_id: &str,
        event: EventKind,
        payload: Value,
    ) -> Result<String, StoreError> {
        match self {
            Store::Redis(redis) => {
                let key = keys::run_events(run_id);
                let envelope = Envelope::new(run_id, thread_id, event, payload, jiff::Timestamp::now().to_string());
                let data = serde_json::to_string(&envelope).expect("an envelope serializes");
                let mut connection = redis.connection.clone();
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
            Store::Memory(memory) => {
                let envelope = Envelope::new(run_id, thread_id, event, payload, jiff::Timestamp::now().to_string());
                let mut state = memory.state.lock().expect("store lock");
                state.last_seq += 1;
                let seq = format!("{}-0", state.last_seq);
                state.events.entry(run_id.to_string()).or_default().push(StoredEvent { seq: seq.clone(), envelope });
                Ok(seq)
            }
            // The serving process stamps the envelope.
            Store::Socket(socket) => socket.append_event(run_id, thread_id, event, payload).await,
        }
    }

    /// Up to `limit` events of the run after the cursor `after_seq` (`0-0` for the start), oldest first.
    pub async fn read_events(
        &self,
        run_id: &str,
        after_seq: &str,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        match self {
            Store::Redis(redis) => {
                let key = keys::run_events(run_id);
                let mut connection = redis.connection.clone();
                let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                    .arg(&key)
                    .arg(format!("({after_seq}"))
                    .arg("+")
                    .arg("COUNT")
                    .arg(limit)
                    .query_async(&mut connection)
                    .await?;
                reply
                    .ids
                    .into_iter()
                    .map(|entry| {
                        let data: String = entry.get("data").unwrap_or_default();
                        let envelope = serde_json::from_str(&data)
                            .map_err(|source| StoreError::Corrupt { key: key.clone(), source })?;
                        Ok(StoredEvent { seq: entry.id, envelope })
                    })
                    .collect()
            }
            Store::Memory(memory) => {
                let state = memory.state.lock().expect("store lock");
                let after = seq_number(after_seq);
                Ok(state
                    .events
                    .get(run_id)
                    .map(|events| events.iter().filter(|e| seq_number(&e.seq) > after).take(limit).cloned().collect())
                    .unwrap_or_default())
            }
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "read_events" }),
        }
    }

    /// The thread's messages, oldest first; empty for a new thread.
    pub async fn thread_messages(&self, thread_id: &str) -> Result<Vec<Message>, StoreError> {
        match self {
            Store::Redis(redis) => {
                let key = keys::thread_messages(thread_id);
                let mut connection = redis.connection.clone();
                let items: Vec<String> = connection.lrange(&key, 0, -1).await?;
                items
                    .iter()
                    .map(|item| {
                        serde_json::from_str(item).map_err(|source| StoreError::Corrupt { key: key.clone(), source })
                    })
                    .collect()
            }
            Store::Memory(memory) => {
                Ok(memory.state.lock().expect("store lock").threads.get(thread_id).cloned().unwrap_or_default())
            }
            Store::Socket(socket) => socket.thread_messages(thread_id).await,
        }
    }

    /// Appends the run's new messages to its thread and records its result, in one transaction.
    pub async fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
    ) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut pipe = redis::pipe();
                pipe.atomic();
                let thread_key = keys::thread_messages(thread_id);
                for message in new_messages {
                    pipe.rpush(&thread_key, serde_json::to_string(message).expect("a message serializes")).ignore();
                }
                let result = serde_json::to_string(result).expect("a result serializes");
                pipe.set_ex(keys::run_result(run_id), result, keys::RESULT_TTL_SECONDS as u64).ignore();
                let mut connection = redis.connection.clone();
                pipe.query_async::<()>(&mut connection).await?;
                Ok(())
            }
            Store::Memory(memory) => {
                let mut state = memory.state.lock().expect("store lock");
                state.threads.entry(thread_id.to_string()).or_default().extend(new_messages.iter().cloned());
                state.results.insert(run_id.to_string(), result.clone());
                Ok(())
            }
            Store::Socket(socket) => socket.finish_run(run_id, thread_id, new_messages, result).await,
        }
    }

    /// The run's result, once it has finished.
    pub async fn run_result(&self, run_id: &str) -> Result<Option<RunResult>, StoreError> {
        match self {
            Store::Redis(redis) => {
                let key = keys::run_result(run_id);
                let mut connection = redis.connection.clone();
                let text: Option<String> = connection.get(&key).await?;
                text.map(|t| serde_json::from_str(&t).map_err(|source| StoreError::Corrupt { key, source })).transpose()
            }
            Store::Memory(memory) => Ok(memory.state.lock().expect("store lock").results.get(run_id).cloned()),
            Store::Socket(socket) => socket.run_result(run_id).await,
        }
    }

    /// Asks the run to stop: sets its cancel key and announces it on the cancel channel.
    pub async fn request_cancel(&self, run_id: &str) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => {
                let key = keys::run_cancel(run_id);
                let mut connection = redis.connection.clone();
                redis::pipe()
                    .set_ex(&key, "1", keys::CANCEL_TTL_SECONDS as u64)
                    .ignore()
                    .publish(&key, "cancel")
                    .ignore()
                    .query_async::<()>(&mut connection)
                    .await?;
                Ok(())
            }
            Store::Memory(memory) => {
                memory.state.lock().expect("store lock").cancelled.insert(run_id.to_string());
                memory.cancel_notice.notify_waiters();
                Ok(())
            }
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "request_cancel" }),
        }
    }

    /// Takes the run's runner lease for `holder` for `ttl`, or renews it when `holder` has it. Returns
    /// whether `holder` holds it now.
    pub async fn hold_run_lease(&self, run_id: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => {
                let key = keys::run_lease(run_id);
                let mut connection = redis.connection.clone();
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
                let renewed: i64 = redis::Script::new(
                    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end",
                )
                .key(&key)
                .arg(holder)
                .arg(millis)
                .invoke_async(&mut connection)
                .await?;
                Ok(renewed == 1)
            }
            Store::Memory(memory) => {
                let mut state = memory.state.lock().expect("store lock");
                let now = Instant::now();
                // As in Redis: taken when free or lapsed, renewed by its holder, refused to anyone else.
                if state.leases.get(run_id).is_some_and(|(current, until)| current != holder && *until > now) {
                    return Ok(false);
                }
                state.leases.insert(run_id.to_string(), (holder.to_string(), now + ttl.max(Duration::from_millis(1))));
                Ok(true)
            }
            Store::Socket(socket) => socket.hold_run_lease(run_id, holder, ttl).await,
        }
    }

    /// Gives up the run's runner lease if `holder` has it.
    pub async fn release_run_lease(&self, run_id: &str, holder: &str) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                redis::Script::new(
                    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
                )
                .key(keys::run_lease(run_id))
                .arg(holder)
                .invoke_async::<i64>(&mut connection)
                .await?;
                Ok(())
            }
            Store::Memory(memory) => {
                let mut state = memory.state.lock().expect("store lock");
                if state.leases.get(run_id).is_some_and(|(current, _)| current == holder) {
                    state.leases.remove(run_id);
                }
                Ok(())
            }
            Store::Socket(socket) => socket.release_run_lease(run_id, holder).await,
        }
    }

    /// Records a new run, atomically: when `start_key` already started a run, that run is `Existing`; when
    /// the record's thread has a non-terminal run, it is `Busy`; otherwise the record is stored, takes the
    /// thread's lock, and remembers `start_key`.
    pub async fn create_run(&self, record: &RunRecord, start_key: Option<&str>) -> Result<Created, StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                let (outcome, run_id): (String, String) = redis::Script::new(
                    r"
                    if KEYS[3] ~= '' then
                      local existing = redis.call('GET', KEYS[3])
                      if existing then return {'existing', existing} end
                    end
                    local active = redis.call('GET', KEYS[2])
                    if active then return {'busy', active} end
                    redis.call('SET', KEYS[1], ARGV[2])
                    redis.call('SET', KEYS[2], ARGV[1])
                    redis.call('SET', KEYS[4], ARGV[4], 'NX')
                    if KEYS[3] ~= '' then redis.call('SET', KEYS[3], ARGV[1], 'EX', ARGV[3]) end
                    if KEYS[5] ~= '' then
                      redis.call('SADD', KEYS[5], ARGV[1])
                      redis.call('EXPIRE', KEYS[5], ARGV[5])
                    end
                    return {'started', ARGV[1]}
                    ",
                )
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
                .invoke_async(&mut connection)
                .await?;
                Ok(match outcome.as_str() {
                    "existing" => Created::Existing(run_id),
                    "busy" => Created::Busy(run_id),
                    _ => Created::Started,
                })
            }
            Store::Memory(memory) => {
                let mut state = memory.state.lock().expect("store lock");
                if let Some(existing) = start_key.and_then(|k| state.starts.get(k)) {
                    return Ok(Created::Existing(existing.clone()));
                }
                if let Some(active) = state.thread_locks.get(&record.thread_id) {
                    return Ok(Created::Busy(active.clone()));
                }
                state.records.insert(record.run_id.clone(), record.clone());
                state.thread_locks.insert(record.thread_id.clone(), record.run_id.clone());
                state.thread_owners.entry(record.thread_id.clone()).or_insert_with(|| record.uid.clone());
                if let Some(key) = start_key {
                    state.starts.insert(key.to_string(), record.run_id.clone());
                }
                if let Some(parent) = &record.parent {
                    state.children.entry(parent.run_id.clone()).or_default().push(record.run_id.clone());
                }
                Ok(Created::Started)
            }
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "create_run" }),
        }
    }

    /// The user whose runs use the thread.
    pub async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                Ok(connection.get(keys::thread_owner(thread_id)).await?)
            }
            Store::Memory(memory) => Ok(memory.state.lock().expect("store lock").thread_owners.get(thread_id).cloned()),
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "thread_owner" }),
        }
    }

    /// Makes `uid` the owner of `thread_id` unless somebody owns it already; returns whether `uid` owns it
    /// now. One atomic step, so two users racing for a new thread cannot both win.
    pub async fn claim_thread(&self, thread_id: &str, uid: &str) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                let key = keys::thread_owner(thread_id);
                let _: Option<String> =
                    redis::cmd("SET").arg(&key).arg(uid).arg("NX").query_async(&mut connection).await?;
                let owner: Option<String> = connection.get(&key).await?;
                Ok(owner.as_deref() == Some(uid))
            }
            Store::Memory(memory) => {
                let mut state = memory.state.lock().expect("store lock");
                Ok(state.thread_owners.entry(thread_id.to_string()).or_insert_with(|| uid.to_string()) == uid)
            }
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "claim_thread" }),
        }
    }

    /// The run's record.
    pub async fn run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        match self {
            Store::Redis(redis) => {
                let key = keys::run_record(run_id);
                let mut connection = redis.connection.clone();
                let text: Option<String> = connection.get(&key).await?;
                text.map(|t| serde_json::from_str(&t).map_err(|source| StoreError::Corrupt { key, source })).transpose()
            }
            Store::Memory(memory) => Ok(memory.state.lock().expect("store lock").records.get(run_id).cloned()),
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "run_record" }),
        }
    }

    /// Moves the run to `status`, with `error` when given: never out of a terminal status, and to
    /// `running` only from `pending` (a cancel asked for while the run was starting stays asked for). A
    /// terminal status releases the thread's lock. Returns whether the record changed.
    pub async fn set_run_status(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => {
                let Some(record) = self.run_record(run_id).await? else { return Ok(false) };
                let mut connection = redis.connection.clone();
                let changed: i64 = redis::Script::new(
                    r"
                    local raw = redis.call('GET', KEYS[1])
                    if not raw then return 0 end
                    local record = cjson.decode(raw)
                    local s = record.status
                    if s == 'completed' or s == 'failed' or s == 'cancelled' or s == 'interrupted' then return 0 end
                    if ARGV[1] == 'running' and s ~= 'pending' then return 0 end
                    record.status = ARGV[1]
                    if ARGV[2] ~= '' then record.error = ARGV[2] end
                    redis.call('SET', KEYS[1], cjson.encode(record))
                    if ARGV[3] == '1' and redis.call('GET', KEYS[2]) == record.run_id then redis.call('DEL', KEYS[2]) end
                    return 1
                    ",
                )
                .key(keys::run_record(run_id))
                .key(keys::thread_active_run(&record.thread_id))
                .arg(status.as_str())
                .arg(error.unwrap_or_default())
                .arg(if status.is_terminal() { "1" } else { "0" })
                .invoke_async(&mut connection)
                .await?;
                Ok(changed == 1)
            }
            Store::Memory(memory) => {
                let mut state = memory.state.lock().expect("store lock");
                let Some(record) = state.records.get_mut(run_id) else { return Ok(false) };
                if record.status.is_terminal() || (status == RunStatus::Running && record.status != RunStatus::Pending)
                {
                    return Ok(false);
                }
                record.status = status;
                if let Some(error) = error {
                    record.error = Some(error.to_string());
                }
                let thread = record.thread_id.clone();
                if status.is_terminal() && state.thread_locks.get(&thread).is_some_and(|r| r == run_id) {
                    state.thread_locks.remove(&thread);
                }
                Ok(true)
            }
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "set_run_status" }),
        }
    }

    /// Cancels a run that has not ended: a run that has not started ends `cancelled` at once, a running
    /// one goes `cancel_requested` and its runner is told to stop (Yuxi's cancel). Returns the record as it
    /// is afterwards; `None` for an unknown run.
    pub async fn cancel_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let Some(record) = self.run_record(run_id).await? else { return Ok(None) };
        if !record.status.is_terminal() {
            self.request_cancel(run_id).await?;
            let next =
                if record.status == RunStatus::Pending { RunStatus::Cancelled } else { RunStatus::CancelRequested };
            self.set_run_status(run_id, next, None).await?;
        }
        Ok(self.run_record(run_id).await?.or(Some(record)))
    }

    /// Whether a cancel was requested for the run.
    pub async fn is_cancel_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                Ok(connection.exists(keys::run_cancel(run_id)).await?)
            }
            Store::Memory(memory) => Ok(memory.state.lock().expect("store lock").cancelled.contains(run_id)),
            Store::Socket(socket) => socket.is_cancel_requested(run_id).await,
        }
    }

    /// Resolves when a cancel is requested for the run: at once on the pub/sub notice (Redis) or the
    /// in-process notice, and by checking the key every `poll` in case a notice was missed (or there is
    /// none: over the store socket, polling is all there is).
    pub async fn cancelled(&self, run_id: &str, poll: Duration) {
        let mut notices = match self {
            Store::Redis(redis) => match redis.client.get_async_pubsub().await {
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
            },
            Store::Memory(_) | Store::Socket(_) => None,
        };
        let mut messages = notices.as_mut().map(|p| p.on_message());
        loop {
            if self.is_cancel_requested(run_id).await.unwrap_or(false) {
                return;
            }
            let notice = async {
                match (&mut messages, self) {
                    (Some(messages), _) => {
                        if messages.next().await.is_none() {
                            std::future::pending::<()>().await;
                        }
                    }
                    (None, Store::Memory(memory)) => memory.cancel_notice.notified().await,
                    (None, Store::Redis(_) | Store::Socket(_)) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = notice => {}
                () = tokio::time::sleep(poll) => {}
            }
        }
    }
}

fn seq_number(seq: &str) -> u64 {
    seq.split('-').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

impl Store {
    /// Checks that the store answers (Redis `PING`); the in-process store always does.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => {
                let _: String = redis::cmd("PING").query_async(&mut redis.connection.clone()).await?;
                Ok(())
            }
            Store::Memory(_) => Ok(()),
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "ping" }),
        }
    }
}

/// Parents and credentials: what the facade keeps for the runs it starts (not carried by the store
/// socket, which serves runners).
impl Store {
    /// The runs `parent_run_id` started, in no particular order.
    pub async fn children(&self, parent_run_id: &str) -> Result<Vec<String>, StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                Ok(connection.smembers(keys::run_children(parent_run_id)).await?)
            }
            Store::Memory(memory) => {
                Ok(memory.state.lock().expect("store lock").children.get(parent_run_id).cloned().unwrap_or_default())
            }
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "children" }),
        }
    }

    /// Cancels every unfinished run `parent_run_id` started (see [`Store::cancel_run`]); returns how many
    /// were unfinished.
    pub async fn cancel_children(&self, parent_run_id: &str) -> Result<usize, StoreError> {
        let mut cancelled = 0;
        for child in self.children(parent_run_id).await? {
            if let Some(record) = self.run_record(&child).await?
                && !record.status.is_terminal()
            {
                self.cancel_run(&child).await?;
                cancelled += 1;
            }
        }
        Ok(cancelled)
    }

    /// Keeps `grant` under the digest of the run's token, for at most a day.
    pub async fn save_grant(&self, token_digest: &str, grant: &RunGrant) -> Result<(), StoreError> {
        let text = serde_json::to_string(grant)
            .map_err(|source| StoreError::Corrupt { key: keys::run_grant(token_digest), source })?;
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                let () = connection.set_ex(keys::run_grant(token_digest), text, keys::GRANT_TTL_SECONDS as u64).await?;
                Ok(())
            }
            Store::Memory(memory) => {
                memory.state.lock().expect("store lock").grants.insert(token_digest.to_string(), grant.clone());
                Ok(())
            }
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "save_grant" }),
        }
    }

    /// The grant of a token digest, while it lives.
    pub async fn grant(&self, token_digest: &str) -> Result<Option<RunGrant>, StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                let key = keys::run_grant(token_digest);
                let text: Option<String> = connection.get(&key).await?;
                text.map(|t| serde_json::from_str(&t).map_err(|source| StoreError::Corrupt { key, source })).transpose()
            }
            Store::Memory(memory) => Ok(memory.state.lock().expect("store lock").grants.get(token_digest).cloned()),
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "grant" }),
        }
    }

    /// Drops the grants of a run (when it ends, its credentials stop working).
    pub async fn drop_grant(&self, token_digest: &str) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => {
                let mut connection = redis.connection.clone();
                let () = connection.del(keys::run_grant(token_digest)).await?;
                Ok(())
            }
            Store::Memory(memory) => {
                memory.state.lock().expect("store lock").grants.remove(token_digest);
                Ok(())
            }
            Store::Socket(_) => Err(StoreError::Unsupported { operation: "drop_grant" }),
        }
    }
}
