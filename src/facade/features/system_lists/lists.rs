//! The read-only lists Yuxi's web client fetches to fill its agent editor and its skills page:
//! `GET /api/system/tools`, `GET /api/system/mcp-servers`, `GET /api/skills/accessible` and
//! `GET /api/skills`, each answered as Yuxi does
//! (`{success: true, data: [...]}`) from this system's own catalogue:
//!
//! - tools: the built-in tools every runner offers ([`crate::resources::tools`]) and the subagent tools
//!   main agents get ([`crate::delegation::prompt::tool_schemas`]); the same for every user;
//! - skills: this system declares them on the agents (`context.skills`, `context.preloadSkills`), so
//!   the lists are the names the agents the caller may read reference, with the agents that reference
//!   each. A skill that only a stranger's agent names is not listed.
//! - MCP servers: [`super::mcp`].

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::access::Identity;
use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::agent_views::{referenced, skills_of, used_by};
use crate::facade::services::state::FacadeState;
use crate::resources::Agent;
use crate::resources::tools::builtin_tools;

/// Yuxi's list answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Listed<T> {
    /// Always true.
    pub success: bool,
    /// The items.
    pub data: Vec<T>,
}

/// One tool, in the fields Yuxi's client reads.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ToolItem {
    /// Its name, as `context.tools` lists it.
    pub slug: String,
    /// The label shown (the same).
    pub name: String,
    /// What it does.
    pub description: String,
    /// `buildin` (granted by `context.tools`) or `subagents` (given to main agents that may delegate).
    pub category: &'static str,
    /// Tags: `needs_approval` for the tools a subagent in `default` approval mode goes without.
    pub tags: Vec<&'static str>,
    /// Its arguments, `{name, type, description}` (the subagent tools'; empty for the built-in ones).
    #[schema(value_type = Vec<Object>)]
    pub args: Vec<Value>,
    /// Always `{}`.
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// Always empty: the tools need no configuration.
    pub config_guide: &'static str,
}

/// `GET /api/system/tools` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ToolsQuery {
    /// Only tools of this category (`buildin`, `subagents`).
    #[serde(default)]
    category: Option<String>,
}

/// Every tool of the catalogue.
fn all_tools() -> Vec<ToolItem> {
    let mut tools: Vec<ToolItem> = builtin_tools()
        .into_iter()
        .map(|tool| ToolItem {
            slug: tool.name.into(),
            name: tool.name.into(),
            description: tool.description.into(),
            category: "buildin",
            tags: if tool.needs_approval { vec!["needs_approval"] } else { vec![] },
            args: Vec::new(),
            metadata: Value::Object(Default::default()),
            config_guide: "",
        })
        .collect();
    for schema in crate::delegation::prompt::tool_schemas() {
        let text = |key: &str| schema[key].as_str().unwrap_or_default().to_string();
        let args = schema["parameters"]["properties"]
            .as_object()
            .map(|props| {
                props
                    .iter()
                    .map(|(name, p)| serde_json::json!({"name": name, "type": p["type"], "description": p.get("description").and_then(Value::as_str).unwrap_or_default()}))
                    .collect()
            })
            .unwrap_or_default();
        tools.push(ToolItem {
            slug: text("name"),
            name: text("name"),
            description: text("description"),
            category: "subagents",
            tags: vec![],
            args,
            metadata: Value::Object(Default::default()),
            config_guide: "",
        });
    }
    tools
}

/// `GET /api/system/tools[?category=]`: the tools agents may be given.
#[utoipa::path(
    get,
    path = "/api/system/tools",
    operation_id = "list_system_tools",
    tag = "catalogue",
    params(ToolsQuery),
    responses(
        (status = 200, description = "the tools", body = Listed<ToolItem>),
        (status = 400, description = "malformed query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn tools(Caller(_): Caller, QueryParams(query): QueryParams<ToolsQuery>) -> Json<Listed<ToolItem>> {
    let data = all_tools().into_iter().filter(|t| query.category.as_deref().is_none_or(|c| c == t.category)).collect();
    Json(Listed { success: true, data })
}

/// One skill: a name the caller's agents reference.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Referenced {
    /// The name, as the context lists it.
    pub slug: String,
    /// The label shown (the same).
    pub name: String,
    /// Which of the caller's agents reference it.
    pub description: String,
    /// The slugs of those agents.
    pub agents: Vec<String>,
    /// Always true: a referenced name is in use.
    pub enabled: bool,
    /// No icon is known.
    pub icon: Option<String>,
    /// Always empty.
    pub tags: Vec<String>,
    /// Always false: the lists are read-only here.
    pub can_manage: bool,
    /// Always `read`.
    pub effective_permission: &'static str,
    /// Always false.
    pub is_builtin: bool,
}

/// The names the agents `who` may read reference, as `names_of` reads them from an agent (its skills),
/// each with the agents that reference it. Errors: 503 when the agents cannot be
/// read.
async fn referenced_by(
    state: &FacadeState,
    who: &Identity,
    names_of: fn(&Agent) -> Vec<String>,
) -> Result<Vec<Referenced>, ApiError> {
    let all = state.agents.all().await?;
    Ok(referenced(&all, who, names_of)
        .into_iter()
        .map(|(name, agents)| Referenced {
            description: used_by(&agents),
            slug: name.clone(),
            name,
            agents,
            enabled: true,
            icon: None,
            tags: vec![],
            can_manage: false,
            effective_permission: "read",
            is_builtin: false,
        })
        .collect())
}

/// `GET /api/skills/accessible`: the skills the caller's agents reference.
#[utoipa::path(
    get,
    path = "/api/skills/accessible",
    operation_id = "list_accessible_skills",
    tag = "catalogue",
    responses(
        (status = 200, description = "the skills", body = Listed<Referenced>),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
        (status = 503, description = "the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn accessible_skills(
    State(state): State<FacadeState>,
    Caller(who): Caller,
) -> Result<Json<Listed<Referenced>>, ApiError> {
    Ok(Json(Listed { success: true, data: referenced_by(&state, &who, skills_of).await? }))
}

/// The answer of `GET /api/skills` (Yuxi's skills page).
#[derive(Serialize, utoipa::ToSchema)]
pub struct SkillCards {
    /// Always true.
    pub success: bool,
    /// The skills the caller's agents reference (as `GET /api/skills/accessible`).
    pub data: Vec<Referenced>,
    /// The share scopes the caller may give a skill: none, the skills are read-only here (they live in
    /// the skills library the operator keeps).
    pub allowed_access_levels: Vec<String>,
}

/// `GET /api/skills`: the skills page's cards: the skills the caller's agents reference.
#[utoipa::path(
    get,
    path = "/api/skills",
    operation_id = "list_skill_cards",
    tag = "catalogue",
    responses(
        (status = 200, description = "the skills", body = SkillCards),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
        (status = 503, description = "the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn skill_cards(State(state): State<FacadeState>, Caller(who): Caller) -> Result<Json<SkillCards>, ApiError> {
    let data = referenced_by(&state, &who, skills_of).await?;
    Ok(Json(SkillCards { success: true, data, allowed_access_levels: Vec::new() }))
}
