//! The runner: executes one AgentRun of one Agent to a terminal state (the `runner` role; in a pod the
//! `runner` container, in the local mode a subprocess).
//!
//! # Contract
//!
//! The controller and the local mode start it the same way:
//!
//! ```text
//! yuxi-operator runner --run RUN.yaml --agent AGENT.yaml
//!     [--workspace DIR --uploads DIR --outputs DIR --skills DIR]   (default: the pod's /home/gem paths)
//!     [--sandbox-socket PATH]                                      (run `execute` in the sandbox container)
//! environment: YUXI_REDIS_URL or YUXI_STORE_SOCKET (exactly one; or --redis-url, --store-socket),
//!              YUXI_DEFAULT_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY,
//!              YUXI_SCRIPTS_DIR (where scripted/file: models are read), YUXI_MCP_SERVERS (a file)
//! ```
//!
//! `RUN.yaml` is the AgentRun manifest (its `metadata.name` is the run id; its `spec.threadId`, or the run
//! id when absent, the thread), `AGENT.yaml` the Agent manifest it names. Events, history and the result
//! go to Redis (DESIGN.md section 6), or, for a runner of the local mode without Redis, to the local
//! mode's in-process store over its store socket ([`crate::store::socket`]). Exit status: 0 when the run
//! completed or was cancelled, 1 when it failed (its `error` and `end` events say why; this includes an
//! Agent file that does not fit the run), 2 when the run file is unusable, the store is unreachable,
//! another runner holds the run, or the run has already finished (nothing was written). Secrets are
//! never printed and never passed to `execute`.

pub mod graph;
pub mod mcp;
pub mod model;
pub mod remote;
pub mod skills;
mod spans;
pub mod tools;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use serde_json::{Value, json};

use crate::resources::manifest::{Manifest, read_written_manifests};
use crate::resources::validation::{validate_agent, validate_agent_run};
use crate::resources::{Agent, AgentRun};
use crate::store::RunnerStoreClient;
use graph::{Graph, RunIdentity, RunReport};
use model::{Model, ModelSettings};
pub use tools::execute::Confinement;
use tools::execute::{ExecuteTool, Executor, LocalExecutor, SandboxSocket};
use tools::files::{FileOp, FileTool, VolumePaths, Volumes};
use tools::{Grants, ToolBox, names};

pub use crate::run::inputs::{
    DEFAULT_MAX_STEPS, DEFAULT_MODEL_RETRIES, DEFAULT_SYSTEM_PROMPT, DEFAULT_TIMEOUT_SECONDS,
};

/// What the runner needs besides the run and the agent.
#[derive(Clone, Debug)]
pub struct RunnerOptions {
    /// The AgentRun manifest.
    pub run_file: PathBuf,
    /// The Agent manifest.
    pub agent_file: PathBuf,
    /// Where the volumes are.
    pub volumes: VolumePaths,
    /// The sandbox container's socket; `None` runs commands as local subprocesses.
    pub sandbox_socket: Option<PathBuf>,
    /// The model of agents whose context and run name none.
    pub default_model: Option<String>,
    /// Where `openai/` models are served.
    pub models: ModelSettings,
    /// The MCP servers agents may use, by name.
    pub mcp_servers: mcp::McpServers,
    /// How often the cancel key is checked besides the pub/sub notice.
    pub cancel_poll: Duration,
    /// The facade and the run's credentials for it: a main agent's run delegates to subagents through
    /// them (the task middleware); `None` offers no subagent tools.
    pub facade: Option<FacadeAccess>,
    /// The read-only skills library the agent's `context.skills` are projected from into the skills
    /// scope at start; `None` leaves the scope as it is.
    pub skills_library: Option<PathBuf>,
    /// Paths `execute` commands must not see (the local mode's data folder, with other runs' files).
    pub sandbox_hide: Vec<PathBuf>,
    /// Whether `execute` may run commands unconfined when bubblewrap cannot confine them.
    pub confinement: Confinement,
    /// How long the runner's lease on its run lasts without renewal (renewed every third of it).
    pub lease_ttl: Duration,
}

/// How a run reaches the facade.
#[derive(Clone)]
pub struct FacadeAccess {
    /// The facade's base URL, such as `http://127.0.0.1:8080`.
    pub url: String,
    /// The run's bearer token (never printed).
    pub token: String,
}

impl std::fmt::Debug for FacadeAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FacadeAccess").field("url", &self.url).field("token", &"<hidden>").finish()
    }
}

