//! `/api/knowledge`: knowledge bases for users, under the Agents' share rules ([`crate::access`]): a
//! knowledge base the caller may not read answers 404 exactly as a missing one; one it may read but not
//! manage answers 403 to a change. Only administrators may give a knowledge base a folder or MCP source
//! (both reach what the platform, not the user, controls) or share it with everybody or departments.

use axum::Json;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use kube::ResourceExt;
use kube::core::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::access::{Identity, Permission, Role, knowledge_permission};
use crate::facade::http::auth::Caller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::agent_views::check_scopes;
use crate::facade::services::catalog::CatalogError;
use crate::facade::services::catalog::fields::yuxi_field;
use crate::facade::services::files::safe_name;
use crate::facade::services::knowledge::search::{Passage, check_search, passages};
use crate::facade::services::knowledge::sync::ChangeError;
use crate::facade::services::knowledge::{IndexState, Knowledge, SearchError};
use crate::facade::services::slug::slugify;
use crate::facade::services::state::FacadeState;
use crate::knowledge::extract::{ExtractError, KNOWN_EXTENSIONS, MAX_DOCUMENT_BYTES};
use crate::resources::knowledge_base::{ConfigMapRef, DocumentsSource, McpSource, SecretKeyRef};
use crate::resources::validation::validate_knowledge_base;
use crate::resources::yuxi::YuxiShare;
use crate::resources::{AccessLevel, AgentShare, KnowledgeBase, KnowledgeBaseSpec, KnowledgeSource, ShareScope};

/// The longest document name, in bytes (a file name of the file system holds 255, and the upload's
/// temporary name adds 9).
pub const MAX_NAME_BYTES: usize = 200;

/// `kb` when `who` may read it; otherwise 404, as for a knowledge base that does not exist.
pub(crate) fn readable(kb: Option<KnowledgeBase>, who: &Identity, slug: &str) -> Result<KnowledgeBase, ApiError> {
    kb.filter(|kb| knowledge_permission(who, kb) >= Permission::Read)
        .ok_or_else(|| ApiError::NotFound(format!("knowledge base {slug:?} does not exist")))
}

fn manageable(kb: &KnowledgeBase, who: &Identity) -> Result<(), ApiError> {
    if knowledge_permission(who, kb) < Permission::Manage {
        return Err(ApiError::Forbidden(format!(
            "you may search knowledge base {:?} but not change it",
            kb.name_any()
        )));
    }
    Ok(())
}

/// A knowledge base as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KnowledgeBaseView {
    /// Its slug (`metadata.name`).
    pub slug: String,
    /// Its display name.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// Where its passages come from.
    pub source: SourceBody,
    /// Whether documents are uploaded to it (`POST /api/knowledge/{slug}/documents`).
    pub takes_uploads: bool,
    /// Its owner's uid.
    pub created_by: Option<String>,
    /// Who may search and manage it.
    pub share_config: Option<YuxiShare>,
    /// What the caller may do: `read` or `manage`.
    pub permission: Permission,
    /// Its indexing.
    pub status: StatusView,
}

/// A knowledge base's indexing, as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct StatusView {
    /// Whether searches are answered.
    pub ready: bool,
    /// Documents indexed.
    pub documents: usize,
    /// Passages indexed.
    pub chunks: u64,
    /// When indexing last finished (RFC 3339), if it has.
    pub indexed_at: Option<String>,
    /// Why it is not ready, or what went wrong with some documents.
    pub error: Option<String>,
}

impl From<IndexState> for StatusView {
    fn from(state: IndexState) -> Self {
        StatusView {
            ready: state.ready,
            documents: state.documents,
            chunks: state.chunks,
            indexed_at: state.indexed_at.map(|t| t.to_string()),
            error: state.error,
        }
    }
}

/// The source of a knowledge base: exactly one of `documents` and `mcp` (neither: uploaded documents).
#[derive(Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceBody {
    /// Documents indexed by the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<DocumentsBody>,
    /// An MCP server's retrieval tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpBody>,
}

/// Documents indexed by the system: uploaded ones, or (administrators only) a folder's or a ConfigMap's.
#[derive(Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentsBody {
    /// A folder of the documents volume (administrators only); absent with `config_map`: uploaded
    /// documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 512)]
    pub folder: Option<String>,
    /// A ConfigMap whose keys are the documents (administrators only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapRefBody>,
}

