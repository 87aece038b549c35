//! `/api/knowledge`: knowledge bases for users, under the Agents' share rules ([`crate::access`]): a
//! knowledge base the caller may not read answers 404 exactly as a missing one; one it may read but not
//! manage answers 403 to a change. Only administrators may give a knowledge base a folder or MCP source
//! (both reach what the platform, not the user, controls) or share it with everybody or departments.

//!
//! This file holds the CRUD of knowledge bases; their documents are in [`super::documents`], their
//! search in [`super::search`].

use super::access::{manageable, readable};
use super::views::{KnowledgeAnswer, KnowledgeList, SourceBody, view};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use kube::core::ObjectMeta;
use serde::Deserialize;

use crate::access::{Identity, Permission, Role, knowledge_permission};
use crate::facade::http::auth::Caller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::agent_views::check_scopes;
use crate::facade::services::catalog::CatalogError;
use crate::facade::services::catalog::fields::yuxi_field;
use crate::facade::services::slug::slugify;
use crate::facade::services::state::FacadeState;
use crate::resources::validation::validate_knowledge_base;
use crate::resources::yuxi::YuxiShare;
use crate::resources::{AccessLevel, AgentShare, KnowledgeBase, KnowledgeBaseSpec, KnowledgeSource, ShareScope};

/// `GET /api/knowledge`: the knowledge bases the caller may search.
#[utoipa::path(
    get,
    path = "/api/knowledge",
    operation_id = "list_knowledge_bases",
    tag = "knowledge",
    responses(
        (status = 200, description = "the knowledge bases the caller may search", body = KnowledgeList),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list(State(state): State<FacadeState>, Caller(who): Caller) -> Result<Json<KnowledgeList>, ApiError> {
    let knowledge = state.knowledge()?;
    let knowledge_bases = knowledge
        .catalog
        .all()
        .await?
        .iter()
        .filter(|kb| knowledge_permission(&who, kb) >= Permission::Read)
        .map(|kb| view(kb, &who, knowledge))
        .collect();
    Ok(Json(KnowledgeList { knowledge_bases }))
}

/// `GET /api/knowledge/{slug}`.
#[utoipa::path(
    get,
    path = "/api/knowledge/{slug}",
    operation_id = "get_knowledge_base",
    tag = "knowledge",
    params(("slug" = String, Path, description = "the knowledge base's slug")),
    responses(
        (status = 200, description = "the knowledge base", body = KnowledgeAnswer),
        (status = 404, description = "unknown, or not readable by the caller", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<Json<KnowledgeAnswer>, ApiError> {
    let knowledge = state.knowledge()?;
    let kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    Ok(Json(KnowledgeAnswer { knowledge_base: view(&kb, &who, knowledge) }))
}

/// `POST /api/knowledge` body.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKnowledgeBase {
    /// The display name.
    #[schema(min_length = 1, max_length = 200)]
    name: String,
    /// The slug; absent: made from the name.
    #[serde(default)]
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63)]
    slug: Option<String>,
    /// What it holds.
    #[serde(default)]
    #[schema(max_length = 4096)]
    description: Option<String>,
    /// Its source; absent: uploaded documents.
    #[serde(default)]
    source: Option<SourceBody>,
    /// Who may search and manage it; absent: its owner only.
    #[serde(default)]
    share_config: Option<YuxiShare>,
}

/// `PUT /api/knowledge/{slug}` body: the fields to change.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateKnowledgeBase {
    /// The display name.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    name: Option<String>,
    /// What it holds.
    #[serde(default)]
    #[schema(max_length = 4096)]
    description: Option<String>,
    /// Its source (a change of source re-indexes it).
    #[serde(default)]
    source: Option<SourceBody>,
    /// Who may search and manage it.
    #[serde(default)]
    share_config: Option<YuxiShare>,
}

/// Folder, ConfigMap and MCP sources reach what the platform controls (its documents volume, its
/// namespace's objects, its network): only administrators may set them.
fn check_source(who: &Identity, source: &KnowledgeSource) -> Result<(), ApiError> {
    let privileged =
        source.mcp.is_some() || !source.documents.as_ref().is_none_or(|d| d.folder.is_none() && d.config_map.is_none());
    if privileged && who.role < Role::Admin {
        return Err(ApiError::Forbidden(
            "source: only administrators may index a folder of the documents volume or a ConfigMap, or reach an MCP service"
                .into(),
        ));
    }
    Ok(())
}

/// The validation module's verdict, the first error as a 422 in the API's field names.
fn judge(kb: &KnowledgeBase) -> Result<(), ApiError> {
    match validate_knowledge_base(kb).errors.first() {
        None => Ok(()),
        Some(error) => Err(ApiError::invalid(
            yuxi_field(&error.field.replacen("spec.source", "source", 1)),
            error.message.as_str(),
        )),
    }
}