/// Why the runner could not run at all (nothing was written for the run).
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The run manifest is unusable.
    #[error("{0}")]
    BadInput(String),
    /// Another runner executes the run, or it has already finished.
    #[error("{0}")]
    NotRunnable(String),
    /// The store could not be reached.
    #[error("the run's state store failed: {0}")]
    Store(#[from] crate::store::StoreError),
}

/// Reads the run, then runs it against `store` (see the module's contract).
///
/// Errors: [`RunnerError::BadInput`] when the run manifest cannot be read as one valid AgentRun. Every
/// later problem (a bad agent, an unknown model, an unreachable endpoint) ends the run `failed` with an
/// `error` event, and is in the returned report.
pub async fn run(options: &RunnerOptions, store: RunnerStoreClient) -> Result<RunReport, RunnerError> {
    let run = read_run(options)?;
    let agent = read_agent(options, &run.spec.agent);
    execute(options, run, agent, store).await
}

/// Runs `run` of `agent` against `store`, as [`run`] does once it has read them: what the local mode
/// calls for a run it executes in its own process (its `run_file` and `agent_file` are then unused).
/// `agent` is the Agent, or why it cannot be used (the run then fails with that error).
///
/// Errors: [`RunnerError::NotRunnable`] (another runner holds it, or it has finished) and
/// [`RunnerError::Store`] as for [`run`].
pub async fn execute(
    options: &RunnerOptions,
    run: AgentRun,
    agent: Result<Agent, String>,
    store: RunnerStoreClient,
) -> Result<RunReport, RunnerError> {
    let identity = RunIdentity {
        run_id: run.name_any(),
        thread_id: run.spec.thread_id.clone().unwrap_or_else(|| run.name_any()),
        agent_slug: run.spec.agent.clone(),
    };
    let mut metadata = json!({
        "agent_slug": identity.agent_slug,
        "run_id": identity.run_id,
        "thread_id": identity.thread_id,
        "parent": run.spec.parent,
        "input": run.spec.input,
    });
    // One runner per run: a second one (a duplicated pod, a retried subprocess) refuses to start, and a
    // finished run is never run again.
    let holder = format!("{}-{}", std::process::id(), jiff::Timestamp::now().as_nanosecond());
    if !store.hold_run_lease(&identity.run_id, &holder, options.lease_ttl).await? {
        return Err(RunnerError::NotRunnable(format!(
            "run {} is already being executed by another runner",
            identity.run_id
        )));
    }
    if store.run_result(&identity.run_id).await?.is_some() {
        store.release_run_lease(&identity.run_id, &holder).await?;
        return Err(RunnerError::NotRunnable(format!("run {} has already finished", identity.run_id)));
    }
    let renewal = {
        let (store, run_id, holder, lease_ttl) =
            (store.clone(), identity.run_id.clone(), holder.clone(), options.lease_ttl);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(lease_ttl / 3).await;
                if let Err(err) = store.hold_run_lease(&run_id, &holder, lease_ttl).await {
                    tracing::warn!(error = %err, "cannot renew the run's lease");
                }
            }
        })
    };
    // A run resumed after a person's decisions goes on from its checkpoint.
    let resumption = store.take_resumption(&identity.run_id).await?;
    let span = spans::run_span(&run, &identity);
    let started = jiff::Timestamp::now();
    let first_message: Arc<std::sync::OnceLock<jiff::Timestamp>> = Arc::default();
    let remote = agent.as_ref().ok().and_then(|a| a.spec.remote.as_ref()).and_then(|r| r.a2a.clone());
    let executed = async {
        // A remote subagent's run is its remote task: no model, tools or sandbox of its own.
        if let Some(a2a) = &remote {
            let remote = remote::RemoteRun {
                store: store.clone(),
                identity: identity.clone(),
                run: &run,
                a2a,
                cancel_poll: options.cancel_poll,
                end_retry_for: options.lease_ttl,
            };
            return remote.run(metadata).await;
        }
        match prepare(options, &run, agent, &identity, store.clone(), &mut metadata, first_message.clone()).await {
            Ok(graph) => match resumption {
                Some((checkpoint, decisions)) => graph.resume(checkpoint, decisions).await,
                None => graph.run(metadata).await,
            },
            Err(error) => {
                // A run cancelled while it was being prepared ends cancelled, whatever the preparing met
                // (its credentials, for one, stop working once its cancel has ended it).
                let cancelled = store.is_cancel_requested(&identity.run_id).await.unwrap_or(false);
                let error = (!cancelled).then_some(error);
                graph::fail_before_start(&store, &identity, metadata, error, options.lease_ttl).await
            }
        }
    };
    let report = tracing::Instrument::instrument(executed, span.clone()).await;
    span.record("yuxi.run.status", report.status.as_str());
    span.record("gen_ai.usage.input_tokens", report.token_usage.prompt_tokens);
    span.record("gen_ai.usage.output_tokens", report.token_usage.completion_tokens);
    if report.status != crate::run::RunStatus::Completed {
        span.record("otel.status_code", "ERROR");
    }
    renewal.abort();
    // The run's end in its agent's totals (the run metrics); a metric is not worth failing the run for.
    let end = spans::run_end(&run, &identity, report.status, started, first_message.get().copied());
    if let Err(err) = store.record_run_end(&identity.run_id, &end).await {
        tracing::warn!(error = %err, "cannot count the run's end in the run metrics");
    }
    if let Err(err) = store.release_run_lease(&identity.run_id, &holder).await {
        tracing::warn!(error = %err, "cannot release the run's lease");
    }
    Ok(report)
}

