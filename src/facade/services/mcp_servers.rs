//! The MCP servers a user may give an agent: the McpServer resources whose share admits them
//! ([`crate::access::mcp_server_permission`]), with the tools discovery found, and the names of servers
//! of the installation's configuration that the agents they may read name (those have no resource to
//! read tools from). A server shared with nobody the caller is, and one that does not exist, are alike:
//! neither is listed.

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::agent_views::{mcps_of, referenced};
use super::state::FacadeState;
use crate::access::{Identity, Permission, mcp_server_permission};
use crate::facade::http::error::ApiError;
use crate::resources::mcp_server::McpServer;

/// One MCP server a user may name in `context.mcps`.
#[derive(Clone, Debug)]
pub struct Usable {
    /// Its name, as `context.mcps` lists it.
    pub name: String,
    /// Its resource; `None` for a server of the installation's configuration.
    pub resource: Option<McpServer>,
    /// The slugs of the agents the user may read that name it.
    pub agents: Vec<String>,
}

impl Usable {
    /// How a list describes it: which of the user's agents use it, else how many tools it offers.
    pub fn description(&self) -> String {
        let tools = self.resource.as_ref().map(|r| r.status.as_ref().and_then(|s| s.tool_count).unwrap_or(0));
        match (self.agents.is_empty(), tools) {
            (false, _) => super::agent_views::used_by(&self.agents),
            (true, Some(count)) => format!("{count} tools"),
            (true, None) => String::new(),
        }
    }
}

/// The MCP servers `who` may use, sorted by name. Errors: 503 when the agents or the McpServers cannot
/// be read.
pub async fn usable(state: &FacadeState, who: &Identity) -> Result<Vec<Usable>, ApiError> {
    let agents = state.agents.all().await?;
    let mut named = referenced(&agents, who, mcps_of);
    let mut found: BTreeMap<String, Usable> = BTreeMap::new();
    for server in state.mcp_resources.all().await? {
        if mcp_server_permission(who, &server) < Permission::Read {
            // Agents may name it, but not to this user: it is not theirs to see.
            named.remove(&server.name_any());
            continue;
        }
        let name = server.name_any();
        let agents = named.remove(&name).unwrap_or_default();
        found.insert(name.clone(), Usable { name, resource: Some(server), agents });
    }
    for (name, agents) in named {
        found.insert(name.clone(), Usable { name, resource: None, agents });
    }
    Ok(found.into_values().collect())
}
