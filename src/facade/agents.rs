//! (Over 500 lines with its tests: the five CRUD handlers share one mapping and one set of rights checks.)
//! `/api/agent`: Yuxi-compatible agent CRUD (YUXI-REFERENCE.md "/api/agent routes"), with visibility and
//! rights from the share rules ([`crate::access`]) and every write judged by the validation module.

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
use super::catalog::CatalogError;
use super::error::ApiError;
use crate::access::{Identity, Permission, Role, may_save_scope, permission};
use crate::resources::validation::{validate_agent, validate_agent_among};
use crate::resources::yuxi::{YuxiAgent, YuxiConfig, YuxiShare};
use crate::resources::{
    AccessLevel, Agent, AgentShare, AgentSpec, BACKEND_CHATBOT, BACKEND_SUBAGENT, BACKENDS, GENERAL_PURPOSE, ShareScope,
};

/// An agent as the caller sees it: the Yuxi fields plus the caller's rights.
#[derive(Serialize, utoipa::ToSchema)]
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
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Include subagents (the management view).
    #[serde(default)]
    include_subagents: bool,
}

/// `GET /api/agent[?include_subagents=true]`: the agents the caller may see; ordinary agents only unless
/// subagents are asked for.
#[utoipa::path(
    get,
    path = "/api/agent",
    operation_id = "list_agents",
    tag = "agents",
    params(ListQuery),
    responses(
        (status = 200, description = "the agents the caller may see", body = AgentList),
        (status = 400, description = "malformed body or query", body = super::error::ErrorBody),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Json<AgentList>, ApiError> {
    let agents: Vec<AgentView> = state
        .agents
        .all()
        .await?
        .iter()
        .filter(|a| permission(&who, a) >= Permission::Read)
        .filter(|a| query.include_subagents || !a.spec.is_subagent())
        .map(|a| view(a, &who))
        .collect();
    Ok(Json(AgentList { agents }))
}

/// `GET /api/agent/default`: the namespace's default agent, when the caller may see it.
#[utoipa::path(
    get,
    path = "/api/agent/default",
    operation_id = "get_default_agent",
    tag = "agents",
    responses(
        (status = 200, description = "the default agent", body = AgentView),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get_default(State(state): State<FacadeState>, Caller(who): Caller) -> Result<Json<AgentView>, ApiError> {
    let default = state.agents.all().await?.into_iter().find(|a| a.spec.is_default());
    let agent =
        visible(default, &who, "default").map_err(|_| ApiError::NotFound("there is no default agent".into()))?;
    Ok(Json(view(&agent, &who)))
}

/// `GET /api/agent/backends`: the known backends.
#[utoipa::path(
    get,
    path = "/api/agent/backends",
    operation_id = "list_backends",
    tag = "agents",
    responses(
        (status = 200, description = "the known backends", body = Backends),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn backends(Caller(_): Caller) -> Json<Backends> {
    Json(Backends {
        backends: vec![
            Backend {
                id: BACKEND_CHATBOT,
                backend_id: BACKEND_CHATBOT,
                name: "Chatbot agent",
                description: "A main agent users chat with; it may delegate to subagents.",
            },
            Backend {
                id: BACKEND_SUBAGENT,
                backend_id: BACKEND_SUBAGENT,
                name: "Subagent",
                description: "An agent main agents delegate tasks to; it cannot delegate further.",
            },
        ],
    })
}

/// The answer of `GET /api/agent`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AgentList {
    /// The agents, sorted by slug.
    pub agents: Vec<AgentView>,
}

/// The answer of `GET /api/agent/backends`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Backends {
    /// The known backends.
    pub backends: Vec<Backend>,
}

/// One backend.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Backend {
    /// `ChatbotAgent` or `SubAgentBackend`.
    pub id: &'static str,
    /// The same, by the name Yuxi's web client reads (and sends back as `backend_id`).
    pub backend_id: &'static str,
    /// Its name.
    pub name: &'static str,
    /// What it is for.
    pub description: &'static str,
}

