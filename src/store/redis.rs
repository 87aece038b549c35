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

/// The Lua helpers every run script shares: `terminal(status)`, against the comma-framed list of
/// terminal statuses in `ARGV[T]` (`,completed,failed,cancelled,interrupted,`), and `ended(run_id)`, true
/// for a run whose record is terminal or gone. `T` is replaced by each script's own index.
const LUA_HELPERS: &str = r"
    local function terminal(s) return string.find(ARGV[T], ',' .. tostring(s) .. ',', 1, true) ~= nil end
    local function ended(id)
      local raw = redis.call('GET', 'yuxi:run:' .. id .. ':record')
      if not raw then return true end
      return terminal(cjson.decode(raw).status)
    end
    local function notice(key, suffix)
      redis.call('PUBLISH', (string.gsub(key, suffix .. '$', ':notice')), '1')
    end
    local function forget_active(record)
      redis.call('SREM', 'yuxi:user:' .. record.uid .. ':active_runs', record.run_id)
      redis.call('SREM', 'yuxi:active_runs', record.run_id)
    end
    ";

/// Appends one event to a run's stream, unless the run has its result (and so its `end`, written in the
/// same step): nothing follows `end`, even from a runner that has not yet seen its run ended elsewhere.
/// `KEYS`: the stream, the result. `ARGV`: the stream's approximate maximum length, the event, its data,
/// the stream's time to live, the run's notice channel. Returns the event's id, or `false` when the run
/// has ended.
const APPEND_EVENT: &str = r"
    if redis.call('EXISTS', KEYS[2]) == 1 then return false end
    local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'event', ARGV[2], 'data', ARGV[3])
    redis.call('EXPIRE', KEYS[1], ARGV[4])
    redis.call('PUBLISH', ARGV[5], '1')
    return id
    ";

/// Creates a run. `KEYS`: the record, the thread's lock, the start key (`''` for none), the thread's
/// owner, the parent's children (`''` for none), the user's unfinished runs, everyone's unfinished runs,
/// the run's keeper. `ARGV`: the run id, the record's JSON, the start key's time to live, the uid, the
/// children's time to live, the per-user and total limits of unfinished runs, the state's time to live,
/// the terminal statuses (see [`LUA_HELPERS`]), the keeper's time to live. Returns `{outcome, run_id}`;
/// `{'limited', 'user' | 'total'}` when a limit is reached. A thread lock whose run has ended (or is
/// gone) is stale and taken over. A set of unfinished runs is pruned of ended and vanished runs only when
/// it has reached its limit, so a run that ended however it ended stops counting and a create stays
/// O(1) below the limit.
const CREATE_RUN: &str = r"
    if KEYS[3] ~= '' then
      local existing = redis.call('GET', KEYS[3])
      if existing then return {'existing', existing} end
    end
    local active = redis.call('GET', KEYS[2])
    if active then
      if ended(active) then redis.call('DEL', KEYS[2]) else return {'busy', active} end
    end
    local function full(set, limit)
      if redis.call('SCARD', set) < limit then return false end
      local n = 0
      for _, id in ipairs(redis.call('SMEMBERS', set)) do
        if ended(id) then redis.call('SREM', set, id) else n = n + 1 end
      end
      return n >= limit
    end
    if full(KEYS[6], tonumber(ARGV[6])) then return {'limited', 'user'} end
    if full(KEYS[7], tonumber(ARGV[7])) then return {'limited', 'total'} end
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
    redis.call('SET', KEYS[8], 'created', 'EX', ARGV[10])
    return {'started', ARGV[1]}
    ";

