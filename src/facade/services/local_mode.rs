//! What the facade knows of the local mode serving it, which a cluster's facade does not have: the
//! skills library agents name skills of, how the manifests folder last applied (the files refused), and
//! whether the data folder is still there and writable. The local mode writes these; the facade reads
//! them for its answers (`GET /api/agent`, `/readyz`) and before it writes into the data folder.

use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

use serde::Serialize;

use crate::resources::manifest_set::follow::FileProblem;

/// The local mode's side of the facade; cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub struct LocalMode {
    /// The skills library (`--skills-library`), when it exists.
    pub skills_library: Option<PathBuf>,
    /// The MCP servers of the installation's configuration (`YUXI_MCP_SERVERS`), by name: usable by
    /// every agent beside the McpServers.
    pub configured_mcp: Vec<String>,
    manifests: Arc<RwLock<ManifestsStatus>>,
    data_problem: Arc<RwLock<Option<String>>>,
}

/// How the manifests folder last applied.
#[derive(Clone, Debug, Default, Serialize, utoipa::ToSchema)]
pub struct ManifestsStatus {
    /// The folder followed.
    pub folder: String,
    /// When its files were last read and applied (RFC 3339), `None` before the first change.
    pub applied_at: Option<String>,
    /// The files whose current version is not in force, each with its errors.
    pub problems: Vec<FileProblem>,
}

impl LocalMode {
    /// The local mode of `skills_library` and the `configured_mcp` servers, following `folder`.
    pub fn new(skills_library: Option<PathBuf>, configured_mcp: Vec<String>, folder: String) -> Self {
        let manifests = ManifestsStatus { folder, ..ManifestsStatus::default() };
        Self { skills_library, configured_mcp, manifests: Arc::new(RwLock::new(manifests)), ..Self::default() }
    }

    /// The skills of the skills library now (none without one).
    pub fn skills(&self) -> Option<Vec<String>> {
        self.skills_library.as_deref().map(crate::resources::manifest_set::library_skills)
    }

    /// Records a round of the manifests folder, applied `at` (RFC 3339).
    pub fn set_manifest_problems(&self, problems: Vec<FileProblem>, at: String) {
        let mut status = self.manifests.write().unwrap_or_else(PoisonError::into_inner);
        status.problems = problems;
        status.applied_at = Some(at);
    }

    /// How the manifests folder last applied.
    pub fn manifests(&self) -> ManifestsStatus {
        self.manifests.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Records what is wrong with the data folder (`None`: nothing).
    pub fn set_data_problem(&self, problem: Option<String>) {
        *self.data_problem.write().unwrap_or_else(PoisonError::into_inner) = problem;
    }

    /// What is wrong with the data folder, naming it; `None` while it is there and writable.
    pub fn data_problem(&self) -> Option<String> {
        self.data_problem.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}