fn read_run(options: &RunnerOptions) -> Result<AgentRun, RunnerError> {
    let bad = |m: String| RunnerError::BadInput(format!("{}: {m}", options.run_file.display()));
    let run = match read_written_manifests(&options.run_file).map_err(|e| bad(e.to_string()))?.as_slice() {
        [Manifest::AgentRun(run)] => (**run).clone(),
        _ => return Err(bad("must hold exactly one AgentRun".to_string())),
    };
    let report = validate_agent_run(&run);
    if !report.is_ok() {
        return Err(bad(report.error_summary()));
    }
    Ok(run)
}

/// Builds the graph: the agent, its model, its tools and its prompt. Errors are the run's failure.
async fn prepare(
    options: &RunnerOptions,
    run: &AgentRun,
    agent: Result<Agent, String>,
    identity: &RunIdentity,
    store: RunnerStoreClient,
    metadata: &mut Value,
    first_message: Arc<std::sync::OnceLock<jiff::Timestamp>>,
) -> Result<Graph, String> {
    let agent = agent?;
    let spec = &agent.spec;
    let context = spec.context();
    metadata["is_subagent"] = Value::Bool(spec.is_subagent());

    let model_id = crate::resources::model::effective(
        run.spec.model.as_deref(),
        context.model.as_deref(),
        options.default_model.as_deref(),
    )
    .ok_or("no model: set spec.context.model on the Agent, spec.model on the AgentRun, or YUXI_DEFAULT_MODEL")?
    .to_string();
    let model_id = model::scripted::pick_auto(&model_id, &identity.agent_slug, options.models.scripts_dir.as_deref());
    metadata["model"] = Value::String(model_id.clone());
    let facade = match &options.facade {
        Some(access) => {
            Some(Arc::new(tools::subagents::Facade::new(&access.url, &access.token).map_err(|e| e.to_string())?))
        }
        None => None,
    };
    let model = resolve_model(&model_id, &options.models, facade.as_deref()).await?;

    let grants = Grants::for_agent(spec);
    let volumes = Arc::new(Volumes::open(&options.volumes).map_err(|e| e.to_string())?);
    let mut tools = ToolBox::new();
    for op in FileOp::ALL.into_iter().filter(|op| grants.allows_builtin(op.name())) {
        tools.insert(Arc::new(FileTool::new(op, volumes.clone())));
    }
    if grants.allows_builtin(names::EXECUTE) {
        let executor = match &options.sandbox_socket {
            Some(socket) => Executor::Socket(SandboxSocket::new(socket)),
            // Commands must not reach the runner's store: Redis is out of reach without a network, but a
            // store socket is a file in the read-only view of the system.
            None => {
                let mut hidden: Vec<PathBuf> = options.sandbox_hide.clone();
                // Nor the files MCP servers' credentials are read from.
                hidden.extend(mcp::header_files(&options.mcp_servers));
                if let RunnerStoreClient::Socket(socket) = &store {
                    hidden.push(std::fs::canonicalize(socket.path()).unwrap_or_else(|_| socket.path().to_path_buf()));
                }
                Executor::Local(LocalExecutor::isolated(&options.volumes, options.confinement).await.hiding(hidden))
            }
        };
        tools.insert(Arc::new(ExecuteTool::new(executor)));
    }
    let connected =
        mcp::connect_granted(&options.mcp_servers, &grants, facade.as_deref()).await.map_err(|e| e.to_string())?;
    let tool_servers = connected.servers;
    let destructive = connected.destructive;
    for tool in connected.tools {
        tools.insert(tool);
    }
    if !connected.unavailable.is_empty() {
        metadata["mcp_unavailable"] = json!(connected.unavailable);
    }
    let unavailable_prompt = mcp::unavailable_prompt(&connected.unavailable);
    // The task middleware: a main agent with subagents it may call gets their list and the six tools.
    // A subagent never does (no nesting).
    let mut delegation_prompt = None;
    let mut knowledge_prompt = None;
    let mut delegation = None;
    if let Some(facade) = facade {
        if !spec.is_subagent()
            && let Some((delegating, prompt)) = mount_delegation(&facade, &identity.agent_slug).await?
        {
            for tool in delegating {
                tools.insert(tool);
            }
            delegation_prompt = Some(prompt);
            delegation = Some(facade.clone());
        }
        // Every agent, subagents included, searches its own knowledge bases. A facade that cannot be
        // reached (it is stopping, or restarting) leaves the run without them, said in its metadata:
        // the run goes on, and ends as its stop decides, rather than failing at its start.
        match tools::knowledge::mount(&facade, &identity.agent_slug).await {
            Ok(Some((tool, prompt))) => {
                tools.insert(tool);
                knowledge_prompt = Some(prompt);
            }
            Ok(None) => {}
            Err(err @ tools::subagents::MountError::Unreachable { .. }) => {
                tracing::warn!(run_id = %identity.run_id, error = %err, "the run goes on without its knowledge bases");
                metadata["knowledge_unavailable"] = Value::String(err.to_string());
            }
            Err(err) => return Err(err.to_string()),
        }
    }
    metadata["tools"] = json!(tools.names());

    let mut system_prompt = context
        .system_prompt
        .clone()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_SYSTEM_PROMPT.to_string());
    for prompt in [delegation_prompt, knowledge_prompt, unavailable_prompt].into_iter().flatten() {
        system_prompt.push_str("\n\n");
        system_prompt.push_str(&prompt);
    }
    if let Some(library) = &options.skills_library {
        let projection =
            skills::project(library, context.skills.as_deref(), &options.volumes.skills).map_err(|e| e.to_string())?;
        metadata["skills"] = json!(projection.projected);
        if !projection.missing.is_empty() {
            metadata["skills_missing"] = json!(projection.missing);
        }
    }
    let skills = skills::read_skills(&options.volumes.skills);
    if let Some(section) = skills::prompt_section(&skills, context.preload_skills.as_deref().unwrap_or_default()) {
        system_prompt.push_str("\n\n");
        system_prompt.push_str(&section);
    }

    let pricing = options.models.resources.get(&model_id).and_then(|c| c.as_ref().ok()).and_then(|c| c.pricing.clone());
    Ok(Graph {
        identity: identity.clone(),
        store,
        model,
        provider: provider_name(&model_id, &options.models),
        model_id: model_id.clone(),
        pricing,
        tools,
        system_prompt,
        input: run.spec.input.clone(),
        max_steps: context.max_execution_steps.unwrap_or(DEFAULT_MAX_STEPS),
        model_retries: context.model_retry_times.unwrap_or(DEFAULT_MODEL_RETRIES),
        timeout: Duration::from_secs(run.spec.timeout_seconds.map_or(DEFAULT_TIMEOUT_SECONDS, |t| t.max(1) as u64)),
        cancel_poll: options.cancel_poll,
        end_retry_for: options.lease_ttl,
        delegation,
        usage: usage_target(run, spec),
        approval: crate::run::approval::ApprovalRule {
            destructive,
            ..crate::run::approval::ApprovalRule::of(spec, context.tool_approval_mode.unwrap_or_default())
        },
        tool_servers,
        approval_timeout: Duration::from_secs(u64::from(
            context.approval_timeout_seconds.unwrap_or(crate::run::approval::DEFAULT_APPROVAL_TIMEOUT_SECONDS),
        )),
        first_message,
    })
}