/// Ends a run that has not ended, in one step: its record's status and error, its thread's lock
/// released, its result (unless the runner wrote one), one `end` event on its stream, its keeper gone,
/// and it no longer counted as unfinished. `KEYS`: the record, the thread's lock, the result, the event
/// stream, the runner's lease, the keeper. `ARGV`: the status, the error (`''` for none), the result's
/// JSON, the `end` envelope's JSON, the stream's length bound, its time to live, the result's time to
/// live, the terminal statuses, and `'1'` to end it only if it is abandoned (neither a lease nor a keeper
/// exists). Returns 1 if it ended the run, 0 if it had ended already (or is not abandoned).
const END_RUN: &str = r"
    local raw = redis.call('GET', KEYS[1])
    if not raw then return 0 end
    local record = cjson.decode(raw)
    if terminal(record.status) then return 0 end
    if ARGV[9] == '1' and (redis.call('EXISTS', KEYS[5]) == 1 or redis.call('EXISTS', KEYS[6]) == 1) then
      return 0
    end
    record.status = ARGV[1]
    record.waiting = nil
    if ARGV[2] ~= '' then record.error = ARGV[2] end
    redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
    if redis.call('GET', KEYS[2]) == record.run_id then redis.call('DEL', KEYS[2]) end
    redis.call('SET', KEYS[3], ARGV[3], 'NX', 'EX', ARGV[7])
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[5], '*', 'event', 'end', 'data', ARGV[4])
    redis.call('EXPIRE', KEYS[4], ARGV[6])
    redis.call('DEL', KEYS[6])
    forget_active(record)
    notice(KEYS[4], ':events')
    return 1
    ";

/// The runner's end of its run, in one step: the new messages appended to the thread (bounded, with its
/// time to live), the result, an `error` event (when failed), the `end` event, the record's terminal
/// status with its thread's lock released, the keeper gone. `KEYS`: the record, the thread's lock, the
/// result, the event stream, the thread's messages, the keeper. `ARGV`: the status, the error (`''`),
/// the result's JSON, the `error` envelope's JSON (`''` for none), the `end` envelope's JSON, the
/// stream's length bound, its time to live, the result's time to live, the most messages a thread
/// keeps, the state's time to live, the terminal statuses, then the new messages' JSON. Returns 1 if it
/// ended the run; 0, writing nothing, if the run had ended already (a sweeper or a cancel ended it, or a
/// run without a record has a result).
const FINISH_RUN: &str = r"
    local raw = redis.call('GET', KEYS[1])
    if raw then
      local record = cjson.decode(raw)
      if terminal(record.status) then return 0 end
      record.status = ARGV[1]
      if ARGV[2] ~= '' then record.error = ARGV[2] end
      redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
      if redis.call('GET', KEYS[2]) == record.run_id then redis.call('DEL', KEYS[2]) end
      forget_active(record)
    elseif redis.call('EXISTS', KEYS[3]) == 1 then
      return 0
    end
    for i = 12, #ARGV do redis.call('RPUSH', KEYS[5], ARGV[i]) end
    redis.call('LTRIM', KEYS[5], -tonumber(ARGV[9]), -1)
    redis.call('EXPIRE', KEYS[5], ARGV[10])
    redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[8])
    if ARGV[4] ~= '' then
      redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'event', 'error', 'data', ARGV[4])
    end
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'event', 'end', 'data', ARGV[5])
    redis.call('EXPIRE', KEYS[4], ARGV[7])
    redis.call('DEL', KEYS[6])
    notice(KEYS[4], ':events')
    return 1
    ";

/// `body` with [`LUA_HELPERS`] before it, reading the terminal statuses from `ARGV[terminal_at]`.
fn script(body: &str, terminal_at: usize) -> redis::Script {
    redis::Script::new(&format!("{}{body}", LUA_HELPERS.replace("ARGV[T]", &format!("ARGV[{terminal_at}]"))))
}

static APPEND_EVENT_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(APPEND_EVENT));
static CREATE_RUN_SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| script(CREATE_RUN, 9));
static END_RUN_SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| script(END_RUN, 8));
static FINISH_RUN_SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| script(FINISH_RUN, 11));

