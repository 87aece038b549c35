//! The subcommands of the `yuxi-operator` binary, one file each: its clap arguments and its `run`, which
//! turns them into a role of the library and gives the process its exit status.
//!
//! What several subcommands share lives beside them: the HTTP server start-up and the shutdown signal
//! ([`serve`]), leader election ([`leader`]), and here the async runtime and the cluster connection.

pub mod api;
pub mod connections;
pub mod controller;
pub mod crd;
pub mod extract_text;
pub mod hash_password;
pub mod in_process;
pub mod leader;
pub mod local;
pub mod local_data;
pub mod local_endpoints;
pub mod local_follow;
pub mod local_mcp;
pub mod local_models;
pub mod memory;
pub mod oidc;
pub mod quick_model;
pub mod runner;
pub mod sandbox_exec;
pub mod sandbox_pod;
pub mod serve;
pub mod telemetry;
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
    Ok(connect_with_config(hint).await?.0)
}

/// [`connect`], with the configuration the client was made from (to make clients that impersonate).
pub async fn connect_with_config(hint: &str) -> anyhow::Result<(kube::Client, kube::Config)> {
    let config = kube::Config::infer()
        .await
        .map_err(|err| anyhow::anyhow!("no Kubernetes cluster configured ({err}); {hint}"))?;
    let client = kube::Client::try_from(config.clone())
        .map_err(|err| anyhow::anyhow!("no Kubernetes cluster configured ({err}); {hint}"))?;
    client
        .apiserver_version()
        .await
        .map_err(|err| anyhow::anyhow!("cannot reach the Kubernetes API server ({err}); {hint}"))?;
    Ok((client, config))
}

/// Hybrid knowledge search: an OpenAI-compatible embeddings endpoint (docs/concepts/knowledge.md),
/// shared by `api` and `local`. Without `--embeddings-url`, search is by words alone.
#[derive(clap::Args, Clone, Debug)]
pub struct EmbeddingArgs {
    /// The endpoint's base URL, such as `https://api.openai.com/v1` (`/embeddings` is added).
    #[arg(long, env = "YUXI_EMBEDDINGS_URL", value_name = "URL")]
    embeddings_url: Option<String>,
    /// The embedding model.
    #[arg(long, env = "YUXI_EMBEDDINGS_MODEL", default_value = "text-embedding-3-small")]
    embeddings_model: String,
    /// A file holding the endpoint's API key (sent as a bearer token); none: no key.
    #[arg(long, env = "YUXI_EMBEDDINGS_API_KEY_FILE", value_name = "FILE")]
    embeddings_api_key_file: Option<std::path::PathBuf>,
}

