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

use std::path::{Path, PathBuf};
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

/// The MCP servers cannot be configured or reached.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The configuration file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration file is not a YAML map of servers by name.
    #[error("{} is not a map of MCP servers: {source}", path.display())]
    NotServers {
        /// The file.
        path: PathBuf,
        /// Where and how it is wrong.
        source: serde_norway::Error,
    },
    /// The agent's `spec.context.mcps` names a server that is not configured.
    #[error("spec.context.mcps names the MCP server {server:?}, which is not configured")]
    NotConfigured {
        /// The server's name.
        server: String,
    },
    /// The server did not finish connecting and listing its tools within 15 seconds.
    #[error("MCP server {server:?} at {url} did not answer within {} s", CONNECT_TIMEOUT.as_secs())]
    Timeout {
        /// The server's name.
        server: String,
        /// Its endpoint.
        url: String,
    },
    /// The server cannot be connected to.
    #[error("MCP server {server:?} at {url}: cannot connect: {source}")]
    Connect {
        /// The server's name.
        server: String,
        /// Its endpoint.
        url: String,
        /// Why.
        source: Box<rmcp::service::ClientInitializeError>,
    },
    /// The server cannot list its tools.
    #[error("MCP server {server:?} at {url}: cannot list tools: {source}")]
    ListTools {
        /// The server's name.
        server: String,
        /// Its endpoint.
        url: String,
        /// Why.
        source: Box<rmcp::ServiceError>,
    },
}

/// Reads the MCP server configuration file.
///
/// Errors: [`McpError::Unreadable`] or [`McpError::NotServers`], naming the file.
pub fn load_servers(path: &Path) -> Result<McpServers, McpError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| McpError::Unreadable { path: path.to_path_buf(), source })?;
    serde_norway::from_str(&text).map_err(|source| McpError::NotServers { path: path.to_path_buf(), source })
}

type Client = Arc<RunningService<RoleClient, ()>>;

/// Connects to every MCP server the grants allow and returns their tools (filtered per server). A tool
/// whose name is taken by a built-in tool is left out.
///
/// Errors: a granted server that is not configured ([`McpError::NotConfigured`]), cannot be reached
/// ([`McpError::Connect`], [`McpError::Timeout`]), or cannot list its tools ([`McpError::ListTools`]),
/// each naming the server.
pub async fn connect_granted(servers: &McpServers, grants: &Grants) -> Result<Vec<Arc<dyn Tool>>, McpError> {
    if let Some(named) = &grants.mcps
        && let Some(missing) = named.iter().find(|n| !servers.contains_key(*n))
    {
        return Err(McpError::NotConfigured { server: missing.clone() });
    }
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for (name, server) in servers.iter().filter(|(name, _)| grants.allows_mcp(name)) {
        let (client, listed) = tokio::time::timeout(CONNECT_TIMEOUT, connect(name, server))
            .await
            .map_err(|_| McpError::Timeout { server: name.clone(), url: server.url.clone() })??;
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

/// Connects to the server `name` and lists its tools. Errors: [`McpError::Connect`],
/// [`McpError::ListTools`].
async fn connect(name: &str, server: &McpServer) -> Result<(Client, Vec<rmcp::model::Tool>), McpError> {
    crate::tls::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_uri(server.url.as_str());
    let client = ().serve(transport).await.map_err(|source| McpError::Connect {
        server: name.to_string(),
        url: server.url.clone(),
        source: Box::new(source),
    })?;
    let tools = client.list_all_tools().await.map_err(|source| McpError::ListTools {
        server: name.to_string(),
        url: server.url.clone(),
        source: Box::new(source),
    })?;
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
