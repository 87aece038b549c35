//! `/api/agent`: Yuxi-compatible agent CRUD (YUXI-REFERENCE.md "/api/agent routes"), with visibility and
//! rights from the share rules ([`crate::access`]) and every write judged by the validation module.
//! One agent answers as Yuxi's server does, `{agent: <item>}` ([`super::view`]); the list as
//! `{agents: [<item>]}`. The verdict every write gets is [`super::rules`], the default agent
//! [`super::default`].

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kube::ResourceExt;
use kube::core::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};

use super::config::guard_admin_fields;
use super::default::{clear_defaults, restore};
use super::rules::judge;
use super::view::{AgentAnswer, AgentView, detail, set_pictures, stamp, view};
use crate::access::{Identity, Permission, permission};
use crate::facade::http::auth::{Caller, administrator};
use crate::facade::http::body::{JsonBody, QueryParams};
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::agent_views::{check_scopes, visible};
use crate::facade::services::catalog::CatalogError;
use crate::facade::services::slug::{slugify, unique_slug};
use crate::facade::services::state::FacadeState;
use crate::resources::yuxi::{YuxiConfig, YuxiShare};
use crate::resources::{
    AccessLevel, Agent, AgentContext, AgentShare, AgentSpec, BACKEND_CHATBOT, BACKEND_SUBAGENT, BACKENDS,
    GENERAL_PURPOSE, ShareScope,
};

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
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
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
        .map(|a| view(a, &who, state.keeps_files(), state.agents.fixed(&a.name_any())))
        .collect();
    // The manifests folder's files and errors name objects of every user: administrators' to see.
    let manifests = match administrator(&who, "") {
        Ok(()) => state.local.as_ref().map(|local| local.manifests()),
        Err(_) => None,
    };
    Ok(Json(AgentList { agents, manifests }))
}

/// The answer of `GET /api/agent`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AgentList {
    /// The agents, sorted by slug.
    pub agents: Vec<AgentView>,
    /// In the local mode, to administrators: how the manifests folder last applied, with the files whose
    /// current version is not in force (their last good version is, when they had one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifests: Option<crate::facade::services::local_mode::ManifestsStatus>,
}

