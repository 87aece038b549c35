//! The `yuxi-operator` command line: one binary, one subcommand per role.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use yuxi_operator::facade::launch::{LocalLauncher, RunnerStore};
use yuxi_operator::resources::{crd, manifest_set as catalog};
use yuxi_operator::run::RunStatus;
use yuxi_operator::runner::model::{ModelSettings, OpenAiEndpoint};
use yuxi_operator::runner::tools::execute::LocalExecutor;
use yuxi_operator::runner::tools::files::VolumePaths;
use yuxi_operator::runner::{self, RunnerOptions, mcp};
use yuxi_operator::store::socket::{bind_store_socket, serve_store_socket};
use yuxi_operator::store::{RunnerStoreClient, Store};
use yuxi_operator::webhook::{self, Admission, ServeOptions};

#[derive(Parser)]
#[command(
    name = "yuxi-operator",
    version,
    about = "Runs LLM agents and subagents declared as Kubernetes custom resources"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of Agent and AgentRun as YAML.
    Crd {
        /// Write `agent.yaml` and `agentrun.yaml` into this folder instead of printing them.
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
    /// Check Agent and AgentRun manifests (files, or folders of .yaml files) by the admission rules.
    Validate {
        /// Manifest files or folders.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Serve the admission webhook (AdmissionReview v1 over TLS).
    Webhook {
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
    },
    /// Run the system on this machine without a cluster: the facade over the Agent manifests of a folder.
    Local {
        /// The folder of Agent manifests.
        #[arg(long, value_name = "DIR", default_value = "examples")]
        manifests: PathBuf,
        /// Address the facade listens on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// The users file: a YAML list of {token, uid, role, department_id}.
        #[arg(long, value_name = "FILE", default_value = "examples/local-users.yaml")]
        users: PathBuf,
        /// Where runs keep their volumes.
        #[arg(long, value_name = "DIR", default_value = ".run/data")]
        data_dir: PathBuf,
        /// Redis, where runs keep their state; without it they keep it in this process (lost when it
        /// stops) and runners reach it over `<data-dir>/store.sock`.
        #[arg(long, env = "REDIS_URL", hide_env_values = true)]
        redis_url: Option<String>,
        /// The model of agents that name none: by default each agent's own script
        /// (`<scripts-dir>/<slug>.yaml`) when it has one, else `scripted/echo`.
        #[arg(long, env = "YUXI_DEFAULT_MODEL", default_value = "scripted/auto")]
        default_model: String,
        /// Where `scripted/file:` model scripts are read from.
        #[arg(long, env = "YUXI_SCRIPTS_DIR", value_name = "DIR", default_value = "examples/scripts")]
        scripts_dir: PathBuf,
        /// The skills library (folders with a SKILL.md) agents' skills are projected from; runs get no
        /// skills when the folder does not exist.
        #[arg(long, env = "YUXI_SKILLS_LIBRARY", value_name = "DIR", default_value = "examples/skills")]
        skills_library: PathBuf,
    },
    /// Serve the facade in a cluster: the Agents of one namespace, TokenReview authentication, runs as
    /// AgentRuns, run state in Redis.
    Api(ApiArgs),
    /// Run the reconcilers, leader-elected: AgentRuns into sandbox pods and back into phases, Agents'
    /// conditions; `/metrics`, `/healthz` and `/readyz` on `--listen`.
    Controller(ControllerArgs),
    /// Execute one AgentRun to a terminal state (what runs in a sandbox pod's `runner` container).
    Runner(RunnerArgs),
    /// Print the sandbox pod (and, after `---`, the ConfigMap of its inputs) an AgentRun would get.
    SandboxPod {
        /// The AgentRun manifest.
        #[arg(long, value_name = "FILE")]
        run: PathBuf,
        /// The Agent manifest the run names.
        #[arg(long, value_name = "FILE")]
        agent: PathBuf,
        /// The sandbox settings (YAML, camelCase); without it, the defaults.
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
    },
    /// Serve the `execute` tool's commands on a Unix socket (a sandbox pod's `sandbox` container).
    SandboxExec {
        /// The Unix socket to listen on, on a volume shared with the runner.
        #[arg(long, value_name = "PATH", default_value = "/run/yuxi/sandbox.sock")]
        socket: PathBuf,
        /// The folder commands run in.
        #[arg(long, value_name = "DIR", default_value = "/home/gem/user-data/workspace")]
        workdir: PathBuf,
    },
}

/// The facade's settings in a cluster.
#[derive(clap::Args)]
struct ApiArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080", env = "YUXI_API_LISTEN")]
    listen: SocketAddr,
    /// The namespace whose Agents are served and where AgentRuns are created.
    #[arg(long, env = "YUXI_NAMESPACE")]
    namespace: String,
    /// Redis, where runs keep their state.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    redis_url: String,
    /// Audiences a token must be issued for (repeatable; none: the API server's own).
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
}

