//! A thread's attachments: the held files confirmed into it
//! (`POST /api/chat/thread/{thread_id}/attachments/confirm`, moved into the thread's uploads scope,
//! where its runs read them at `/home/gem/user-data/uploads/<file_id>`), listed and removed with `GET`
//! and `DELETE /api/chat/thread/{thread_id}/attachments[/{file_id}]`. The bounds and the holding
//! folder are in [`super::held`].

use std::path::Path;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use serde::{Deserialize, Serialize};

use super::held::{
    ALLOWED_EXTENSIONS, MAX_FILE_BYTES, MAX_PER_THREAD, count_files, data_dir, held_dir, io_error, uploads_dir,
};
use crate::facade::http::auth::Caller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::conversations::owned;
use crate::facade::services::files::safe_name;
use crate::facade::services::state::FacadeState;
use crate::run::scope::Scope;

/// One file to confirm.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmItem {
    /// The `object_name` its upload answered.
    #[schema(min_length = 1, max_length = 240)]
    pub object_name: String,
    /// Its media type (accepted, not used).
    #[serde(default)]
    pub file_type: Option<String>,
    /// Must be absent or `null`: files are not parsed here.
    #[serde(default)]
    pub parsed_object_name: Option<String>,
}

/// `POST .../attachments/confirm` body.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmBody {
    /// The held files to add, at most 50.
    #[schema(max_items = 50)]
    pub attachments: Vec<ConfirmItem>,
}

/// An attachment (Yuxi's `AttachmentResponse`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct Attachment {
    /// Its id in the thread: its file name there.
    pub file_id: String,
    /// Its file name.
    pub file_name: String,
    /// Always `null` (the kind is the name's).
    pub file_type: Option<String>,
    /// Its size, in bytes.
    pub file_size: u64,
    /// Always `uploaded`.
    pub status: &'static str,
    /// When it was added, RFC 3339.
    pub uploaded_at: String,
    /// Where the thread's runs read it.
    pub path: String,
}

/// The answer of `POST .../attachments/confirm`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Confirmed {
    /// The attachments added.
    pub attachments: Vec<Attachment>,
}

/// The attachment `file_id` of the uploads folder `dir`: a regular file (never what a link a run made
/// there points at).
async fn attachment(dir: &Path, file_id: &str) -> Option<Attachment> {
    let meta = tokio::fs::symlink_metadata(dir.join(file_id)).await.ok().filter(|m| m.is_file())?;
    let uploaded_at =
        meta.modified().ok().and_then(|t| jiff::Timestamp::try_from(t).ok()).map(|t| t.to_string()).unwrap_or_default();
    Some(Attachment {
        file_id: file_id.to_string(),
        file_name: file_id.to_string(),
        file_type: None,
        file_size: meta.len(),
        status: "uploaded",
        uploaded_at,
        path: format!("{}/{file_id}", Scope::Uploads.virtual_root()),
    })
}

/// `POST /api/chat/thread/{thread_id}/attachments/confirm`: moves held files into one of the caller's
/// threads.
#[utoipa::path(
    post,
    path = "/api/chat/thread/{thread_id}/attachments/confirm",
    operation_id = "confirm_attachments",
    tag = "chat",
    params(("thread_id" = String, Path, description = "the thread id")),
    request_body = ConfirmBody,
    responses(
        (status = 200, description = "the attachments added", body = Confirmed),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "the thread is unknown or another user's, or `attachments[i].object_name` names no file the caller holds", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 429, description = "`max_attachments_per_thread`", body = ErrorBody),
        (status = 503, description = "this facade keeps no files, or the store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn confirm(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    UrlPath(thread_id): UrlPath<String>,
    JsonBody(body): JsonBody<ConfirmBody>,
) -> Result<Json<Confirmed>, ApiError> {
    let store = state.store()?;
    let conversation = owned(store, &who, &thread_id).await?;
    let data = data_dir(&state)?;
    let held = held_dir(data, &conversation.uid)?;
    let uploads = uploads_dir(data, &conversation.uid, &thread_id)?;
    if body.attachments.len() > MAX_PER_THREAD {
        return Err(ApiError::invalid("attachments", format!("at most {MAX_PER_THREAD} at once")));
    }
    for (at, item) in body.attachments.iter().enumerate() {
        let found = safe_name(&item.object_name).filter(|n| *n == item.object_name && held.join(n).is_file());
        if found.is_none() {
            return Err(ApiError::NotFound(format!("attachments[{at}].object_name: you hold no file of that name")));
        }
        if body.attachments[..at].iter().any(|earlier| earlier.object_name == item.object_name) {
            return Err(ApiError::invalid(format!("attachments[{at}].object_name"), "names a file given before"));
        }
        if item.parsed_object_name.is_some() {
            return Err(ApiError::invalid(
                format!("attachments[{at}].parsed_object_name"),
                "files are not parsed here",
            ));
        }
    }
    if count_files(&uploads).await + body.attachments.len() > MAX_PER_THREAD {
        return Err(ApiError::Limited {
            limit: "max_attachments_per_thread".into(),
            message: format!("a thread has at most {MAX_PER_THREAD} attachments"),
            retry_after: 60,
        });
    }
    tokio::fs::create_dir_all(&uploads).await.map_err(|e| io_error("cannot add the attachment", e))?;
    let mut added = Vec::new();
    for item in body.attachments {
        // The held name is `<32 hex>_<name>`: the thread keeps the name, made unique with a counter.
        let name = item.object_name.split_once('_').map_or(item.object_name.as_str(), |(_, n)| n).to_string();
        let mut file_id = name.clone();
        let mut n = 2;
        // A link never replaces what is there (a rename would: two confirms at once of files of one name
        // would keep one of them).
        loop {
            match tokio::fs::hard_link(held.join(&item.object_name), uploads.join(&file_id)).await {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n <= MAX_PER_THREAD * 4 => {
                    file_id = format!("{n}-{name}");
                    n += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !held.join(&item.object_name).exists() => {
                    return Err(ApiError::NotFound(format!(
                        "{:?}: you hold no file of that name (added meanwhile?)",
                        item.object_name
                    )));
                }
                Err(e) => return Err(io_error("cannot add the attachment", e)),
            }
        }
        match tokio::fs::remove_file(held.join(&item.object_name)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error("cannot add the attachment", e)),
            _ => {}
        }
        if let Some(attachment) = attachment(&uploads, &file_id).await {
            added.push(attachment);
        }
    }
    Ok(Json(Confirmed { attachments: added }))
}