/// The model `model_id` names; a Model called as each run's user (`callerAudience`) with the token of
/// this run's user the facade gives. Errors: the model cannot be resolved, or no token comes.
async fn resolve_model(
    model_id: &str,
    settings: &ModelSettings,
    facade: Option<&tools::subagents::Facade>,
) -> Result<Model, String> {
    let Some(Ok(connection)) =
        settings.resources.get(model_id).filter(|c| c.as_ref().is_ok_and(|c| c.caller_audience.is_some()))
    else {
        return Model::resolve(model_id, settings).map_err(|e| e.to_string());
    };
    let audience = connection.caller_audience.as_deref().unwrap_or_default();
    let facade = facade.ok_or_else(|| {
        format!("Model {model_id:?} is called as the run's user (callerAudience), which needs the facade this run cannot reach")
    })?;
    let token = facade
        .caller_token(audience)
        .await
        .map_err(|why| format!("Model {model_id:?}: no token of the run's user for {audience:?}: {why}"))?;
    let mut connection = connection.clone();
    connection.credentials = crate::endpoints::connection::Credentials::ApiKey(token);
    Model::connect(&connection).map_err(|e| e.to_string())
}

/// The subagent tools of `agent`, asked of the facade again with backoff for up to 15 s while it cannot
/// be reached (restarting, or stopping: a stopping local mode ends its runs meanwhile, and the run ends
/// as that says). Errors: the facade's refusal, or its absence past that, as the run's failure.
async fn mount_delegation(
    facade: &Arc<tools::subagents::Facade>,
    agent: &str,
) -> Result<Option<(Vec<Arc<dyn tools::Tool>>, String)>, String> {
    use backon::Retryable;
    let backoff = backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(2))
        .with_jitter()
        .without_max_times()
        .with_total_delay(Some(Duration::from_secs(15)));
    (|| facade.mount(agent))
        .retry(backoff)
        .when(|err| matches!(err, tools::subagents::MountError::Unreachable { .. }))
        .await
        .map_err(|e| e.to_string())
}