/// The controller's settings.
#[derive(clap::Args)]
struct ControllerArgs {
    /// A namespace to serve (repeatable); all namespaces when none is given.
    #[arg(long = "namespace", value_name = "NS")]
    namespaces: Vec<String>,
    /// Redis, where runners keep events, results and cancel requests.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    redis_url: String,
    /// The sandbox pods' settings: a YAML file (see the `controller::pod` module); defaults when absent.
    #[arg(long, env = "YUXI_SANDBOX_SETTINGS", value_name = "FILE")]
    sandbox_settings: Option<PathBuf>,
    /// Address of `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, default_value = "0.0.0.0:8081", env = "YUXI_CONTROLLER_LISTEN")]
    listen: SocketAddr,
    /// The Lease replicas elect their leader with.
    #[arg(long, default_value = "yuxi-operator-controller")]
    lease_name: String,
    /// The namespace of the Lease (the controller's own).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// This replica's identity in the Lease (the pod's name); random when absent.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// At most this many reconciles at once, per kind.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,
    /// How long a cancelled run may take to stop before its pod is deleted, in seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    cancel_grace_seconds: u64,
}

/// The runner's inputs; see the `runner` module for the contract.
#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("store").required(true).args(["redis_url", "store_socket"]))]
struct RunnerArgs {
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
    #[arg(long, env = "YUXI_REDIS_URL", hide_env_values = true)]
    redis_url: Option<String>,
    /// The local mode's store socket, where events, history and the result go (this or --redis-url).
    #[arg(long, env = "YUXI_STORE_SOCKET", value_name = "PATH")]
    store_socket: Option<PathBuf>,
    /// The model of agents whose context names none.
    #[arg(long, env = "YUXI_DEFAULT_MODEL")]
    default_model: Option<String>,
    /// The OpenAI-compatible endpoint of `openai/` models.
    #[arg(long, env = "OPENAI_BASE_URL")]
    openai_base_url: Option<String>,
    /// The folder `scripted/file:<name>` model scripts are read from (none: such models are refused).
    #[arg(long, env = "YUXI_SCRIPTS_DIR", value_name = "DIR")]
    scripts_dir: Option<PathBuf>,
    /// The MCP servers agents may use (a YAML map of name to {url, tools}).
    #[arg(long, env = "YUXI_MCP_SERVERS", value_name = "FILE")]
    mcp_servers: Option<PathBuf>,
    /// The facade a main agent's run delegates to subagents through, with the run's token from
    /// YUXI_RUN_TOKEN (an environment variable only, never an argument).
    #[arg(long, env = "YUXI_FACADE_URL", value_name = "URL")]
    facade_url: Option<String>,
    /// The read-only skills library the agent's skills are projected from into the skills scope.
    #[arg(long, env = "YUXI_SKILLS_LIBRARY", value_name = "DIR")]
    skills_library: Option<PathBuf>,
    /// Folders or files `execute` commands must not see (`:`-separated in the environment): the local
    /// mode hides its data folder, where other runs' files are.
    #[arg(long = "sandbox-hide", env = "YUXI_SANDBOX_HIDE", value_name = "PATH", value_delimiter = ':')]
    sandbox_hide: Vec<PathBuf>,
}

