//! `yuxi-operator sandbox-exec`: the sandbox pod's second container, which runs the `execute` tool's
//! commands for the runner over a Unix socket and holds no secret.

use std::path::PathBuf;
use std::process::ExitCode;

use yuxi_operator::run::inputs;
use yuxi_operator::runner::tools::execute::{LocalExecutor, serve_socket};

/// Where the commands come from and where they run.
#[derive(clap::Args)]
pub struct SandboxExecArgs {
    /// The Unix socket to listen on, on a volume shared with the runner.
    #[arg(long, value_name = "PATH", default_value = inputs::SANDBOX_SOCKET)]
    socket: PathBuf,
    /// The folder commands run in.
    #[arg(long, value_name = "DIR", default_value = "/home/gem/user-data/workspace")]
    workdir: PathBuf,
}

/// Serves commands until the process is stopped: SIGTERM ends it at once with status 0 (as its
/// container's first process it would otherwise ignore it, and its pod would wait out its grace period
/// after the runner ended). Exit status 1 when the workdir is not a folder or the socket cannot be
/// served.
pub fn run(args: SandboxExecArgs) -> ExitCode {
    let SandboxExecArgs { socket, workdir } = args;
    super::run_async(async move {
        anyhow::ensure!(workdir.is_dir(), "the workdir {} is not a folder", workdir.display());
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            served = serve_socket(&socket, LocalExecutor::plain(workdir)) => served?,
            _ = terminate.recv() => {}
        }
        Ok(())
    })
}