/// `POST /api/knowledge`: creates a knowledge base owned by the caller (readable by its owner only
/// unless `share_config` says otherwise).
#[utoipa::path(
    post,
    path = "/api/knowledge",
    operation_id = "create_knowledge_base",
    tag = "knowledge",
    request_body = CreateKnowledgeBase,
    responses(
        (status = 201, description = "the new knowledge base", body = KnowledgeAnswer),
        (status = 403, description = "a source or share scope only administrators may set", body = ErrorBody),
        (status = 409, description = "the slug is taken", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 429, description = "the caller owns `max_knowledge_bases_per_user` knowledge bases", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn create(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CreateKnowledgeBase>,
) -> Result<(StatusCode, Json<KnowledgeAnswer>), ApiError> {
    let knowledge = state.knowledge()?;
    if body.name.is_empty() {
        return Err(ApiError::invalid("name", "must not be empty"));
    }
    let source = KnowledgeSource::from(body.source.unwrap_or_default());
    check_source(&who, &source)?;
    let share = body.share_config.as_ref().map(AgentShare::from).unwrap_or_else(|| AgentShare {
        read_scope: Some(ShareScope {
            access_level: AccessLevel::User,
            department_ids: vec![],
            user_uids: vec![who.uid.clone()],
        }),
        manage_scope: None,
    });
    check_scopes(&who, &share)?;
    let slug = body.slug.clone().unwrap_or_else(|| slugify(&body.name));
    let mut kb = KnowledgeBase::new(
        &slug,
        KnowledgeBaseSpec {
            display_name: Some(body.name.clone()),
            description: body.description.clone(),
            source,
            share: Some(share),
            owner: Some(who.uid.clone()),
        },
    );
    kb.metadata = ObjectMeta { name: Some(slug.clone()), ..ObjectMeta::default() };
    judge(&kb)?;
    let owned =
        knowledge.catalog.all().await?.iter().filter(|k| k.spec.owner.as_deref() == Some(who.uid.as_str())).count();
    if owned >= state.limits.knowledge_bases_per_user {
        return Err(ApiError::Limited {
            limit: "max_knowledge_bases_per_user".into(),
            message: format!("you own {owned} knowledge bases, the most allowed; delete one first"),
            retry_after: crate::facade::http::limits::RETRY_AFTER_SECONDS,
        });
    }
    let kb = match knowledge.catalog.create(kb, &who).await {
        Err(CatalogError::Exists { .. }) => {
            return Err(ApiError::Conflict(format!("knowledge base {slug:?} exists already; choose another slug")));
        }
        other => other?,
    };
    // A new knowledge base starts empty: whatever a deleted one of its slug left is gone.
    knowledge.forget(&slug).await;
    if let Ok(base) = knowledge.base(&slug) {
        knowledge.sync(&kb, &base).await;
    }
    Ok((StatusCode::CREATED, Json(KnowledgeAnswer { knowledge_base: view(&kb, &who, knowledge) })))
}

/// `PUT /api/knowledge/{slug}`: changes a knowledge base the caller manages.
#[utoipa::path(
    put,
    path = "/api/knowledge/{slug}",
    operation_id = "update_knowledge_base",
    tag = "knowledge",
    params(("slug" = String, Path, description = "the knowledge base's slug")),
    request_body = UpdateKnowledgeBase,
    responses(
        (status = 200, description = "the changed knowledge base", body = KnowledgeAnswer),
        (status = 403, description = "readable but not manageable, or a source or scope only administrators may set", body = ErrorBody),
        (status = 404, description = "unknown, or not readable by the caller", body = ErrorBody),
        (status = 409, description = "defined by a manifest, or changed meanwhile", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn update(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<UpdateKnowledgeBase>,
) -> Result<Json<KnowledgeAnswer>, ApiError> {
    let knowledge = state.knowledge()?;
    let mut kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    manageable(&kb, &who)?;
    if let Some(name) = body.name {
        if name.is_empty() {
            return Err(ApiError::invalid("name", "must not be empty"));
        }
        kb.spec.display_name = Some(name);
    }
    if let Some(description) = body.description {
        kb.spec.description = Some(description);
    }
    if let Some(source) = body.source {
        let source = KnowledgeSource::from(source);
        check_source(&who, &source)?;
        kb.spec.source = source;
    }
    if let Some(share) = &body.share_config {
        let share = AgentShare::from(share);
        check_scopes(&who, &share)?;
        kb.spec.share = Some(share);
    }
    judge(&kb)?;
    let kb = knowledge.catalog.replace(kb, &who).await?;
    Ok(Json(KnowledgeAnswer { knowledge_base: view(&kb, &who, knowledge) }))
}

/// `DELETE /api/knowledge/{slug}`: deletes a knowledge base the caller manages, its documents and index.
#[utoipa::path(
    delete,
    path = "/api/knowledge/{slug}",
    operation_id = "delete_knowledge_base",
    tag = "knowledge",
    params(("slug" = String, Path, description = "the knowledge base's slug")),
    responses(
        (status = 204, description = "deleted"),
        (status = 403, description = "readable but not manageable", body = ErrorBody),
        (status = 404, description = "unknown, or not readable by the caller", body = ErrorBody),
        (status = 409, description = "defined by a manifest", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn delete(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<StatusCode, ApiError> {
    let knowledge = state.knowledge()?;
    let kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    manageable(&kb, &who)?;
    knowledge.catalog.delete(&slug, &who).await?;
    knowledge.forget(&slug).await;
    Ok(StatusCode::NO_CONTENT)
}