/// A ConfigMap of the facade's namespace.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapRefBody {
    /// Its name.
    #[schema(min_length = 1, max_length = 253)]
    pub name: String,
}

/// An MCP server's retrieval tool (administrators only).
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpBody {
    /// The streamable HTTP endpoint.
    #[schema(min_length = 1, max_length = 2048)]
    pub url: String,
    /// The tool.
    #[schema(min_length = 1, max_length = 128)]
    pub tool: String,
    /// The argument that takes the query (default `query`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 128)]
    pub query_argument: Option<String>,
    /// The argument that takes the number of passages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 128)]
    pub top_k_argument: Option<String>,
    /// The Secret key holding the bearer token: `{name, key}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret_ref: Option<SecretRefBody>,
}

/// One key of a Secret.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretRefBody {
    /// The Secret.
    #[schema(min_length = 1, max_length = 253)]
    pub name: String,
    /// The key.
    #[schema(min_length = 1, max_length = 253)]
    pub key: String,
}

impl From<&KnowledgeSource> for SourceBody {
    fn from(source: &KnowledgeSource) -> Self {
        SourceBody {
            documents: source.documents.as_ref().map(|d| DocumentsBody {
                folder: d.folder.clone(),
                config_map: d.config_map.as_ref().map(|c| ConfigMapRefBody { name: c.name.clone() }),
            }),
            mcp: source.mcp.as_ref().map(|m| McpBody {
                url: m.url.clone(),
                tool: m.tool.clone(),
                query_argument: m.query_argument.clone(),
                top_k_argument: m.top_k_argument.clone(),
                auth_secret_ref: m
                    .auth_secret_ref
                    .as_ref()
                    .map(|s| SecretRefBody { name: s.name.clone(), key: s.key.clone() }),
            }),
        }
    }
}

impl From<SourceBody> for KnowledgeSource {
    fn from(body: SourceBody) -> Self {
        let mcp = body.mcp.map(|m| McpSource {
            url: m.url,
            tool: m.tool,
            query_argument: m.query_argument,
            top_k_argument: m.top_k_argument,
            auth_secret_ref: m.auth_secret_ref.map(|s| SecretKeyRef { name: s.name, key: s.key }),
        });
        let documents = match (&mcp, body.documents) {
            (Some(_), None) => None,
            (_, documents) => {
                let (folder, config_map) = documents.map(|d| (d.folder, d.config_map)).unwrap_or_default();
                let config_map = config_map.map(|c| ConfigMapRef { name: c.name });
                Some(DocumentsSource { folder, config_map })
            }
        };
        KnowledgeSource { documents, mcp }
    }
}

/// The view of `kb` for `who`.
pub fn view(kb: &KnowledgeBase, who: &Identity, knowledge: &Knowledge) -> KnowledgeBaseView {
    KnowledgeBaseView {
        slug: kb.name_any(),
        name: kb.spec.display_name.clone().unwrap_or_else(|| kb.name_any()),
        description: kb.spec.description.clone().unwrap_or_default(),
        source: SourceBody::from(&kb.spec.source),
        takes_uploads: kb.spec.takes_uploads(),
        created_by: kb.spec.owner.clone(),
        share_config: kb.spec.share.as_ref().map(YuxiShare::from),
        permission: knowledge_permission(who, kb),
        status: knowledge.state(kb).into(),
    }
}

/// The answer of `GET /api/knowledge`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KnowledgeList {
    /// The knowledge bases the caller may search, by slug.
    pub knowledge_bases: Vec<KnowledgeBaseView>,
}

/// One knowledge base.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KnowledgeAnswer {
    /// It.
    pub knowledge_base: KnowledgeBaseView,
}

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
    let kb = match knowledge.catalog.create(kb).await {
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
    let kb = knowledge.catalog.replace(kb).await?;
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
    knowledge.catalog.delete(&slug).await?;
    knowledge.forget(&slug).await;
    Ok(StatusCode::NO_CONTENT)
}

/// One indexed document.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DocumentView {
    /// Its file name.
    pub name: String,
    /// The SHA-256 of its contents.
    pub content_hash: String,
    /// How many passages it was cut into.
    pub chunks: usize,
}

/// The answer of `GET /api/knowledge/{slug}/documents`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DocumentList {
    /// The documents indexed, by name.
    pub documents: Vec<DocumentView>,
    /// The knowledge base's indexing.
    pub status: StatusView,
}

