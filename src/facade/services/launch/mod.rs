//! Starting runs. In the local mode a run is a `yuxi-operator runner` subprocess, with the volume layout
//! of DESIGN.md section 5 under the data folder; in a cluster it will be an AgentRun resource that the
//! controller turns into a sandbox pod.
//!
//! [`Launcher`] chooses between the two ([`local`], [`cluster`]); [`run`] holds what both share, [`error`]
//! why a launch fails, and [`folders`] tidies what local runs leave in the data folder. This module names
//! its children and re-exports their types; they never name it.

pub mod cluster;
pub mod error;
pub mod folders;
pub mod local;
pub mod run;

pub use cluster::ClusterLauncher;
pub use error::LaunchError;
pub use local::{InProcessRunner, LocalLauncher, LocalRuns, ModelInputs, RunJob, RunnerStore, ThreadsTaken};
pub use run::{agent_run, check_startable, end_of_run};

use crate::resources::Agent;
use crate::run::{RunRecord, RunStatus};
use crate::store::Store;

/// Starts runs: as local subprocesses or as AgentRun resources.
#[derive(Clone)]
pub enum Launcher {
    /// The local mode's subprocesses.
    Local(LocalLauncher),
    /// A cluster's AgentRuns.
    Cluster(ClusterLauncher),
}

impl From<LocalLauncher> for Launcher {
    fn from(local: LocalLauncher) -> Self {
        Launcher::Local(local)
    }
}

impl Launcher {
    /// The folder the runs' files live under, when this process has it: the local mode's data folder
    /// (`None` in a cluster, where they are on volumes only the sandbox pods mount).
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        match self {
            Launcher::Local(local) => Some(&local.data_dir),
            Launcher::Cluster(_) => None,
        }
    }

    /// Starts again, in the background, a run a person's decisions resumed (it is `pending`, its
    /// decisions stored with its checkpoint): locally its runner again; in a cluster its AgentRun is
    /// marked resumed and its credentials renewed, and the controller makes its pod anew. A run that
    /// cannot be resumed so is recorded `failed` with the reason.
    pub fn resume(&self, store: Store, record: RunRecord, agent: Agent, input: String, credentials: String) {
        match self {
            Launcher::Local(local) => local.launch(store, record, agent, input, Some(credentials)),
            Launcher::Cluster(cluster) => {
                let cluster = cluster.clone();
                tokio::spawn(async move {
                    if let Err(error) = cluster.resume(&record, &credentials).await {
                        tracing::error!(run_id = %record.run_id, error = %error, "the run could not be resumed");
                        let error = error.to_string();
                        if let Err(err) = store.end_run(&record.run_id, RunStatus::Failed, Some(&error)).await {
                            tracing::error!(run_id = %record.run_id, error = %err, "cannot record the run's failure");
                        }
                    }
                });
            }
        }
    }

    /// Starts the run in the background. A run whose AgentRun cannot be created is recorded `failed` with
    /// the reason; from then on, in a cluster, the controller records the run's progress.
    pub fn launch(&self, store: Store, record: RunRecord, agent: Agent, input: String, credentials: Option<String>) {
        match self {
            Launcher::Local(local) => local.launch(store, record, agent, input, credentials),
            Launcher::Cluster(cluster) => {
                let cluster = cluster.clone();
                tokio::spawn(async move {
                    if let Err(error) = cluster.create(&record, input, credentials.as_deref()).await {
                        tracing::error!(run_id = %record.run_id, error = %error, "the run could not be started");
                        let error = error.to_string();
                        if let Err(err) = store.end_run(&record.run_id, RunStatus::Failed, Some(&error)).await {
                            tracing::error!(run_id = %record.run_id, error = %err, "cannot record the run's failure");
                        }
                    }
                });
            }
        }
    }
}
