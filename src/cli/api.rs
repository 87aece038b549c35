//! `yuxi-operator api`: the facade in a cluster — the Agents of one namespace, TokenReview
//! authentication, runs as AgentRuns, run state in Redis.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use yuxi_operator::facade;
use yuxi_operator::facade::http::auth;
use yuxi_operator::facade::services::catalog;
use yuxi_operator::facade::services::launch;
use yuxi_operator::store::Store;

use super::serve::{bind, serve, shutdown_signal};

/// The facade's settings in a cluster.
#[derive(clap::Args)]
pub struct ApiArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080", env = "YUXI_API_LISTEN")]
    listen: SocketAddr,
    /// The namespace whose Agents are served and where AgentRuns are created.
    #[arg(long, env = "YUXI_NAMESPACE")]
    namespace: String,
    /// Redis, where runs keep their state.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    redis_url: String,
    /// Use a Redis that answers clients without a password (with a warning): anything that reaches it
    /// could read every conversation and forge run state. Refused by default.
    #[arg(long, env = yuxi_operator::run::inputs::env::ALLOW_UNAUTHENTICATED_STORE)]
    allow_unauthenticated_store: bool,
    /// The key run tokens are signed with: a file of at least 32 bytes (the chart's `<release>-run-token-key`
    /// Secret). Every replica of the facade must be given the same one.
    #[arg(long, env = "YUXI_RUN_TOKEN_KEY_FILE", value_name = "FILE")]
    run_token_key_file: PathBuf,
    /// Audiences a user's token must be issued for (repeatable; none: `yuxi-operator`, this facade's own).
    #[arg(long = "token-audience", value_name = "AUDIENCE")]
    token_audiences: Vec<String>,
    /// Members of this Kubernetes group are administrators.
    #[arg(long, default_value = "yuxi:admins")]
    admin_group: String,
    /// Members of this Kubernetes group are super administrators.
    #[arg(long, default_value = "yuxi:superadmins")]
    superadmin_group: String,
    /// A group `<prefix><n>` puts its members in department `n`.
    #[arg(long, default_value = "yuxi:department:")]
    department_group_prefix: String,
    /// Where uploaded knowledge base documents are kept (shared by the replicas: the chart's
    /// `knowledge` volume).
    #[arg(long, default_value = "/var/lib/yuxi/knowledge/documents", env = "YUXI_KNOWLEDGE_DOCUMENTS_DIR")]
    knowledge_documents_dir: PathBuf,
    /// Where this replica keeps its knowledge base indexes (its own: an emptyDir is enough, they are
    /// rebuilt from the documents).
    #[arg(long, default_value = "/var/lib/yuxi/index", env = "YUXI_KNOWLEDGE_INDEX_DIR")]
    knowledge_index_dir: PathBuf,
    /// The documents volume that `documents.folder` sources are relative to; unset: folder sources are
    /// not ready.
    #[arg(long, env = "YUXI_KNOWLEDGE_SOURCES_DIR")]
    knowledge_sources_dir: Option<PathBuf>,
    /// The users' data volume, mounted read-only (the sandbox pods' `userDataClaim`; its `users/` folder
    /// holds the scopes): the conversations' files and the workspaces are read from it. Unset: the file
    /// routes answer 503.
    #[arg(long, env = "YUXI_USER_DATA_DIR", value_name = "DIR")]
    user_data_dir: Option<PathBuf>,
    /// The address of a trace in the tracing backend, `{trace_id}` standing for its id (Jaeger:
    /// `https://jaeger.example/trace/{trace_id}`): a run's timeline links to it.
    #[arg(long, env = "YUXI_TRACE_LINK", value_name = "URL")]
    trace_link: Option<String>,
    /// An OIDC issuer whose tokens are accepted beside the others: a YAML file of `issuer`,
    /// `audiences`, `uidClaim`, `roleClaim`, `adminValues`, `superadminValues`, `departmentClaim`,
    /// `leewaySeconds`.
    #[arg(long, env = "YUXI_OIDC_CONFIG", value_name = "FILE")]
    oidc_config: Option<PathBuf>,
    /// Create and change Agents, KnowledgeBases and AgentRuns as the caller (`Impersonate-User`,
    /// `-Uid`, `-Group`), so the cluster's RBAC, audit log and admission see the person; the
    /// facade's account then needs `impersonate` on users and groups. Off: every write is the
    /// facade's own (docs/concepts/trust-model.md says what each gives).
    #[arg(long, env = "YUXI_IMPERSONATE")]
    impersonate: bool,
    /// The model of agents that name none, as the sandbox pods' settings have it (`defaultModel`): listed
    /// first by the model picker.
    #[arg(long, env = yuxi_operator::run::inputs::env::DEFAULT_MODEL, value_name = "MODEL")]
    default_model: Option<String>,
    /// The models a person may pick besides the default one (the model picker's list), comma-separated
    /// `<provider>/<model>`.
    #[arg(long, env = "YUXI_MODELS", value_name = "MODEL,...", value_delimiter = ',')]
    models: Vec<String>,
    /// The OpenAI-compatible endpoint `openai/` models are served by, as the sandbox pods' settings have it
    /// (`openaiBaseUrl`): named in the model picker. Unset: OpenAI's.
    #[arg(long, env = yuxi_operator::run::inputs::env::OPENAI_BASE_URL, value_name = "URL")]
    openai_base_url: Option<String>,
    #[command(flatten)]
    limits: super::LimitArgs,
    #[command(flatten)]
    embeddings: super::EmbeddingArgs,
}

