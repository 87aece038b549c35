//! `yuxi-operator runner`: executes one AgentRun to a terminal state; what runs in a sandbox pod's
//! `runner` container, and what the local mode starts per run with `--runner-processes`.
//!
//! Exit status: 0 when the run ended other than `failed`, 1 when it failed, [`EXIT_UNUSABLE`] (2) when it
//! could not run at all (inputs, store or runtime unusable).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use yuxi_operator::run::RunStatus;
use yuxi_operator::run::inputs::env;
use yuxi_operator::runner::model::connection::Connection;
use yuxi_operator::runner::model::{ModelSettings, OpenAiEndpoint};
use yuxi_operator::runner::tools::files::VolumePaths;
use yuxi_operator::runner::{self, RunnerOptions, mcp};
use yuxi_operator::store::RunnerStoreClient;

/// The endpoint of `openai/` models when only `OPENAI_API_KEY` is set.
const OPENAI_API_BASE: &str = "https://api.openai.com/v1";

/// Exit status of a runner that could not run at all.
pub const EXIT_UNUSABLE: u8 = 2;

/// The runner's inputs; see the `runner` module for the contract.
#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("store").required(true).args(["redis_url", "store_socket"]))]
pub struct RunnerArgs {
    /// The AgentRun manifest to execute.
    #[arg(long, value_name = "FILE")]
    run: PathBuf,
    /// The Agent manifest the run names.
    #[arg(long, value_name = "FILE")]
    agent: PathBuf,
    /// The user's workspace volume.
    #[arg(long, value_name = "DIR", default_value = "/home/gem/user-data/workspace")]
    workspace: PathBuf,
    /// The parent conversation's uploads volume.
    #[arg(long, value_name = "DIR", default_value = "/home/gem/user-data/uploads")]
    uploads: PathBuf,
    /// The parent conversation's outputs volume.
    #[arg(long, value_name = "DIR", default_value = "/home/gem/user-data/outputs")]
    outputs: PathBuf,
    /// The agent's skills scope.
    #[arg(long, value_name = "DIR", default_value = "/home/gem/skills")]
    skills: PathBuf,
    /// Run `execute` commands in the sandbox container listening on this socket, not as subprocesses.
    #[arg(long, value_name = "PATH")]
    sandbox_socket: Option<PathBuf>,
    /// Redis, where events, history and the result go (this or --store-socket).
    #[arg(long, env = env::REDIS_URL, hide_env_values = true)]
    redis_url: Option<String>,
    /// Use a Redis that answers clients without a password (with a warning): anything that reaches it
    /// could read every conversation and forge run state. Refused by default.
    #[arg(long, env = yuxi_operator::run::inputs::env::ALLOW_UNAUTHENTICATED_STORE)]
    allow_unauthenticated_store: bool,
    /// The local mode's store socket, where events, history and the result go (this or --redis-url).
    #[arg(long, env = env::STORE_SOCKET, value_name = "PATH")]
    store_socket: Option<PathBuf>,
    /// How long the runner's lease on its run lasts without renewal, in seconds (renewed every third
    /// of it): a runner that dies is known to be gone this long after its last renewal.
    #[arg(long, env = env::RUN_LEASE_SECONDS, default_value_t = yuxi_operator::run::inputs::DEFAULT_LEASE_SECONDS)]
    lease_seconds: u64,
    /// The model of agents whose context names none.
    #[arg(long, env = env::DEFAULT_MODEL)]
    default_model: Option<String>,
    /// The OpenAI-compatible endpoint of `openai/` models.
    #[arg(long, env = env::OPENAI_BASE_URL)]
    openai_base_url: Option<String>,
    /// The Model resource the run runs on (a manifest), its referenced values in the `YUXI_MODEL_*`
    /// variables.
    #[arg(long, env = env::MODEL_FILE, value_name = "FILE")]
    model_file: Option<PathBuf>,
    /// The folder `scripted/file:<name>` model scripts are read from (none: such models are refused).
    #[arg(long, env = env::SCRIPTS_DIR, value_name = "DIR")]
    scripts_dir: Option<PathBuf>,
    /// The MCP servers agents may use (a YAML map of name to {url, tools}).
    #[arg(long, env = env::MCP_SERVERS, value_name = "FILE")]
    mcp_servers: Option<PathBuf>,
    /// The facade a main agent's run delegates to subagents through, with the run's token from
    /// YUXI_RUN_TOKEN (an environment variable only, never an argument).
    #[arg(long, env = env::FACADE_URL, value_name = "URL")]
    facade_url: Option<String>,
    /// The read-only skills library the agent's skills are projected from into the skills scope.
    #[arg(long, env = env::SKILLS_LIBRARY, value_name = "DIR")]
    skills_library: Option<PathBuf>,
    /// Folders or files `execute` commands must not see (`:`-separated in the environment): the local
    /// mode hides its data folder, where other runs' files are.
    #[arg(long = "sandbox-hide", env = env::SANDBOX_HIDE, value_name = "PATH", value_delimiter = ':')]
    sandbox_hide: Vec<PathBuf>,
    /// Start as a warm pod's runner: hold no run, wait for this pod's claim in the store (keyed by
    /// `--pod-uid`), write its inputs to the folder of `--run` and `--agent`, then run it
    /// (docs/concepts/warm-pools.md). Redis only.
    #[arg(long, requires = "pod_uid")]
    await_claim: bool,
    /// How long a warm pod's runner waits for its claim, in seconds; none by then, it exits with 0.
    #[arg(long, value_name = "SECONDS", default_value_t = 330)]
    claim_wait_seconds: u64,
    /// This pod's uid (from the downward API), the key of its claim.
    #[arg(long, env = yuxi_operator::run::claim::POD_UID_ENV, value_name = "UID")]
    pod_uid: Option<String>,
    /// Run `execute` commands unconfined (plain subprocesses) when bubblewrap cannot confine them; they are
    /// refused otherwise.
    #[arg(long, env = env::UNCONFINED_SANDBOX)]
    unconfined_sandbox: bool,
}

