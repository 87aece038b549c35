//! The facade's HTTP API, served for real, over the local mode's agents and over a stand-in cluster.

#[path = "facade/facade_agents.rs"]
mod facade_agents;
#[path = "facade/facade_cluster.rs"]
mod facade_cluster;
#[path = "facade/facade_document.rs"]
mod facade_document;
#[path = "facade/knowledge.rs"]
mod knowledge;
#[path = "facade/login.rs"]
mod login;
#[path = "facade/run_tokens.rs"]
mod run_tokens;
#[path = "facade/user_files.rs"]
mod user_files;
#[path = "facade/yuxi_client.rs"]
mod yuxi_client;

/// The fixtures of `tests/support/` this binary uses, and only those (the others would go unused here).
#[path = "support"]
mod support {
    // Only the scripted stand-in's `api_server` serves here; the rest serves the controller tests.
    #[allow(dead_code)]
    pub mod api_server;
    // Only `example_agents` serves here; the rest serves the resources tests.
    #[allow(dead_code)]
    pub mod examples;
    // The A2A SDK's scenarios are the local tests'.
    #[allow(dead_code)]
    pub mod mcp_client;
    pub mod redis;
    pub mod repository;
}