/// The limits of attachments, as Yuxi's client shows them.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AttachmentLimits {
    /// The kinds allowed, by extension.
    pub allowed_extensions: Vec<&'static str>,
    /// The largest file, in bytes.
    pub max_size_bytes: usize,
}

/// The answer of `GET /api/chat/thread/{thread_id}/attachments`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AttachmentList {
    /// The thread's attachments, by name.
    pub attachments: Vec<Attachment>,
    /// The limits.
    pub limits: AttachmentLimits,
}

/// `GET /api/chat/thread/{thread_id}/attachments`: the files in the thread's uploads scope.
#[utoipa::path(
    get,
    path = "/api/chat/thread/{thread_id}/attachments",
    operation_id = "list_attachments",
    tag = "chat",
    params(("thread_id" = String, Path, description = "the thread id")),
    responses(
        (status = 200, description = "the attachments", body = AttachmentList),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "the thread is unknown or another user's", body = ErrorBody),
        (status = 503, description = "this facade keeps no files, or the store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    UrlPath(thread_id): UrlPath<String>,
) -> Result<Json<AttachmentList>, ApiError> {
    let store = state.store()?;
    let conversation = owned(store, &who, &thread_id).await?;
    let uploads = uploads_dir(data_dir(&state)?, &conversation.uid, &thread_id)?;
    let mut names = Vec::new();
    if let Ok(mut entries) = tokio::fs::read_dir(&uploads).await {
        while let Ok(Some(entry)) = entries.next_entry().await {
            if names.len() >= MAX_PER_THREAD * 2 {
                break;
            }
            names.push(entry.file_name().to_string_lossy().to_string());
        }
    }
    names.sort();
    let mut attachments = Vec::new();
    for name in names {
        if let Some(attachment) = attachment(&uploads, &name).await {
            attachments.push(attachment);
        }
    }
    Ok(Json(AttachmentList {
        attachments,
        limits: AttachmentLimits { allowed_extensions: ALLOWED_EXTENSIONS.to_vec(), max_size_bytes: MAX_FILE_BYTES },
    }))
}

/// The answer of `DELETE /api/chat/thread/{thread_id}/attachments/{file_id}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AttachmentDeleted {
    /// The attachment.
    pub file_id: String,
    /// `deleted`.
    pub status: &'static str,
}

/// `DELETE /api/chat/thread/{thread_id}/attachments/{file_id}`: removes an attachment.
#[utoipa::path(
    delete,
    path = "/api/chat/thread/{thread_id}/attachments/{file_id}",
    operation_id = "delete_attachment",
    tag = "chat",
    params(("thread_id" = String, Path, description = "the thread id"), ("file_id" = String, Path, description = "the attachment")),
    responses(
        (status = 200, description = "removed", body = AttachmentDeleted),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown attachment, or the thread is unknown or another user's", body = ErrorBody),
        (status = 503, description = "this facade keeps no files, or the store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn delete(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    UrlPath((thread_id, file_id)): UrlPath<(String, String)>,
) -> Result<Json<AttachmentDeleted>, ApiError> {
    let store = state.store()?;
    let conversation = owned(store, &who, &thread_id).await?;
    let uploads = uploads_dir(data_dir(&state)?, &conversation.uid, &thread_id)?;
    let missing = || ApiError::NotFound(format!("attachment {file_id:?} does not exist"));
    if safe_name(&file_id).as_deref() != Some(file_id.as_str()) {
        return Err(missing());
    }
    match tokio::fs::symlink_metadata(uploads.join(&file_id)).await {
        Ok(meta) if meta.is_file() => {}
        _ => return Err(missing()),
    }
    tokio::fs::remove_file(uploads.join(&file_id)).await.map_err(|e| io_error("cannot remove the attachment", e))?;
    Ok(Json(AttachmentDeleted { file_id, status: "deleted" }))
}
