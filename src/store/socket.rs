//! (Over 500 lines: one wire protocol, its client and its server, kept together so each request reads beside the answer it gets; its tests are in `tests/store/store_socket.rs`.)
//! The run store over a Unix socket. The local mode without Redis keeps its runs in this process
//! ([`Store::Memory`]); its runners are subprocesses, which reach that store through a socket the local
//! mode serves ([`serve_store_socket`]) with a [`SocketStore`] client (`runner --store-socket PATH`),
//! held as [`RunnerStoreClient::Socket`](super::RunnerStoreClient::Socket): the socket carries the
//! runner's operations only, and a runner can call no others.
//!
//! # Protocol
//!
//! Newline-delimited JSON on one connection the client keeps: a request is one line, answered by one
//! line, in order. A request is an object tagged by `op`, carrying exactly the operations the runner
//! uses, with the arguments of the [`Store`] method of the same name:
//!
//! ```text
//! {"op": "append_event", "run_id", "thread_id", "event", "payload"}   => the event's id ("7-0")
//! {"op": "thread_messages", "thread_id"}                              => [message, ...]
//! {"op": "put_run_input", "run_id", "thread_id", "input"}             => true | false (no record, or ended)
//! {"op": "finish_run", "run_id", "thread_id", "new_messages", "result"} => true | false (ended already)
//! {"op": "run_result", "run_id"}                                      => the result, or null
//! {"op": "is_cancel_requested", "run_id"}                             => true | false
//! {"op": "await_cancel", "run_id", "timeout_ms"}                      => true (asked) | false (not within it)
//! {"op": "hold_run_lease", "run_id", "holder", "ttl_ms"}              => true | false
//! {"op": "release_run_lease", "run_id", "holder"}                     => null
//! {"op": "record_usage", "target", "call", "day"}                     => the tree's usage {usage, max_tokens, cost, max_cost}
//! {"op": "record_run_end", "run_id", "end"}                           => null
//! {"op": "tree_usage", "root_run_id"}                                 => the tree's usage {usage, max_tokens}
//! {"op": "pause_run", "run_id", "thread_id", "checkpoint", "waiting", "payload", "keep_ms"} => true | false
//! {"op": "take_resumption", "run_id"}                                 => [checkpoint, decisions] or null
//! ```
//!
//! The answer is `{"ok": VALUE}`, or `{"error": "MESSAGE"}` for a request that is not valid JSON, not one
//! of these, names an invalid id, or that the store failed; the connection stays usable. A line, its
//! newline included, is at most [`MAX_LINE_BYTES`]; a longer request is answered with an error and the
//! connection closed. `await_cancel` answers as soon as a cancel is asked for (the store's notice), or
//! after `timeout_ms` (at most [`AWAIT_CANCEL_MAX`]); the runner's `cancelled` sends it on a
//! connection of its own, so its other requests never wait behind it.
//!
//! The socket file is made with mode 0600: only the local mode's user can connect.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};

use crate::run::budget::{TreeUsage, UsageTarget};
use crate::run::message::Message;
use crate::run::thread_id::is_valid_id;
use crate::run::{EventKind, RunResult};
use crate::store::Store;
use crate::store::types::StoreError;

/// The longest request or answer line, newline included, in bytes (64 MiB). A run's `finish_run`
/// carries its whole new conversation (up to `maxExecutionSteps` tool results of up to 64 KiB each), and
/// `thread_messages` a thread's whole history, so the bound is well above what a run writes; it keeps a
/// runaway client from making the server buffer without end.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// How long a client waits for an answer (sending the request included) before it gives up on the
/// connection.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest an `await_cancel` waits before it answers `false` (well within [`ANSWER_TIMEOUT`]).
pub const AWAIT_CANCEL_MAX: Duration = Duration::from_secs(20);

/// One request: a runner's store operation (see the module's protocol).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Request {
    AppendEvent {
        run_id: String,
        thread_id: String,
        event: EventKind,
        payload: Value,
    },
    ThreadMessages {
        thread_id: String,
    },
    PutRunInput {
        run_id: String,
        thread_id: String,
        input: String,
    },
    FinishRun {
        run_id: String,
        thread_id: String,
        new_messages: Vec<Message>,
        result: RunResult,
    },
    RunResult {
        run_id: String,
    },
    IsCancelRequested {
        run_id: String,
    },
    IsSteerRequested {
        run_id: String,
    },
    AwaitCancel {
        run_id: String,
        timeout_ms: u64,
    },
    HoldRunLease {
        run_id: String,
        holder: String,
        ttl_ms: u64,
    },
    ReleaseRunLease {
        run_id: String,
        holder: String,
    },
    RecordUsage {
        target: UsageTarget,
        call: crate::run::budget::ModelCall,
        day: String,
    },
    TreeUsage {
        root_run_id: String,
    },
    RecordRunEnd {
        run_id: String,
        end: crate::run::metrics::RunEnd,
    },
    PauseRun {
        run_id: String,
        thread_id: String,
        checkpoint: crate::run::approval::Checkpoint,
        waiting: crate::run::approval::Waiting,
        payload: Value,
        keep_ms: u64,
    },
    TakeResumption {
        run_id: String,
    },
}

