//! The tools parent agents' runs call over HTTP (`/api/tools`): the subagent tools ([`subagents`]) and the
//! retrieval tool ([`knowledge`]), and the runner's request for its user's token for an MCP server
//! ([`caller_token`]). The same tools are offered over MCP by the mcp feature; both are thin
//! over the services that hold their logic.

pub mod caller_token;
pub mod knowledge;
pub mod subagents;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(subagents::list_tools))
        .routes(routes!(subagents::subagent_start))
        .routes(routes!(subagents::subagent_status))
        .routes(routes!(subagents::subagent_await))
        .routes(routes!(subagents::subagent_events))
        .routes(routes!(subagents::subagent_cancel))
        .routes(routes!(subagents::task))
        .routes(routes!(subagents::subagent_wait_any))
        .routes(routes!(knowledge::bases))
        .routes(routes!(knowledge::search))
        .routes(routes!(caller_token::caller_token))
}
