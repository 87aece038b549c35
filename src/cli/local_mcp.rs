//! The local mode's McpServers (the manifests folder's): what in-process runs connect to, and their
//! discovery, which lists each server's tools when the process starts and then every `refreshSeconds`
//! into the catalog `GET /api/system/mcp-servers` answers from, as the controller does in a cluster.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use yuxi_operator::controller::mcp_discovery::{judge_with, listed};
use yuxi_operator::facade::services::catalog::LocalCatalog;
use yuxi_operator::resources::mcp_server::McpServer;
use yuxi_operator::run::inputs::McpServers;

use super::local_models::LocalSecrets;

/// The servers of `servers` this process can reach: those with a `url`. One the operator would run
/// (`deploy`) needs a cluster; it is left out, with a warning, and runs naming it fail naming it.
pub fn reachable(servers: Vec<McpServer>) -> Vec<McpServer> {
    servers
        .into_iter()
        .filter(|server| {
            let local = !server.spec.url.is_empty();
            if !local {
                tracing::warn!(server = %server.name_any(), "an McpServer the operator runs (spec.deploy) needs a cluster; the local mode leaves it out");
            }
            local
        })
        .collect()
}

/// The value of `key` of the ConfigMap `name` among `config_maps`.
fn config_map_value(config_maps: &[ConfigMap], name: &str, key: &str) -> Option<String> {
    config_maps.iter().find(|map| map.name_any() == name).and_then(|map| map.data.as_ref()?.get(key).cloned())
}

/// The servers as in-process runs read them, by name: each CA bundle read from the manifests'
/// ConfigMaps (empty when the key is missing, so that the runner refuses the server rather than trust
/// the system's roots).
pub fn run_inputs(servers: &[McpServer], config_maps: &[ConfigMap]) -> McpServers {
    servers
        .iter()
        .map(|server| {
            let mut inputs = yuxi_operator::run::inputs::McpServer::of_resource(server);
            if let Some(key) = &server.spec.ca_bundle_ref {
                inputs.ca_bundle = Some(config_map_value(config_maps, &key.name, &key.key).unwrap_or_default());
            }
            (server.name_any(), inputs)
        })
        .collect()
}

/// Lists the tools of each of `servers` now and then every `refreshSeconds`, writing its status into
/// `catalog`, until its task is aborted (when the servers change) or the process stops. Header values
/// come from `secrets` (and the process's variables); none reaches a status.
pub fn spawn_discovery(
    catalog: LocalCatalog<McpServer>,
    servers: Vec<McpServer>,
    secrets: Arc<LocalSecrets>,
    config_maps: Arc<Vec<ConfigMap>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for mut server in servers {
        let (catalog, secrets, config_maps) = (catalog.clone(), secrets.clone(), config_maps.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let judged = judge_with(
                    &server,
                    |name, key| secrets.get(name, key),
                    |name, key| config_map_value(&config_maps, name, key),
                );
                server.status = Some(listed(&server, judged).await);
                catalog.refresh(server.clone());
                tokio::time::sleep(Duration::from_secs(server.spec.refresh_seconds().into())).await;
            }
        }));
    }
    tasks
}
