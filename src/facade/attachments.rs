//! A conversation's attachments, as Yuxi's client adds them: a file is uploaded first
//! (`POST /api/chat/attachments/tmp`, multipart field `file`) into the caller's own holding folder,
//! then confirmed into a thread (`POST /api/chat/thread/{thread_id}/attachments/confirm`), which moves
//! it into the thread's uploads scope, where the thread's runs read it at
//! `/home/gem/user-data/uploads/<file_id>`. Listed and removed with `GET` and
//! `DELETE /api/chat/thread/{thread_id}/attachments[/{file_id}]`.
//!
//! Bounds: a file is at most [`MAX_FILE_BYTES`] (the body limit), of an allowed kind
//! ([`ALLOWED_EXTENSIONS`]); a user holds at most [`MAX_HELD`] unconfirmed files, a thread at most
//! [`MAX_PER_THREAD`] attachments. Files live in the local mode's data folder; a facade without one (in
//! a cluster, the volumes are the sandbox pods') answers 503.

use std::path::{Path, PathBuf};

use axum::Json;
use axum::extract::{Multipart, Path as UrlPath, State};
use serde::{Deserialize, Serialize};

use crate::facade::http::auth::Caller;
use crate::facade::http::body::{JsonBody, UploadForm};
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::files::{MAX_NAME_CHARS, safe_name};
use crate::facade::services::state::FacadeState;
use crate::run::scope::{Scope, ScopeIds};

/// The largest attachment, in bytes (the request body limit less room for the multipart framing).
pub const MAX_FILE_BYTES: usize = crate::facade::http::limits::MAX_BODY_BYTES - 16 * 1024;
/// The most files a user holds uploaded but not yet confirmed into a thread.
pub const MAX_HELD: usize = 20;
/// The most attachments one thread has.
pub const MAX_PER_THREAD: usize = 50;
/// The kinds of file an attachment may be, by extension (text and office documents, images).
pub const ALLOWED_EXTENSIONS: [&str; 16] = [
    ".txt", ".md", ".csv", ".json", ".yaml", ".yml", ".html", ".xml", ".log", ".py", ".pdf", ".docx", ".xlsx", ".pptx",
    ".png", ".jpg",
];

fn data_dir(state: &FacadeState) -> Result<&Path, ApiError> {
    state.runs.as_ref().and_then(|r| r.launcher.data_dir()).ok_or_else(|| {
        ApiError::Unavailable("attachments are kept in the local mode's data folder; this facade has none".into())
    })
}

/// The caller's holding folder for unconfirmed uploads.
fn held_dir(data: &Path, uid: &str) -> Result<PathBuf, ApiError> {
    let uid = crate::run::scope::segment("uid", uid).map_err(|e| ApiError::invalid("uid", e.to_string()))?;
    Ok(data.join("users").join(uid).join("attachments-held"))
}

/// The thread's uploads folder.
fn uploads_dir(data: &Path, uid: &str, thread_id: &str) -> Result<PathBuf, ApiError> {
    let ids =
        ScopeIds::new(uid, "thread_id", thread_id, None).map_err(|e| ApiError::invalid("thread_id", e.to_string()))?;
    Ok(data.join(ids.sub_path(Scope::Uploads)))
}

fn allowed(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ALLOWED_EXTENSIONS.iter().any(|ext| lower.ends_with(ext))
}

fn io_error(what: &str, err: std::io::Error) -> ApiError {
    tracing::error!(error = %err, "{what}");
    ApiError::Unavailable(format!("{what}: the data folder cannot be written"))
}

async fn count_files(dir: &Path) -> usize {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else { return 0 };
    let mut count = 0;
    while let Ok(Some(entry)) = entries.next_entry().await {
        if entry.file_type().await.is_ok_and(|t| t.is_file()) {
            count += 1;
        }
    }
    count
}

/// The answer of `POST /api/chat/attachments/tmp` (Yuxi's `TmpAttachmentResponse`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct HeldFile {
    /// The name as uploaded.
    pub file_name: String,
    /// Its media type, as the client sent it.
    pub file_type: Option<String>,
    /// Its size, in bytes.
    pub file_size: usize,
    /// What to confirm it by.
    pub object_name: String,
    /// When it was uploaded, RFC 3339.
    pub uploaded_at: String,
    /// Always `false`: files are given to runs as they are.
    pub parse_supported: bool,
    /// Always empty.
    pub parse_methods: Vec<String>,
}

/// `POST /api/chat/attachments/tmp`: holds one file for the caller until it is confirmed into a thread.
#[utoipa::path(
    post,
    path = "/api/chat/attachments/tmp",
    operation_id = "upload_held_attachment",
    tag = "chat",
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "the file is held", body = HeldFile),
        (status = 400, description = "not a multipart body with a `file` field", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 413, description = "the file is larger than the limit", body = ErrorBody),
        (status = 422, description = "`file`: no name, or a kind not allowed", body = ErrorBody),
        (status = 429, description = "`max_held_attachments`: too many files held", body = ErrorBody),
        (status = 503, description = "this facade keeps no files", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn upload_held(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    form: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Result<Json<HeldFile>, ApiError> {
    let mut form = form.map_err(|e| ApiError::BadRequest(format!("not a multipart body: {}", e.body_text())))?;
    let data = data_dir(&state)?;
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
    let file_name = field.file_name().unwrap_or_default().chars().take(MAX_NAME_CHARS).collect::<String>();
    let file_type = field.content_type().map(String::from);
    let Some(safe) = safe_name(&file_name) else {
        return Err(ApiError::invalid("file", "has no file name"));
    };
    if !allowed(&safe) {
        return Err(ApiError::invalid(
            "file",
            format!("{file_name:?} is not one of {}", ALLOWED_EXTENSIONS.join(", ")),
        ));
    }
    let bytes = field.bytes().await.map_err(bad)?;
    if let Some(extra) = form.next_field().await.map_err(bad)? {
        return Err(ApiError::invalid(
            extra.name().unwrap_or("body").to_string(),
            "only one part, `file`, is expected",
        ));
    }
    if bytes.len() > MAX_FILE_BYTES {
        return Err(ApiError::TooLarge(format!("file: {} bytes; at most {MAX_FILE_BYTES}", bytes.len())));
    }
    let held = held_dir(data, &who.uid)?;
    if count_files(&held).await >= MAX_HELD {
        return Err(ApiError::Limited {
            limit: "max_held_attachments".into(),
            message: format!("you hold {MAX_HELD} files not yet added to a conversation, the most allowed"),
            retry_after: 60,
        });
    }
    tokio::fs::create_dir_all(&held).await.map_err(|e| io_error("cannot hold the file", e))?;
    let object_name = format!("{}_{safe}", uuid::Uuid::new_v4().simple());
    tokio::fs::write(held.join(&object_name), &bytes).await.map_err(|e| io_error("cannot hold the file", e))?;
    Ok(Json(HeldFile {
        file_name,
        file_type,
        file_size: bytes.len(),
        object_name,
        uploaded_at: jiff::Timestamp::now().to_string(),
        parse_supported: false,
        parse_methods: Vec::new(),
    }))
}

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
    let conversation = crate::facade::services::conversations::owned(store, &who, &thread_id).await?;
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
    let conversation = crate::facade::services::conversations::owned(store, &who, &thread_id).await?;
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
    let conversation = crate::facade::services::conversations::owned(store, &who, &thread_id).await?;
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
