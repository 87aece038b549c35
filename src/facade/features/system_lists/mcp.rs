//! `GET /api/system/mcp-servers` and `GET /api/system/mcp-servers/{name}/tools`: the MCP servers the
//! caller may give an agent, with the tools discovery found at each
//! ([`crate::facade::services::mcp_servers`]). A server the caller may not use answers exactly as one
//! that does not exist.

use axum::Json;
use axum::extract::{Path, State};
use serde::Serialize;
use serde_json::Value;

use super::lists::Listed;
use crate::facade::http::auth::Caller;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::mcp_servers::{Usable, usable};
use crate::facade::services::state::FacadeState;
use crate::resources::mcp_server::{McpServer, READY};

/// One MCP server, in the fields Yuxi's client reads, with what discovery found.
#[derive(Serialize, utoipa::ToSchema)]
pub struct McpServerItem {
    /// Its name, as `context.mcps` lists it.
    pub slug: String,
    /// The label shown: the name it gave itself, else its name.
    pub name: String,
    /// Which of the caller's agents use it, or how many tools it offers.
    pub description: String,
    /// The slugs of the caller's agents that name it.
    pub agents: Vec<String>,
    /// Whether the last discovery reached it (a server of the configuration: always true).
    pub enabled: bool,
    /// `resource` (an McpServer, its tools discovered) or `configuration` (the installation's file).
    pub source: &'static str,
    /// `ready`, `unavailable` (the last discovery failed) or `unknown` (not listed yet, or not listable
    /// without a user's own token).
    pub status: &'static str,
    /// How many tools it offers (0 when unknown).
    pub tool_count: i32,
    /// Their names, in the order it lists them.
    pub tools: Vec<String>,
    /// The MCP protocol version it spoke.
    pub protocol_version: Option<String>,
    /// No icon is known.
    pub icon: Option<String>,
    /// Always empty.
    pub tags: Vec<String>,
    /// Always false: servers are managed as resources, not through this API.
    pub can_manage: bool,
    /// Always `read`: the caller may use it.
    pub effective_permission: &'static str,
    /// Always false.
    pub is_builtin: bool,
}

/// The status word of `server`'s `Ready` condition.
fn status_of(server: &McpServer) -> &'static str {
    let ready = server.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == READY));
    match ready.map(|c| c.status.as_str()) {
        Some("True") => "ready",
        Some("False") => "unavailable",
        _ => "unknown",
    }
}

impl From<Usable> for McpServerItem {
    fn from(found: Usable) -> Self {
        let status = found.resource.as_ref().and_then(|r| r.status.clone()).unwrap_or_default();
        let (source, state) = match &found.resource {
            Some(server) => ("resource", status_of(server)),
            None => ("configuration", "unknown"),
        };
        let tool_count = status.tool_count.unwrap_or_default();
        let description = found.description();
        McpServerItem {
            name: status.server_name.clone().unwrap_or_else(|| found.name.clone()),
            slug: found.name,
            description,
            agents: found.agents,
            enabled: source == "configuration" || state == "ready",
            source,
            status: state,
            tool_count,
            tools: status.tools.iter().map(|t| t.name.clone()).collect(),
            protocol_version: status.protocol_version,
            icon: None,
            tags: Vec::new(),
            can_manage: false,
            effective_permission: "read",
            is_builtin: false,
        }
    }
}

/// `GET /api/system/mcp-servers`: the MCP servers the caller may give an agent.
#[utoipa::path(
    get,
    path = "/api/system/mcp-servers",
    operation_id = "list_mcp_servers",
    tag = "catalogue",
    responses(
        (status = 200, description = "the MCP servers", body = Listed<McpServerItem>),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
        (status = 503, description = "the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn mcp_servers(
    State(state): State<FacadeState>,
    Caller(who): Caller,
) -> Result<Json<Listed<McpServerItem>>, ApiError> {
    let data = usable(&state, &who).await?.into_iter().map(McpServerItem::from).collect();
    Ok(Json(Listed { success: true, data }))
}

/// One tool of an MCP server, as discovery found it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct McpToolItem {
    /// Its name: what `context.mcpTools` lists, and `<server>/<tool>` in `context.approvalRequired`.
    pub name: String,
    /// What it does, as the server says.
    pub description: String,
    /// Its input schema (`null` when the server's was too large to keep).
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// The server's hint that it only reads.
    pub read_only: bool,
    /// The server's hint that it may destroy or change things: a person approves its calls unless the
    /// agent trusts every tool.
    pub destructive: bool,
}

/// `GET /api/system/mcp-servers/{name}/tools`: the tools discovery found at one server the caller may
/// use (none for a server of the installation's configuration).
#[utoipa::path(
    get,
    path = "/api/system/mcp-servers/{name}/tools",
    operation_id = "list_mcp_server_tools",
    tag = "catalogue",
    params(("name" = String, Path, description = "the server's name")),
    responses(
        (status = 200, description = "its tools", body = Listed<McpToolItem>),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
        (status = 404, description = "no such server the caller may use", body = ErrorBody),
        (status = 503, description = "the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn mcp_server_tools(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(name): Path<String>,
) -> Result<Json<Listed<McpToolItem>>, ApiError> {
    let found = usable(&state, &who).await?.into_iter().find(|server| server.name == name);
    let Some(found) = found else {
        return Err(ApiError::NotFound(format!("no MCP server {name:?}")));
    };
    let tools = found.resource.and_then(|r| r.status).map(|s| s.tools).unwrap_or_default();
    let data = tools
        .into_iter()
        .map(|tool| McpToolItem {
            input_schema: tool.input_schema.and_then(|s| serde_json::from_str(&s).ok()).unwrap_or(Value::Null),
            name: tool.name,
            description: tool.description.unwrap_or_default(),
            read_only: tool.read_only.unwrap_or(false),
            destructive: tool.destructive.unwrap_or(false),
        })
        .collect();
    Ok(Json(Listed { success: true, data }))
}
