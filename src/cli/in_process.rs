//! Runs executed inside the local mode's own process (its default): the runner as a library on the
//! facade's runtime, with the same store, volumes and `execute` sandbox subprocesses a `runner`
//! subprocess has, and none of a process's start-up cost. Here because this layer holds both the
//! facade's launcher and the runner (roles do not import each other).

use std::path::PathBuf;
use std::time::Duration;

use kube::ResourceExt;
use yuxi_operator::facade::services::launch::{InProcessRunner, RunJob};
use yuxi_operator::run::inputs::env;
use yuxi_operator::runner::model::ModelSettings;
use yuxi_operator::runner::{self, Confinement, FacadeAccess, RunnerOptions};
use yuxi_operator::store::Store;

/// The runner settings every in-process run shares; each run adds its volumes and credentials. The
/// manifests' Models and McpServers in them change as the manifests folder does
/// ([`InProcess::set_endpoints`]); a run takes a copy at its start and keeps it.
#[derive(Debug)]
pub struct InProcess {
    base: std::sync::RwLock<RunnerOptions>,
    /// The servers of `YUXI_MCP_SERVERS`, which an McpServer of the same name does not replace.
    configured_mcp: yuxi_operator::run::inputs::McpServers,
    facade_url: Option<String>,
}

/// The MCP servers of the installation's configuration (`YUXI_MCP_SERVERS`, a file as the runner reads
/// it), none when it is unset. Errors: the file cannot be read.
pub fn configured_mcp() -> anyhow::Result<yuxi_operator::run::inputs::McpServers> {
    match std::env::var_os(env::MCP_SERVERS).filter(|p| !p.is_empty()) {
        Some(path) => runner::mcp::load_servers(std::path::Path::new(&path)).map_err(|e| anyhow::anyhow!("{e}")),
        None => Ok(Default::default()),
    }
}

/// `configured` with the manifests' `resources` added (the configuration's servers are the platform's:
/// an McpServer of the same name does not replace one).
fn merged(
    configured: &yuxi_operator::run::inputs::McpServers,
    resources: yuxi_operator::run::inputs::McpServers,
) -> yuxi_operator::run::inputs::McpServers {
    let mut servers = configured.clone();
    for (name, server) in resources {
        match servers.entry(name) {
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(server);
            }
            std::collections::btree_map::Entry::Occupied(taken) => tracing::warn!(
                server = %taken.key(),
                "an McpServer of the manifests is named like a server of YUXI_MCP_SERVERS; the file's is used"
            ),
        }
    }
    servers
}

/// What the local mode gives its in-process runs.
pub struct Settings {
    /// The model of agents that name none.
    pub default_model: String,
    /// Where `scripted/file:` scripts are read from.
    pub scripts_dir: Option<PathBuf>,
    /// The skills library.
    pub skills_library: Option<PathBuf>,
    /// What `execute` commands must not see (the data folder).
    pub sandbox_hide: Vec<PathBuf>,
    /// Whether `execute` may run unconfined where bubblewrap cannot confine it.
    pub unconfined_sandbox: bool,
    /// The runners' lease.
    pub lease_ttl: Duration,
    /// The facade's URL, as runs reach it.
    pub facade_url: Option<String>,
    /// The manifests' McpServers, by name, as the runner reads them (beside `YUXI_MCP_SERVERS`'s).
    pub mcp_resources: yuxi_operator::run::inputs::McpServers,
    /// The manifests' Models, connected with the local mode's secrets.
    pub model_resources: ModelResources,
}

impl InProcess {
    /// The runner of the local mode's runs, its model endpoint read from the environment as a `runner`
    /// subprocess reads it (`OPENAI_BASE_URL`, `OPENAI_API_KEY`), with the `configured_mcp` servers
    /// ([`configured_mcp`]) and the manifests' ones.
    pub fn new(
        configured_mcp: yuxi_operator::run::inputs::McpServers,
        settings: Settings,
    ) -> anyhow::Result<InProcess> {
        let mcp_servers = merged(&configured_mcp, settings.mcp_resources.clone());
        let base = RunnerOptions {
            run_file: PathBuf::from("(in process)"),
            agent_file: PathBuf::from("(in process)"),
            // Each run's own volumes replace these.
            volumes: yuxi_operator::run::scope::VolumePaths::under(std::path::Path::new("/nonexistent")),
            sandbox_socket: None,
            default_model: Some(settings.default_model),
            models: ModelSettings {
                openai: super::runner::openai_endpoint(std::env::var(env::OPENAI_BASE_URL).ok()),
                scripts_dir: settings.scripts_dir,
                resources: settings.model_resources,
            },
            mcp_servers,
            cancel_poll: Duration::from_secs(1),
            facade: None,
            skills_library: settings.skills_library,
            sandbox_hide: settings.sandbox_hide,
            confinement: if settings.unconfined_sandbox { Confinement::Unconfined } else { Confinement::Required },
            lease_ttl: settings.lease_ttl,
        };
        Ok(InProcess { base: std::sync::RwLock::new(base), configured_mcp, facade_url: settings.facade_url })
    }

    /// Puts the manifests' Models (connected) and McpServers in place of the former ones, for the runs
    /// that start from now on.
    pub fn set_endpoints(&self, models: ModelResources, mcp_resources: yuxi_operator::run::inputs::McpServers) {
        let servers = merged(&self.configured_mcp, mcp_resources);
        let mut base = self.base.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        base.models.resources = models;
        base.mcp_servers = servers;
    }
}

/// The manifests' Models, connected, by name.
pub type ModelResources = std::collections::BTreeMap<
    String,
    Result<yuxi_operator::endpoints::connection::Connection, yuxi_operator::endpoints::connection::ConnectionError>,
>;

impl InProcessRunner for InProcess {
    fn execute(&self, job: RunJob, store: Store) -> futures::future::BoxFuture<'static, ()> {
        let mut options = self.base.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        options.volumes = job.volumes;
        options.facade = match (&self.facade_url, job.token) {
            (Some(url), Some(token)) => Some(FacadeAccess { url: url.clone(), token }),
            _ => None,
        };
        Box::pin(async move {
            let run_id = job.run.name_any();
            match runner::execute(&options, job.run, Ok(job.agent), store.into()).await {
                Ok(report) => tracing::info!(run_id = %run_id, status = %report.status, "run ended"),
                Err(err) => tracing::warn!(run_id = %run_id, error = %err, "the run was not executed"),
            }
        })
    }
}