/// `GET /api/knowledge/{slug}/documents`: the documents indexed and the indexing status.
#[utoipa::path(
    get,
    path = "/api/knowledge/{slug}/documents",
    operation_id = "list_knowledge_documents",
    tag = "knowledge",
    params(("slug" = String, Path, description = "the knowledge base's slug")),
    responses(
        (status = 200, description = "its documents and indexing status", body = DocumentList),
        (status = 404, description = "unknown, or not readable by the caller", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or its index cannot be read", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn documents(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<Json<DocumentList>, ApiError> {
    let knowledge = state.knowledge()?;
    let kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    let documents = match kb.spec.source.mcp {
        Some(_) => Vec::new(),
        None => knowledge.documents(&kb).await.map_err(ApiError::Unavailable)?,
    };
    let documents = documents
        .into_iter()
        .map(|d| DocumentView { name: d.name, content_hash: d.content_hash, chunks: d.passages })
        .collect();
    Ok(Json(DocumentList { documents, status: knowledge.state(&kb).into() }))
}

/// The answer of an upload.
#[derive(Serialize, utoipa::ToSchema)]
pub struct UploadAnswer {
    /// The document as indexed.
    pub document: DocumentView,
}

/// `POST /api/knowledge/{slug}/documents`: adds (or replaces) a document of a knowledge base the caller
/// manages. It is read and cut before anything is stored: a document of an unknown kind, too large,
/// empty or unreadable is refused and the knowledge base is unchanged.
#[utoipa::path(
    post,
    path = "/api/knowledge/{slug}/documents",
    operation_id = "upload_knowledge_document",
    tag = "knowledge",
    params(("slug" = String, Path, description = "the knowledge base's slug")),
    request_body(content = crate::facade::http::body::UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "indexed", body = UploadAnswer),
        (status = 400, description = "not a multipart body with a `file` field", body = ErrorBody),
        (status = 403, description = "readable but not manageable", body = ErrorBody),
        (status = 404, description = "unknown, or not readable by the caller", body = ErrorBody),
        (status = 409, description = "its documents come from a folder or a service", body = ErrorBody),
        (status = 413, description = "larger than `max_document_bytes`", body = ErrorBody),
        (status = 422, description = "not a document it can index: `file` names why", body = ErrorBody),
        (status = 429, description = "it holds `max_documents_per_knowledge_base` documents", body = ErrorBody),
        (status = 502, description = "the embeddings endpoint failed; nothing was stored", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or its files cannot be written", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn upload(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
    form: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<(StatusCode, Json<UploadAnswer>), ApiError> {
    let knowledge = state.knowledge()?;
    let kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    manageable(&kb, &who)?;
    let mut form = form.map_err(|e| ApiError::BadRequest(format!("not a multipart body: {}", e.body_text())))?;
    let bad = |e: axum::extract::multipart::MultipartError| {
        ApiError::BadRequest(format!("the multipart body cannot be read: {e}"))
    };
    let field = match form.next_field().await.map_err(bad)? {
        Some(field) if field.name() == Some("file") => field,
        Some(field) => {
            return Err(ApiError::invalid(
                field.name().unwrap_or("body").to_string(),
                "only the part `file` is expected",
            ));
        }
        None => return Err(ApiError::invalid("file", "the multipart body has no `file` part")),
    };
    let given = field.file_name().unwrap_or_default();
    if given.len() > MAX_NAME_BYTES {
        return Err(ApiError::invalid("file", format!("the file name is longer than {MAX_NAME_BYTES} bytes")));
    }
    let Some(name) = safe_name(given) else {
        return Err(ApiError::invalid("file", "has no file name"));
    };
    if name.len() > MAX_NAME_BYTES {
        return Err(ApiError::invalid("file", format!("the file name is longer than {MAX_NAME_BYTES} bytes")));
    }
    let bytes = field.bytes().await.map_err(bad)?;
    if form.next_field().await.map_err(bad)?.is_some() {
        return Err(ApiError::invalid("file", "only one part, `file`, is expected"));
    }
    let document = knowledge.upload(&kb, &name, bytes.to_vec()).await.map_err(|err| match err {
        ChangeError::Unreadable(ExtractError::TooLarge { bytes }) => {
            ApiError::TooLarge(format!("file: {bytes} bytes; at most {MAX_DOCUMENT_BYTES} (max_document_bytes)"))
        }
        ChangeError::Unreadable(
            ref too_big @ (ExtractError::TooMuchText | ExtractError::Expands | ExtractError::PageExpands),
        ) => ApiError::TooLarge(format!("file: {too_big}")),
        ChangeError::Unreadable(ExtractError::UnknownKind { name }) => {
            ApiError::invalid("file", format!("{name:?} is not a document it can index: one of {KNOWN_EXTENSIONS}"))
        }
        ChangeError::Unreadable(other) => ApiError::invalid("file", other.to_string()),
        ChangeError::NotUploads(_) => ApiError::Conflict(err.to_string()),
        ChangeError::Full(_) => ApiError::Limited {
            limit: "max_documents_per_knowledge_base".into(),
            message: err.to_string(),
            retry_after: crate::facade::http::limits::RETRY_AFTER_SECONDS,
        },
        ChangeError::NoDocument { .. } | ChangeError::Gone(_) => ApiError::NotFound(err.to_string()),
        ChangeError::Storage(message) => ApiError::Unavailable(message),
        ChangeError::Embeddings(_) => ApiError::BadGateway(err.to_string()),
    })?;
    let document = DocumentView { name: document.name, content_hash: document.content_hash, chunks: document.passages };
    Ok((StatusCode::CREATED, Json(UploadAnswer { document })))
}

/// `DELETE /api/knowledge/{slug}/documents/{name}`: removes a document of a knowledge base the caller
/// manages.
#[utoipa::path(
    delete,
    path = "/api/knowledge/{slug}/documents/{name}",
    operation_id = "delete_knowledge_document",
    tag = "knowledge",
    params(
        ("slug" = String, Path, description = "the knowledge base's slug"),
        ("name" = String, Path, description = "the document's file name"),
    ),
    responses(
        (status = 204, description = "removed"),
        (status = 403, description = "readable but not manageable", body = ErrorBody),
        (status = 404, description = "no such knowledge base or document", body = ErrorBody),
        (status = 409, description = "its documents come from a folder or a service", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or its files cannot be written", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn delete_document(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path((slug, name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let knowledge = state.knowledge()?;
    let kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    manageable(&kb, &who)?;
    knowledge.delete_document(&kb, &name).await.map_err(|err| match err {
        ChangeError::NotUploads(_) => ApiError::Conflict(err.to_string()),
        ChangeError::NoDocument { .. } | ChangeError::Gone(_) => ApiError::NotFound(err.to_string()),
        other => ApiError::Unavailable(other.to_string()),
    })?;
    Ok(StatusCode::NO_CONTENT)
}

/// A search.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    /// What to look for, in words (no query syntax; some text besides spaces).
    #[schema(min_length = 1, max_length = 2000, pattern = "\\S")]
    pub query: String,
    /// How many passages, 1 to 20 (default 5).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 20)]
    pub top_k: Option<u32>,
}

/// The answer of a search.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SearchAnswer {
    /// The passages, best first.
    pub results: Vec<Passage>,
}

/// `POST /api/knowledge/{slug}/search`: the best passages of a knowledge base the caller may read.
#[utoipa::path(
    post,
    path = "/api/knowledge/{slug}/search",
    operation_id = "search_knowledge_base",
    tag = "knowledge",
    params(("slug" = String, Path, description = "the knowledge base's slug")),
    request_body = SearchBody,
    responses(
        (status = 200, description = "the passages, best first", body = SearchAnswer),
        (status = 404, description = "unknown, or not readable by the caller", body = ErrorBody),
        (status = 409, description = "not ready: its documents cannot be read", body = ErrorBody),
        (status = 422, description = "a bad `query` or `top_k`", body = ErrorBody),
        (status = 502, description = "its retrieval service failed", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn search(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<SearchBody>,
) -> Result<Json<SearchAnswer>, ApiError> {
    let knowledge = state.knowledge()?;
    let kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    let top_k = check_search(&body.query, body.top_k)?;
    let hits = knowledge.search(&kb, &body.query, top_k).await.map_err(|err| match err {
        SearchError::NotReady { .. } => ApiError::Conflict(err.to_string()),
        SearchError::Service { .. } => ApiError::BadGateway(err.to_string()),
    })?;
    Ok(Json(SearchAnswer { results: passages(&slug, hits) }))
}
