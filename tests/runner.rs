//! The runner's parts called as a library: the model-and-tools loop, MCP tools, the `execute` tool's executors.

#[path = "runner/execute.rs"]
mod execute;
#[path = "runner/runner_graph.rs"]
mod runner_graph;
#[path = "runner/runner_mcp.rs"]
mod runner_mcp;

/// The fixtures of `tests/support/` this binary uses, and only those (the others would go unused here).
#[path = "support"]
mod support {
    pub mod openai_endpoint;
}
