//! What an MCP server offers: connect with the official SDK's client (`rmcp`, streamable HTTP), list
//! its tools with their hints, and note its protocol version and name ([`discover`]). The controller's
//! McpServer discovery writes the answer into the resource's status.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::resources::mcp_server::{DiscoveredTool, MAX_LISTED_TOOLS};

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

/// Headers sent with every request, by name.
pub type Headers = std::collections::HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>;

/// The streamable HTTP transport to the server at `url`, sending `headers` with every request, checking
/// its certificate against the PEM `ca_bundle` in place of the system's roots when set, and following
/// no redirect (the headers are credentials for that server alone). Errors: the bundle holds no
/// readable certificate, or the client cannot be built.
pub fn transport(
    url: &str,
    headers: Headers,
    ca_bundle: Option<&str>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    crate::tls::install_crypto_provider();
    let mut builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    if let Some(pem) = ca_bundle {
        let certificates =
            reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| format!("caBundleRef: {e}"))?;
        if certificates.is_empty() {
            return Err("caBundleRef: no certificate in it".into());
        }
        builder = builder.tls_certs_only(certificates);
    }
    let client = builder.build().map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// Connects to `url` with `headers` (and `ca_bundle`, as [`transport`]) and lists its tools, within
/// `timeout`. Errors: why it could not be reached or listed, for a person (no header value in it).
pub async fn discover(
    url: &str,
    headers: Headers,
    ca_bundle: Option<&str>,
    timeout: Duration,
) -> Result<Discovery, String> {
    let transport = transport(url, headers, ca_bundle)?;
    let listed = async {
        let client = ().serve(transport).await.map_err(|e| format!("cannot connect: {e}"))?;
        let info = client.peer_info();
        let tools = client.list_all_tools().await.map_err(|e| format!("cannot list tools: {e}"))?;
        let _ = client.cancel().await;
        Ok::<_, String>((info, tools))
    };
    let (info, tools) = tokio::time::timeout(timeout, listed)
        .await
        .map_err(|_| format!("did not answer within {} s", timeout.as_secs()))??;
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

/// A standing connection to an MCP server that calls its callback on each
/// `notifications/tools/list_changed` the server sends; dropped, it closes.
pub struct ChangeWatch {
    client: rmcp::service::RunningService<rmcp::RoleClient, ChangeHandler>,
    /// Reads the subscription (`subscriptions/listen`, MCP 2026-07-28); `None` on an earlier protocol,
    /// whose notifications come on the standing stream to [`ChangeHandler`].
    listening: Option<tokio::task::JoinHandle<()>>,
}

impl ChangeWatch {
    /// Whether the connection or its subscription is known to be gone: a new watch is due.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed() || self.listening.as_ref().is_some_and(|task| task.is_finished())
    }

    /// Whether the server still answers on this connection, asked with a tool listing within `timeout`:
    /// a server that restarted has forgotten the session, and its announcements would not come here.
    pub async fn answers(&self, timeout: Duration) -> bool {
        !self.is_closed() && matches!(tokio::time::timeout(timeout, self.client.list_tools(None)).await, Ok(Ok(_)))
    }
}

impl Drop for ChangeWatch {
    fn drop(&mut self) {
        if let Some(task) = &self.listening {
            task.abort();
        }
    }
}

/// Calls back on a tool list change that comes outside a subscription; answers nothing else.
pub struct ChangeHandler(std::sync::Arc<dyn Fn() + Send + Sync>);

impl rmcp::ClientHandler for ChangeHandler {
    async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<rmcp::RoleClient>) {
        (self.0)()
    }
}

/// Connects to `url` as [`discover`] does and keeps the connection open, calling `changed` on each
/// tool list change the server announces: on a subscription to them (`subscriptions/listen`), or, from
/// a server of an earlier protocol, on its standing stream. `Ok(None)` when the server does not say it
/// announces them (`capabilities.tools.listChanged`). Errors: why it could not be reached or
/// subscribed to, within `timeout`.
pub async fn watch_changes(
    url: &str,
    headers: Headers,
    ca_bundle: Option<&str>,
    timeout: Duration,
    changed: std::sync::Arc<dyn Fn() + Send + Sync>,
) -> Result<Option<ChangeWatch>, String> {
    let transport = transport(url, headers, ca_bundle)?;
    let client = tokio::time::timeout(timeout, ChangeHandler(changed.clone()).serve(transport))
        .await
        .map_err(|_| format!("did not answer within {} s", timeout.as_secs()))?
        .map_err(|e| format!("cannot connect: {e}"))?;
    let info = client.peer_info();
    let announces = info.as_ref().and_then(|i| i.capabilities.tools.as_ref()?.list_changed).unwrap_or(false);
    if !announces {
        let _ = client.cancel().await;
        return Ok(None);
    }
    let listens = info.as_ref().is_some_and(|i| i.protocol_version >= rmcp::model::ProtocolVersion::V_2026_07_28);
    if !listens {
        return Ok(Some(ChangeWatch { client, listening: None }));
    }
    let filter = rmcp::model::SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = tokio::time::timeout(timeout, client.listen(filter))
        .await
        .map_err(|_| format!("did not acknowledge a subscription within {} s", timeout.as_secs()))?
        .map_err(|e| format!("cannot subscribe to tool changes: {e}"))?;
    let listening = tokio::spawn(async move {
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(notification, rmcp::model::ServerNotification::ToolListChangedNotification(_)) {
                changed();
            }
        }
    });
    Ok(Some(ChangeWatch { client, listening: Some(listening) }))
}
