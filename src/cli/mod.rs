//! The subcommands of the `yuxi-operator` binary, one file each: its clap arguments and its `run`, which
//! turns them into a role of the library and gives the process its exit status.
//!
//! What several subcommands share lives beside them: the HTTP server start-up and the shutdown signal
//! ([`serve`]), leader election ([`leader`]), and here the async runtime and the cluster connection.

pub mod api;
pub mod controller;
pub mod crd;
pub mod leader;
pub mod local;
pub mod runner;
pub mod sandbox_exec;
pub mod sandbox_pod;
pub mod serve;
pub mod validate;
pub mod webhook;

use std::future::Future;
use std::process::ExitCode;

/// Runs `future` to its end on a new multi-threaded runtime: exit status 0 when it returns `Ok`, 1 with
/// the error (and its causes) on stderr when it fails or when the runtime cannot start.
pub fn run_async<F: Future<Output = anyhow::Result<()>>>(future: F) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(future) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Connects to the cluster (in-cluster config or kubeconfig) and checks that the API server answers.
///
/// `hint` says why the role needs a cluster and what to do without one; it ends both errors: no cluster
/// configured, and an API server that does not answer.
pub async fn connect(hint: &str) -> anyhow::Result<kube::Client> {
    let client = kube::Client::try_default()
        .await
        .map_err(|err| anyhow::anyhow!("no Kubernetes cluster configured ({err}); {hint}"))?;
    client
        .apiserver_version()
        .await
        .map_err(|err| anyhow::anyhow!("cannot reach the Kubernetes API server ({err}); {hint}"))?;
    Ok(client)
}