/// `GET /api/agent/{slug}`.
#[utoipa::path(
    get,
    path = "/api/agent/{slug}",
    operation_id = "get_agent",
    tag = "agents",
    params(("slug" = String, Path, description = "the agent's slug")),
    responses(
        (status = 200, description = "the agent", body = AgentView),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<Json<AgentView>, ApiError> {
    let agent = visible(state.agents.get(&slug).await?, &who, &slug)?;
    Ok(Json(view(&agent, &who)))
}

/// `POST /api/agent` body (Yuxi's create payload).
#[derive(Deserialize, utoipa::ToSchema)]
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
#[derive(Deserialize, utoipa::ToSchema)]
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
/// name (`agent` when the name has no ASCII letter or digit), made unique with `-2`, `-3`... A new agent without `share_config` is readable by its owner only.
#[utoipa::path(
    post,
    path = "/api/agent",
    operation_id = "create_agent",
    tag = "agents",
    request_body = CreateAgent,
    responses(
        (status = 201, description = "the new agent", body = AgentView),
        (status = 400, description = "malformed body or query", body = super::error::ErrorBody),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 403, description = "not allowed", body = super::error::ErrorBody),
        (status = 409, description = "conflict", body = super::error::ErrorBody),
        (status = 413, description = "body too large", body = super::error::ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
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
        // A name with no ASCII letter or digit (a Chinese name) still makes an agent.
        None => slugify(&body.name).unwrap_or_else(|| "agent".to_string()),
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
    // Another create may take the slug between the look and the write: the catalog refuses the second,
    // and the next free suffix is tried.
    for _ in 0..CREATE_ATTEMPTS {
        let others = state.agents.all().await?;
        let owned = others.iter().filter(|a| a.spec.owner.as_deref() == Some(who.uid.as_str())).count();
        if owned >= state.limits.agents_per_user {
            return Err(ApiError::Limited {
                limit: "max_agents_per_user".into(),
                message: format!("you own {owned} agents, the most allowed; delete one first"),
                retry_after: super::limits::RETRY_AFTER_SECONDS,
            });
        }
        let slug = unique_slug(&base, &others);
        let mut agent = Agent::new(&slug, spec.clone());
        agent.metadata = ObjectMeta { name: Some(slug.clone()), ..ObjectMeta::default() };
        judge(&agent, &others)?;
        match state.agents.create(agent).await {
            Ok(agent) => return Ok((StatusCode::CREATED, Json(view(&agent, &who)))),
            Err(CatalogError::Exists(_)) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(ApiError::Conflict(format!("no free slug could be taken for {base:?}; retry")))
}

/// How many slugs a create tries when others take them first.
const CREATE_ATTEMPTS: usize = 5;

/// `PUT /api/agent/{slug}`: changes the given fields; the caller must manage the agent.
#[utoipa::path(
    put,
    path = "/api/agent/{slug}",
    operation_id = "update_agent",
    tag = "agents",
    params(("slug" = String, Path, description = "the agent's slug")),
    request_body = UpdateAgent,
    responses(
        (status = 200, description = "the changed agent", body = AgentView),
        (status = 400, description = "malformed body or query", body = super::error::ErrorBody),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 403, description = "not allowed", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 409, description = "conflict", body = super::error::ErrorBody),
        (status = 413, description = "body too large", body = super::error::ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn update(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<UpdateAgent>,
) -> Result<Json<AgentView>, ApiError> {
    let _ = (&body.icon, &body.pics);
    let others = state.agents.all().await?;
    let mut agent = visible(others.iter().find(|a| a.name_any() == slug).cloned(), &who, &slug)?;
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
    judge(&agent, &others)?;
    let agent = state.agents.replace(agent).await?;
    Ok(Json(view(&agent, &who)))
}

/// `DELETE /api/agent/{slug}`: the caller must manage it; the built-in `general-purpose` cannot go.
#[utoipa::path(
    delete,
    path = "/api/agent/{slug}",
    operation_id = "delete_agent",
    tag = "agents",
    params(("slug" = String, Path, description = "the agent's slug")),
    responses(
        (status = 204, description = "deleted"),
        (status = 401, description = "no or bad token", body = super::error::ErrorBody),
        (status = 403, description = "not allowed", body = super::error::ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = super::error::ErrorBody),
        (status = 409, description = "conflict", body = super::error::ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = super::error::ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn delete(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<StatusCode, ApiError> {
    let agent = visible(state.agents.get(&slug).await?, &who, &slug)?;
    if slug == GENERAL_PURPOSE {
        return Err(ApiError::Conflict("the built-in general-purpose subagent cannot be deleted".into()));
    }
    if permission(&who, &agent) < Permission::Manage {
        return Err(ApiError::Forbidden(format!("you may read agent {slug:?} but not delete it")));
    }
    state.agents.delete(&slug).await?;
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
        Some(error) => Err(ApiError::invalid(yuxi_field(&error.field), error.message.as_str())),
    }
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

/// `base`, or the first of `base-2`, `base-3`... that no agent of `taken` has.
fn unique_slug(base: &str, taken: &[Agent]) -> String {
    let used: std::collections::HashSet<String> = taken.iter().map(|a| a.name_any()).collect();
    std::iter::once(base.to_string())
        .chain((2..=taken.len() + 2).map(|n| format!("{base}-{n}")))
        .find(|candidate| !used.contains(candidate))
        .unwrap_or_else(|| format!("{base}-{}", uuid::Uuid::new_v4().simple()))
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

    #[test]
    fn unique_slugs_take_the_first_free_suffix() {
        let agents: Vec<Agent> = ["a", "a-2", "a-4"].iter().map(|n| Agent::new(n, AgentSpec::default())).collect();
        assert_eq!(unique_slug("a", &agents), "a-3");
        assert_eq!(unique_slug("b", &agents), "b");
    }
}
