//! The read-only lists Yuxi's web client fetches to fill its agent editor and its skills page:
//! `GET /api/system/tools`, `GET /api/system/mcp-servers`, `GET /api/skills/accessible` and
//! `GET /api/skills` ([`lists`]); the MCP servers' tools ([`mcp`]).

pub mod lists;
pub mod mcp;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(lists::tools))
        .routes(routes!(mcp::mcp_servers))
        .routes(routes!(mcp::mcp_server_tools))
        .routes(routes!(lists::accessible_skills))
        .routes(routes!(lists::skill_cards))
}