/// The provider of `model_id`, as OpenTelemetry's GenAI conventions name it (`gen_ai.provider.name`).
fn provider_name(model_id: &str, models: &ModelSettings) -> String {
    use crate::resources::ModelProvider;
    match models.resources.get(model_id).and_then(|c| c.as_ref().ok()).map(|c| c.endpoint.provider) {
        Some(ModelProvider::OpenAI) => "openai".into(),
        Some(ModelProvider::OpenAICompatible) => "openai_compatible".into(),
        Some(ModelProvider::AzureOpenAI) => "azure.ai.openai".into(),
        Some(ModelProvider::Anthropic) => "anthropic".into(),
        Some(ModelProvider::Gemini) => "gcp.gemini".into(),
        Some(ModelProvider::Bedrock) => "aws.bedrock".into(),
        None => model_id.split_once('/').map_or("unknown", |(provider, _)| provider).to_string(),
    }
}

/// Where `run`'s tokens are counted: the tree of its parent (or its own, for a run without one) with
/// the budget it carries, and its namespace and user.
fn usage_target(run: &AgentRun, agent: &crate::resources::AgentSpec) -> crate::run::budget::UsageTarget {
    // A cost budget: the run's own, else (for a run that starts a tree) its Agent's; a child's tree
    // carries its root's.
    let own_cost = run.spec.budget.as_ref().and_then(|b| b.max_cost.clone());
    let agent_cost = agent.budget.as_ref().and_then(|b| b.max_cost.clone()).filter(|_| run.spec.parent.is_none());
    let max_cost = own_cost
        .or(agent_cost)
        .and_then(|cost| Some((cost.currency, crate::resources::model::parse_amount_picos(&cost.amount)?)));
    crate::run::budget::UsageTarget {
        root_run_id: run.spec.parent.as_ref().map_or_else(|| run.name_any(), |p| p.root().to_string()),
        max_tokens: run.spec.budget.as_ref().and_then(|b| b.max_tokens),
        max_cost,
        namespace: run.namespace().unwrap_or_else(|| crate::resources::manifest_set::DEFAULT_NAMESPACE.to_string()),
        uid: run.spec.uid.clone().unwrap_or_default(),
    }
}

fn read_agent(options: &RunnerOptions, slug: &str) -> Result<Agent, String> {
    let path = options.agent_file.display();
    let agent = match read_written_manifests(&options.agent_file).map_err(|e| format!("{path}: {e}"))?.as_slice() {
        [Manifest::Agent(agent)] => (**agent).clone(),
        _ => return Err(format!("{path} must hold exactly one Agent")),
    };
    if agent.name_any() != slug {
        return Err(format!("{path} holds Agent {:?}, but the run names {slug:?}", agent.name_any()));
    }
    let report = validate_agent(&agent);
    if !report.is_ok() {
        return Err(format!("Agent {slug:?} is not valid: {}", report.error_summary()));
    }
    Ok(agent)
}
