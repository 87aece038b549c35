//! The delegation tools over MCP: `/mcp`, a streamable HTTP MCP server (the official Rust SDK, `rmcp`)
//! offering `task`, `subagent_start`, `subagent_status`, `subagent_events`, `subagent_cancel`,
//! `subagent_await`, `subagent_wait_any` and `knowledge_search` with the schemas, allowlists and
//! ownership rules of `/api/tools` (docs/concepts/mcp.md).
//!
//! - Authentication is the facade's: every HTTP request to `/mcp` carries a user token or a run token
//!   (`Authorization: Bearer`), checked before the MCP layer sees it ([`authenticate`]); 401 otherwise.
//! - The agent whose subagents the tools reach: `?agent=<slug>` on the URL, else the run's own (run
//!   token), else the namespace's default agent.
//! - The parent of a user's calls is its MCP session: one session, one parent run and thread (made at
//!   `initialize`, shown in its result), unless a call names a `parent` the user owns. A client of the
//!   stateless protocol (no session) gets one parent per user and agent. A run token's parent is its run.
//!   A session belongs to the caller who opened it (the user, or the run for a run token): every
//!   request naming it is checked, and another caller's is answered as for a session that does not
//!   exist. Sessions are counted per user and per replica, 429 beyond ([`sessions`]).
//! - Each tool call is the logic of the `/api/tools` handler of the same name (the services
//!   [`crate::facade::services::subagents`] and [`crate::facade::services::run_knowledge`]), so the
//!   answers, and the refusals (a stranger's run answers exactly as a missing one), are the same JSON; a
//!   refusal is a tool result with `isError`.
//! - `task`, `subagent_await` and `subagent_wait_any` send progress notifications (the runs' latest
//!   progress) when the call has a progress token, and stop waiting when the call is cancelled; a
//!   cancelled `task` cancels its run.
//! - Clients that declare the tasks extension (`io.modelcontextprotocol/tasks`) get `subagent_start`
//!   answered as an MCP task whose id is the run's: `tasks/get` reads the run (its result once ended),
//!   `tasks/cancel` cancels it ([`tasks`]).
//!
//! The caller and the session's parent are in [`caller`], the authentication in [`authenticate`], the
//! server in [`server`], the tools in [`calls`].

pub mod authenticate;
pub mod caller;
pub mod calls;
pub mod server;
pub mod sessions;
pub mod tasks;

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use self::server::McpServer;
use self::sessions::Sessions;
use crate::facade::services::state::FacadeState;

/// The path the MCP server is served at.
pub const MCP_PATH: &str = "/mcp";

/// The `/mcp` route: the MCP server behind the facade's authentication.
pub fn routes(state: FacadeState) -> axum::Router<FacadeState> {
    let made_with = state.clone();
    let config = StreamableHttpServerConfig::default()
        // The facade's own bearer authentication guards it, whatever the Host: it is reached through a
        // Service or an Ingress by name.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(crate::facade::http::limits::MAX_BODY_BYTES);
    let manager = Arc::new(LocalSessionManager::default());
    let sessions = Arc::new(Sessions::new(manager.clone()));
    let service = StreamableHttpService::new(move || Ok(McpServer::new(made_with.clone())), manager, config);
    axum::Router::new()
        .route_service(MCP_PATH, service)
        .layer(axum::middleware::from_fn_with_state((state, sessions), authenticate::authenticate))
}
