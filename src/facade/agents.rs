//! `/api/agent`: Yuxi-compatible agent CRUD (YUXI-REFERENCE.md "/api/agent routes"), with visibility and
//! rights from the share rules ([`crate::access`]) and every write judged by the validation module.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kube::ResourceExt;
use kube::core::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::FacadeState;
use super::auth::Caller;
use super::body::{JsonBody, QueryParams};
use super::error::ApiError;
use crate::access::{Identity, Permission, Role, may_save_scope, permission};
use crate::resources::validation::{validate_agent, validate_agent_among};
use crate::resources::yuxi::{YuxiAgent, YuxiConfig, YuxiShare};
use crate::resources::{
    AccessLevel, Agent, AgentShare, AgentSpec, BACKEND_CHATBOT, BACKEND_SUBAGENT, BACKENDS, GENERAL_PURPOSE, ShareScope,
};

/// The agents the facade serves, by slug: in the local mode the manifests folder plus what was created
/// through the API; the built-in `general-purpose` is always there.
#[derive(Clone, Default)]
pub struct AgentCatalog {
    agents: Arc<RwLock<BTreeMap<String, Agent>>>,
}

impl AgentCatalog {
    /// A catalog of `agents`, with the built-in `general-purpose` added when none of them is it.
    pub fn new(agents: Vec<Agent>) -> Self {
        let mut map: BTreeMap<String, Agent> = agents.into_iter().map(|a| (a.name_any(), a)).collect();
        map.entry(GENERAL_PURPOSE.to_string()).or_insert_with(builtin_general_purpose);
        Self { agents: Arc::new(RwLock::new(map)) }
    }

    /// Every agent, sorted by slug.
    pub fn all(&self) -> Vec<Agent> {
        self.agents.read().expect("catalog lock").values().cloned().collect()
    }

    /// The agent `slug`.
    pub fn get(&self, slug: &str) -> Option<Agent> {
        self.agents.read().expect("catalog lock").get(slug).cloned()
    }
}

/// The built-in subagent: an empty context, resolved from the defaults at run time; everybody may use it.
pub fn builtin_general_purpose() -> Agent {
    let mut agent = Agent::new(
        GENERAL_PURPOSE,
        AgentSpec {
            display_name: Some("General purpose".into()),
            description: Some(
                "A general-purpose subagent for analysis, writing and file work; give it a self-contained task.".into(),
            ),
            backend: BACKEND_SUBAGENT.into(),
            is_subagent: Some(true),
            share: Some(AgentShare { read_scope: Some(global_scope()), manage_scope: None }),
            ..AgentSpec::default()
        },
    );
    agent.metadata = ObjectMeta { name: Some(GENERAL_PURPOSE.into()), ..ObjectMeta::default() };
    agent
}

fn global_scope() -> ShareScope {
    ShareScope { access_level: AccessLevel::Global, department_ids: vec![], user_uids: vec![] }
}

/// An agent as the caller sees it: the Yuxi fields plus the caller's rights.
#[derive(Serialize)]
pub struct AgentView {
    #[serde(flatten)]
    agent: YuxiAgent,
    /// Whether the caller may edit and delete it.
    can_manage: bool,
    /// `read` or `manage`.
    effective_permission: Permission,
    /// Whether it is the built-in `general-purpose`.
    is_builtin: bool,
}

fn view(agent: &Agent, who: &Identity) -> AgentView {
    let effective = permission(who, agent);
    AgentView {
        agent: YuxiAgent::from_agent(agent),
        can_manage: effective == Permission::Manage,
        effective_permission: effective,
        is_builtin: agent.name_any() == GENERAL_PURPOSE,
    }
}

fn visible(agent: Option<Agent>, who: &Identity, slug: &str) -> Result<Agent, ApiError> {
    agent
        .filter(|a| permission(who, a) >= Permission::Read)
        .ok_or_else(|| ApiError::NotFound(format!("agent {slug:?} does not exist")))
}

/// `GET /api/agent` query.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Include subagents (the management view).
    #[serde(default)]
    include_subagents: bool,
}

/// `GET /api/agent[?include_subagents=true]`: the agents the caller may see; ordinary agents only unless
/// subagents are asked for.
pub async fn list(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ListQuery>,
) -> Json<Value> {
    let agents: Vec<AgentView> = state
        .agents
        .all()
        .iter()
        .filter(|a| permission(&who, a) >= Permission::Read)
        .filter(|a| query.include_subagents || !a.spec.is_subagent())
        .map(|a| view(a, &who))
        .collect();
    Json(serde_json::json!({ "agents": agents }))
}