impl Request {
    /// Whether doing it twice is the same as doing it once, so that it may be sent again on a new
    /// connection when the first one broke before its answer came.
    fn is_idempotent(&self) -> bool {
        // `finish_run` is: a second one finds the run ended and writes nothing.
        !matches!(
            self,
            Request::AppendEvent { .. }
                | Request::RecordUsage { .. }
                | Request::RecordRunEnd { .. }
                | Request::TakeResumption { .. }
        )
    }

    /// The ids the request names; each must be a valid id, as for every key of the store.
    fn ids(&self) -> Vec<&str> {
        match self {
            Request::AppendEvent { run_id, thread_id, .. }
            | Request::FinishRun { run_id, thread_id, .. }
            | Request::PutRunInput { run_id, thread_id, .. }
            | Request::PauseRun { run_id, thread_id, .. } => vec![run_id, thread_id],
            Request::TakeResumption { run_id } => vec![run_id],
            Request::ThreadMessages { thread_id } => vec![thread_id],
            Request::RunResult { run_id }
            | Request::IsCancelRequested { run_id }
            | Request::IsSteerRequested { run_id }
            | Request::AwaitCancel { run_id, .. }
            | Request::HoldRunLease { run_id, .. }
            | Request::ReleaseRunLease { run_id, .. }
            | Request::RecordRunEnd { run_id, .. } => vec![run_id],
            Request::RecordUsage { target, .. } => vec![&target.root_run_id],
            Request::TreeUsage { root_run_id } => vec![root_run_id],
        }
    }
}

/// One answer line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Ok(Value),
    Error(String),
}

/// The client: the runner's operations (those of [`super::RunnerStoreClient`]), sent to the store served
/// on a Unix socket. Clones share one connection, used by one request at a time; a connection that broke (or whose request was abandoned
/// half-way) is dropped and the next request opens a new one.
#[derive(Clone, Debug)]
pub struct SocketStore {
    path: PathBuf,
    connection: Arc<tokio::sync::Mutex<Option<Connection>>>,
}

#[derive(Debug)]
struct Connection {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl Connection {
    async fn open(path: &Path) -> std::io::Result<Connection> {
        let (read, writer) = UnixStream::connect(path).await?.into_split();
        Ok(Connection { reader: BufReader::new(read), writer })
    }
}

/// Why one exchange got no answer, and whether the server can have acted on the request.
enum Failure {
    /// The request was not (completely) sent: the server saw at most a partial line, which it drops.
    NotSent(String),
    /// The request was sent; it may have been carried out.
    Sent(String),
}

impl SocketStore {
    /// Connects to the store socket at `path`.
    ///
    /// Errors: [`StoreError::Socket`] when nothing accepts connections there.
    pub async fn connect(path: &Path) -> Result<SocketStore, StoreError> {
        let connection = Connection::open(path)
            .await
            .map_err(|e| StoreError::Socket { path: path.to_path_buf(), message: format!("cannot connect: {e}") })?;
        Ok(SocketStore { path: path.to_path_buf(), connection: Arc::new(tokio::sync::Mutex::new(Some(connection))) })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, message: String) -> StoreError {
        StoreError::Socket { path: self.path.clone(), message }
    }

    pub(super) async fn append_event(
        &self,
        run_id: &str,
        thread_id: &str,
        event: EventKind,
        payload: Value,
    ) -> Result<String, StoreError> {
        self.call(Request::AppendEvent { run_id: run_id.into(), thread_id: thread_id.into(), event, payload }).await
    }

    pub(super) async fn thread_messages(&self, thread_id: &str) -> Result<Vec<Message>, StoreError> {
        self.call(Request::ThreadMessages { thread_id: thread_id.into() }).await
    }

    pub(super) async fn put_run_input(&self, run_id: &str, thread_id: &str, input: &str) -> Result<bool, StoreError> {
        self.call(Request::PutRunInput { run_id: run_id.into(), thread_id: thread_id.into(), input: input.into() })
            .await
    }

