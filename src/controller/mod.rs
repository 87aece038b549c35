//! The controller (the `controller` role): the AgentRun reconciler, which turns runs into sandboxed pods
//! and pods back into run phases, the Model prober, which keeps every Model's `Available` true to its
//! endpoint, and the Agent reconciler, which keeps every Agent's conditions true
//! (docs/architecture.md). The rules are pure ([`decide`], [`pod`], [`agent_reconciler`]); the shells
//! around them only read the cluster and apply what the rules return.

pub mod agent_reconciler;
pub mod decide;
pub mod mcp_discovery;
pub mod metrics;
pub mod model_prober;
pub mod pod;
pub mod pod_times;
pub mod run_reconciler;
