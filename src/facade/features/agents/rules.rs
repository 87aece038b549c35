//! The validation module's verdict on an agent about to be written, among the others of its namespace,
//! as a 422 in Yuxi's field names ([`judge`]): every create, change and default move goes through it.
//! The names the agent declares must exist and be the writer's to use ([`known_to`]): a facade write is
//! one object at a time, so a name that resolves to nothing is a mistake, not an order of applying.

use crate::access::{Identity, Permission, permission};
use crate::facade::http::error::ApiError;
use crate::facade::services::catalog::fields::yuxi_field;
use crate::facade::services::state::FacadeState;
use crate::resources::Agent;
use crate::resources::validation::{Known, Severity, check_references, validate_agent, validate_default_among};

/// The validation module's verdict, the first error as a 422 in Yuxi's field names: the agent's own
/// rules, the default agent among `others`, and every name it declares against what `who` may use.
pub async fn judge(state: &FacadeState, who: &Identity, agent: &Agent, others: &[Agent]) -> Result<(), ApiError> {
    let mut report = validate_agent(agent);
    report.extend(validate_default_among(agent, others));
    report.extend(check_references(agent, &known_to(state, who, others).await, Severity::Refuse));
    match report.errors.first() {
        None => Ok(()),
        Some(error) => Err(ApiError::invalid(yuxi_field(&error.field), error.message.as_str())),
    }
}

/// The names `who` may give an agent: the knowledge bases they may read, the Models they may use, the
/// subagents among `agents` they may see, and locally the skills library's skills and the MCP servers
/// they may use (a cluster's admission webhook judges MCP servers, whose configured ones the facade does
/// not know). A list that cannot be read is left unchecked, with a warning in the log. Only names `who`
/// may use are listed in a refusal, so it tells nothing of anybody else's objects.
async fn known_to(state: &FacadeState, who: &Identity, agents: &[Agent]) -> Known {
    let knowledge_bases = match &state.knowledge {
        Some(knowledge) => match knowledge.catalog.all().await {
            Ok(all) => Some(
                all.iter()
                    .filter(|kb| crate::access::knowledge_permission(who, kb) >= Permission::Read)
                    .map(kube::ResourceExt::name_any)
                    .collect(),
            ),
            Err(err) => unchecked("knowledge bases", &err),
        },
        None => Some(Vec::new()),
    };
    let models = match crate::facade::services::model_access::usable_models(state, who).await {
        Ok(models) => Some(models.iter().map(kube::ResourceExt::name_any).collect()),
        Err(err) => unchecked("Models", &err),
    };
    let visible: Vec<Agent> = agents.iter().filter(|a| permission(who, a) >= Permission::Read).cloned().collect();
    let (skills, mcp_servers) = match &state.local {
        Some(local) => {
            let mcp = match crate::facade::services::mcp_servers::usable(state, who).await {
                Ok(servers) => {
                    let mut names: Vec<String> = servers.into_iter().map(|s| s.name).collect();
                    names.extend(local.configured_mcp.iter().cloned());
                    Some(names)
                }
                Err(err) => unchecked("MCP servers", &err),
            };
            (local.skills(), mcp)
        }
        None => (None, None),
    };
    Known { knowledge_bases, skills, models, mcp_servers, subagents: Some(Known::subagents_of(&visible)) }
}

/// A list the facade could not read: logged, and its names go unchecked.
fn unchecked(what: &str, err: &dyn std::fmt::Display) -> Option<Vec<String>> {
    tracing::warn!(error = %err, "cannot list the {what} to check an agent's names; they are not checked");
    None
}
