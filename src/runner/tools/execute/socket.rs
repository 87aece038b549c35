//! The `execute` tool across a Unix socket: the runner container's client and the `sandbox` container's
//! server (`sandbox-exec`), one JSON request line and one JSON outcome line per connection.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::local::LocalExecutor;
use super::request::{ExecError, ExecOutcome, ExecRequest, MAX_REQUEST_BYTES, bounded};

/// The most an outcome line from the sandbox may hold, in bytes (1 MiB): [`super::MAX_OUTPUT_BYTES`]
/// of output, each byte JSON-escaped to at most six, and the other fields. A longer answer is not an
/// outcome.
pub const MAX_OUTCOME_BYTES: u64 = 1024 * 1024;

/// The sandbox container's socket as the runner reaches it: the socket file found at `path` the first
/// time a command is sent, pinned (an `O_PATH` handle of it) and reached through that handle from then
/// on. A command in the sandbox that replaces the file at `path` (its folder is the sandbox's too) makes
/// a socket the runner never reaches; if the pinned socket's server is gone, commands fail rather than
/// reach whatever listens at `path` now.
#[derive(Clone, Debug)]
pub struct SandboxSocket {
    path: PathBuf,
    pinned: Arc<OnceLock<std::fs::File>>,
}

impl SandboxSocket {
    /// The socket at `path`, pinned at the first command.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), pinned: Arc::default() }
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A connection to the pinned socket (pinning the one at the path first, if none is yet).
    async fn connect(&self) -> std::io::Result<UnixStream> {
        let pinned = match self.pinned.get() {
            Some(file) => file,
            None => {
                let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH).open(&self.path)?;
                if !file.metadata()?.file_type().is_socket() {
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a socket"));
                }
                self.pinned.get_or_init(|| file)
            }
        };
        UnixStream::connect(format!("/proc/self/fd/{}", pinned.as_raw_fd())).await
    }
}

/// Sends `request` to the sandbox at `socket` and reads its outcome, at most [`MAX_OUTCOME_BYTES`].
/// Errors: [`ExecError::Unreachable`], [`ExecError::Request`], [`ExecError::NotAnOutcome`].
pub(super) async fn execute_over_socket(
    socket: &SandboxSocket,
    request: &ExecRequest,
) -> Result<ExecOutcome, ExecError> {
    let path = socket.path();
    let unreachable = |source: std::io::Error| ExecError::Unreachable { socket: path.to_path_buf(), source };
    let mut stream = socket.connect().await.map_err(unreachable)?;
    let mut line = serde_json::to_vec(request).map_err(|source| ExecError::Request { source })?;
    line.push(b'\n');
    stream.write_all(&line).await.map_err(unreachable)?;
    let mut answer = Vec::new();
    BufReader::new(stream.take(MAX_OUTCOME_BYTES)).read_until(b'\n', &mut answer).await.map_err(unreachable)?;
    serde_json::from_slice(&answer).map_err(|source| ExecError::NotAnOutcome { socket: path.to_path_buf(), source })
}

/// Serves `execute` requests on the Unix socket at `socket` (the `sandbox-exec` role), one JSON request
/// line and one JSON outcome line per connection, running each command with `executor`. Runs until the
/// listener fails.
pub async fn serve_socket(socket: &Path, executor: LocalExecutor) -> std::io::Result<()> {
    let _ = std::fs::remove_file(socket);
    let listener = tokio::net::UnixListener::bind(socket)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {}: {e}", socket.display())))?;
    tracing::info!(socket = %socket.display(), "serving execute requests");
    loop {
        let (stream, _) = listener.accept().await?;
        let executor = executor.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut reader = BufReader::new(read.take(MAX_REQUEST_BYTES));
            let mut line = String::new();
            let answer = match reader.read_line(&mut line).await {
                Ok(_) => match serde_json::from_str::<ExecRequest>(&line) {
                    Ok(request) => {
                        // The runner hangs up when its run is cancelled or times out: the command stops
                        // with it (dropping the execution kills its process group).
                        let mut rest = Vec::new();
                        let request = bounded(request);
                        tokio::select! {
                            outcome = executor.execute(&request) => match outcome {
                                Ok(outcome) => outcome,
                                Err(err) => ExecOutcome { output: err.to_string(), ..ExecOutcome::default() },
                            },
                            _ = reader.read_to_end(&mut rest) => return,
                        }
                    }
                    Err(err) => {
                        ExecOutcome { output: format!("not an execute request: {err}"), ..ExecOutcome::default() }
                    }
                },
                Err(err) => ExecOutcome { output: format!("cannot read the request: {err}"), ..ExecOutcome::default() },
            };
            let mut bytes = serde_json::to_vec(&answer).unwrap_or_default();
            bytes.push(b'\n');
            let _ = write.write_all(&bytes).await;
        });
    }
}