    pub(super) async fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
    ) -> Result<bool, StoreError> {
        self.call(Request::FinishRun {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            new_messages: new_messages.to_vec(),
            result: result.clone(),
        })
        .await
    }

    pub(super) async fn run_result(&self, run_id: &str) -> Result<Option<RunResult>, StoreError> {
        self.call(Request::RunResult { run_id: run_id.into() }).await
    }

    pub(super) async fn is_cancel_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        self.call(Request::IsCancelRequested { run_id: run_id.into() }).await
    }

    pub(super) async fn is_steer_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        self.call(Request::IsSteerRequested { run_id: run_id.into() }).await
    }

    pub(super) async fn hold_run_lease(&self, run_id: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.call(Request::HoldRunLease { run_id: run_id.into(), holder: holder.into(), ttl_ms }).await
    }

    pub(super) async fn release_run_lease(&self, run_id: &str, holder: &str) -> Result<(), StoreError> {
        self.call(Request::ReleaseRunLease { run_id: run_id.into(), holder: holder.into() }).await
    }

    pub(super) async fn record_usage(
        &self,
        target: &UsageTarget,
        call: &crate::run::budget::ModelCall,
        day: &str,
    ) -> Result<TreeUsage, StoreError> {
        self.call(Request::RecordUsage { target: target.clone(), call: call.clone(), day: day.into() }).await
    }

    pub(super) async fn record_run_end(
        &self,
        run_id: &str,
        end: &crate::run::metrics::RunEnd,
    ) -> Result<(), StoreError> {
        self.call(Request::RecordRunEnd { run_id: run_id.into(), end: end.clone() }).await
    }

    pub(super) async fn pause_run(
        &self,
        run_id: &str,
        thread_id: &str,
        checkpoint: &crate::run::approval::Checkpoint,
        waiting: &crate::run::approval::Waiting,
        payload: Value,
        keep: Duration,
    ) -> Result<bool, StoreError> {
        let keep_ms = u64::try_from(keep.as_millis()).unwrap_or(u64::MAX);
        self.call(Request::PauseRun {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            checkpoint: checkpoint.clone(),
            waiting: waiting.clone(),
            payload,
            keep_ms,
        })
        .await
    }

    pub(super) async fn take_resumption(
        &self,
        run_id: &str,
    ) -> Result<Option<(crate::run::approval::Checkpoint, Vec<crate::run::approval::Decision>)>, StoreError> {
        self.call(Request::TakeResumption { run_id: run_id.into() }).await
    }

    pub(super) async fn tree_usage(&self, root_run_id: &str) -> Result<TreeUsage, StoreError> {
        self.call(Request::TreeUsage { root_run_id: root_run_id.into() }).await
    }

    /// Resolves when a cancel is requested for the run: pushed, with `await_cancel` on a connection of
    /// its own. After a failure it waits `poll` and asks again.
    pub(super) async fn cancelled(&self, run_id: &str, poll: Duration) {
        let waiter = SocketStore { path: self.path.clone(), connection: Default::default() };
        let timeout_ms = AWAIT_CANCEL_MAX.as_millis() as u64;
        loop {
            match waiter.call::<bool>(Request::AwaitCancel { run_id: run_id.into(), timeout_ms }).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(err) => {
                    tracing::debug!(error = %err, "cannot wait for a cancel on the store socket; asking again");
                    tokio::time::sleep(poll).await;
                }
            }
        }
    }

    /// Sends one request and decodes its answer. A request that was not sent, or an idempotent one whose
    /// connection broke before the answer, is tried once more on a new connection.
    async fn call<T: DeserializeOwned>(&self, request: Request) -> Result<T, StoreError> {
        let mut line = serde_json::to_vec(&request).map_err(|e| self.error(format!("cannot encode a request: {e}")))?;
        line.push(b'\n');
        if line.len() > MAX_LINE_BYTES {
            return Err(self.error(format!(
                "a request of {} bytes is longer than the socket's limit of {MAX_LINE_BYTES} bytes",
                line.len()
            )));
        }
        let mut slot = self.connection.lock().await;
        let mut retried = false;
        let value = loop {
            // The connection is out of the slot while in use: when this future is dropped half-way (a
            // cancelled caller), the connection goes with it rather than leaving an answer unread for the
            // next request.
            let connection = match slot.take() {
                Some(connection) => connection,
                None => Connection::open(&self.path).await.map_err(|e| self.error(format!("cannot connect: {e}")))?,
            };
            let exchanged = tokio::time::timeout(ANSWER_TIMEOUT, exchange(connection, &line))
                .await
                .unwrap_or_else(|_| Err(Failure::Sent(format!("no answer within {} s", ANSWER_TIMEOUT.as_secs()))));
            match exchanged {
                Ok((connection, answer)) => {
                    *slot = Some(connection);
                    match answer {
                        Answer::Ok(value) => break value,
                        Answer::Error(message) => return Err(self.error(format!("the store answered: {message}"))),
                    }
                }
                Err(Failure::NotSent(message) | Failure::Sent(message)) if retried => {
                    return Err(self.error(message));
                }
                Err(Failure::Sent(message)) if !request.is_idempotent() => return Err(self.error(message)),
                Err(Failure::NotSent(_) | Failure::Sent(_)) => retried = true,
            }
        };
        serde_json::from_value(value).map_err(|e| self.error(format!("unexpected answer: {e}")))
    }
}

