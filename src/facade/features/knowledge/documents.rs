//! A knowledge base's documents: listed with the indexing status, uploaded (one multipart file, taken
//! as a stream once the caller may write there, read and indexed before the answer) and deleted (`/api/knowledge/{slug}/documents[/{name}]`).

use super::access::{manageable, readable};
use super::views::StatusView;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Serialize;

use crate::facade::http::auth::Caller;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::http::intake::{BodyBudget, BodyDeadline, FileForm, take_part};
use crate::facade::services::files::safe_name;
use crate::facade::services::knowledge::sync::ChangeError;
use crate::facade::services::state::FacadeState;
use crate::knowledge::extract::{ExtractError, KNOWN_EXTENSIONS, MAX_DOCUMENT_BYTES};

/// The longest document name, in bytes (a file name of the file system holds 255, and the upload's
/// temporary name adds 9).
pub const MAX_NAME_BYTES: usize = 200;

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
        (status = 422, description = "not a document it can index: `file` names why; or a part besides it, named", body = ErrorBody),
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
    deadline: Option<Extension<BodyDeadline>>,
    budget: Option<Extension<BodyBudget>>,
    form: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<(StatusCode, Json<UploadAnswer>), ApiError> {
    let knowledge = state.knowledge()?;
    let kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    manageable(&kb, &who)?;
    let mut form = FileForm::new(form)?.until(deadline.as_ref().map(|d| d.0));
    let mut field = form.file().await?;
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
    let spool = knowledge.spool_dir().map_err(|e| ApiError::Unavailable(format!("uploads cannot be received: {e}")))?;
    let limit = (MAX_DOCUMENT_BYTES, "max_document_bytes");
    let (bytes, _held) = take_part(&mut field, &spool, limit, deadline.map(|d| d.0), budget.map(|b| b.0)).await?;
    // The part lets go of the body before the next is looked for.
    drop(field);
    form.end().await?;
    let document = knowledge.upload(&kb, &who.uid, &name, bytes).await.map_err(|err| match err {
        ChangeError::Unreadable(ExtractError::TooLarge { bytes }) => {
            ApiError::TooLarge(format!("file: {bytes} bytes; at most {MAX_DOCUMENT_BYTES} (max_document_bytes)"))
        }
        ChangeError::Unreadable(
            ref too_big @ (ExtractError::TooMuchText
            | ExtractError::Expands
            | ExtractError::PageExpands
            | ExtractError::TooManyPassages
            | ExtractError::PassagesTooLarge),
        ) => ApiError::TooLarge(format!("file: {too_big}")),
        ChangeError::Unreadable(ExtractError::ReadersBusy) => ApiError::Limited {
            limit: "max_document_readings_per_user".into(),
            message: format!("file: {}", ExtractError::ReadersBusy),
            retry_after: crate::facade::http::limits::RETRY_AFTER_SECONDS,
        },
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
