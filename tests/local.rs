//! `yuxi-operator local` started as a subprocess, as a user starts it, and driven over HTTP.

#[path = "local/a2a.rs"]
mod a2a;
#[path = "local/a2a_remote.rs"]
mod a2a_remote;
#[path = "local/approvals.rs"]
mod approvals;
#[path = "local/attacks.rs"]
mod attacks;
#[path = "local/budgets.rs"]
mod budgets;
#[path = "local/isolation.rs"]
mod isolation;
#[path = "local/limits.rs"]
mod limits;
#[path = "local/live_manifests.rs"]
mod live_manifests;
#[path = "local/local_memory.rs"]
mod local_memory;
#[path = "local/local_mode.rs"]
mod local_mode;
#[path = "local/local_parents.rs"]
mod local_parents;
#[path = "local/local_tools.rs"]
mod local_tools;
#[path = "local/mcp.rs"]
mod mcp;
#[path = "local/mcp_servers.rs"]
mod mcp_servers;
#[path = "local/metrics.rs"]
mod metrics;
#[path = "local/models.rs"]
mod models;
#[path = "local/oidc.rs"]
mod oidc;
#[path = "local/readme_tour.rs"]
mod readme_tour;
#[path = "local/run_queues.rs"]
mod run_queues;
#[path = "local/run_trees.rs"]
mod run_trees;
#[path = "local/traces.rs"]
mod traces;
#[path = "local/user_files.rs"]
mod user_files;
#[path = "local/yuxi_client.rs"]
mod yuxi_client;

/// The fixtures of `tests/support/` this binary uses, and only those (the others would go unused here).
#[path = "support"]
mod support {
    pub mod extra_agents;
    pub mod local_mode;
    pub mod mcp_client;
    // Its CA as text is the kube tests' (the API server's configuration).
    #[allow(dead_code)]
    pub mod oidc_provider;
    // The endpoint's error replies and tool calls are the runner tests'; the Models test streams text.
    #[allow(dead_code)]
    pub mod openai_endpoint;
    pub mod redis;
    pub mod repository;
}
