//! The controller (the `controller` role): the AgentRun reconciler, which turns runs into sandboxed pods
//! and pods back into run phases, the Model prober, which keeps every Model's `Available` true to its
//! endpoint, the McpServer discovery, which lists every McpServer's tools, and the Agent reconciler, which keeps every Agent's conditions true
//! (docs/architecture.md). The rules are pure ([`decide`], [`pod`], [`agent_reconciler`]); the shells
//! around them only read the cluster and apply what the rules return.

pub mod agent_reconciler;
pub mod decide;
pub mod mcp_changes;
pub mod mcp_deploy;
pub mod mcp_discovery;
pub mod metrics;
pub mod model_prober;
pub mod namespace_reads;
pub mod pod;
pub mod pod_times;
pub mod pool;
pub mod pool_reconciler;
pub mod run_reconciler;

/// The APIs a controller of `K` watches: each of `namespaces`, or every namespace when `None`.
pub fn watched_apis<K>(client: &kube::Client, namespaces: Option<&[String]>) -> Vec<kube::Api<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespaces {
        None => vec![kube::Api::all(client.clone())],
        Some(namespaces) => namespaces.iter().map(|ns| kube::Api::namespaced(client.clone(), ns)).collect(),
    }
}
