//! The Redis backend of the run store: every operation of [`Store`](super::Store) as Redis commands on
//! the keys of [`super::keys`] (DESIGN.md section 6). Used in a cluster, and by the local mode when it is
//! given a Redis. What must happen in one step (a run's creation, a status change, renewing or releasing
//! a lease only for its holder) is a transaction or a Lua script, so two roles racing on the same run
//! cannot interleave.
//!
//! This file holds the connection: [`RedisStore`], how it connects and checks that anonymous clients are
//! refused ([`admits_anonymous`]), and how a command is sent (once, or again after a transient failure).
//! The operations are in files by concern, each an `impl RedisStore`: `runs.rs` (leases, creation, the
//! record, the end, the status, children), `events.rs` (the event stream, the thread's messages, the
//! result), `notices.rs` (watches, steer and cancel requests), `conversations.rs`; the Lua scripts of a
//! run's life are in `scripts.rs`.

mod conversations;
mod events;
mod notices;
mod runs;
mod scripts;

use std::time::Duration;

use redis::aio::ConnectionManager;

use crate::store::types::{RunView, StoreAuth, StoreError};

/// Whether the Redis at `info`'s address answers `PING` from a client that gives no credentials (a
/// second, short-lived connection with the same address and TLS settings, tried three times 100 ms
/// apart). A server that cannot be reached this way within 5 s counts as not answering.
pub async fn admits_anonymous(info: &redis::ConnectionInfo) -> bool {
    let anonymous = info.clone().set_redis_settings(redis::RedisConnectionInfo::default());
    let Ok(client) = redis::Client::open(anonymous) else { return false };
    // A connection that fails says nothing of what the server admits (a server just started may not
    // accept yet, while the store's own connection retries): it is tried up to three times.
    let probe = async {
        let mut attempts = 0;
        let mut connection = loop {
            match client.get_multiplexed_async_connection().await {
                Ok(connection) => break connection,
                Err(_) if attempts < 2 => attempts += 1,
                Err(_) => return None,
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
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

/// The Redis store: one multiplexed connection that reconnects by itself, and the client for pub/sub.
/// Its operations are those of [`Store`](super::Store), documented there.
#[derive(Clone)]
pub struct RedisStore {
    client: redis::Client,
    connection: ConnectionManager,
    notices: crate::store::notices::Notices,
    /// The subscription that turns notice messages into wake-ups, started by the first watch.
    hub: std::sync::Arc<std::sync::OnceLock<()>>,
    /// Whose notices this process listens to.
    listens: Listens,
    /// The status views of runs that have ended, by run and number of recent events: a run that has
    /// ended changes no more, so its status is read from Redis once, not at every poll of a parent.
    /// Bounded by [`ENDED_VIEWS`] and [`ENDED_VIEW_TTL`] (the longest a view outlives its run's keys).
    ended_views: std::sync::Arc<moka::sync::Cache<(String, usize), RunView>>,
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
    pub(super) async fn connect(url: &str, auth: StoreAuth, listens: Listens) -> Result<RedisStore, StoreError> {
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
                StoreAuth::Required => return Err(StoreError::Unauthenticated { addr }),
                StoreAuth::AllowAnonymous => tracing::warn!(
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

    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        let _: String = redis::cmd("PING").query_async(&mut self.connection.clone()).await?;
        Ok(())
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
