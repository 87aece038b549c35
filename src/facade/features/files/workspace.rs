//! The caller's personal workspace (the folder every run of theirs sees as
//! `/home/gem/user-data/workspace`), as Yuxi's workspace page reads it: `GET /api/workspace/tree`,
//! `/file` and `/download`, each with `path` (from the workspace's root; `/home/gem/user-data/workspace/...`
//! is the same). Only the caller's own workspace can be named.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::preview::{FileBytes, Preview, download as download_file, preview};
use crate::access::Identity;
use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::scope::{OpenedFile, ScopeDir, answer, blocking, segments};
use crate::facade::services::state::FacadeState;
use crate::run::scope::{Scope, ScopeIds};

/// `GET /api/workspace/tree` query (Yuxi's `include_unbound_project_dirs` is ignored: there are no
/// projects here).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TreeQuery {
    /// The folder, from the workspace's root (default `/`); no `..`.
    #[serde(default)]
    path: Option<String>,
    /// Every entry below the folder (at most 16 levels down) instead of its own.
    #[serde(default)]
    recursive: Option<bool>,
    /// Files only.
    #[serde(default)]
    files_only: Option<bool>,
}

/// `GET /api/workspace/file` and `/download` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FileQuery {
    /// The file, from the workspace's root (required: 422 naming `query.path` without it); no `..`.
    #[serde(default)]
    #[param(required = true, value_type = String)]
    path: Option<String>,
}

/// One entry of the workspace (Yuxi's workspace entry).
#[derive(Serialize, utoipa::ToSchema)]
pub struct WorkspaceEntry {
    /// Its path from the workspace's root, a folder's ending in `/`.
    pub path: String,
    /// Its path as the runs see it.
    pub virtual_path: String,
    /// Its name.
    pub name: String,
    /// Whether it is a folder.
    pub is_dir: bool,
    /// Its size, in bytes (0 for a folder).
    pub size: u64,
    /// When it last changed, RFC 3339 (empty when unknown).
    pub modified_at: String,
}

/// The answer of `GET /api/workspace/tree`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct WorkspaceTree {
    /// The entries, folders first, then by name (level by level when recursive).
    pub entries: Vec<WorkspaceEntry>,
}

/// The caller's workspace folder in the users' data folder, and the segments of `path` in it. Errors:
/// 422 naming `query.path`; 503 when this facade reads no users' files.
fn located(
    state: &FacadeState,
    who: &Identity,
    path: &str,
) -> Result<(std::path::PathBuf, String, Vec<String>), ApiError> {
    let data = state.user_files()?.to_path_buf();
    let mut parts = segments("query.path", path)?;
    if parts.len() >= 4 && parts[..4] == ["home", "gem", "user-data", "workspace"] {
        parts.drain(..4);
    }
    // The workspace is the user's alone: its sub-path takes no thread.
    let ids =
        ScopeIds::new(&who.uid, "thread_id", "workspace", None).map_err(|e| ApiError::invalid("uid", e.to_string()))?;
    Ok((data, ids.sub_path(Scope::Workspace), parts))
}

/// `GET /api/workspace/tree`: a folder of the caller's workspace.
#[utoipa::path(
    get,
    path = "/api/workspace/tree",
    operation_id = "workspace_tree",
    tag = "files",
    params(TreeQuery),
    responses(
        (status = 200, description = "the entries", body = WorkspaceTree),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such folder", body = ErrorBody),
        (status = 413, description = "`max_tree_entries`: more entries than a listing answers", body = ErrorBody),
        (status = 422, description = "`query.path` has `..` or names a file", body = ErrorBody),
        (status = 503, description = "this facade reads no users' files", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn tree(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<TreeQuery>,
) -> Result<Json<WorkspaceTree>, ApiError> {
    let path = query.path.unwrap_or_else(|| "/".into());
    let (data, sub_path, rel) = located(&state, &who, &path)?;
    let (recursive, files_only) = (query.recursive.unwrap_or(false), query.files_only.unwrap_or(false));
    let entries = blocking(move || {
        ScopeDir::list_in(&data, &sub_path, &rel, recursive).map_err(|e| answer(e, "query.path", &path))
    })
    .await?;
    let root = Scope::Workspace.virtual_root();
    let entries = entries
        .into_iter()
        .filter(|e| !files_only || !e.is_dir)
        .map(|e| {
            let slash = if e.is_dir { "/" } else { "" };
            WorkspaceEntry {
                path: format!("/{}{slash}", e.rel),
                virtual_path: format!("{root}/{}{slash}", e.rel),
                name: e.name,
                is_dir: e.is_dir,
                size: e.size,
                modified_at: e.modified_at,
            }
        })
        .collect();
    Ok(Json(WorkspaceTree { entries }))
}

/// The caller's workspace file the query names, opened, and its name. Errors: 422 naming `query.path`
/// (missing, `..`, a folder); 404 for no such file; 503 when this facade reads no users' files.
async fn open(state: &FacadeState, who: &Identity, query: FileQuery) -> Result<(OpenedFile, String), ApiError> {
    let path = query.path.filter(|p| !p.is_empty()).ok_or_else(|| ApiError::invalid("query.path", "is required"))?;
    let (data, sub_path, rel) = located(state, who, &path)?;
    let name = rel.last().cloned().unwrap_or_default();
    let opened =
        blocking(move || ScopeDir::open_file_in(&data, &sub_path, &rel).map_err(|e| answer(e, "query.path", &path)))
            .await?;
    Ok((opened, name))
}

/// `GET /api/workspace/file`: a preview of a file of the caller's workspace.
#[utoipa::path(
    get,
    path = "/api/workspace/file",
    operation_id = "workspace_file",
    tag = "files",
    params(FileQuery),
    responses(
        (status = 200, description = "text, Markdown or HTML as a JSON preview; an image or a PDF as its bytes (`X-Yuxi-Preview-Type`)",
         content((Preview = "application/json"), (FileBytes = "image/*"), (FileBytes = "application/pdf"))),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such file (links and special files are not files here)", body = ErrorBody),
        (status = 413, description = "`max_preview_bytes`: the file is larger than a preview reads", body = ErrorBody),
        (status = 422, description = "`query.path` missing, with `..`, or naming a folder", body = ErrorBody),
        (status = 503, description = "this facade reads no users' files", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn file(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<FileQuery>,
) -> Result<Response, ApiError> {
    let (opened, name) = open(&state, &who, query).await?;
    preview(opened, &name).await
}

/// `GET /api/workspace/download`: a file of the caller's workspace, as an attachment.
#[utoipa::path(
    get,
    path = "/api/workspace/download",
    operation_id = "workspace_download",
    tag = "files",
    params(FileQuery),
    responses(
        (status = 200, description = "the file's bytes, as the media type of its name", content((FileBytes = "*/*"))),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such file", body = ErrorBody),
        (status = 413, description = "`max_download_bytes`: the file is larger than a download sends", body = ErrorBody),
        (status = 422, description = "`query.path` missing, with `..`, or naming a folder", body = ErrorBody),
        (status = 503, description = "this facade reads no users' files", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn download(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<FileQuery>,
) -> Result<Response, ApiError> {
    let (opened, name) = open(&state, &who, query).await?;
    download_file(opened, &name)
}