fn main() -> ExitCode {
    // A runner holds the model key and the run's credentials in its environment: before anything else,
    // other processes of the same user (commands the model runs among them) lose the right to read its
    // memory and environment through /proc.
    if std::env::args_os().nth(1).is_some_and(|role| role == "runner") {
        // SAFETY: prctl(PR_SET_DUMPABLE) changes only this process's own dumpable flag.
        unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 0);
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Crd { out_dir } => print_crds(out_dir),
        Command::Validate { paths } => validate(&paths),
        Command::Api(args) => run_async(run_api(args)),
        Command::Controller(args) => run_async(run_controller(args)),
        Command::Runner(args) => run_runner(args),
        Command::Local {
            manifests,
            listen,
            users,
            data_dir,
            redis_url,
            default_model,
            scripts_dir,
            skills_library,
        } => {
            let runs = LocalRuns { data_dir, redis_url, default_model, scripts_dir, skills_library };
            run_async(run_local(manifests, listen, users, runs))
        }
        Command::SandboxPod { run, agent, settings } => {
            match yuxi_operator::controller::pod::sandbox_pod_yaml(&run, &agent, settings.as_deref()) {
                Ok(yaml) => {
                    // A closed pipe (`| head`) ends the listing, not the process.
                    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), yaml.as_bytes());
                    ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("error: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::SandboxExec { socket, workdir } => run_async(async move {
            anyhow::ensure!(workdir.is_dir(), "the workdir {} is not a folder", workdir.display());
            yuxi_operator::runner::tools::execute::serve_socket(&socket, LocalExecutor::plain(workdir)).await?;
            Ok(())
        }),
        Command::Webhook { listen, tls_cert, tls_key, cert_reload_seconds, offline } => {
            let options = ServeOptions {
                listen,
                tls_cert,
                tls_key,
                reload_interval: Duration::from_secs(cert_reload_seconds),
                header_read_timeout: webhook::HEADER_READ_TIMEOUT,
            };
            run_async(run_webhook(options, offline))
        }
    }
}

/// The endpoint of `openai/` models when only `OPENAI_API_KEY` is set.
const OPENAI_API_BASE: &str = "https://api.openai.com/v1";

/// Exit status of a runner that could not run at all.
const EXIT_UNUSABLE: u8 = 2;

fn run_runner(args: RunnerArgs) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(EXIT_UNUSABLE);
        }
    };
    let code = runtime.block_on(async move {
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
        let api_key = std::env::var("OPENAI_API_KEY").unwrap_or_default();
        let base_url =
            args.openai_base_url.clone().or_else(|| (!api_key.is_empty()).then(|| OPENAI_API_BASE.to_string()));
        let openai = base_url.map(|base_url| OpenAiEndpoint { base_url, api_key });
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
            models: ModelSettings { openai, scripts_dir: args.scripts_dir },
            mcp_servers,
            // A store socket has no cancel notice: checking often is all there is, and it is cheap.
            cancel_poll: if args.store_socket.is_some() { Duration::from_millis(250) } else { Duration::from_secs(1) },
            facade: match (args.facade_url, std::env::var("YUXI_RUN_TOKEN").ok().filter(|t| !t.is_empty())) {
                (Some(url), Some(token)) => Some(runner::FacadeAccess { url, token }),
                _ => None,
            },
            skills_library: args.skills_library,
            sandbox_hide: args.sandbox_hide,
        };
        let store = match (&args.redis_url, &args.store_socket) {
            (Some(url), _) => RunnerStoreClient::connect_redis(url)
                .await
                .map_err(|e| format!("cannot reach Redis (YUXI_REDIS_URL): {e}")),
            (None, Some(path)) => RunnerStoreClient::connect_socket(path)
                .await
                .map_err(|e| format!("cannot reach the store socket (YUXI_STORE_SOCKET): {e}")),
            (None, None) => Err("no store: pass --redis-url or --store-socket".to_string()),
        };
        let store = match store {
            Ok(store) => store,
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::from(EXIT_UNUSABLE);
            }
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
    });
    // A tool stuck in a blocking call (a file operation the deadline abandoned) must not keep the process
    // alive after the run has ended.
    runtime.shutdown_timeout(Duration::from_millis(500));
    code
}