/// Writes one request line on `connection` and reads its answer; gives the connection back with the
/// answer, as it is fit for the next request then.
async fn exchange(mut connection: Connection, line: &[u8]) -> Result<(Connection, Answer), Failure> {
    if let Err(err) = connection.writer.write_all(line).await {
        return Err(Failure::NotSent(format!("the connection broke: {err}")));
    }
    let mut answer = Vec::new();
    match read_line(&mut connection.reader, &mut answer).await {
        Err(err) => Err(Failure::Sent(format!("the connection broke: {err}"))),
        Ok(Line::End) => Err(Failure::Sent("the server closed the connection".into())),
        Ok(Line::TooLong) => Err(Failure::Sent(format!("an answer is longer than {MAX_LINE_BYTES} bytes"))),
        Ok(Line::Complete) => match serde_json::from_slice::<Answer>(&answer) {
            Ok(answer) => Ok((connection, answer)),
            Err(err) => Err(Failure::Sent(format!("the server answered something that is not an answer: {err}"))),
        },
    }
}

/// How reading one line ended.
enum Line {
    /// A line, its newline included.
    Complete,
    /// The connection ended (a partial line is dropped).
    End,
    /// The line is longer than [`MAX_LINE_BYTES`]; what was read of it is in the buffer.
    TooLong,
}

/// Reads one line of at most [`MAX_LINE_BYTES`] into `buf`.
async fn read_line(reader: &mut BufReader<OwnedReadHalf>, buf: &mut Vec<u8>) -> std::io::Result<Line> {
    buf.clear();
    reader.take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', buf).await?;
    Ok(if buf.len() > MAX_LINE_BYTES {
        Line::TooLong
    } else if buf.last() == Some(&b'\n') {
        Line::Complete
    } else {
        Line::End
    })
}

/// Makes the store socket at `path`: replaces a stale socket file left there, refuses when another
/// process serves it, and makes it with mode 0600 (bound under a temporary name, then moved into place,
/// so it is never reachable with a wider mode). Serve it with [`serve_store_socket`].
///
/// Errors: another process answers on `path` (`AddrInUse`); the path is too long for a Unix socket (108
/// bytes on Linux) or its folder cannot be written; each names the path.
pub async fn bind_store_socket(path: &Path) -> std::io::Result<UnixListener> {
    let named = |e: std::io::Error| std::io::Error::new(e.kind(), format!("store socket {}: {e}", path.display()));
    if UnixStream::connect(path).await.is_ok() {
        return Err(named(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "another process serves it (is another local mode using this data folder?)",
        )));
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| named(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path does not name a file")))?;
    let mut staging_name = std::ffi::OsString::from(".");
    staging_name.push(file_name);
    staging_name.push(format!(".{}", std::process::id()));
    let staging = path.with_file_name(staging_name);
    let _ = std::fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging).map_err(named)?;
    let placed = std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&staging, path));
    if let Err(err) = placed {
        let _ = std::fs::remove_file(&staging);
        return Err(named(err));
    }
    Ok(listener)
}

