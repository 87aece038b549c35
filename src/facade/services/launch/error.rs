//! Why a run could not be launched ([`LaunchError`]).

use std::path::PathBuf;

use crate::run::scope::NotAPathSegment;
use crate::store::StoreError;

/// A run could not be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// An id of the run record cannot be a path segment of its volumes.
    #[error(transparent)]
    Volumes(#[from] NotAPathSegment),
    /// The run store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The facade writes as its callers and cannot write as the run's user (no Kubernetes identity,
    /// or one of Kubernetes' own).
    #[error("run {run_id}: {reason}")]
    WriteAs {
        /// The run.
        run_id: String,
        /// Why.
        reason: String,
    },
    /// The run's volumes cannot be made.
    #[error("cannot make the run's volumes: {source}")]
    MakeVolumes {
        /// The run.
        run_id: String,
        /// Why.
        source: std::io::Error,
    },
    /// The run's folder (`runs/<run_id>` under the data folder) cannot be made.
    #[error("cannot make {}: {source}", path.display())]
    MakeDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A manifest of the run cannot be written as YAML.
    #[error("{source}")]
    Manifest {
        /// The run.
        run_id: String,
        /// The manifest's file name: `run.yaml` or `agent.yaml`.
        name: &'static str,
        /// Why.
        source: serde_norway::Error,
    },
    /// A manifest of the run cannot be written to its folder.
    #[error("cannot write {name}: {source}")]
    Write {
        /// The run.
        run_id: String,
        /// The manifest's file name: `run.yaml` or `agent.yaml`.
        name: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The runner subprocess cannot be started.
    #[error("cannot start the runner: {source}")]
    StartRunner {
        /// The run.
        run_id: String,
        /// Why.
        source: std::io::Error,
    },
    /// The run's AgentRun cannot be created.
    #[error("the AgentRun could not be created: {source}")]
    CreateAgentRun {
        /// The run, which names the AgentRun.
        run_id: String,
        /// The Kubernetes API's refusal or failure.
        source: kube::Error,
    },
    /// The run's AgentRun exists already but cannot be read back.
    #[error("the AgentRun could not be read back: {source}")]
    ReadAgentRun {
        /// The run, which names the AgentRun.
        run_id: String,
        /// The Kubernetes API's failure.
        source: kube::Error,
    },
    /// The Secret with the run's credentials cannot be created.
    #[error("the run's credentials Secret could not be created: {source}")]
    CreateSecret {
        /// The run.
        run_id: String,
        /// The Kubernetes API's refusal or failure.
        source: kube::Error,
    },
}
