//! The runner's parts called as a library: the model-and-tools loop, the native model clients, MCP tools,
//! the `execute` tool's executors.

#[path = "runner/execute.rs"]
mod execute;
#[path = "runner/model_anthropic.rs"]
mod model_anthropic;
#[path = "runner/model_bedrock.rs"]
mod model_bedrock;
#[path = "runner/model_clients.rs"]
mod model_clients;
#[path = "runner/model_gemini.rs"]
mod model_gemini;
#[path = "runner/runner_graph.rs"]
mod runner_graph;
#[path = "runner/runner_mcp.rs"]
mod runner_mcp;

/// The fixtures of `tests/support/` this binary uses, and only those (the others would go unused here).
#[path = "support"]
mod support {
    pub mod model_endpoint;
    pub mod openai_endpoint;
}