/// The endpoint of `openai/` models: `base_url` (`OPENAI_BASE_URL`) with the key in `OPENAI_API_KEY`; a
/// key alone means OpenAI's own endpoint; neither, none.
pub fn openai_endpoint(base_url: Option<String>) -> Option<OpenAiEndpoint> {
    let api_key = std::env::var(env::OPENAI_API_KEY).unwrap_or_default();
    let base_url =
        base_url.filter(|u| !u.is_empty()).or_else(|| (!api_key.is_empty()).then(|| OPENAI_API_BASE.to_string()));
    base_url.map(|base_url| OpenAiEndpoint { base_url, api_key })
}

/// The connection of the Model in `path` (the run's pod's inputs), each value it references read from
/// its `YUXI_MODEL_*` variable ([`yuxi_operator::resources::model::secrets`]), which the controller
/// fills from the Model's Secrets in this container only.
fn pod_model(path: &std::path::Path) -> Result<Connection, String> {
    use yuxi_operator::resources::manifest::{Manifest, read_manifest_file};
    let model = match read_manifest_file(path).map_err(|e| e.to_string())?.as_slice() {
        [Manifest::Model(model)] => (**model).clone(),
        _ => return Err(format!("{}: is not one Model", path.display())),
    };
    let name = model.metadata.name.clone().unwrap_or_default();
    Connection::from_spec(
        &name,
        &model.spec,
        |reference| std::env::var(reference.env_name()).ok(),
        |reference| format!(" (variable {} is unset)", reference.env_name()),
    )
    .map_err(|e| e.to_string())
}

/// Takes from this process the right of other processes of the same user (commands the model runs among
/// them) to read its memory and environment through /proc, where the model key and the run's
/// credentials are. Called first thing, before the arguments are parsed.
pub fn forbid_inspection() {
    // SAFETY: prctl(PR_SET_DUMPABLE) changes only this process's own dumpable flag.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
    }
}

/// Executes the run and reports its final status on stderr (`run <status>`, with its error when there
/// is one). See the module doc for the exit status.
pub fn run(args: RunnerArgs) -> ExitCode {
    // One run is one task tree: a current-thread runtime starts in microseconds where a multi-threaded
    // one starts a worker per core; blocking file work still goes to the runtime's blocking threads.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let code = runtime.block_on(execute(args));
    // A tool stuck in a blocking call (a file operation the deadline abandoned) must not keep the process
    // alive after the run has ended.
    runtime.shutdown_timeout(Duration::from_millis(500));
    code
}

