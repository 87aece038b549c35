//! `yuxi-operator local`: the whole system on one machine without a cluster — the facade over the Agent
//! manifests of a folder, runs as `runner` subprocesses under a local data folder, run state in Redis when
//! one is given and in this process otherwise.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use yuxi_operator::facade::services::launch::{LocalLauncher, LocalRuns, RunnerStore};
use yuxi_operator::facade::{self, AgentCatalog, FacadeParts, FacadeState, Runs, Users};
use yuxi_operator::resources::manifest_set;
use yuxi_operator::run::inputs::env;
use yuxi_operator::store::Store;
use yuxi_operator::store::socket::{bind_store_socket, serve_store_socket};

use super::serve::{bind, serve, shutdown_signal};

/// The local mode's store socket, in its data folder, when it keeps runs in its own process.
const STORE_SOCKET: &str = "store.sock";

/// The local mode's manifests, users, listener and how it runs agents.
#[derive(clap::Args)]
pub struct LocalArgs {
    /// The folder of Agent manifests.
    #[arg(long, value_name = "DIR", default_value = "examples")]
    manifests: PathBuf,
    /// Address the facade listens on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The users file: a YAML list of {token, uid, role, department_id, username, password_hash}.
    #[arg(long, value_name = "FILE", default_value = "examples/local-users.yaml")]
    users: PathBuf,
    /// Where runs keep their volumes.
    #[arg(long, value_name = "DIR", default_value = ".run/data")]
    data_dir: PathBuf,
    /// Redis, where runs keep their state; without it they keep it in this process (lost when it
    /// stops) and runners reach it over `<data-dir>/store.sock`.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    redis_url: Option<String>,
    /// Use a Redis that answers clients without a password (with a warning): anything that reaches it
    /// could read every conversation and forge run state. Refused by default.
    #[arg(long, env = yuxi_operator::run::inputs::env::ALLOW_UNAUTHENTICATED_STORE)]
    allow_unauthenticated_store: bool,
    /// Let `execute` run commands UNCONFINED (plain subprocesses that can read what this user can and
    /// reach the network) when bubblewrap cannot confine them; they are refused otherwise.
    #[arg(long)]
    unconfined_sandbox: bool,
    /// Run each run in a `runner` subprocess of its own, as a pod does, instead of inside this process
    /// (the default: the same runner, store, volumes and `execute` sandbox, without a process's start-up
    /// cost).
    #[arg(long)]
    runner_processes: bool,
    #[command(flatten)]
    limits: super::LimitArgs,
    #[command(flatten)]
    embeddings: super::EmbeddingArgs,
    /// How many runners run at once for main agents, and as many again for subagents; runs beyond
    /// wait `pending`, in order (bounded by --max-runs and --max-runs-per-user).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_concurrent_runs: u32,
    /// How long a runner's lease on its run (and this process's keep of it) lasts without renewal, in
    /// seconds: a run whose runner or local mode died is ended `interrupted` at most about this long
    /// later, by the sweeper of any local mode on the same store.
    #[arg(long, default_value_t = yuxi_operator::run::inputs::DEFAULT_LEASE_SECONDS, value_parser = clap::value_parser!(u64).range(1..=3600))]
    run_lease_seconds: u64,
    /// Without Redis: how many runs that have ended this process keeps (their records, events and
    /// results), the earliest ended forgotten first; each is forgotten two hours after its end at the
    /// latest.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    keep_finished_runs: u64,
    /// Without Redis: how many threads (conversation histories) this process keeps for each user, that
    /// user's least recently written forgotten first (never one a run holds, never because of another
    /// user's); each is forgotten 30 days after its last write at the latest.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    keep_threads: u64,
    /// The model of agents that name none: by default each agent's own script
    /// (`<scripts-dir>/<slug>.yaml`) when it has one, else `scripted/echo`.
    #[arg(long, env = env::DEFAULT_MODEL, default_value = "scripted/auto")]
    default_model: String,
    /// The models a person may pick for a conversation besides the default one (the model picker's
    /// list), comma-separated `<provider>/<model>`.
    #[arg(long, env = "YUXI_MODELS", value_name = "MODEL,...", value_delimiter = ',', default_value = "scripted/echo")]
    models: Vec<String>,
    /// Where `scripted/file:` model scripts are read from.
    #[arg(long, env = env::SCRIPTS_DIR, value_name = "DIR", default_value = "examples/scripts")]
    scripts_dir: PathBuf,
    /// The skills library (folders with a SKILL.md) agents' skills are projected from; runs get no
    /// skills when the folder does not exist.
    #[arg(long, env = env::SKILLS_LIBRARY, value_name = "DIR", default_value = "examples/skills")]
    skills_library: PathBuf,
    /// The Secrets the manifests' Models name (their keys), as v1 Secret manifests in a file readable by
    /// its owner only; a variable `YUXI_SECRET_<NAME>_<KEY>` takes precedence over it.
    #[arg(long, env = "YUXI_SECRETS_FILE", value_name = "FILE")]
    secrets: Option<PathBuf>,
    /// The address of a trace in the tracing backend, `{trace_id}` standing for its id: a run's
    /// timeline links to it.
    #[arg(long, env = "YUXI_TRACE_LINK", value_name = "URL")]
    trace_link: Option<String>,
    /// An OIDC issuer whose tokens are accepted beside the others: a YAML file of `issuer`,
    /// `audiences`, `uidClaim`, `roleClaim`, `adminValues`, `superadminValues`, `departmentClaim`,
    /// `leewaySeconds`.
    #[arg(long, env = "YUXI_OIDC_CONFIG", value_name = "FILE")]
    oidc_config: Option<PathBuf>,
}