/// Serves `store` on `listener` (from [`bind_store_socket`]) until the task is dropped: each connection
/// in its own task, its requests answered in order (see the module's protocol). Never panics on what a
/// client sends; a failed accept is logged and retried.
pub async fn serve_store_socket(listener: UnixListener, store: Store) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(serve_connection(stream, store.clone()));
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot accept a store socket connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve_connection(stream: UnixStream, store: Store) {
    let (read, mut writer) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        let answer = match read_line(&mut reader, &mut line).await {
            Err(err) => {
                tracing::debug!(error = %err, "a store socket connection broke");
                return;
            }
            Ok(Line::End) => return,
            Ok(Line::TooLong) => {
                // The rest of the line is still coming: answer, then hang up rather than read it.
                let refusal = Answer::Error(format!("the request is longer than {MAX_LINE_BYTES} bytes"));
                let _ = write_answer(&mut writer, &refusal).await;
                return;
            }
            Ok(Line::Complete) => match serde_json::from_slice::<Request>(&line) {
                Ok(request) => answer(&store, request).await,
                Err(err) => Answer::Error(format!("not a store request: {err}")),
            },
        };
        if write_answer(&mut writer, &answer).await.is_err() {
            return;
        }
    }
}

async fn write_answer(writer: &mut OwnedWriteHalf, answer: &Answer) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(answer).unwrap_or_else(|e| {
        serde_json::to_vec(&Answer::Error(format!("cannot encode the answer: {e}"))).unwrap_or_default()
    });
    bytes.push(b'\n');
    writer.write_all(&bytes).await
}

/// Whether a cancel is asked for the run within `timeout`, woken by the store's notice.
async fn await_cancel(store: &Store, run_id: &str, timeout: Duration) -> Result<bool, StoreError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let watch = store.watch(run_id);
    loop {
        let changed = watch.changed(deadline.saturating_duration_since(tokio::time::Instant::now()));
        if store.is_cancel_requested(run_id).await? {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        changed.await;
    }
}

/// Carries out one request on `store`.
async fn answer(store: &Store, request: Request) -> Answer {
    if let Some(id) = request.ids().into_iter().find(|id| !is_valid_id(id)) {
        return Answer::Error(format!("{id:?} is not a valid id"));
    }
    let outcome = match request {
        Request::AppendEvent { run_id, thread_id, event, payload } => {
            store.append_event(&run_id, &thread_id, event, payload).await.map(Value::String)
        }
        Request::ThreadMessages { thread_id } => store
            .thread_messages(&thread_id)
            .await
            .map(|messages| serde_json::to_value(messages).expect("messages serialize")),
        Request::FinishRun { run_id, thread_id, new_messages, result } => {
            store.finish_run(&run_id, &thread_id, &new_messages, &result).await.map(Value::Bool)
        }
        Request::RunResult { run_id } => store
            .run_result(&run_id)
            .await
            .map(|r| r.map_or(Value::Null, |r| serde_json::to_value(r).expect("a result serializes"))),
        Request::IsCancelRequested { run_id } => store.is_cancel_requested(&run_id).await.map(Value::Bool),
        Request::IsSteerRequested { run_id } => store.is_steer_requested(&run_id).await.map(Value::Bool),
        Request::AwaitCancel { run_id, timeout_ms } => {
            await_cancel(store, &run_id, Duration::from_millis(timeout_ms).min(AWAIT_CANCEL_MAX)).await.map(Value::Bool)
        }
        Request::HoldRunLease { run_id, holder, ttl_ms } => {
            store.hold_run_lease(&run_id, &holder, Duration::from_millis(ttl_ms)).await.map(Value::Bool)
        }
        Request::ReleaseRunLease { run_id, holder } => {
            store.release_run_lease(&run_id, &holder).await.map(|()| Value::Null)
        }
        Request::RecordUsage { target, call, day } => store
            .record_usage(&target, &call, &day)
            .await
            .map(|tree| serde_json::to_value(tree).expect("a usage serializes")),
        Request::RecordRunEnd { end, .. } => store.record_run_end(&end).await.map(|()| Value::Null),
        Request::PauseRun { run_id, thread_id, checkpoint, waiting, payload, keep_ms } => store
            .pause_run(&run_id, &thread_id, &checkpoint, &waiting, payload, Duration::from_millis(keep_ms))
            .await
            .map(Value::Bool),
        Request::PutRunInput { run_id, thread_id, input } => {
            store.put_run_input(&run_id, &thread_id, &input).await.map(Value::Bool)
        }
        Request::TakeResumption { run_id } => store
            .take_resumption(&run_id)
            .await
            .map(|taken| taken.map_or(Value::Null, |t| serde_json::to_value(t).expect("a resumption serializes"))),
        Request::TreeUsage { root_run_id } => {
            store.tree_usage(&root_run_id).await.map(|tree| serde_json::to_value(tree).expect("a usage serializes"))
        }
    };
    match outcome {
        Ok(value) => Answer::Ok(value),
        Err(err) => Answer::Error(err.to_string()),
    }
}