fn print_crds(out_dir: Option<PathBuf>) -> ExitCode {
    match out_dir {
        None => {
            print!("{}", crd::crds_yaml());
            ExitCode::SUCCESS
        }
        Some(dir) => {
            for (name, yaml) in crd::crd_files() {
                let path = dir.join(name);
                if let Err(err) = std::fs::write(&path, yaml) {
                    eprintln!("error: cannot write {}: {err}", path.display());
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
    }
}

fn validate(paths: &[PathBuf]) -> ExitCode {
    let files = match catalog::manifest_files(paths) {
        Ok(files) => files,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    let checked = catalog::check_files(&files);
    let mut out = String::new();
    let mut failed = 0;
    for item in &checked {
        let object = item.object.as_deref().unwrap_or("not decoded");
        let verdict = match (item.skipped, item.report.is_ok()) {
            (true, _) => "skipped ",
            (false, true) => "ok      ",
            (false, false) => {
                failed += 1;
                "rejected"
            }
        };
        out.push_str(&format!("{verdict} {} ({object})\n", item.origin));
        for error in &item.report.errors {
            out.push_str(&format!("  error:   {error}\n"));
        }
        for warning in &item.report.warnings {
            out.push_str(&format!("  warning: {warning}\n"));
        }
    }
    let checked_objects = checked.iter().filter(|c| !c.skipped).count();
    // A closed pipe (`| head`) or a full disk ends the listing, not the process.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
    if checked_objects == 0 {
        eprintln!(
            "error: no Agent or AgentRun manifests found in {}",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        );
        return ExitCode::FAILURE;
    }
    if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn run_async<F: std::future::Future<Output = anyhow::Result<()>>>(future: F) -> ExitCode {
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

async fn run_webhook(options: ServeOptions, offline: bool) -> anyhow::Result<()> {
    let client = if offline {
        tracing::info!("offline: single-object checks only");
        None
    } else {
        Some(connect("the webhook reads Agents through the Kubernetes API for its cross-object checks; run it in a cluster or with a kubeconfig, or pass --offline for the single-object checks only").await?)
    };
    let handle = axum_server::Handle::new();
    tokio::spawn(shutdown_on_signal(handle.clone()));
    webhook::serve(options, Admission::new(client), handle).await?;
    Ok(())
}

/// The local mode's store socket, in its data folder, when it keeps runs in its own process.
const STORE_SOCKET: &str = "store.sock";

/// How the local mode runs agents.
struct LocalRuns {
    data_dir: PathBuf,
    redis_url: Option<String>,
    default_model: String,
    scripts_dir: PathBuf,
    skills_library: PathBuf,
}

async fn run_local(manifests: PathBuf, listen: SocketAddr, users: PathBuf, runs: LocalRuns) -> anyhow::Result<()> {
    let files = catalog::manifest_files(std::slice::from_ref(&manifests))?;
    let agents = catalog::load_agents(&files).map_err(|problems| {
        anyhow::anyhow!("the manifests in {} are not valid:\n  {}", manifests.display(), problems.join("\n  "))
    })?;
    let users = yuxi_operator::facade::Users::load(&users).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&runs.data_dir)?;
    let data_dir = runs.data_dir.canonicalize()?;
    let (store, runner_store) = match &runs.redis_url {
        Some(url) => {
            let store = Store::connect_redis(url).await.map_err(|e| {
                anyhow::anyhow!("cannot reach Redis (REDIS_URL): {e}; unset it to keep runs in this process")
            })?;
            tracing::info!("runs keep their state in Redis (REDIS_URL)");
            (store, RunnerStore::Redis(url.clone()))
        }
        None => {
            let store = Store::memory();
            let socket = data_dir.join(STORE_SOCKET);
            let listener = bind_store_socket(&socket).await?;
            tokio::spawn(serve_store_socket(listener, store.clone()));
            tracing::info!(
                socket = %socket.display(),
                "no REDIS_URL: runs keep their state in this process and are lost when it stops; runners reach it over the socket"
            );
            (store, RunnerStore::Socket(socket))
        }
    };
    let launcher = LocalLauncher {
        exe: std::env::current_exe()?,
        data_dir: data_dir.clone(),
        store: runner_store.clone(),
        default_model: runs.default_model.clone(),
        scripts_dir: runs.scripts_dir.canonicalize().ok(),
        // Main agents delegate through this facade; a wildcard address is reached on the loopback.
        facade_url: Some(format!(
            "http://{}",
            match listen.ip().is_unspecified() {
                true => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), listen.port()),
                false => listen,
            }
        )),
        skills_library: match runs.skills_library.canonicalize() {
            Ok(library) => Some(library),
            Err(err) => {
                tracing::warn!(library = %runs.skills_library.display(), error = %err, "no skills library: runs get no skills");
                None
            }
        },
    };
    // Agents created through the API are kept as manifests here, and served again after a restart.
    let saved_in = data_dir.join("agents");
    let saved = if saved_in.is_dir() {
        catalog::load_agents(&catalog::manifest_files(std::slice::from_ref(&saved_in))?).map_err(|problems| {
            anyhow::anyhow!("the saved agents in {} are not valid:\n  {}", saved_in.display(), problems.join("\n  "))
        })?
    } else {
        Vec::new()
    };
    let agent_catalog = yuxi_operator::facade::catalog::LocalCatalog::new(agents, saved, Some(saved_in));
    let state = yuxi_operator::facade::FacadeState {
        auth: users.into(),
        agents: yuxi_operator::facade::AgentCatalog::Local(agent_catalog),
        runs: Some(yuxi_operator::facade::Runs { store, launcher: launcher.into() }),
        metrics: Default::default(),
    };
    let listener =
        std::net::TcpListener::bind(listen).map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    tracing::info!(listen = %listen, manifests = %manifests.display(), "serving the facade");
    let served = yuxi_operator::facade::serve(listener, yuxi_operator::facade::router(state), shutdown_signal()).await;
    if let RunnerStore::Socket(socket) = &runner_store {
        let _ = std::fs::remove_file(socket);
    }
    served?;
    Ok(())
}

async fn run_api(args: ApiArgs) -> anyhow::Result<()> {
    use yuxi_operator::facade::{self, auth, catalog, launch};
    let client = connect(
        "the facade serves the Agents of its namespace and checks tokens through the Kubernetes API; run it in a cluster or with a kubeconfig, or use `yuxi-operator local`",
    )
    .await?;
    let store = Store::connect_redis(&args.redis_url)
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach Redis (REDIS_URL): {e}"))?;
    let mapping = auth::GroupMapping {
        admin_group: args.admin_group,
        superadmin_group: args.superadmin_group,
        department_prefix: args.department_group_prefix,
    };
    let state = facade::FacadeState {
        auth: auth::Authenticator::TokenReview(auth::TokenReviewer::new(client.clone(), args.token_audiences, mapping)),
        agents: facade::AgentCatalog::Cluster(Box::new(catalog::ClusterCatalog::new(client.clone(), &args.namespace))),
        runs: Some(facade::Runs {
            store,
            launcher: launch::Launcher::Cluster(launch::ClusterLauncher::new(client, &args.namespace)),
        }),
        metrics: Default::default(),
    };
    let listener = std::net::TcpListener::bind(args.listen)
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    tracing::info!(listen = %args.listen, namespace = %args.namespace, "serving the facade");
    facade::serve(listener, facade::router(state), shutdown_signal()).await?;
    Ok(())
}

async fn run_controller(args: ControllerArgs) -> anyhow::Result<()> {
    use futures::FutureExt;
    use yuxi_operator::controller::{decide, metrics::ControllerMetrics, pod::SandboxSettings, run_reconciler as runs};
    let client = connect(
        "the controller watches AgentRuns and Agents and creates pods through the Kubernetes API; run it in a cluster or with a kubeconfig",
    )
    .await?;
    let store = Store::connect_redis(&args.redis_url)
        .await
        .map_err(|e| anyhow::anyhow!("cannot reach Redis (REDIS_URL): {e}"))?;
    let sandbox: SandboxSettings = match &args.sandbox_settings {
        None => SandboxSettings::default(),
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            serde_path_to_error::deserialize(serde_norway::Deserializer::from_str(&text))
                .map_err(|e| anyhow::anyhow!("{}: {}: {}", path.display(), e.path(), e.inner()))?
        }
    };
    let metrics = ControllerMetrics::default();
    let (leading_tx, leading) = tokio::sync::watch::channel(false);
    let server = {
        let (metrics, leading) = (metrics.clone(), leading.clone());
        let router = axum::Router::new()
            .route("/healthz", axum::routing::get(|| async { "ok" }))
            // Every replica is ready: the standby ones wait for the Lease.
            .route(
                "/readyz",
                axum::routing::get(move || async move { if *leading.borrow() { "leader" } else { "standby" } }),
            )
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let text = metrics.render();
                    async move {
                        (
                            [(
                                axum::http::header::CONTENT_TYPE,
                                yuxi_operator::facade::http_metrics::CONTENT_TYPE_TEXT,
                            )],
                            text,
                        )
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
        tokio::spawn(async move { axum::serve(listener, router).await })
    };

    let identity = args.identity.clone().unwrap_or_else(|| format!("yuxi-operator-{}", uuid::Uuid::new_v4().simple()));
    let lease = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &args.lease_name)
        .with_namespace(&args.lease_namespace)
        .with_identity(&identity)
        .with_duration(15)
        .with_grace(5)
        .with_field_manager(runs::FIELD_MANAGER)
        .build()
        .await
        .map_err(|e| {
            anyhow::anyhow!("cannot set up leader election on Lease {}/{}: {e}", args.lease_namespace, args.lease_name)
        })?;
    let (mut elected, lease_task) = lease.watch().await;
    tracing::info!(identity = %identity, lease = %args.lease_name, "waiting to lead");
    tokio::select! {
        changed = elected.wait_for(|leader| *leader) => { changed.map_err(|_| anyhow::anyhow!("leader election stopped"))?; }
        () = shutdown_signal() => { server.abort(); return Ok(()); }
    }
    let _ = leading_tx.send(true);
    tracing::info!(identity = %identity, "leading: reconciling");

    // Stop on a signal, or as soon as the lease is lost (another replica may lead by now: acting on would
    // mean two leaders; the pod restarts and waits again).
    let lost = {
        let mut elected = elected.clone();
        async move {
            let _ = elected.wait_for(|leader| !*leader).await;
        }
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        let mut stop_rx = stop_rx;
        let _ = stop_rx.wait_for(|stop| *stop).await;
    }
    .boxed()
    .shared();
    let namespaces = (!args.namespaces.is_empty()).then(|| args.namespaces.clone());
    let reporter =
        kube::runtime::events::Reporter { controller: "yuxi-operator".into(), instance: Some(identity.clone()) };
    let ctx = std::sync::Arc::new(runs::RunContext {
        client: client.clone(),
        store,
        settings: decide::Settings {
            cancel_grace: Duration::from_secs(args.cancel_grace_seconds),
            sandbox,
            ..decide::Settings::default()
        },
        recorder: kube::runtime::events::Recorder::new(client.clone(), reporter),
        metrics: metrics.clone(),
        backoff: runs::Backoff::default(),
    });
    let agents = yuxi_operator::controller::agent_reconciler::run(
        client.clone(),
        namespaces.clone(),
        metrics.clone(),
        shutdown.clone(),
    );
    let reconcilers = async move {
        let (agents, ()) = tokio::join!(agents, runs::run(ctx, namespaces, args.concurrency, shutdown));
        if let Err(err) = agents {
            tracing::error!(error = %err, "the Agent reconciler stopped");
        }
    };
    tokio::pin!(reconcilers);
    let outcome = tokio::select! {
        () = &mut reconcilers => Ok(()),
        () = shutdown_signal() => { let _ = stop_tx.send(true); reconcilers.await; Ok(()) }
        () = lost => { let _ = stop_tx.send(true); reconcilers.await; Err(anyhow::anyhow!("lost the leader Lease; stopping so that only one replica acts")) }
    };
    drop(elected);
    if let Ok(Ok(manager)) = lease_task.await
        && let Err(err) = manager.release().await
    {
        tracing::warn!(error = %err, "cannot release the leader Lease; another replica takes it when it expires");
    }
    server.abort();
    outcome
}

/// Connects to the cluster and checks that the API server answers; `hint` says why the role needs it.
async fn connect(hint: &str) -> anyhow::Result<kube::Client> {
    let client = kube::Client::try_default()
        .await
        .map_err(|err| anyhow::anyhow!("no Kubernetes cluster configured ({err}); {hint}"))?;
    client
        .apiserver_version()
        .await
        .map_err(|err| anyhow::anyhow!("cannot reach the Kubernetes API server ({err}); {hint}"))?;
    Ok(client)
}

/// Resolves on SIGTERM (what a kubelet sends) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}

/// Stops the server gracefully on a shutdown signal, letting open requests finish for up to 10 seconds.
async fn shutdown_on_signal(handle: axum_server::Handle<SocketAddr>) {
    shutdown_signal().await;
    handle.graceful_shutdown(Some(Duration::from_secs(10)));
}