/// Serves the facade until SIGTERM or Ctrl-C, then lets requests under way finish and removes the store
/// socket. Exit status 1 when a manifest or the users file is not valid, Redis (when given) cannot be
/// reached, or the address cannot be bound.
pub fn run(args: LocalArgs) -> ExitCode {
    super::run_async(serve_local(args))
}

async fn serve_local(args: LocalArgs) -> anyhow::Result<()> {
    let LocalArgs {
        manifests,
        listen,
        users,
        data_dir,
        redis_url,
        allow_unauthenticated_store,
        unconfined_sandbox,
        runner_processes,
        limits,
        embeddings,
        max_concurrent_runs,
        run_lease_seconds,
        keep_finished_runs,
        keep_threads,
        default_model,
        models,
        scripts_dir,
        skills_library,
        secrets,
        trace_link,
        oidc_config,
    } = args;
    let openai_base_url = std::env::var(env::OPENAI_BASE_URL).ok();
    let models = facade::services::models::ModelCatalog::new(Some(default_model.clone()), models, openai_base_url)
        .map_err(anyhow::Error::msg)?;
    let store_auth = yuxi_operator::store::StoreAuth::from_flag(allow_unauthenticated_store);
    let skills_library = match skills_library.canonicalize() {
        Ok(library) => Some(library),
        Err(err) => {
            tracing::warn!(library = %skills_library.display(), error = %err, "no skills library: runs get no skills");
            None
        }
    };
    let configured_mcp = super::in_process::configured_mcp()?;
    let local_mode = facade::services::local_mode::LocalMode::new(
        skills_library.clone(),
        configured_mcp.keys().cloned().collect(),
        manifests.display().to_string(),
    );
    // The data folder is taken before the manifests are read: they may name what was created through
    // the API and kept there.
    // Everything this process and its runners write is theirs alone: the data folder 0700, files 0600.
    // SAFETY: umask only sets this process's file mode mask.
    unsafe {
        libc::umask(0o077);
    }
    let data_folder = super::local_data::DataFolder::take(&data_dir)?;
    let data_dir = data_folder.path().to_path_buf();
    // Held while this process runs: one local mode per data folder, whichever store it keeps runs in.
    let _data_lock = data_folder.lock()?;
    let _data_guard = data_folder.spawn_guard(local_mode.clone());
    let saved_agents = saved(&data_dir.join("agents"), "agents")?.agents;
    let saved_kbs = saved(&data_dir.join("knowledge-bases"), "knowledge bases")?.knowledge_bases;
    let files = manifest_set::manifest_files(std::slice::from_ref(&manifests))?;
    let around = super::local_follow::surroundings(
        &saved_agents,
        saved_kbs.iter().map(kube::ResourceExt::name_any).collect(),
        &local_mode,
    );
    let (followed, loaded) = manifest_set::follow::Followed::start(&files, &around).map_err(|problems| {
        anyhow::anyhow!("the manifests in {} are not valid:\n  {}", manifests.display(), problems.join("\n  "))
    })?;
    let manifest_set::Loaded { agents, knowledge_bases, config_maps, models: model_resources, mcp_servers } = loaded;
    let held_endpoints = (model_resources.clone(), mcp_servers.clone(), config_maps.clone());
    let mcp_servers = super::local_mcp::reachable(mcp_servers);
    let users = Users::load(&users).map_err(anyhow::Error::msg)?;
    let secrets = std::sync::Arc::new(super::local_models::LocalSecrets::load(secrets.as_deref())?);
    let connections = super::local_models::connect_all(&model_resources, &secrets, &config_maps);
    for (name, connection) in &connections {
        if let Err(err) = connection {
            tracing::warn!(model = %name, "runs on this Model will fail: {err}");
        }
    }
    let (store, runner_store) = match &redis_url {
        Some(url) => {
            let store = Store::connect_redis(url, store_auth).await.map_err(|e| {
                anyhow::anyhow!("cannot reach Redis (REDIS_URL): {e}; unset it to keep runs in this process")
            })?;
            tracing::info!("runs keep their state in Redis (REDIS_URL)");
            (store, RunnerStore::Redis { url: url.clone(), auth: store_auth })
        }
        None => {
            let store = Store::memory_with(yuxi_operator::store::Retention {
                finished_runs: keep_finished_runs as usize,
                threads: keep_threads as usize,
                ..Default::default()
            });
            let socket = data_dir.join(STORE_SOCKET);
            let listener = bind_store_socket(&socket).await?;
            tokio::spawn(serve_store_socket(listener, store.clone()));
            tracing::info!(
                socket = %socket.display(),
                "no REDIS_URL: runs keep their state in this process and are lost when it stops; runner subprocesses reach it over the socket, which also keeps a second local mode off this data folder"
            );
            (store, RunnerStore::Socket(socket))
        }
    };
    if unconfined_sandbox {
        tracing::warn!(
            "--unconfined-sandbox: where bubblewrap cannot confine them, the commands models run are NOT confined: they can read every file this user can (other users' files, the users file with its tokens) and reach the network"
        );
    }
    let lease_ttl = std::time::Duration::from_secs(run_lease_seconds);
    // Runs a previous local mode on this store left behind (stopped, killed, its machine gone) end now
    // or, if their lease is still running out, at the next sweep.
    super::spawn_sweeper(store.clone(), std::time::Duration::ZERO, lease_ttl / 2);
    let runs = LocalRuns::new(max_concurrent_runs as usize, lease_ttl);
    let facade_url = Some(format!(
        "http://{}",
        match listen.ip().is_unspecified() {
            true => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), listen.port()),
            false => listen,
        }
    ));
    let scripts_dir = scripts_dir.canonicalize().ok();
    let in_process = if runner_processes {
        if !mcp_servers.is_empty() {
            tracing::warn!(
                "the manifests' McpServers are used by runs in this process only; with --runner-processes list them in YUXI_MCP_SERVERS"
            );
        }
        None
    } else {
        // The runs' credentials (the model key, run tokens) are in this process now: commands of other
        // processes of this user must not read them through /proc.
        super::runner::forbid_inspection();
        let runner = super::in_process::InProcess::new(
            configured_mcp,
            super::in_process::Settings {
                default_model: default_model.clone(),
                scripts_dir: scripts_dir.clone(),
                skills_library: skills_library.clone(),
                sandbox_hide: vec![data_dir.clone()],
                unconfined_sandbox,
                lease_ttl,
                facade_url: facade_url.clone(),
                model_resources: connections.clone(),
                mcp_resources: super::local_mcp::run_inputs(&mcp_servers, &config_maps),
            },
        )?;
        Some(std::sync::Arc::new(runner))
    };
    let quick_model = std::sync::Arc::new(super::quick_model::RunnerModels {
        default_model: default_model.clone(),
        settings: std::sync::RwLock::new(yuxi_operator::runner::model::ModelSettings {
            openai: super::runner::openai_endpoint(std::env::var(env::OPENAI_BASE_URL).ok()),
            scripts_dir: scripts_dir.clone(),
            resources: connections.clone(),
        }),
    });
    let model_inputs = std::sync::Arc::new(std::sync::RwLock::new(super::local_models::subprocess_inputs(
        &model_resources,
        &secrets,
        &config_maps,
    )?));
    let launcher = LocalLauncher {
        in_process: in_process
            .clone()
            .map(|runner| runner as std::sync::Arc<dyn yuxi_operator::facade::services::launch::InProcessRunner>),
        model_inputs: model_inputs.clone(),
        runs: runs.clone(),
        unconfined_sandbox,
        exe: std::env::current_exe()?,
        data_dir: data_dir.clone(),
        store: runner_store.clone(),
        default_model,
        scripts_dir,
        // Main agents delegate through this facade; a wildcard address is reached on the loopback.
        facade_url,
        skills_library,
    };
    // The skills scopes of threads the store has forgotten go with them.
    facade::services::launch::folders::spawn_tidier(launcher.clone(), store.clone(), lease_ttl / 2);
    // Agents created through the API are kept as manifests here, and served again after a restart.
    let saved_in = data_dir.join("agents");
    let agent_catalog = facade::services::catalog::LocalCatalog::new(agents, saved_agents, Some(saved_in));
    let agent_catalog_handle = agent_catalog.clone();
    let mcp_catalog = facade::services::catalog::LocalCatalog::new(mcp_servers.clone(), Vec::new(), None);
    let discovery = super::local_mcp::spawn_discovery(
        mcp_catalog.clone(),
        mcp_servers,
        secrets.clone(),
        std::sync::Arc::new(config_maps.clone()),
    );
    let model_catalog = facade::services::catalog::LocalCatalog::new(model_resources, Vec::new(), None);
    let endpoints = super::local_endpoints::LocalEndpoints {
        secrets,
        in_process,
        quick: quick_model.clone(),
        model_inputs,
        models: model_catalog.clone(),
        mcp: mcp_catalog.clone(),
        discovery: std::sync::Mutex::new(discovery),
        held: std::sync::Mutex::new(held_endpoints),
    };
    let knowledge =
        local_knowledge(knowledge_bases, saved_kbs, config_maps, &data_dir, &manifests, embeddings.embeddings()?)?;
    let _indexer = knowledge.clone().spawn_syncer();
    let knowledge_handle = knowledge.clone();
    let state: FacadeState = FacadeParts {
        auth: super::oidc::with_oidc(users.into(), oidc_config.as_deref())?,
        agents: AgentCatalog::Local(agent_catalog),
        runs: Some(Runs { store: store.clone(), launcher: launcher.into() }),
        metrics: Default::default(),
        // Runs do not outlive this process, nor do their tokens.
        run_tokens: yuxi_operator::run::grant::TokenKey::random(),
        limits: limits.limits(),
        streams: Default::default(),
        queues: Default::default(),
        chat_calls: Default::default(),
        quick_model: Some(quick_model),
        knowledge: Some(knowledge),
        user_files: Some(data_dir.clone()),
        models,
        // The manifests' Models, read-only through the API.
        model_resources: facade::services::catalog::Catalog::Local(model_catalog),
        // The manifests' McpServers, with the tools their discovery finds.
        mcp_resources: facade::services::catalog::Catalog::Local(mcp_catalog),
        trace_link,
        local: Some(local_mode.clone()),
    }
    .into();
    // Starts what waits in the threads' queues, after a restart too.
    let _dispatcher = facade::services::run_queue::spawn_dispatcher(state.clone());
    // The metrics over OTLP too, when export is on.
    let _metrics = super::telemetry::export_configured().then(|| {
        let state = state.clone();
        tokio::spawn(yuxi_operator::telemetry::metrics::export("yuxi-operator-local".into(), move || {
            let state = state.clone();
            async move { facade::features::models::metrics::metrics_text(&state).await }
        }))
    });
    // The manifests folder, followed from here on.
    super::local_follow::spawn(
        manifests.clone(),
        followed,
        super::local_follow::Targets {
            agents: agent_catalog_handle,
            knowledge: knowledge_handle,
            local: local_mode,
            endpoints,
        },
    )?;
    let listener = bind(listen)?;
    tracing::info!(listen = %listen, manifests = %manifests.display(), "serving the facade");
    // Its runs stop with it, and end as the stop breaks them: `interrupted`, each with its result and one
    // `end`, before the facade stops answering. Ended after the server stopped, a run whose call to the
    // facade failed meanwhile ("could not reach the facade") could finish first, `completed`.
    let stopping = {
        let (runs, store) = (runs.clone(), store.clone());
        async move {
            shutdown_signal().await;
            let interrupted = runs.interrupt_all(&store, "the local mode stopped before the run ended").await;
            if interrupted > 0 {
                tracing::warn!(runs = interrupted, "ended the runs under way as interrupted");
            }
        }
    };
    let served = serve(listener, facade::router(state), stopping, limits.max_connections as usize).await;
    // A run that started while the server was stopping ends too.
    runs.interrupt_all(&store, "the local mode stopped before the run ended").await;
    if let RunnerStore::Socket(socket) = &runner_store {
        let _ = std::fs::remove_file(socket);
    }
    served?;
    Ok(())
}