/// `GET /api/agent/default`: the namespace's default agent, when the caller may see it.
pub async fn get_default(State(state): State<FacadeState>, Caller(who): Caller) -> Result<Json<AgentView>, ApiError> {
    let default = state.agents.all().into_iter().find(|a| a.spec.is_default());
    let agent =
        visible(default, &who, "default").map_err(|_| ApiError::NotFound("there is no default agent".into()))?;
    Ok(Json(view(&agent, &who)))
}

/// `GET /api/agent/backends`: the known backends.
pub async fn backends(Caller(_): Caller) -> Json<Value> {
    Json(serde_json::json!({"backends": [
        {"id": BACKEND_CHATBOT, "name": "Chatbot agent", "description": "A main agent users chat with; it may delegate to subagents."},
        {"id": BACKEND_SUBAGENT, "name": "Subagent", "description": "An agent main agents delegate tasks to; it cannot delegate further."},
    ]}))
}

/// `GET /api/agent/{slug}`.
pub async fn get(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<Json<AgentView>, ApiError> {
    let agent = visible(state.agents.get(&slug), &who, &slug)?;
    Ok(Json(view(&agent, &who)))
}

/// `POST /api/agent` body (Yuxi's create payload).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateAgent {
    name: String,
    #[serde(default = "chatbot")]
    backend_id: String,
    #[serde(default)]
    slug: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    icon: Option<Value>,
    #[serde(default)]
    pics: Option<Value>,
    #[serde(default)]
    config_json: Option<YuxiConfig>,
    #[serde(default)]
    share_config: Option<YuxiShare>,
    #[serde(default)]
    is_subagent: Option<bool>,
    #[serde(default)]
    set_default: bool,
}

fn chatbot() -> String {
    BACKEND_CHATBOT.to_string()
}

/// `PUT /api/agent/{slug}` body: the fields to change.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateAgent {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    backend_id: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    icon: Option<Value>,
    #[serde(default)]
    pics: Option<Value>,
    #[serde(default)]
    config_json: Option<YuxiConfig>,
    #[serde(default)]
    share_config: Option<YuxiShare>,
    #[serde(default)]
    is_subagent: Option<bool>,
}

/// `POST /api/agent`: creates an agent owned by the caller. The slug is the body's, or slugified from the
/// name, made unique with `-2`, `-3`... A new agent without `share_config` is readable by its owner only.
pub async fn create(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CreateAgent>,
) -> Result<(StatusCode, Json<AgentView>), ApiError> {
    let _ = (&body.icon, &body.pics);
    if body.set_default && who.role < Role::Admin {
        return Err(ApiError::Forbidden("only administrators may set the default agent".into()));
    }
    let base = match &body.slug {
        Some(slug) => slug.clone(),
        None => slugify(&body.name).ok_or_else(|| invalid("name", "no slug can be made of it; give a slug"))?,
    };
    let share = body.share_config.as_ref().map(AgentShare::from).unwrap_or_else(|| AgentShare {
        read_scope: Some(ShareScope {
            access_level: AccessLevel::User,
            department_ids: vec![],
            user_uids: vec![who.uid.clone()],
        }),
        manage_scope: None,
    });
    check_scopes(&who, &share)?;
    let spec = AgentSpec {
        display_name: Some(body.name.clone()),
        description: body.description.clone(),
        backend: body.backend_id.clone(),
        is_subagent: body
            .is_subagent
            .or_else(|| BACKENDS.contains(&body.backend_id.as_str()).then(|| body.backend_id == BACKEND_SUBAGENT)),
        default: body.set_default.then_some(true),
        context: body.config_json.as_ref().map(|c| (&c.context).into()),
        share: Some(share),
        owner: Some(who.uid.clone()),
    };
    let mut agents = state.agents.agents.write().expect("catalog lock");
    let slug = unique_slug(&base, &agents);
    let mut agent = Agent::new(&slug, spec);
    agent.metadata = ObjectMeta { name: Some(slug.clone()), ..ObjectMeta::default() };
    let others: Vec<Agent> = agents.values().cloned().collect();
    judge(&agent, &others)?;
    agents.insert(slug, agent.clone());
    Ok((StatusCode::CREATED, Json(view(&agent, &who))))
}

