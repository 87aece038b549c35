//! How the agents look from a caller: which one it may see ([`visible`]), which share scopes it may save
//! ([`check_scopes`]), and the MCP servers and skills the agents it may read reference ([`referenced`],
//! with [`mcps_of`] and [`skills_of`]; [`used_by`] says which agents).

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::access::{Identity, Permission, may_save_scope, permission};
use crate::facade::http::error::ApiError;
use crate::resources::{Agent, AgentShare};

/// `agent` when `who` may see it; otherwise 404, as for a missing one.
pub fn visible(agent: Option<Agent>, who: &Identity, slug: &str) -> Result<Agent, ApiError> {
    agent
        .filter(|a| permission(who, a) >= Permission::Read)
        .ok_or_else(|| ApiError::NotFound(format!("agent {slug:?} does not exist")))
}

/// Only administrators may save Global and Department scopes.
pub fn check_scopes(who: &Identity, share: &AgentShare) -> Result<(), ApiError> {
    for (field, scope) in
        [("share_config.read_scope", &share.read_scope), ("share_config.manage_scope", &share.manage_scope)]
    {
        if let Some(scope) = scope
            && !may_save_scope(who, scope)
        {
            return Err(ApiError::Forbidden(format!(
                "{field}: only administrators may share with everybody or with departments"
            )));
        }
    }
    Ok(())
}

/// The names `names_of` gives for the agents `who` may read, each with the slugs of those agents.
pub fn referenced(
    all: &[Agent],
    who: &Identity,
    names_of: impl Fn(&Agent) -> Vec<String>,
) -> BTreeMap<String, Vec<String>> {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for agent in all.iter().filter(|a| permission(who, a) >= Permission::Read) {
        for name in names_of(agent) {
            let agents = found.entry(name).or_default();
            if !agents.contains(&agent.name_any()) {
                agents.push(agent.name_any());
            }
        }
    }
    found
}

/// The MCP servers `agent`'s context names.
pub fn mcps_of(agent: &Agent) -> Vec<String> {
    agent.spec.context().mcps.clone().unwrap_or_default()
}

/// The skills `agent`'s context names, preloaded or not.
pub fn skills_of(agent: &Agent) -> Vec<String> {
    let context = agent.spec.context();
    context.skills.iter().chain(context.preload_skills.iter()).flatten().cloned().collect()
}

/// The description of a referenced name: which agents use it.
pub fn used_by(agents: &[String]) -> String {
    format!("used by {}", agents.join(", "))
}
