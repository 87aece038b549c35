//! Tools of MCP servers (`context.mcps`), reached over streamable HTTP with the official Rust MCP SDK.
//!
//! The servers an installation offers are configured by name in a YAML file (`YUXI_MCP_SERVERS`):
//!
//! ```yaml
//! docs:
//!   url: http://docs-mcp.tools.svc:8080/mcp
//!   tools: [search, fetch]      # optional: expose only these tools of the server
//!   headers:                    # optional: sent with every request (crate::run::mcp_headers)
//!     Authorization: {env: DOCS_TOKEN, prefix: "Bearer "}
//! ```
//!
//! An agent whose `context.mcps` is absent gets every configured server; one that names a server that is
//! not configured fails at start with an error naming it. A server that cannot be reached, refuses the
//! run's headers or does not answer in time leaves the run without its tools, and the model reads why
//! in its system prompt ([`Connected::unavailable`]); a tool call that fails or times out is an error
//! the model reads as the tool's result.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use serde_json::Value;

use super::tools::{Grants, Tool, ToolError, ToolSpec, names};

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
    /// The server did not finish connecting and listing its tools in time (`timeoutSeconds`).
    #[error("MCP server {server:?} at {url} did not answer within {seconds} s")]
    Timeout {
        /// The server's name.
        server: String,
        /// Its endpoint.
        url: String,
        /// How long it had.
        seconds: u64,
    },
    /// The server's CA bundle holds no readable certificate.
    #[error("MCP server {server:?}: {message}")]
    CaBundle {
        /// The server's name.
        server: String,
        /// What is wrong with it.
        message: String,
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
    /// A header of the server's configuration is not valid.
    #[error("{}: MCP server {server:?}: {source}", path.display())]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// The server's name.
        server: String,
        /// Which header and why.
        source: crate::run::mcp_headers::HeaderError,
    },
    /// A header's value cannot be read (its variable unset, its file unreadable).
    #[error("MCP server {server:?}: {source}")]
    Header {
        /// The server's name.
        server: String,
        /// Which header and why.
        source: crate::run::mcp_headers::HeaderError,
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
/// Errors: [`McpError::Unreadable`], [`McpError::NotServers`] or [`McpError::BadHeader`], naming the
/// file.
pub fn load_servers(path: &Path) -> Result<McpServers, McpError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| McpError::Unreadable { path: path.to_path_buf(), source })?;
    let servers: McpServers =
        serde_norway::from_str(&text).map_err(|source| McpError::NotServers { path: path.to_path_buf(), source })?;
    for (name, server) in &servers {
        crate::run::mcp_headers::check(&server.headers).map_err(|source| McpError::BadHeader {
            path: path.to_path_buf(),
            server: name.clone(),
            source,
        })?;
    }
    Ok(servers)
}

/// The files the servers' headers are read from: hidden from `execute`, which must not read them.
pub fn header_files(servers: &McpServers) -> Vec<PathBuf> {
    servers.values().flat_map(|s| s.headers.values()).filter_map(|h| h.file.clone()).collect()
}

/// What connecting to an agent's MCP servers gave.
pub struct Connected {
    /// The tools of the servers that answered.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The servers that did not, each with why: what the model is told.
    pub unavailable: Vec<String>,
    /// The server of each tool, by tool name (what `approvalRequired: [<server>/*]` names).
    pub servers: std::collections::HashMap<String, String>,
    /// The tools their servers mark destructive (`destructiveHint`), whose calls a person approves.
    pub destructive: Vec<String>,
}

type Client = Arc<RunningService<RoleClient, ()>>;

