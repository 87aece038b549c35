//! `GET /a2a/{namespace}/{slug}/.well-known/agent-card.json`: the agent's A2A card for a caller who may
//! see it (404 as a missing agent otherwise). The card names the agent, its one interface (JSON-RPC,
//! A2A 1.0, at the agent's URL), its capabilities (streaming; no push notifications and no extended
//! card: docs/concepts/a2a.md says why), the schemes its requests authenticate with (a bearer token;
//! the OIDC provider's discovery when one is configured), and its skills: the agent itself, then its
//! built-in tools, subagents, knowledge bases and MCP servers, one skill each.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::access::{Permission, permission};
use crate::delegation::a2a::{JSONRPC_BINDING, PROTOCOL_VERSION};
use crate::facade::http::auth::Caller;
use crate::facade::http::error::ApiError;
use crate::facade::services::state::FacadeState;
use crate::resources::Agent;
use crate::resources::tools::builtin_tools;

/// The media types a task takes: text, and JSON data (a decision on a waiting task).
const INPUT_MODES: [&str; 2] = ["text/plain", "application/json"];
/// The media types a task answers: text, JSON data for its progress, and its output files.
const OUTPUT_MODES: [&str; 3] = ["text/plain", "application/json", "application/octet-stream"];

/// `GET /a2a/{namespace}/{slug}/.well-known/agent-card.json`.
pub async fn card(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path((namespace, slug)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    let agent = super::agent_for(&state, &who, &namespace, &slug).await?;
    // Only the agents the caller may see lend their descriptions to the card.
    let all: Vec<Agent> =
        state.agents.all().await?.into_iter().filter(|a| permission(&who, a) >= Permission::Read).collect();
    let issuer = state.auth.oidc().map(|oidc| oidc.config().issuer.clone());
    let card = card_of(&agent, &all, &super::agent_url(&headers, &namespace, &agent), issuer.as_deref());
    // The card is the caller's: no shared cache keeps it.
    let private = [(header::CACHE_CONTROL, "private, no-store"), (header::VARY, "Authorization")];
    Ok((private, Json(card)))
}

/// The card of `agent` served at `url`; `all` are the agents its subagents are found among (one not
/// there is left out), `issuer`
/// the OIDC provider whose tokens the facade takes, when one is configured.
pub fn card_of(agent: &Agent, all: &[Agent], url: &str, issuer: Option<&str>) -> Value {
    let slug = agent.name_any();
    let spec = &agent.spec;
    let description =
        spec.description.clone().filter(|d| !d.trim().is_empty()).unwrap_or_else(|| format!("The agent {slug}."));
    let name = spec.display_name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| slug.clone());
    let mut skills = vec![
        json!({"id": slug, "name": name, "description": description, "tags": [if spec.is_subagent() { "subagent" } else { "agent" }]}),
    ];
    let context = spec.context();
    let builtin = builtin_tools();
    for tool in context.tools.iter().flatten() {
        let about = builtin.iter().find(|b| b.name == tool).map_or("A tool of the agent.", |b| b.description);
        skills.push(json!({"id": format!("tool:{tool}"), "name": tool, "description": about, "tags": ["tool"]}));
    }
    for sub in context.subagents.iter().flatten() {
        // A subagent not among `all` (one the caller may not see) is left out.
        let Some(found) = all.iter().find(|a| a.name_any() == *sub) else { continue };
        let about = found.spec.description.clone().unwrap_or_else(|| format!("The subagent {sub}."));
        skills.push(json!({"id": format!("subagent:{sub}"), "name": sub, "description": about, "tags": ["subagent"]}));
    }
    for kb in context.knowledges.iter().flatten() {
        let about = format!("Searches the knowledge base {kb}.");
        skills.push(json!({"id": format!("knowledge:{kb}"), "name": kb, "description": about, "tags": ["knowledge"]}));
    }
    for server in context.mcps.iter().flatten() {
        let about = format!("The tools of the MCP server {server}.");
        skills.push(json!({"id": format!("mcp:{server}"), "name": server, "description": about, "tags": ["mcp"]}));
    }
    let mut schemes = json!({
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "a token of the facade's users, or of its OIDC provider"}},
    });
    let mut requirements = vec![json!({"schemes": {"bearer": {"list": []}}})];
    if let Some(issuer) = issuer {
        let discovery = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
        schemes["oidc"] = json!({"openIdConnectSecurityScheme": {"openIdConnectUrl": discovery}});
        requirements.push(json!({"schemes": {"oidc": {"list": []}}}));
    }
    json!({
        "name": name,
        "description": description,
        "supportedInterfaces": [{"url": url, "protocolBinding": JSONRPC_BINDING, "protocolVersion": PROTOCOL_VERSION}],
        "provider": {"organization": "yuxi-operator", "url": url},
        "version": agent.metadata.generation.unwrap_or(1).to_string(),
        "capabilities": {"streaming": true, "pushNotifications": false, "extendedAgentCard": false},
        "securitySchemes": schemes,
        "securityRequirements": requirements,
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": OUTPUT_MODES,
        "skills": skills,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, spec: Value) -> Agent {
        Agent::new(name, serde_json::from_value(spec).expect("a spec"))
    }

    #[test]
    fn the_card_names_the_interface_the_schemes_and_a_skill_per_tool_and_subagent() {
        let parent = agent(
            "writer",
            json!({"backend": "ChatbotAgent", "description": "Writes.", "context": {"tools": ["read_file"], "subagents": ["checker"], "knowledges": ["docs"]}}),
        );
        let checker =
            agent("checker", json!({"backend": "SubAgentBackend", "isSubagent": true, "description": "Checks facts."}));
        let card =
            card_of(&parent, &[parent.clone(), checker], "http://h/a2a/default/writer", Some("https://id.example/"));
        assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(card["capabilities"]["pushNotifications"], false);
        assert_eq!(
            card["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"],
            "https://id.example/.well-known/openid-configuration"
        );
        let ids: Vec<&str> =
            card["skills"].as_array().expect("skills").iter().map(|s| s["id"].as_str().expect("id")).collect();
        assert_eq!(ids, ["writer", "tool:read_file", "subagent:checker", "knowledge:docs"]);
        assert_eq!(card["skills"][2]["description"], "Checks facts.");
        let without = card_of(&parent, &[], "http://h/x", None);
        assert!(without["securitySchemes"].get("oidc").is_none(), "no OIDC scheme without a provider");
    }
}
