//! What the controller does in a cluster: its reconcilers against a stand-in API server, the pod a run gets.

#[path = "controller/agent_reconciler.rs"]
mod agent_reconciler;
#[path = "controller/controller_runs.rs"]
mod controller_runs;
#[path = "controller/sandbox_pod.rs"]
mod sandbox_pod;

/// The fixtures of `tests/support/` this binary uses, and only those (the others would go unused here).
#[path = "support"]
mod support {
    pub mod api_server;
    // Only `example_manifests` serves here; the rest serves the resources and facade tests.
    #[allow(dead_code)]
    pub mod examples;
    pub mod pss;
    pub mod repository;
}