/// A warm pod's wait for its claim: the claim's files written where `run_file`'s folder is (the pod's
/// inputs folder), and its token. `Ok(None)` when no run claimed the pod in time.
async fn await_claim(
    store: &RunnerStoreClient,
    pod_uid: &str,
    wait: Duration,
    run_file: &std::path::Path,
) -> Result<Option<Option<String>>, String> {
    use yuxi_operator::run::claim::Claim;
    let Some(text) = store.take_claim(pod_uid, wait).await.map_err(|e| format!("cannot take this pod's claim: {e}"))?
    else {
        return Ok(None);
    };
    let claim = Claim::parse(&text).map_err(|e| e.to_string())?;
    let folder = run_file.parent().ok_or_else(|| format!("{}: has no folder", run_file.display()))?;
    for (name, text) in &claim.files {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = folder.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(&path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        file.write_all(text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(Some(claim.token))
}

async fn execute(args: RunnerArgs) -> ExitCode {
    let store = match connect(&args).await {
        Ok(store) => store,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let mut token = std::env::var(env::RUN_TOKEN).ok().filter(|t| !t.is_empty());
    if args.await_claim {
        let pod_uid = args.pod_uid.clone().unwrap_or_default();
        // An idle pod is deleted by its pool: it ends at once on SIGTERM (as its container's first
        // process, it would otherwise wait out the grace period), having run nothing.
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(err) => {
                eprintln!("error: cannot listen for SIGTERM: {err}");
                return ExitCode::from(EXIT_UNUSABLE);
            }
        };
        let wait = Duration::from_secs(args.claim_wait_seconds);
        let claimed = tokio::select! {
            claimed = await_claim(&store, &pod_uid, wait, &args.run) => claimed,
            _ = terminate.recv() => {
                eprintln!("stopped before any run claimed this pod");
                return ExitCode::SUCCESS;
            }
        };
        match claimed {
            Ok(Some(claimed)) => token = claimed,
            Ok(None) => {
                eprintln!("no run claimed this pod in {} s", args.claim_wait_seconds);
                return ExitCode::SUCCESS;
            }
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::from(EXIT_UNUSABLE);
            }
        }
    }
    let mcp_servers = match &args.mcp_servers {
        Some(path) => match mcp::load_servers(path) {
            Ok(servers) => servers,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::from(EXIT_UNUSABLE);
            }
        },
        None => Default::default(),
    };
    // OPENAI_BASE_URL names the endpoint; a key alone means OpenAI's own.
    let openai = openai_endpoint(args.openai_base_url.clone());
    let mut models = ModelSettings { openai, scripts_dir: args.scripts_dir, ..ModelSettings::default() };
    if let Some(path) = &args.model_file {
        match pod_model(path) {
            Ok(connection) => {
                models.resources.insert(connection.name.clone(), Ok(connection));
            }
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::from(EXIT_UNUSABLE);
            }
        }
    }
    let options = RunnerOptions {
        run_file: args.run,
        agent_file: args.agent,
        volumes: VolumePaths {
            workspace: args.workspace,
            uploads: args.uploads,
            outputs: args.outputs,
            skills: args.skills,
        },
        sandbox_socket: args.sandbox_socket,
        default_model: args.default_model,
        models,
        mcp_servers,
        // A store socket has no cancel notice: checking often is all there is, and it is cheap.
        cancel_poll: if args.store_socket.is_some() { Duration::from_millis(250) } else { Duration::from_secs(1) },
        facade: match (args.facade_url, token) {
            (Some(url), Some(token)) => Some(runner::FacadeAccess { url, token }),
            _ => None,
        },
        skills_library: args.skills_library,
        sandbox_hide: args.sandbox_hide,
        lease_ttl: Duration::from_secs(args.lease_seconds.max(1)),
        confinement: if args.unconfined_sandbox {
            runner::Confinement::Unconfined
        } else {
            runner::Confinement::Required
        },
    };
    match runner::run(&options, store).await {
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(EXIT_UNUSABLE)
        }
        Ok(report) => {
            match &report.error {
                Some(error) => eprintln!("run {}: {error}", report.status.as_str()),
                None => eprintln!("run {}", report.status.as_str()),
            }
            if report.status == RunStatus::Failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
        }
    }
}

/// The run store the arguments name: Redis or the local mode's socket.
async fn connect(args: &RunnerArgs) -> Result<RunnerStoreClient, String> {
    match (&args.redis_url, &args.store_socket) {
        (Some(url), _) => RunnerStoreClient::connect_redis(
            url,
            yuxi_operator::store::StoreAuth::from_flag(args.allow_unauthenticated_store),
        )
        .await
        .map_err(|e| format!("cannot reach Redis ({}): {e}", env::REDIS_URL)),
        (None, Some(path)) => RunnerStoreClient::connect_socket(path)
            .await
            .map_err(|e| format!("cannot reach the store socket ({}): {e}", env::STORE_SOCKET)),
        (None, None) => Err("no store: pass --redis-url or --store-socket".to_string()),
    }
}
