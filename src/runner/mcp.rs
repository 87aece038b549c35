//! Tools of MCP servers (`context.mcps`), reached over streamable HTTP with the official Rust MCP SDK.
//!
//! The servers an installation offers are configured by name in a YAML file (`YUXI_MCP_SERVERS`):
//!
//! ```yaml
//! docs:
//!   url: http://docs-mcp.tools.svc:8080/mcp
//!   tools: [search, fetch]      # optional: expose only these tools of the server
//! ```
//!
//! An agent whose `context.mcps` is absent gets every configured server; one that names a server that is
//! not configured or cannot be reached fails at start with an error naming it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::Value;

use super::tools::{Grants, Tool, ToolError, ToolSpec, names};

/// How long connecting to a server and listing its tools may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one MCP tool call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

pub use crate::run::inputs::{McpServer, McpServers};

/// Reads the MCP server configuration file. Errors name the file and the problem.
pub fn load_servers(path: &Path) -> Result<McpServers, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_norway::from_str(&text).map_err(|e| format!("{} is not a map of MCP servers: {e}", path.display()))
}

type Client = Arc<RunningService<RoleClient, ()>>;

/// Connects to every MCP server the grants allow and returns their tools (filtered per server). A tool
/// whose name is taken by a built-in tool is left out.
///
/// Errors: a granted server that is not configured, cannot be reached, or cannot list its tools.
pub async fn connect_granted(servers: &McpServers, grants: &Grants) -> Result<Vec<Arc<dyn Tool>>, String> {
    if let Some(named) = &grants.mcps
        && let Some(missing) = named.iter().find(|n| !servers.contains_key(*n))
    {
        return Err(format!("spec.context.mcps names the MCP server {missing:?}, which is not configured"));
    }
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for (name, server) in servers.iter().filter(|(name, _)| grants.allows_mcp(name)) {
        let (client, listed) = tokio::time::timeout(CONNECT_TIMEOUT, connect(server))
            .await
            .map_err(|_| {
                format!("MCP server {name:?} at {} did not answer within {} s", server.url, CONNECT_TIMEOUT.as_secs())
            })?
            .map_err(|e| format!("MCP server {name:?} at {}: {e}", server.url))?;
        for tool in listed {
            let tool_name = tool.name.to_string();
            if server.tools.as_ref().is_some_and(|only| !only.contains(&tool_name)) {
                continue;
            }
            if names::BUILTIN.contains(&tool_name.as_str()) {
                tracing::warn!(server = %name, tool = %tool_name, "an MCP tool has a built-in tool's name; left out");
                continue;
            }
            let spec = ToolSpec {
                name: tool_name.clone(),
                description: tool.description.as_deref().unwrap_or_default().to_string(),
                parameters: Value::Object((*tool.input_schema).clone()),
            };
            tools.push(Arc::new(McpTool { spec, client: client.clone() }));
        }
    }
    Ok(tools)
}

async fn connect(server: &McpServer) -> Result<(Client, Vec<rmcp::model::Tool>), String> {
    crate::tls::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_uri(server.url.as_str());
    let client = ().serve(transport).await.map_err(|e| format!("cannot connect: {e}"))?;
    let tools = client.list_all_tools().await.map_err(|e| format!("cannot list tools: {e}"))?;
    Ok((Arc::new(client), tools))
}

/// One tool of an MCP server.
struct McpTool {
    spec: ToolSpec,
    client: Client,
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call(&self, arguments: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin(async move {
            let Value::Object(arguments) = arguments else {
                return Err(ToolError::new("the arguments must be a JSON object"));
            };
            let request = CallToolRequestParams::new(self.spec.name.clone()).with_arguments(arguments);
            let result = tokio::time::timeout(CALL_TIMEOUT, self.client.call_tool(request))
                .await
                .map_err(|_| {
                    ToolError::new(format!(
                        "the MCP tool {} did not answer within {} s",
                        self.spec.name,
                        CALL_TIMEOUT.as_secs()
                    ))
                })?
                .map_err(|e| ToolError::new(format!("the MCP tool {} failed: {e}", self.spec.name)))?;
            let text: Vec<String> =
                result.content.iter().filter_map(|block| block.as_text().map(|t| t.text.clone())).collect();
            let mut text = text.join("\n");
            if text.is_empty()
                && let Some(structured) = &result.structured_content
            {
                text = structured.to_string();
            }
            if result.is_error.unwrap_or(false) { Err(ToolError::new(text)) } else { Ok(text) }
        })
    }
}