/// `GET /api/agent/{slug}`.
#[utoipa::path(
    get,
    path = "/api/agent/{slug}",
    operation_id = "get_agent",
    tag = "agents",
    params(("slug" = String, Path, description = "the agent's slug")),
    responses(
        (status = 200, description = "the agent, with its configurable_items", body = AgentAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<Json<AgentAnswer>, ApiError> {
    let all = state.agents.all().await?;
    let agent = visible(all.iter().find(|a| a.name_any() == slug).cloned(), &who, &slug)?;
    Ok(Json(detail(&state, &agent, &who, &all).await))
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
    /// A URL or data URL (at most 16,384 characters).
    #[serde(default)]
    icon: Option<String>,
    /// Picture URLs (at most 16, each at most 2,048 characters).
    #[serde(default)]
    pics: Option<Vec<String>>,
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
    /// A URL or data URL (at most 16,384 characters); `null` removes it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    icon: Option<Option<String>>,
    /// Picture URLs (at most 16, each at most 2,048 characters); `[]` removes them.
    #[serde(default)]
    pics: Option<Vec<String>>,
    #[serde(default)]
    config_json: Option<YuxiConfig>,
    #[serde(default)]
    share_config: Option<YuxiShare>,
    #[serde(default)]
    is_subagent: Option<bool>,
}

/// A field that is present, `null` or not: `Some(None)` for `null`, so `null` can mean "remove".
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(deserializer).map(Some)
}

/// `POST /api/agent`: creates an agent owned by the caller. The slug is the body's, or slugified from the
/// name, made unique with `-2`, `-3`... A new agent without `share_config` is readable by its owner only.
#[utoipa::path(
    post,
    path = "/api/agent",
    operation_id = "create_agent",
    tag = "agents",
    request_body = CreateAgent,
    responses(
        (status = 201, description = "the new agent, with its configurable_items", body = AgentAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not allowed", body = ErrorBody),
        (status = 409, description = "conflict", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 429, description = "the caller owns the most agents allowed (`max_agents_per_user`)", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn create(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CreateAgent>,
) -> Result<(StatusCode, Json<AgentAnswer>), ApiError> {
    if body.set_default {
        administrator(&who, "may set the default agent")?;
    }
    let base = body.slug.clone().unwrap_or_else(|| slugify(&body.name));
    let context = match &body.config_json {
        Some(config) => Some(guard_admin_fields(&who, None, AgentContext::from(&config.context))?),
        None => None,
    };
    let mut meta = ObjectMeta::default();
    set_pictures(&mut meta, Some(body.icon.clone()), body.pics.clone())?;
    stamp(&mut meta, &who, true);
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
        context,
        share: Some(share),
        owner: Some(who.uid.clone()),
        budget: None,
        remote: None,
        sandbox: None,
    };
    if spec.is_default() && spec.is_subagent() {
        return Err(ApiError::invalid("set_default", "a subagent cannot be the default agent"));
    }
    // The one default moves to the new agent: the previous one is cleared first, and given back if the
    // create fails.
    let listed = state.agents.all().await?;
    let cleared = match body.set_default {
        true => clear_defaults(&state, &who, &listed).await?,
        false => Vec::new(),
    };
    let listed = listed
        .into_iter()
        .map(|a| cleared.iter().find(|c| c.name_any() == a.name_any()).cloned().unwrap_or(a))
        .collect();
    let outcome = create_unique(&state, &who, &base, &spec, &meta, listed).await;
    if outcome.is_err() {
        restore(&state, &who, cleared).await;
    }
    outcome
}

/// Creates the agent of `spec` and `meta` under `base` or its first free suffix, judged first among
/// `listed` (the agents as just read), then among the agents read again.
async fn create_unique(
    state: &FacadeState,
    who: &Identity,
    base: &str,
    spec: &AgentSpec,
    meta: &ObjectMeta,
    listed: Vec<Agent>,
) -> Result<(StatusCode, Json<AgentAnswer>), ApiError> {
    let mut listed = Some(listed);
    // Another create may take the slug between the look and the write: the catalog refuses the second,
    // and the next free suffix is tried.
    for _ in 0..CREATE_ATTEMPTS {
        let others = match listed.take() {
            Some(others) => others,
            None => state.agents.all().await?,
        };
        let owned = others.iter().filter(|a| a.spec.owner.as_deref() == Some(who.uid.as_str())).count();
        if owned >= state.limits.agents_per_user {
            return Err(ApiError::Limited {
                limit: "max_agents_per_user".into(),
                message: format!("you own {owned} agents, the most allowed; delete one first"),
                retry_after: crate::facade::http::limits::RETRY_AFTER_SECONDS,
            });
        }
        let slug = unique_slug(base, &others);
        let mut agent = Agent::new(&slug, spec.clone());
        agent.metadata = ObjectMeta { name: Some(slug.clone()), ..meta.clone() };
        judge(state, who, &agent, &others).await?;
        match state.agents.create(agent, who).await {
            Ok(agent) => {
                let mut all = others;
                all.push(agent.clone());
                return Ok((StatusCode::CREATED, Json(detail(state, &agent, who, &all).await)));
            }
            Err(CatalogError::Exists { .. }) => continue,
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
        (status = 200, description = "the changed agent, with its configurable_items", body = AgentAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not allowed", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 409, description = "conflict", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn update(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<UpdateAgent>,
) -> Result<Json<AgentAnswer>, ApiError> {
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
        spec.context = Some(guard_admin_fields(&who, spec.context.as_ref(), AgentContext::from(&config.context))?);
    }
    if let Some(share) = body.share_config {
        let share = AgentShare::from(&share);
        check_scopes(&who, &share)?;
        spec.share = Some(share);
    }
    set_pictures(&mut agent.metadata, body.icon, body.pics)?;
    stamp(&mut agent.metadata, &who, false);
    judge(&state, &who, &agent, &others).await?;
    let agent = state.agents.replace(agent, &who).await?;
    let all: Vec<Agent> = others.into_iter().map(|a| if a.name_any() == slug { agent.clone() } else { a }).collect();
    Ok(Json(detail(&state, &agent, &who, &all).await))
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
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not allowed", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 409, description = "conflict", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
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
    state.agents.delete(&slug, &who).await?;
    Ok(StatusCode::NO_CONTENT)
}
