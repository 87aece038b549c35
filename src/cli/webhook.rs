//! `yuxi-operator webhook`: the admission server (AdmissionReview v1 over TLS) for Agent, AgentRun and KnowledgeBase.
//!
//! The TLS server itself, with its certificate reload, is the `webhook` role's; this file connects to the
//! cluster for the cross-object checks and stops the server on a shutdown signal.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use yuxi_operator::access::RunCreators;
use yuxi_operator::webhook::{self, Admission, ServeOptions};

use super::serve::{shutdown_signal, stop_gracefully};

/// How long open admission requests get to finish on shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The webhook's listener, certificate and mode.
#[derive(clap::Args)]
pub struct WebhookArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8443", env = "YUXI_WEBHOOK_LISTEN")]
    listen: SocketAddr,
    /// PEM certificate chain; re-read when it changes.
    #[arg(long, value_name = "FILE", env = "YUXI_WEBHOOK_TLS_CERT")]
    tls_cert: PathBuf,
    /// PEM private key; re-read when it changes.
    #[arg(long, value_name = "FILE", env = "YUXI_WEBHOOK_TLS_KEY")]
    tls_key: PathBuf,
    /// How often to check the certificate files for changes, in seconds.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    cert_reload_seconds: u64,
    /// Run without a cluster: single-object checks only, no default-agent or subagent-reference checks.
    #[arg(long)]
    offline: bool,
    /// A Kubernetes user who may create AgentRuns for other users (repeatable): the facade's service
    /// account, `system:serviceaccount:<namespace>:<name>`. Anyone else's AgentRuns run as themselves.
    #[arg(long = "run-creator", value_name = "USERNAME")]
    run_creators: Vec<String>,
    /// A Kubernetes group whose members may create AgentRuns for other users (repeatable).
    #[arg(long = "run-creator-group", value_name = "GROUP", default_value = "yuxi:run-creators")]
    run_creator_groups: Vec<String>,
    /// An MCP server the installation configures (the chart's `mcpServers`; repeatable): an Agent may
    /// name it in `context.mcps` beside the namespace's McpServers.
    #[arg(long = "mcp-server", value_name = "NAME")]
    mcp_servers: Vec<String>,
}

/// Serves admission reviews until SIGTERM or Ctrl-C. Exit status 1 when the cluster cannot be reached
/// (without `--offline`), the certificate cannot be loaded, or the listener fails.
pub fn run(args: WebhookArgs) -> ExitCode {
    let options = ServeOptions {
        listen: args.listen,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        reload_interval: Duration::from_secs(args.cert_reload_seconds),
        header_read_timeout: webhook::HEADER_READ_TIMEOUT,
    };
    let creators = RunCreators { usernames: args.run_creators, groups: args.run_creator_groups };
    super::run_async(serve(options, args.offline, creators, args.mcp_servers))
}

async fn serve(options: ServeOptions, offline: bool, creators: RunCreators, mcp: Vec<String>) -> anyhow::Result<()> {
    let client = if offline {
        tracing::info!("offline: single-object checks only");
        None
    } else {
        Some(super::connect("the webhook reads Agents through the Kubernetes API for its cross-object checks; run it in a cluster or with a kubeconfig, or pass --offline for the single-object checks only").await?)
    };
    let handle = axum_server::Handle::new();
    tokio::spawn(stop_gracefully(handle.clone(), shutdown_signal(), SHUTDOWN_GRACE));
    webhook::serve(options, Admission::new(client).with_run_creators(creators).with_configured_mcp(mcp), handle)
        .await?;
    Ok(())
}