/// `PUT /api/agent/{slug}`: changes the given fields; the caller must manage the agent.
pub async fn update(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<UpdateAgent>,
) -> Result<Json<AgentView>, ApiError> {
    let _ = (&body.icon, &body.pics);
    let mut agents = state.agents.agents.write().expect("catalog lock");
    let mut agent = visible(agents.get(&slug).cloned(), &who, &slug)?;
    if permission(&who, &agent) < Permission::Manage {
        return Err(ApiError::Forbidden(format!("you may read agent {slug:?} but not change it")));
    }
    let spec = &mut agent.spec;
    if let Some(name) = body.name {
        spec.display_name = Some(name);
    }
    if let Some(description) = body.description {
        spec.description = Some(description);
    }
    if let Some(backend) = body.backend_id {
        spec.backend = backend;
        spec.is_subagent = None;
    }
    if let Some(is_subagent) = body.is_subagent {
        spec.is_subagent = Some(is_subagent);
    }
    if spec.is_subagent.is_none() && BACKENDS.contains(&spec.backend.as_str()) {
        spec.is_subagent = Some(spec.has_subagent_backend());
    }
    if let Some(config) = body.config_json {
        spec.context = Some((&config.context).into());
    }
    if let Some(share) = body.share_config {
        let share = AgentShare::from(&share);
        check_scopes(&who, &share)?;
        spec.share = Some(share);
    }
    let others: Vec<Agent> = agents.values().cloned().collect();
    judge(&agent, &others)?;
    agents.insert(slug, agent.clone());
    Ok(Json(view(&agent, &who)))
}

/// `DELETE /api/agent/{slug}`: the caller must manage it; the built-in `general-purpose` cannot go.
pub async fn delete(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<StatusCode, ApiError> {
    let mut agents = state.agents.agents.write().expect("catalog lock");
    let agent = visible(agents.get(&slug).cloned(), &who, &slug)?;
    if slug == GENERAL_PURPOSE {
        return Err(ApiError::Conflict("the built-in general-purpose subagent cannot be deleted".into()));
    }
    if permission(&who, &agent) < Permission::Manage {
        return Err(ApiError::Forbidden(format!("you may read agent {slug:?} but not delete it")));
    }
    agents.remove(&slug);
    Ok(StatusCode::NO_CONTENT)
}

/// Only administrators may save Global and Department scopes.
fn check_scopes(who: &Identity, share: &AgentShare) -> Result<(), ApiError> {
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

/// The validation module's verdict, the first error as a 422 in Yuxi's field names.
fn judge(agent: &Agent, others: &[Agent]) -> Result<(), ApiError> {
    let mut report = validate_agent(agent);
    report.extend(validate_agent_among(agent, others));
    match report.errors.first() {
        None => Ok(()),
        Some(error) => Err(invalid(&yuxi_field(&error.field), &error.message)),
    }
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::Invalid { field: field.to_string(), message: message.to_string() }
}

/// A resource field path in Yuxi's spelling: `spec.context.maxExecutionSteps` is
/// `config_json.context.max_execution_steps`, `spec.backend` is `backend_id`, `metadata.name` is `slug`.
pub fn yuxi_field(path: &str) -> String {
    let renamed = [
        ("metadata.name", "slug"),
        ("spec.displayName", "name"),
        ("spec.backend", "backend_id"),
        ("spec.isSubagent", "is_subagent"),
        ("spec.default", "is_default"),
        ("spec.owner", "created_by"),
        ("spec.context", "config_json.context"),
        ("spec.share", "share_config"),
        ("spec.description", "description"),
    ];
    let path = renamed
        .iter()
        .find_map(|(from, to)| path.strip_prefix(from).map(|rest| format!("{to}{rest}")))
        .unwrap_or_else(|| path.to_string());
    let mut snake = String::with_capacity(path.len() + 8);
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    snake
}

/// A slug from a display name: lowercase ASCII letters and digits, other runs of characters as one `-`,
/// at most 63 characters. `None` when nothing is left (a name in another script).
pub fn slugify(name: &str) -> Option<String> {
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    slug.truncate(57);
    let slug = slug.trim_matches('-').to_string();
    (!slug.is_empty()).then_some(slug)
}

fn unique_slug(base: &str, taken: &BTreeMap<String, Agent>) -> String {
    if !taken.contains_key(base) {
        return base.to_string();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|candidate| !taken.contains_key(candidate))
        .expect("an unused suffix exists")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_from_names() {
        assert_eq!(slugify("Deep Research!").as_deref(), Some("deep-research"));
        assert_eq!(slugify("  --A__b  ").as_deref(), Some("a-b"));
        assert_eq!(slugify("研究助手"), None);
        assert_eq!(slugify(&"x".repeat(100)).map(|s| s.len()), Some(57));
    }

    #[test]
    fn resource_fields_in_yuxi_spelling() {
        assert_eq!(yuxi_field("spec.context.maxExecutionSteps"), "config_json.context.max_execution_steps");
        assert_eq!(yuxi_field("spec.share.readScope.departmentIds"), "share_config.read_scope.department_ids");
        assert_eq!(yuxi_field("spec.isSubagent"), "is_subagent");
        assert_eq!(yuxi_field("spec.backend"), "backend_id");
        assert_eq!(yuxi_field("metadata.name"), "slug");
        assert_eq!(yuxi_field("spec.context.tools[2]"), "config_json.context.tools[2]");
    }
}
