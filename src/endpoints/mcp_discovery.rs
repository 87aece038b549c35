//! What an MCP server offers: connect with the official SDK's client (`rmcp`, streamable HTTP), list
//! its tools with their hints, and note its protocol version and name ([`discover`]). The controller's
//! McpServer discovery writes the answer into the resource's status.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::resources::mcp_server::{DiscoveredTool, MAX_LISTED_TOOLS};

/// How long connecting and listing may take.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(15);
/// The most characters of a tool's description kept.
const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The most bytes of a tool's input schema kept.
const MAX_SCHEMA_BYTES: usize = 16 * 1024;

/// What the server offers.
#[derive(Clone, Debug, PartialEq)]
pub struct Discovery {
    /// Its tools, at most [`MAX_LISTED_TOOLS`], in the order it lists them.
    pub tools: Vec<DiscoveredTool>,
    /// How many tools it lists in all.
    pub count: usize,
    /// The protocol version it spoke.
    pub protocol_version: String,
    /// The name it gave itself.
    pub server_name: String,
}

/// Connects to `url` with `headers` and lists its tools, within [`DISCOVERY_TIMEOUT`]. Errors: why it
/// could not be reached or listed, for a person (no header value in it).
pub async fn discover(
    url: &str,
    headers: std::collections::HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>,
) -> Result<Discovery, String> {
    crate::tls::install_crypto_provider();
    let listed = async {
        let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
        let client =
            ().serve(StreamableHttpClientTransport::from_config(config))
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
        let info = client.peer_info();
        let tools = client.list_all_tools().await.map_err(|e| format!("cannot list tools: {e}"))?;
        let _ = client.cancel().await;
        Ok::<_, String>((info, tools))
    };
    let (info, tools) = tokio::time::timeout(DISCOVERY_TIMEOUT, listed)
        .await
        .map_err(|_| format!("did not answer within {} s", DISCOVERY_TIMEOUT.as_secs()))??;
    let count = tools.len();
    let tools = tools
        .into_iter()
        .take(MAX_LISTED_TOOLS)
        .map(|tool| {
            let schema = serde_json::to_string(&*tool.input_schema).ok().filter(|s| s.len() <= MAX_SCHEMA_BYTES);
            let hints = tool.annotations.as_ref();
            DiscoveredTool {
                name: tool.name.to_string(),
                description: tool.description.as_deref().map(|d| d.chars().take(MAX_DESCRIPTION_CHARS).collect()),
                input_schema: schema,
                read_only: hints.and_then(|h| h.read_only_hint),
                destructive: hints.and_then(|h| h.destructive_hint),
            }
        })
        .collect();
    let protocol_version = info.as_ref().map(|i| i.protocol_version.to_string()).unwrap_or_default();
    let server_name = info.as_ref().and_then(|i| i.server_info.as_ref()).map(|s| s.name.clone()).unwrap_or_default();
    Ok(Discovery { tools, count, protocol_version, server_name })
}
