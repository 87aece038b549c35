//! The `execute` tool across a Unix socket: the runner container's client and the `sandbox` container's
//! server (`sandbox-exec`), one JSON request line and one JSON outcome line per connection.

use std::path::Path;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::local::LocalExecutor;
use super::request::{ExecError, ExecOutcome, ExecRequest, MAX_REQUEST_BYTES, bounded};

/// Sends `request` to the sandbox at the socket `path` and reads its outcome. Errors:
/// [`ExecError::Unreachable`], [`ExecError::Request`], [`ExecError::NotAnOutcome`].
pub(super) async fn execute_over_socket(path: &Path, request: &ExecRequest) -> Result<ExecOutcome, ExecError> {
    let unreachable = |source: std::io::Error| ExecError::Unreachable { socket: path.to_path_buf(), source };
    let mut stream = UnixStream::connect(path).await.map_err(unreachable)?;
    let mut line = serde_json::to_vec(request).map_err(|source| ExecError::Request { source })?;
    line.push(b'\n');
    stream.write_all(&line).await.map_err(unreachable)?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).await.map_err(unreachable)?;
    serde_json::from_str(&answer).map_err(|source| ExecError::NotAnOutcome { socket: path.to_path_buf(), source })
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
