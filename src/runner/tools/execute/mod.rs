//! The `execute` tool: a shell command in the sandbox, with a time-out and bounded output.
//!
//! Commands run through an [`Executor`]: in a pod, the `sandbox` container over a Unix socket (the
//! `sandbox-exec` role, which holds no secret); in the local mode, a subprocess inside bubblewrap, with an
//! emptied environment, a minimal read-only system (`/usr`, `/bin`, `/lib*` and a few files of `/etc`),
//! the run's four volumes, a private `/tmp`, no network, its own process namespace (every process ends
//! with the command) and resource limits. When bubblewrap cannot confine a command, `execute` is refused
//! ([`Confinement::Required`], the default) unless the operator said that commands may run unconfined.
//! Either way the command sees neither the model API key nor the run's credentials.

mod local;
mod request;
mod socket;

use futures::future::BoxFuture;
use serde_json::{Value, json};

pub use local::{BWRAP_PATHS, Confinement, LocalExecutor, MAX_ADDRESS_SPACE_BYTES, MAX_FILE_BYTES, MAX_OPEN_FILES};
pub use request::{
    DEFAULT_TIMEOUT_SECONDS, ExecError, ExecOutcome, ExecRequest, MAX_OUTPUT_BYTES, MAX_TIMEOUT_SECONDS,
};
pub use socket::{MAX_OUTCOME_BYTES, SandboxSocket, serve_socket};

use request::bounded;

use super::{Tool, ToolError, ToolSpec, names, opt_u64, req_str};
/// Where commands run.
#[derive(Clone, Debug)]
pub enum Executor {
    /// A subprocess of this process (the local mode).
    Local(LocalExecutor),
    /// The sandbox container, reached over its Unix socket (a pod).
    Socket(SandboxSocket),
}

impl Executor {
    /// Runs one command.
    ///
    /// Errors: the command cannot be started ([`ExecError::Start`]), or the sandbox cannot be reached
    /// ([`ExecError::Unreachable`]) or answers something else ([`ExecError::NotAnOutcome`]). A command
    /// that fails or times out is an outcome, not an error.
    pub async fn execute(&self, request: &ExecRequest) -> Result<ExecOutcome, ExecError> {
        match self {
            Executor::Local(local) => local.execute(request).await,
            Executor::Socket(sandbox) => socket::execute_over_socket(sandbox, request).await,
        }
    }
}

/// The `execute` tool.
pub struct ExecuteTool {
    executor: Executor,
}

impl ExecuteTool {
    /// The tool, running commands with `executor`.
    pub fn new(executor: Executor) -> Self {
        Self { executor }
    }
}

impl Tool for ExecuteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: names::EXECUTE.to_string(),
            description: format!(
                "Run a shell command in the sandbox, in /home/gem/user-data/workspace. Output (stdout and stderr) is cut to {MAX_OUTPUT_BYTES} bytes. Default time-out {DEFAULT_TIMEOUT_SECONDS} s, at most {MAX_TIMEOUT_SECONDS} s."
            ),
            parameters: json!({"type": "object", "required": ["command"], "properties": {
                "command": {"type": "string", "description": "A /bin/sh command line"},
                "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECONDS}}}),
        }
    }

    fn call(&self, arguments: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin(async move {
            let command = req_str(&arguments, "command")?.to_string();
            if command.trim().is_empty() {
                return Err(ToolError::new("argument command is empty"));
            }
            let timeout_seconds = opt_u64(&arguments, "timeout_seconds")?.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
            let request = bounded(ExecRequest { command, timeout_seconds, max_output_bytes: MAX_OUTPUT_BYTES });
            let outcome = self.executor.execute(&request).await.map_err(|e| ToolError::new(e.to_string()))?;
            Ok(describe(&request, &outcome))
        })
    }
}

fn describe(request: &ExecRequest, outcome: &ExecOutcome) -> String {
    let mut text = outcome.output.clone();
    if outcome.truncated_bytes > 0 {
        text.push_str(&format!("\n[output cut: {} more bytes]", outcome.truncated_bytes));
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    match (outcome.timed_out, outcome.exit_code) {
        (true, _) => text.push_str(&format!("[timed out after {} s; the command was killed]", request.timeout_seconds)),
        (false, Some(code)) => text.push_str(&format!("[exit code {code}]")),
        (false, None) => text.push_str("[killed by a signal]"),
    }
    text
}