impl EmbeddingArgs {
    /// The endpoint these flags name, or `None`. Errors: the key file cannot be read, or the client
    /// cannot be built.
    pub fn embeddings(&self) -> anyhow::Result<Option<yuxi_operator::knowledge::embeddings::Embeddings>> {
        let Some(url) = &self.embeddings_url else { return Ok(None) };
        let key = match &self.embeddings_api_key_file {
            Some(file) => Some(
                std::fs::read_to_string(file)
                    .map_err(|e| anyhow::anyhow!("cannot read the embeddings API key {}: {e}", file.display()))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        Ok(Some(yuxi_operator::knowledge::embeddings::Embeddings::new(url, &self.embeddings_model, key)?))
    }
}

/// The facade's abuse limits as flags (docs/reference/limits.md), shared by `api` and `local`.
#[derive(clap::Args, Clone, Debug)]
pub struct LimitArgs {
    /// Unfinished runs one user may have at once (429 `max_runs_per_user` beyond).
    #[arg(long, env = "YUXI_MAX_RUNS_PER_USER", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    max_runs_per_user: u32,
    /// Unfinished runs of all users at once (429 `max_runs` beyond).
    #[arg(long, env = "YUXI_MAX_RUNS", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    max_runs: u32,
    /// Event streams one user may have open on this facade (429 `max_streams_per_user` beyond).
    #[arg(long, env = "YUXI_MAX_STREAMS_PER_USER", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    max_streams_per_user: u32,
    /// Event streams one run may have open on this facade (429 `max_streams_per_run` beyond).
    #[arg(long, env = "YUXI_MAX_STREAMS_PER_RUN", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    max_streams_per_run: u32,
    /// Agents one user may own (429 `max_agents_per_user` beyond).
    #[arg(long, env = "YUXI_MAX_AGENTS_PER_USER", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    max_agents_per_user: u32,
    /// Knowledge bases one user may own (429 `max_knowledge_bases_per_user` beyond).
    #[arg(long, env = "YUXI_MAX_KNOWLEDGE_BASES_PER_USER", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    max_knowledge_bases_per_user: u32,
    /// MCP sessions one user (with their runs) may hold open on this facade (429
    /// `max_mcp_sessions_per_user` beyond).
    #[arg(long, env = "YUXI_MAX_MCP_SESSIONS_PER_USER", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    max_mcp_sessions_per_user: u32,
    /// MCP sessions open on this facade (429 `max_mcp_sessions` beyond).
    #[arg(long, env = "YUXI_MAX_MCP_SESSIONS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    max_mcp_sessions: u32,
    /// Seconds a client may take to send a request's whole body (408 beyond).
    #[arg(long, env = "YUXI_BODY_TIMEOUT_SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    body_timeout_seconds: u64,
    /// Bytes of request bodies held in memory at once, by all callers together (429
    /// `max_body_bytes_in_flight` beyond).
    #[arg(long, env = "YUXI_MAX_BODY_BYTES_IN_FLIGHT", default_value_t = 64 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(10 * 1024 * 1024..=1 << 40))]
    max_body_bytes_in_flight: u64,
    /// Connections held open at once; one more is closed at once.
    #[arg(long, env = "YUXI_MAX_CONNECTIONS", default_value_t = connections::DEFAULT_MAX_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Tokens one user's runs may use in a UTC day in this namespace; starts beyond answer 429
    /// `max_tokens_per_user_per_day`. Unset: no quota.
    #[arg(long, env = "YUXI_MAX_TOKENS_PER_USER_PER_DAY", value_parser = clap::value_parser!(i64).range(1..))]
    pub max_tokens_per_user_per_day: Option<i64>,
    /// Tokens all runs of this namespace may use in a UTC day; starts beyond answer 429
    /// `max_tokens_per_namespace_per_day`. Unset: no quota.
    #[arg(long, env = "YUXI_MAX_TOKENS_PER_NAMESPACE_PER_DAY", value_parser = clap::value_parser!(i64).range(1..))]
    pub max_tokens_per_namespace_per_day: Option<i64>,
}

impl LimitArgs {
    /// The limits these flags set.
    pub fn limits(&self) -> yuxi_operator::facade::http::limits::Limits {
        yuxi_operator::facade::http::limits::Limits {
            runs: yuxi_operator::run::RunLimits {
                per_user: self.max_runs_per_user as usize,
                total: self.max_runs as usize,
            },
            streams_per_user: self.max_streams_per_user as usize,
            streams_per_run: self.max_streams_per_run as usize,
            agents_per_user: self.max_agents_per_user as usize,
            knowledge_bases_per_user: self.max_knowledge_bases_per_user as usize,
            mcp_sessions_per_user: self.max_mcp_sessions_per_user as usize,
            mcp_sessions: self.max_mcp_sessions as usize,
            body_timeout: std::time::Duration::from_secs(self.body_timeout_seconds),
            body_bytes_in_flight: usize::try_from(self.max_body_bytes_in_flight).unwrap_or(usize::MAX),
            quotas: self.quotas(),
            namespace: yuxi_operator::resources::manifest_set::DEFAULT_NAMESPACE.to_string(),
        }
    }

    /// The daily token quotas these flags set.
    pub fn quotas(&self) -> yuxi_operator::run::budget::DailyQuotas {
        yuxi_operator::run::budget::DailyQuotas {
            per_user: self.max_tokens_per_user_per_day,
            per_namespace: self.max_tokens_per_namespace_per_day,
        }
    }
}

/// Sweeps `store` for abandoned runs after `first_after` and then every `every` ([`Store::sweep`]):
/// each is ended `interrupted` with its result and one `end`. Failures are logged and the next sweep
/// tries again.
///
/// [`Store::sweep`]: yuxi_operator::store::Store::sweep
pub fn spawn_sweeper(
    store: yuxi_operator::store::Store,
    first_after: std::time::Duration,
    every: std::time::Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(first_after).await;
        loop {
            match store.sweep().await {
                Ok(0) => {}
                Ok(ended) => {
                    tracing::warn!(runs = ended, "ended abandoned runs");
                    let span = tracing::trace_span!(target: yuxi_operator::telemetry::TARGET, "sweep", yuxi.sweep.ended = ended as i64);
                    span.in_scope(|| {
                        tracing::event!(target: yuxi_operator::telemetry::TARGET, tracing::Level::TRACE, yuxi.sweep.ended = ended as i64, "runs_swept")
                    });
                }
                Err(err) => tracing::warn!(error = %err, "cannot sweep the run store for abandoned runs"),
            }
            tokio::time::sleep(every).await;
        }
    })
}
