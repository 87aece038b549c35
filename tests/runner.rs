//! The runner's parts, in the test's own process: the model-and-tools loop, MCP tools and `execute`.

#[path = "runner/execute.rs"]
mod execute;
#[path = "runner/runner_graph.rs"]
mod runner_graph;
#[path = "runner/runner_mcp.rs"]
mod runner_mcp;

/// The fixtures of `tests/support/` this binary uses.
#[path = "support"]
mod support {
    pub mod openai_endpoint;
}
