//! What a run's pod reads of its namespace besides its run and Agent: the namespace's own trace export
//! (its `yuxi-traces` ConfigMap) and the McpServers its agent names. Read by the run reconciler for a
//! pod to be made, and by the pool reconciler for the pods its pools keep.

use kube::api::Api;

use super::pod::SandboxSettings;
use crate::resources::Agent;

/// The trace export the namespace's `yuxi-traces` ConfigMap asks for, `None` without one; one that
/// does not follow the rules exports nothing (an empty endpoint), and says why.
pub async fn namespace_traces(
    client: &kube::Client,
    namespace: &str,
) -> Result<Option<crate::controller::pod::TraceExport>, kube::Error> {
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(config_map) = config_maps.get_opt(crate::controller::pod::NAMESPACE_TRACES_CONFIG_MAP).await? else {
        return Ok(None);
    };
    match crate::controller::pod::namespace_traces(&config_map.data.unwrap_or_default()) {
        Ok(traces) => Ok(Some(traces)),
        Err(why) => {
            tracing::warn!(namespace, error = %why, "the namespace's runs export no traces");
            Ok(Some(Default::default()))
        }
    }
}

/// The McpServers that `agent`'s `context.mcps` names and the installation's configuration does not,
/// as the runner reads them: `<name>` of the run's namespace, or `<namespace>/<name>` of another
/// namespace whose server lets the run's (`allowedNamespaces`) and lends it no Secret. A name of
/// neither is left for the runner, which fails the run naming it.
pub async fn named_mcp_servers(
    client: &kube::Client,
    sandbox: &SandboxSettings,
    namespace: &str,
    agent: &Agent,
) -> Result<crate::run::inputs::McpServers, kube::Error> {
    use crate::resources::mcp_server::{McpServer, parse_reference};
    let mut found = crate::run::inputs::McpServers::new();
    for reference in agent.spec.context().mcps.iter().flatten() {
        if sandbox.mcp_servers.contains_key(reference) || found.contains_key(reference) {
            continue;
        }
        let (home, name) = match parse_reference(reference) {
            (Some(other), name) => (other, name),
            (None, name) => (namespace, name),
        };
        let api: Api<McpServer> = Api::namespaced(client.clone(), home);
        let server = match api.get_opt(name).await {
            Ok(server) => server,
            // A namespace the controller does not serve holds no server a run may use.
            Err(kube::Error::Api(status)) if home != namespace && status.code == 403 => None,
            Err(err) => return Err(err),
        };
        let lent = |s: &McpServer| s.spec.headers.iter().any(|h| h.secret_key_ref.is_some());
        let server = server.filter(|s| home == namespace || (s.spec.allows_namespace(namespace) && !lent(s)));
        if let Some(server) = server {
            let mut named = crate::run::inputs::McpServer::of_resource(&server);
            if let Some(key) = &server.spec.ca_bundle_ref {
                let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), home);
                // Missing, the bundle is empty and the runner refuses the server rather than trust the
                // system's roots; the server's Accepted condition says which key is missing.
                let bundle = maps.get_opt(&key.name).await?.and_then(|m| m.data?.get(&key.key).cloned());
                named.ca_bundle = Some(bundle.unwrap_or_default());
            }
            found.insert(reference.clone(), named);
        }
    }
    Ok(found)
}
