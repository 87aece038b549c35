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
//!
//! This file holds the bounds, the folders and the upload into the holding folder; the thread's side is
//! in [`super::thread`].

use std::path::{Path, PathBuf};

use axum::Json;
use axum::extract::{Multipart, State};
use serde::Serialize;

use crate::facade::http::auth::Caller;
use crate::facade::http::body::UploadForm;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::http::intake::{FileForm, read_part};
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

pub(super) fn data_dir(state: &FacadeState) -> Result<&Path, ApiError> {
    state.runs.as_ref().and_then(|r| r.launcher.data_dir()).ok_or_else(|| {
        ApiError::Unavailable("attachments are kept in the local mode's data folder; this facade has none".into())
    })
}

/// The caller's holding folder for unconfirmed uploads.
pub(super) fn held_dir(data: &Path, uid: &str) -> Result<PathBuf, ApiError> {
    let uid = crate::run::scope::segment("uid", uid).map_err(|e| ApiError::invalid("uid", e.to_string()))?;
    Ok(data.join("users").join(uid).join("attachments-held"))
}

/// The thread's uploads folder.
pub(super) fn uploads_dir(data: &Path, uid: &str, thread_id: &str) -> Result<PathBuf, ApiError> {
    let ids =
        ScopeIds::new(uid, "thread_id", thread_id, None).map_err(|e| ApiError::invalid("thread_id", e.to_string()))?;
    Ok(data.join(ids.sub_path(Scope::Uploads)))
}

fn allowed(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    ALLOWED_EXTENSIONS.iter().any(|ext| lower.ends_with(ext))
}

pub(super) fn io_error(what: &str, err: std::io::Error) -> ApiError {
    tracing::error!(error = %err, "{what}");
    ApiError::Unavailable(format!("{what}: the data folder cannot be written"))
}

pub(super) async fn count_files(dir: &Path) -> usize {
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
    let mut form = FileForm::new(form)?;
    let data = data_dir(&state)?;
    let field = form.file().await?;
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
    let bytes = read_part(field).await?;
    form.end().await?;
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
