//! The state every handler reaches ([`FacadeState`]): the facade's parts ([`FacadeParts`]), shared behind
//! one pointer, and how the kernel's extractors find what they need in it (the `FromRef` impls). The
//! parts are the services' own types; the state names no feature.

use axum::extract::FromRef;

use super::catalog::AgentCatalog;
use super::knowledge::Knowledge;
use crate::facade::http::auth::{Authenticator, RunTokens};
use crate::facade::http::error::ApiError;
use crate::facade::http::limits::{Limits, OpenStreams};
use crate::facade::http::metrics::FacadeMetrics;
use crate::store::Store;

/// What every handler can reach: [`FacadeParts`] behind one shared pointer, so the clone each request
/// makes of it (one per extractor) is a counter's increment, not a copy of every part.
#[derive(Clone)]
pub struct FacadeState(std::sync::Arc<FacadeParts>);

impl std::ops::Deref for FacadeState {
    type Target = FacadeParts;
    fn deref(&self) -> &FacadeParts {
        &self.0
    }
}

impl From<FacadeParts> for FacadeState {
    fn from(parts: FacadeParts) -> Self {
        FacadeState(std::sync::Arc::new(parts))
    }
}

/// The parts of the facade's state.
pub struct FacadeParts {
    /// How bearer tokens are checked.
    pub auth: Authenticator,
    /// The agents.
    pub agents: AgentCatalog,
    /// Where runs are recorded and how they start; `None` for a facade that serves agents only (the run
    /// and tool endpoints answer 503).
    pub runs: Option<Runs>,
    /// The metrics served at `/metrics`.
    pub metrics: FacadeMetrics,
    /// The key the runs' tokens are signed with. Only the facade holds it; with several replicas, all
    /// hold the same one (`--run-token-key-file`).
    pub run_tokens: crate::run::grant::TokenKey,
    /// The abuse limits.
    pub limits: Limits,
    /// The event streams open on this replica, by user and by run.
    pub streams: OpenStreams,
    /// The threads whose request queue this replica pumps.
    pub queues: super::run_queue::pumps::QueuePumps,
    /// The `POST /api/chat/call` requests under way on this replica, by user.
    pub chat_calls: crate::facade::http::limits::InFlight,
    /// The model `POST /api/chat/call` asks; `None` answers 503.
    pub quick_model: Option<std::sync::Arc<dyn super::quick_model::QuickModel>>,
    /// The knowledge bases; `None` answers 503 on `/api/knowledge` and on `knowledge_search`.
    pub knowledge: Option<std::sync::Arc<Knowledge>>,
    /// The users' data folder, read for the file routes (`/api/viewer/filesystem`, `/api/workspace`): the
    /// local mode's data folder, or the users' volume mounted read-only in a cluster; `None` answers 503.
    pub user_files: Option<std::path::PathBuf>,
    /// The models this installation runs, as the model picker lists them.
    pub models: super::models::ModelCatalog,
    /// The Model resources runs may name (the namespace's in a cluster; the manifests folder's locally),
    /// each used only by whom its share allows.
    pub model_resources: super::catalog::Catalog<crate::resources::Model>,
    /// The McpServer resources agents may name (the namespace's in a cluster; the manifests folder's
    /// locally), each listed only to whom its share allows.
    pub mcp_resources: super::catalog::Catalog<crate::resources::mcp_server::McpServer>,
    /// The address of a trace in the tracing backend, `{trace_id}` standing for the trace's W3C id
    /// (`--trace-link`), for the links `GET /api/agent/runs/{run_id}/trace` answers; `None`: no link.
    pub trace_link: Option<String>,
    /// The local mode's skills library, manifests folder and data folder; `None` in a cluster.
    pub local: Option<super::local_mode::LocalMode>,
}

impl FacadeParts {
    /// The parts of a facade authenticating with `auth`, serving `agents` and `runs`, the rest as a new
    /// process has them: default metrics and limits, a random run-token key (set `run_tokens` for
    /// replicas that share one), no open streams or queue pumps, no model for `/api/chat/call`, no users'
    /// files, no models listed.
    pub fn new(auth: Authenticator, agents: AgentCatalog, runs: Option<Runs>) -> FacadeParts {
        FacadeParts {
            auth,
            agents,
            runs,
            metrics: Default::default(),
            run_tokens: crate::run::grant::TokenKey::random(),
            limits: Default::default(),
            streams: Default::default(),
            queues: Default::default(),
            chat_calls: Default::default(),
            quick_model: None,
            knowledge: None,
            user_files: None,
            models: Default::default(),
            model_resources: super::catalog::Catalog::new(Vec::new()),
            mcp_resources: super::catalog::Catalog::new(Vec::new()),
            trace_link: None,
            local: None,
        }
    }

    /// Whether this facade keeps the runs' files (the local mode's data folder): attachments then work.
    pub fn keeps_files(&self) -> bool {
        self.runs.as_ref().is_some_and(|r| r.launcher.data_dir().is_some())
    }

    /// The run store, or 503 when the facade has none.
    pub fn store(&self) -> Result<&Store, ApiError> {
        self.runs
            .as_ref()
            .map(|r| &r.store)
            .ok_or_else(|| ApiError::Unavailable("this facade has no run store: it serves agents only".into()))
    }

    /// The users' data folder, or 503 when this facade reads none.
    pub fn user_files(&self) -> Result<&std::path::Path, ApiError> {
        self.user_files.as_deref().ok_or_else(|| {
            ApiError::Unavailable("this facade reads no users' files (in a cluster: --user-data-dir)".into())
        })
    }

    /// The knowledge bases, or 503 when this facade serves none.
    pub fn knowledge(&self) -> Result<&Knowledge, ApiError> {
        self.knowledge.as_deref().ok_or_else(|| ApiError::Unavailable("this facade serves no knowledge bases".into()))
    }
}

/// Runs: their store and their launcher.
#[derive(Clone)]
pub struct Runs {
    /// Records, events, results.
    pub store: Store,
    /// Starts runs.
    pub launcher: super::launch::Launcher,
}

impl FromRef<FacadeState> for FacadeMetrics {
    fn from_ref(state: &FacadeState) -> FacadeMetrics {
        state.metrics.clone()
    }
}

impl FromRef<FacadeState> for RunTokens {
    fn from_ref(state: &FacadeState) -> RunTokens {
        RunTokens { key: state.run_tokens.clone(), store: state.runs.as_ref().map(|r| r.store.clone()) }
    }
}

impl FromRef<FacadeState> for Authenticator {
    fn from_ref(state: &FacadeState) -> Authenticator {
        state.auth.clone()
    }
}