/// Connects to every MCP server the grants allow and returns their tools (filtered per server). A tool
/// whose name is taken by a built-in tool is left out. A server that cannot be reached, refuses, does not
/// answer within 15 seconds, or whose headers cannot be read, is named in [`Connected::unavailable`].
///
/// Errors: a granted server that is not configured ([`McpError::NotConfigured`]).
pub async fn connect_granted(
    servers: &McpServers,
    grants: &Grants,
    facade: Option<&super::tools::subagents::Facade>,
) -> Result<Connected, McpError> {
    if let Some(named) = &grants.mcps
        && let Some(missing) = named.iter().find(|n| !servers.contains_key(*n))
    {
        return Err(McpError::NotConfigured { server: missing.clone() });
    }
    let mut connected =
        Connected { tools: Vec::new(), unavailable: Vec::new(), servers: Default::default(), destructive: Vec::new() };
    for (name, server) in servers.iter().filter(|(name, _)| grants.allows_mcp(name)) {
        let reached =
            tokio::time::timeout(server.timeout(), connect(name, server, facade)).await.unwrap_or_else(|_| {
                Err(McpError::Timeout {
                    server: name.clone(),
                    url: server.url.clone(),
                    seconds: server.timeout().as_secs(),
                })
            });
        let (client, listed) = match reached {
            Ok(reached) => reached,
            Err(err) => {
                tracing::warn!(server = %name, error = %err, "an MCP server is unavailable; the run goes on without it");
                connected.unavailable.push(err.to_string());
                continue;
            }
        };
        for tool in listed {
            let tool_name = tool.name.to_string();
            if server.tools.as_ref().is_some_and(|only| !only.contains(&tool_name))
                || !grants.allows_mcp_tool(name, &tool_name)
            {
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
            connected.servers.insert(tool_name.clone(), name.clone());
            if tool.annotations.as_ref().and_then(|a| a.destructive_hint) == Some(true) {
                connected.destructive.push(tool_name.clone());
            }
            connected.tools.push(Arc::new(McpTool { spec, client: client.clone(), timeout: server.call_timeout() }));
        }
    }
    Ok(connected)
}

/// The section of the system prompt naming the servers that are unavailable, if any.
pub fn unavailable_prompt(unavailable: &[String]) -> Option<String> {
    (!unavailable.is_empty()).then(|| {
        let lines: Vec<String> = unavailable.iter().map(|why| format!("- {why}")).collect();
        format!("## Unavailable tools\n\nThese MCP servers could not be used for this run; their tools are missing:\n\n{}\n", lines.join("\n"))
    })
}

/// Connects to the server `name` with its headers (a `caller` header's token asked of `facade`) and
/// lists its tools. Errors: [`McpError::Header`], [`McpError::Connect`], [`McpError::ListTools`].
async fn connect(
    name: &str,
    server: &McpServer,
    facade: Option<&super::tools::subagents::Facade>,
) -> Result<(Client, Vec<rmcp::model::Tool>), McpError> {
    let mut headers = std::collections::HashMap::new();
    for (header, source) in &server.headers {
        let header_error = |message: String| McpError::Header {
            server: name.to_string(),
            source: crate::run::mcp_headers::HeaderError { header: header.clone(), message },
        };
        let caller =
            match (&source.caller, facade) {
                (Some(wanted), Some(facade)) => Some(facade.caller_token(&wanted.audience).await.map_err(|why| {
                    header_error(format!("no token of the run's user for {:?}: {why}", wanted.audience))
                })?),
                _ => None,
            };
        let value = crate::run::mcp_headers::resolve(header, source, caller.as_deref())
            .map_err(|source| McpError::Header { server: name.to_string(), source })?;
        let header_name =
            reqwest::header::HeaderName::from_bytes(header.as_bytes()).map_err(|e| header_error(e.to_string()))?;
        let header_value = reqwest::header::HeaderValue::from_str(&value).map_err(|e| header_error(e.to_string()))?;
        headers.insert(header_name, header_value);
    }
    let transport = crate::endpoints::mcp_discovery::transport(&server.url, headers, server.ca_bundle.as_deref())
        .map_err(|message| McpError::CaBundle { server: name.to_string(), message })?;
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
    /// How long one call may take.
    timeout: Duration,
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
            // With the tool call's trace context, so that the server's spans join the run's trace.
            let request = crate::telemetry::with_trace_meta(
                CallToolRequestParams::new(self.spec.name.clone()).with_arguments(arguments),
            );
            let result = tokio::time::timeout(self.timeout, self.client.call_tool(request))
                .await
                .map_err(|_| {
                    ToolError::new(format!(
                        "the MCP tool {} did not answer within {} s",
                        self.spec.name,
                        self.timeout.as_secs()
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