/// The local mode's knowledge bases: the manifests folder's, and those created through the API (`saved`,
/// kept as manifests in `<data>/knowledge-bases`); documents and indexes under `<data>/knowledge`, folder
/// sources relative to the manifests folder, ConfigMap sources among the manifests, MCP tokens from
/// `<data>/secrets/<secret>/<key>`.
fn local_knowledge(
    manifests: Vec<yuxi_operator::resources::KnowledgeBase>,
    saved: Vec<yuxi_operator::resources::KnowledgeBase>,
    config_maps: Vec<k8s_openapi::api::core::v1::ConfigMap>,
    data_dir: &std::path::Path,
    manifests_dir: &std::path::Path,
    embeddings: Option<yuxi_operator::knowledge::embeddings::Embeddings>,
) -> anyhow::Result<std::sync::Arc<facade::services::knowledge::Knowledge>> {
    let saved_in = data_dir.join("knowledge-bases");
    let sources_dir = if manifests_dir.is_dir() {
        manifests_dir.to_path_buf()
    } else {
        manifests_dir.parent().unwrap_or(manifests_dir).to_path_buf()
    };
    super::extract_text::read_documents_in_subprocesses()?;
    let knowledge = facade::services::knowledge::Knowledge::new(
        facade::services::catalog::KnowledgeCatalog::Local(facade::services::catalog::LocalCatalog::new(
            manifests,
            saved,
            Some(saved_in),
        )),
        facade::services::knowledge::KnowledgeSettings {
            documents_dir: data_dir.join("knowledge").join("documents"),
            index_dir: Some(data_dir.join("knowledge").join("index")),
            sources_dir: Some(sources_dir),
        },
        facade::services::knowledge::PlatformObjects::local(data_dir.join("secrets"), config_maps),
        None,
    );
    Ok(std::sync::Arc::new(match embeddings {
        Some(embeddings) => knowledge.with_embeddings(embeddings),
        None => knowledge,
    }))
}

/// The objects created through the API and kept as manifests in `dir` of the data folder (`what` names
/// them in the error), none when it does not exist. Their names are not checked against the others: they
/// were when they were written, and what they named may have gone since, as in a cluster. Errors: a file
/// that is not a valid manifest.
fn saved(dir: &std::path::Path, what: &str) -> anyhow::Result<manifest_set::Loaded> {
    if !dir.is_dir() {
        return Ok(manifest_set::Loaded::default());
    }
    let around = manifest_set::Surroundings {
        severity: yuxi_operator::resources::validation::Severity::Warn,
        ..Default::default()
    };
    manifest_set::load(&manifest_set::manifest_files(&[dir.to_path_buf()])?, &around).map_err(|problems| {
        anyhow::anyhow!("the saved {what} in {} are not valid:\n  {}", dir.display(), problems.join("\n  "))
    })
}