/// The terminal statuses as [`LUA_HELPERS`] reads them: `,completed,failed,cancelled,interrupted,`.
fn terminal_list() -> String {
    let mut list = String::from(",");
    for status in RunStatus::TERMINAL {
        list.push_str(status.as_str());
        list.push(',');
    }
    list
}

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
    redis.call('PUBLISH', (string.gsub(KEYS[1], ':record$', ':notice')), '1')
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

/// How long opening a connection to Redis may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long one command may wait for its answer. A burst makes the scripts of many runs queue behind
/// each other on a busy machine, so this is well above a command's usual time (Redis's client would give
/// up after 500 ms), and still short enough that a hung Redis is noticed in seconds.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a lost connection is tried again before a command fails: with [`CONNECT_TIMEOUT`], a call
/// to a Redis that is down fails within about a second.
const RECONNECT_TRIES: usize = 1;
/// How many commands may queue on the multiplexed connection (the client's default is 50): a burst of
/// starts and the runs' event writes share it.
const PIPELINE_BUFFER: usize = 1024;

/// Whether a failed command may be sent again: the connection broke, was refused or timed out. A
/// command Redis refused (a script error, a wrong type) is not.
fn transient(err: &StoreError) -> bool {
    matches!(err, StoreError::Redis(e) if e.is_io_error() || e.is_connection_refusal() || e.is_timeout() || e.is_connection_dropped())
}

/// Runs the idempotent store operation `op`, again after a transient failure ([`transient`]), twice at
/// most, 50 to 250 ms apart with jitter (a blip of the connection is not an error).
async fn idempotent<T, Fut>(op: impl FnMut() -> Fut) -> Result<T, StoreError>
where
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    use backon::Retryable;
    let backoff = backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(50))
        .with_max_delay(Duration::from_millis(250))
        .with_max_times(2)
        .with_jitter();
    op.retry(backoff).when(transient).await
}

/// Subscribes to every run's notice channel ([`keys::RUN_NOTICE_PATTERN`]) on a connection of its own,
/// and wakes the watches of each run a message names. A subscription that breaks is made again with
/// backoff (100 ms to 5 s); every watch is woken then, as notices may have been missed meanwhile.
async fn serve_notices(client: redis::Client, notices: super::notices::Notices) {
    let mut delay = Duration::from_millis(100);
    loop {
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => match pubsub.psubscribe(keys::RUN_NOTICE_PATTERN).await {
                Ok(()) => {
                    delay = Duration::from_millis(100);
                    notices.wake_all();
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        if let Some(run_id) = keys::run_of_notice(message.get_channel_name()) {
                            notices.wake(run_id);
                        }
                    }
                    tracing::warn!("the subscription to run notices broke; subscribing again");
                }
                Err(err) => tracing::warn!(error = %err, "cannot subscribe to run notices"),
            },
            Err(err) => tracing::debug!(error = %err, "cannot open a connection for run notices"),
        }
        notices.wake_all();
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// The Redis store: one multiplexed connection that reconnects by itself, and the client for pub/sub.
/// Its operations are those of [`Store`](super::Store), documented there.
#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    connection: ConnectionManager,
    notices: super::notices::Notices,
    /// The subscription that turns notice messages into wake-ups, started by the first watch.
    hub: std::sync::Arc<std::sync::OnceLock<()>>,
    /// Whose notices this process listens to.
    listens: Listens,
    /// The status views of runs that have ended, by run and number of recent events: a run that has
    /// ended changes no more, so its status is read from Redis once, not at every poll of a parent.
    /// Bounded by [`ENDED_VIEWS`] and [`ENDED_VIEW_TTL`] (the longest a view outlives its run's keys).
    ended_views: std::sync::Arc<moka::sync::Cache<(String, usize), super::RunView>>,
}

/// The most status views of ended runs a process keeps.
const ENDED_VIEWS: u64 = 10_000;
/// How long a status view of an ended run is kept.
const ENDED_VIEW_TTL: Duration = Duration::from_secs(10);