/// Serves the facade until SIGTERM or Ctrl-C, then lets requests under way finish. Exit status 1 when the
/// cluster or Redis cannot be reached, or the address cannot be bound.
pub fn run(args: ApiArgs) -> ExitCode {
    super::run_async(serve_api(args))
}

async fn serve_api(args: ApiArgs) -> anyhow::Result<()> {
    let (client, config) = super::connect_with_config(
        "the facade serves the Agents of its namespace and checks tokens through the Kubernetes API; run it in a cluster or with a kubeconfig, or use `yuxi-operator local`",
    )
    .await?;
    let writers = if args.impersonate {
        tracing::info!("Agents, KnowledgeBases and AgentRuns are written as their callers (impersonation)");
        facade::services::writers::Writers::impersonating(client.clone(), config)
    } else {
        facade::services::writers::Writers::own(client.clone())
    };
    let run_tokens = read_token_key(&args.run_token_key_file)?;
    let models = facade::services::models::ModelCatalog::new(args.default_model, args.models, args.openai_base_url)
        .map_err(anyhow::Error::msg)?;
    let store = Store::connect_redis(
        &args.redis_url,
        yuxi_operator::store::StoreAuth::from_flag(args.allow_unauthenticated_store),
    )
    .await
    .map_err(|e| anyhow::anyhow!("cannot reach Redis (REDIS_URL): {e}"))?;
    let mapping = auth::GroupMapping {
        admin_group: args.admin_group,
        superadmin_group: args.superadmin_group,
        department_prefix: args.department_group_prefix,
    };
    let metrics = facade::http::metrics::FacadeMetrics::default();
    let reviewer = auth::TokenReviewer::new(client.clone(), args.token_audiences, mapping, metrics.token_reviews());
    tracing::info!(audiences = ?reviewer.audiences(), "user tokens are checked by TokenReview");
    super::extract_text::read_documents_in_subprocesses()?;
    let knowledge = facade::services::knowledge::Knowledge::new(
        facade::services::catalog::KnowledgeCatalog::Cluster(Box::new(catalog::ClusterCatalog::with_writers(
            writers.clone(),
            &args.namespace,
        ))),
        facade::services::knowledge::KnowledgeSettings {
            documents_dir: args.knowledge_documents_dir,
            index_dir: Some(args.knowledge_index_dir),
            sources_dir: args.knowledge_sources_dir,
        },
        facade::services::knowledge::PlatformObjects::cluster(client.clone(), &args.namespace),
        Some(kube::Api::namespaced(client.clone(), &args.namespace)),
    );
    let knowledge = std::sync::Arc::new(match args.embeddings.embeddings()? {
        Some(embeddings) => knowledge.with_embeddings(embeddings),
        None => knowledge,
    });
    let _indexer = knowledge.clone().spawn_syncer();
    let state: facade::FacadeState = facade::FacadeParts {
        auth: super::oidc::with_oidc(reviewer.into(), args.oidc_config.as_deref())?,
        agents: facade::AgentCatalog::Cluster(Box::new(catalog::ClusterCatalog::with_writers(
            writers.clone(),
            &args.namespace,
        ))),
        runs: Some(facade::Runs {
            store,
            launcher: launch::Launcher::Cluster(launch::ClusterLauncher::with_writers(writers, &args.namespace)),
        }),
        metrics,
        run_tokens,
        limits: yuxi_operator::facade::http::limits::Limits {
            namespace: args.namespace.clone(),
            ..args.limits.limits()
        },
        streams: Default::default(),
        queues: Default::default(),
        chat_calls: Default::default(),
        quick_model: None,
        knowledge: Some(knowledge),
        user_files: args.user_data_dir,
        models,
        model_resources: catalog::Catalog::Cluster(Box::new(catalog::ClusterCatalog::new(
            client.clone(),
            &args.namespace,
        ))),
        mcp_resources: catalog::Catalog::Cluster(Box::new(catalog::ClusterCatalog::new(
            client.clone(),
            &args.namespace,
        ))),
        trace_link: args.trace_link,
        local: None,
    }
    .into();
    // Starts what waits in the threads' queues, after a restart too.
    let _dispatcher = facade::services::run_queue::spawn_dispatcher(state.clone());
    // The metrics over OTLP too, when export is on.
    let _metrics = super::telemetry::export_configured().then(|| {
        let state = state.clone();
        tokio::spawn(yuxi_operator::telemetry::metrics::export("yuxi-operator-api".into(), move || {
            let state = state.clone();
            async move { facade::features::models::metrics::metrics_text(&state).await }
        }))
    });
    let listener = bind(args.listen)?;
    tracing::info!(listen = %args.listen, namespace = %args.namespace, "serving the facade");
    serve(listener, facade::router(state), shutdown_signal(), args.limits.max_connections as usize).await?;
    Ok(())
}

/// The run-token key in `path`: its bytes, less one trailing newline. Errors: the file cannot be read, or
/// holds fewer than 32 bytes.
fn read_token_key(path: &std::path::Path) -> anyhow::Result<yuxi_operator::run::grant::TokenKey> {
    let bytes =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("cannot read the run token key {}: {e}", path.display()))?;
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    yuxi_operator::run::grant::TokenKey::new(bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}
