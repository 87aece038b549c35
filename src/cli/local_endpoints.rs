//! The local mode's Models and McpServers as its manifests folder changes, as the controller follows
//! them in a cluster: a changed Model is connected again for the runs that start from then on (in this
//! process, in `runner` subprocesses and for `POST /api/chat/call`), a changed McpServer is handed to the
//! runs that start from then on and its tools listed again. Runs under way keep what they started with.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use k8s_openapi::api::core::v1::ConfigMap;
use yuxi_operator::facade::services::catalog::LocalCatalog;
use yuxi_operator::facade::services::launch::ModelInputs;
use yuxi_operator::resources::Model;
use yuxi_operator::resources::mcp_server::McpServer;

use super::in_process::InProcess;
use super::local_models::LocalSecrets;
use super::quick_model::RunnerModels;

/// What a round of the manifests folder changes besides the agents and knowledge bases.
pub struct LocalEndpoints {
    /// The Secrets the Models name.
    pub secrets: Arc<LocalSecrets>,
    /// The in-process runner, unless runs are `runner` subprocesses.
    pub in_process: Option<Arc<InProcess>>,
    /// The model of `POST /api/chat/call`.
    pub quick: Arc<RunnerModels>,
    /// What a `runner` subprocess of a run on a Model gets.
    pub model_inputs: Arc<RwLock<BTreeMap<String, ModelInputs>>>,
    /// The Models, as the API lists them.
    pub models: LocalCatalog<Model>,
    /// The McpServers, as the API lists them with their tools.
    pub mcp: LocalCatalog<McpServer>,
    /// The tasks listing each McpServer's tools.
    pub discovery: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The Models, McpServers and ConfigMaps in force.
    pub held: Mutex<(Vec<Model>, Vec<McpServer>, Vec<ConfigMap>)>,
}

impl LocalEndpoints {
    /// Puts `models` and `servers` (their references read from `config_maps`) in force when they differ
    /// from those in force. Errors: a Model's manifest cannot be written for a subprocess (then nothing
    /// changed).
    pub fn apply(&self, models: &[Model], servers: &[McpServer], config_maps: &[ConfigMap]) -> Result<(), String> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if same(models, &held.0) && same(servers, &held.1) && same(config_maps, &held.2) {
            return Ok(());
        }
        let inputs = super::local_models::subprocess_inputs(models, &self.secrets, config_maps)
            .map_err(|e| format!("the Models cannot be handed to runners: {e}"))?;
        let connections = super::local_models::connect_all(models, &self.secrets, config_maps);
        for (name, connection) in &connections {
            if let Err(err) = connection {
                tracing::warn!(model = %name, "runs on this Model will fail: {err}");
            }
        }
        let reachable = super::local_mcp::reachable(servers.to_vec());
        if let Some(runner) = &self.in_process {
            runner.set_endpoints(connections.clone(), super::local_mcp::run_inputs(&reachable, config_maps));
        }
        self.quick.set_resources(connections);
        *self.model_inputs.write().unwrap_or_else(PoisonError::into_inner) = inputs;
        let changed = self.models.set_manifests(models.to_vec());
        if !changed.is_empty() {
            tracing::info!(models = ?changed, "applied the manifests folder's Models");
        }
        if !same(servers, &held.1) || !same(config_maps, &held.2) {
            let changed = self.mcp.set_manifests(reachable.clone());
            tracing::info!(mcp_servers = ?changed, "applied the manifests folder's McpServers; listing their tools again");
            let mut discovery = self.discovery.lock().unwrap_or_else(PoisonError::into_inner);
            for task in discovery.drain(..) {
                task.abort();
            }
            *discovery = super::local_mcp::spawn_discovery(
                self.mcp.clone(),
                reachable,
                self.secrets.clone(),
                Arc::new(config_maps.to_vec()),
            );
        }
        *held = (models.to_vec(), servers.to_vec(), config_maps.to_vec());
        Ok(())
    }
}

/// Whether two lists of objects serialize alike.
fn same<T: serde::Serialize>(a: &[T], b: &[T]) -> bool {
    serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
}