/// Whose notices a process's store listens to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listens {
    /// Every run's, through one pattern subscription (the facade, the local mode, the controller).
    AllRuns,
    /// Only the cancels of the runs it waits on, each through a subscription to that run's cancel
    /// channel alone (a runner process, which has one run: it is not sent every other run's traffic).
    OwnCancels,
}

impl RedisStore {
    /// Connects to Redis at `url` (`redis://[:password@]host:port[/db]`), checks that it answers and,
    /// by `auth`, that it refuses anonymous clients ([`super::Store::connect_redis`]).
    pub(super) async fn connect(url: &str, auth: super::StoreAuth, listens: Listens) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(url)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(RECONNECT_TRIES)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(300))
            .set_pipeline_buffer_size(PIPELINE_BUFFER);
        // The probe for anonymous access runs beside the connection's own start.
        let (connection, anonymous) = tokio::join!(
            ConnectionManager::new_with_config(client.clone(), config),
            admits_anonymous(client.get_connection_info())
        );
        let mut connection = connection?;
        let _: String = redis::cmd("PING").query_async(&mut connection).await?;
        if anonymous {
            let addr = client.get_connection_info().addr().to_string();
            match auth {
                super::StoreAuth::Required => return Err(StoreError::Unauthenticated { addr }),
                super::StoreAuth::AllowAnonymous => tracing::warn!(
                    %addr,
                    "the run store's Redis answers clients without a password (--allow-unauthenticated-store): anything that reaches it on the network can read every conversation and forge run state"
                ),
            }
        }
        Ok(RedisStore {
            client,
            connection,
            notices: Default::default(),
            hub: Default::default(),
            listens,
            ended_views: std::sync::Arc::new(
                moka::sync::Cache::builder().max_capacity(ENDED_VIEWS).time_to_live(ENDED_VIEW_TTL).build(),
            ),
        })
    }

    /// A watch of the run, woken by its notices ([`super::notices`]); the first watch of this store
    /// starts its one pattern subscription.
    pub(super) fn watch(&self, run_id: &str) -> super::notices::RunWatch {
        self.hub.get_or_init(|| {
            tokio::spawn(serve_notices(self.client.clone(), self.notices.clone()));
        });
        self.notices.watch(run_id)
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
        let envelope = Envelope::new(run_id, thread_id, event, payload, jiff::Timestamp::now().to_string());
        let data = serde_json::to_string(&envelope).expect("an envelope serializes");
        let mut connection = self.connection.clone();
        let seq: Option<String> = APPEND_EVENT_SCRIPT
            .key(keys::run_events(run_id))
            .key(keys::run_result(run_id))
            .arg(keys::EVENTS_MAX_LEN)
            .arg(event.as_str())
            .arg(data)
            .arg(keys::EVENTS_TTL_SECONDS)
            .arg(keys::run_notice(run_id))
            .invoke_async(&mut connection)
            .await?;
        seq.ok_or_else(|| StoreError::RunEnded { run_id: run_id.to_string() })
    }

    pub(super) async fn recent_events(&self, run_id: &str, count: usize) -> Result<Vec<StoredEvent>, StoreError> {
        let key = keys::run_events(run_id);
        let reply: redis::streams::StreamRangeReply =
            self.read(redis::cmd("XREVRANGE").arg(&key).arg("+").arg("-").arg("COUNT").arg(count)).await?;
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
        let reply: redis::streams::StreamRangeReply = self
            .read(redis::cmd("XRANGE").arg(&key).arg(format!("({after_seq}")).arg("+").arg("COUNT").arg(limit))
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
        let items: Vec<String> = self.read(redis::cmd("LRANGE").arg(&key).arg(0).arg(-1)).await?;
        items
            .iter()
            .map(|item| serde_json::from_str(item).map_err(|source| StoreError::Corrupt { key: key.clone(), source }))
            .collect()
    }

    pub(super) async fn run_result(&self, run_id: &str) -> Result<Option<RunResult>, StoreError> {
        self.get_json(keys::run_result(run_id)).await
    }

    pub(super) async fn request_steer(&self, run_id: &str) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.set_ex(keys::run_steer(run_id), "1", keys::CANCEL_TTL_SECONDS as u64)
            .ignore()
            .publish(keys::run_notice(run_id), "1")
            .ignore();
        self.write(&pipe).await
    }

    pub(super) async fn request_cancel(&self, run_id: &str) -> Result<(), StoreError> {
        let key = keys::run_cancel(run_id);
        let mut connection = self.connection.clone();
        redis::pipe()
            .set_ex(&key, "1", keys::CANCEL_TTL_SECONDS as u64)
            .ignore()
            .publish(&key, "cancel")
            .ignore()
            .publish(keys::run_notice(run_id), "1")
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
        let (outcome, run_id): (String, String) = CREATE_RUN_SCRIPT
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
            .arg(terminal_list())
            .key(keys::run_keeper(&record.run_id))
            .arg(keys::START_GRACE_SECONDS)
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
        self.read(redis::cmd("GET").arg(keys::thread_owner(thread_id))).await
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

    pub(super) async fn run_view(&self, run_id: &str, recent: usize) -> Result<Option<super::RunView>, StoreError> {
        let cached = (run_id.to_string(), recent);
        if let Some(view) = self.ended_views.get(&cached) {
            return Ok(Some(view));
        }
        let (record_key, result_key, events_key) =
            (keys::run_record(run_id), keys::run_result(run_id), keys::run_events(run_id));
        let mut pipe = redis::pipe();
        pipe.get(&record_key)
            .get(&result_key)
            .cmd("XREVRANGE")
            .arg(&events_key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(recent);
        let pipe = &pipe;
        let (record, result, events): (Option<String>, Option<String>, redis::streams::StreamRangeReply) =
            idempotent(|| {
                let mut connection = self.connection.clone();
                async move { Ok(pipe.query_async(&mut connection).await?) }
            })
            .await?;
        fn decode<T: serde::de::DeserializeOwned>(key: &str, text: Option<String>) -> Result<Option<T>, StoreError> {
            text.map(|t| {
                serde_json::from_str(&t).map_err(|source| StoreError::Corrupt { key: key.to_string(), source })
            })
            .transpose()
        }
        let Some(record) = decode(&record_key, record)? else { return Ok(None) };
        let result = decode(&result_key, result)?;
        let mut recent = Self::decode_events(&events_key, events)?;
        recent.reverse();
        let view = super::RunView { record, result, recent };
        // Only a view with its result and its `end` is whole: a run's end writes them in the same step.
        if view.record.status.is_terminal()
            && view.result.is_some()
            && view.recent.last().is_some_and(|e| e.envelope.event == crate::run::EventKind::End)
        {
            self.ended_views.insert(cached, view.clone());
        }
        Ok(Some(view))
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
        only_if_abandoned: bool,
    ) -> Result<bool, StoreError> {
        let mut invocation = END_RUN_SCRIPT.key(keys::run_record(&record.run_id));
        invocation
            .key(keys::thread_active_run(&record.thread_id))
            .key(keys::run_result(&record.run_id))
            .key(keys::run_events(&record.run_id))
            .key(keys::run_lease(&record.run_id))
            .key(keys::run_keeper(&record.run_id))
            .arg(status.as_str())
            .arg(error.unwrap_or_default())
            .arg(serde_json::to_string(result).expect("a result serializes"))
            .arg(serde_json::to_string(end).expect("an envelope serializes"))
            .arg(keys::EVENTS_MAX_LEN)
            .arg(keys::EVENTS_TTL_SECONDS)
            .arg(keys::RESULT_TTL_SECONDS)
            .arg(terminal_list())
            .arg(if only_if_abandoned { "1" } else { "0" });
        self.ends(&invocation).await
    }

    /// Ends the run as its runner reports it, in one step ([`FINISH_RUN`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
        record_status: RunStatus,
        error_event: Option<&Envelope>,
        end: &Envelope,
    ) -> Result<bool, StoreError> {
        let mut invocation = FINISH_RUN_SCRIPT.key(keys::run_record(run_id));
        invocation
            .key(keys::thread_active_run(thread_id))
            .key(keys::run_result(run_id))
            .key(keys::run_events(run_id))
            .key(keys::thread_messages(thread_id))
            .key(keys::run_keeper(run_id))
            .arg(record_status.as_str())
            .arg(result.error.as_deref().unwrap_or_default())
            .arg(serde_json::to_string(result).expect("a result serializes"))
            .arg(error_event.map(|e| serde_json::to_string(e).expect("an envelope serializes")).unwrap_or_default())
            .arg(serde_json::to_string(end).expect("an envelope serializes"))
            .arg(keys::EVENTS_MAX_LEN)
            .arg(keys::EVENTS_TTL_SECONDS)
            .arg(keys::RESULT_TTL_SECONDS)
            .arg(keys::MAX_THREAD_MESSAGES)
            .arg(keys::STATE_TTL_SECONDS)
            .arg(terminal_list());
        for message in new_messages {
            invocation.arg(serde_json::to_string(message).expect("a message serializes"));
        }
        self.ends(&invocation).await
    }

    /// Runs one of the end scripts, which answer 1 when they ended the run. Sent again after a transient
    /// failure ([`idempotent`]): a second try after a lost answer finds the run ended and writes nothing.
    async fn ends(&self, invocation: &redis::ScriptInvocation<'_>) -> Result<bool, StoreError> {
        let ended: i64 = idempotent(|| {
            let mut connection = self.connection.clone();
            async move { Ok(invocation.invoke_async(&mut connection).await?) }
        })
        .await?;
        Ok(ended == 1)
    }

    pub(super) async fn keep_run(&self, run_id: &str, holder: &str, ttl: Duration) -> Result<(), StoreError> {
        let millis = ttl.as_millis().max(1) as u64;
        idempotent(|| {
            let mut connection = self.connection.clone();
            async move {
                let () = connection.pset_ex(keys::run_keeper(run_id), holder, millis).await?;
                Ok(())
            }
        })
        .await
    }

    pub(super) async fn unfinished_runs(&self) -> Result<Vec<String>, StoreError> {
        idempotent(|| {
            let mut connection = self.connection.clone();
            async move { Ok(connection.smembers(keys::ACTIVE_RUNS).await?) }
        })
        .await
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
        self.read(redis::cmd("EXISTS").arg(keys::run_cancel(run_id))).await
    }

    /// Resolves when a cancel is requested for the run: at once on its notice (through this store's one
    /// subscription, see [`RedisStore::watch`]), and by checking the key every `poll` in case a notice
    /// was missed.
    pub(super) async fn cancelled(&self, run_id: &str, poll: Duration) {
        if self.listens == Listens::OwnCancels {
            return self.cancel_announced(run_id, poll).await;
        }
        let watch = self.watch(run_id);
        loop {
            let changed = watch.changed(poll);
            if self.is_cancel_requested(run_id).await.unwrap_or(false) {
                return;
            }
            changed.await;
        }
    }

    /// [`RedisStore::cancelled`] for a process that listens to its own cancels only: a subscription to
    /// the run's cancel channel, on a connection of its own while it waits, and a look at the key every
    /// `poll` (and after the subscription breaks, when one is made again).
    async fn cancel_announced(&self, run_id: &str, poll: Duration) {
        let channel = keys::run_cancel(run_id);
        loop {
            let mut subscription = match self.client.get_async_pubsub().await {
                Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                    Ok(()) => Some(pubsub),
                    Err(err) => {
                        tracing::debug!(run_id, error = %err, "cannot subscribe to the run's cancel");
                        None
                    }
                },
                Err(err) => {
                    tracing::debug!(run_id, error = %err, "cannot open a connection for the run's cancel");
                    None
                }
            };
            loop {
                if self.is_cancel_requested(run_id).await.unwrap_or(false) {
                    return;
                }
                let Some(pubsub) = subscription.as_mut() else {
                    tokio::time::sleep(poll).await;
                    break;
                };
                match tokio::time::timeout(poll, pubsub.on_message().next()).await {
                    Ok(Some(_)) | Err(_) => {}
                    // The subscription broke: look, then subscribe again.
                    Ok(None) => break,
                }
            }
        }
    }

    pub(super) async fn children(&self, parent_run_id: &str) -> Result<Vec<String>, StoreError> {
        self.read(redis::cmd("SMEMBERS").arg(keys::run_children(parent_run_id))).await
    }

    /// The answer to the read-only command `command`, sent again after a transient failure
    /// ([`idempotent`]).
    pub(super) async fn read<T: redis::FromRedisValue>(&self, command: &mut redis::Cmd) -> Result<T, StoreError> {
        let command = &*command;
        idempotent(|| {
            let mut connection = self.connection.clone();
            async move { Ok(command.query_async(&mut connection).await?) }
        })
        .await
    }

    /// Runs the Lua script `body` with `keys` and `args`, once (a script that changes state is not sent
    /// again: it may have run).
    pub(super) async fn run_script<T: redis::FromRedisValue>(
        &self,
        body: &str,
        keys: &[&str],
        args: &[&str],
    ) -> Result<T, StoreError> {
        let script = redis::Script::new(body);
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(*arg);
        }
        let mut connection = self.connection.clone();
        Ok(invocation.invoke_async(&mut connection).await?)
    }

    /// A handle of the store's connection, for a command sent once.
    pub(super) fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }

    /// Sends the idempotent pipeline `pipe` (its replies ignored), again after a transient failure.
    pub(super) async fn write(&self, pipe: &redis::Pipeline) -> Result<(), StoreError> {
        idempotent(|| {
            let mut connection = self.connection.clone();
            async move { Ok(pipe.query_async::<()>(&mut connection).await?) }
        })
        .await
    }

    /// The JSON value at `key`, if there is one.
    ///
    /// Errors: [`StoreError::Corrupt`] naming the key when it holds something else.
    pub(super) async fn get_json<T: serde::de::DeserializeOwned>(&self, key: String) -> Result<Option<T>, StoreError> {
        let text: Option<String> = self.read(redis::cmd("GET").arg(&key)).await?;
        text.map(|t| serde_json::from_str(&t).map_err(|source| StoreError::Corrupt { key, source })).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_name_keys_as_the_keys_module_does() {
        // The shared helpers read a member's record and forget an ended run's counts by keys they build
        // themselves: they must be those of the keys module.
        assert_eq!(keys::run_record("ID"), "yuxi:run:ID:record");
        assert!(LUA_HELPERS.contains("'yuxi:run:' .. id .. ':record'"));
        assert_eq!(keys::user_active_runs("U"), "yuxi:user:U:active_runs");
        assert!(LUA_HELPERS.contains("'yuxi:user:' .. record.uid .. ':active_runs'"));
        assert!(LUA_HELPERS.contains(&format!("'{}'", keys::ACTIVE_RUNS)));
    }

    #[test]
    fn the_terminal_statuses_are_framed_so_no_status_matches_inside_another() {
        assert_eq!(terminal_list(), ",completed,failed,cancelled,interrupted,");
        for status in RunStatus::ALL {
            assert_eq!(terminal_list().contains(&format!(",{status},")), status.is_terminal(), "{status}");
        }
    }
}
