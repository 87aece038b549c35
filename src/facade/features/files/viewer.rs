//! A conversation's files, as Yuxi's viewer shows them beside the chat: `GET /api/viewer/filesystem/tree`,
//! `/file` and `/download`, each with `thread_id` and `path`. The root `/` holds the three folders the
//! conversation's runs see under `/home/gem/user-data`: `workspace/` (the user's), `uploads/` and
//! `outputs/` (the conversation's); a path may also be given as the runs see it
//! (`/home/gem/user-data/outputs/report.md`). A conversation another user owns answers as a missing one.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};

use super::preview::{FileBytes, Preview, download as download_file, preview};
use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::conversations::owned;
use crate::facade::services::scope::{ScopeDir, answer, blocking, segments};
use crate::facade::services::state::FacadeState;
use crate::run::scope::{Scope, ScopeIds};

/// The viewer's query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ViewerQuery {
    /// The conversation (required: 422 naming `query.thread_id` without it).
    #[serde(default)]
    #[param(required = true, value_type = String)]
    thread_id: Option<String>,
    /// The folder or file: `/`, `/outputs/`, `/outputs/report.md` (default `/`); no `..`.
    #[serde(default)]
    path: Option<String>,
}

/// One entry of a listing (Yuxi's viewer entry).
#[derive(Serialize, utoipa::ToSchema)]
pub struct ViewerEntry {
    /// Its path from the root, a folder's ending in `/`.
    pub path: String,
    /// Its name.
    pub name: String,
    /// Whether it is a folder.
    pub is_dir: bool,
    /// Its size, in bytes (0 for a folder).
    pub size: u64,
    /// When it last changed, RFC 3339 (empty when unknown).
    pub modified_at: String,
    /// Always `null`: artifacts are not served.
    pub artifact_url: Option<String>,
}

/// The answer of `GET /api/viewer/filesystem/tree`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ViewerTree {
    /// The folder's entries, folders first, then by name.
    pub entries: Vec<ViewerEntry>,
}

/// The root's folders, in the order they are listed.
const ROOT: [(&str, Scope); 3] =
    [("outputs", Scope::Outputs), ("uploads", Scope::Uploads), ("workspace", Scope::Workspace)];

/// Where a viewer's path points: the root, or a path in one of the three folders.
enum Target {
    Root,
    In(&'static str, Scope, Vec<String>),
}

/// What the query names: the caller's conversation (404 when it is another user's or missing), the
/// users' data folder, and the target. Errors: 422 naming `query.thread_id` or `query.path`; 404 for a
/// path outside the three folders; 503 when this facade reads no users' files or has no run store.
async fn resolve(
    state: &FacadeState,
    who: &crate::access::Identity,
    query: ViewerQuery,
) -> Result<(ScopeIds, std::path::PathBuf, Target, String), ApiError> {
    let data = state.user_files()?.to_path_buf();
    let store = state.store()?;
    let thread_id =
        query.thread_id.filter(|t| !t.is_empty()).ok_or_else(|| ApiError::invalid("query.thread_id", "is required"))?;
    let path = query.path.unwrap_or_else(|| "/".into());
    let mut parts = segments("query.path", &path)?;
    let conversation = owned(store, who, &thread_id).await?;
    // The runs' own spelling of the same folders.
    if parts.len() >= 3 && parts[..3] == ["home", "gem", "user-data"] {
        parts.drain(..3);
    }
    let ids = ScopeIds::new(&conversation.uid, "query.thread_id", &conversation.thread_id, None)
        .map_err(|e| ApiError::invalid("query.thread_id", e.to_string()))?;
    let target = match parts.split_first() {
        None => Target::Root,
        Some((first, rest)) => match ROOT.iter().find(|(name, _)| name == first) {
            Some((name, scope)) => Target::In(name, *scope, rest.to_vec()),
            None => return Err(ApiError::NotFound(format!("{path:?}: no such file or folder"))),
        },
    };
    Ok((ids, data, target, path))
}

/// `GET /api/viewer/filesystem/tree`: a folder of the conversation's files.
#[utoipa::path(
    get,
    path = "/api/viewer/filesystem/tree",
    operation_id = "viewer_tree",
    tag = "files",
    params(ViewerQuery),
    responses(
        (status = 200, description = "the folder's entries", body = ViewerTree),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such folder, or the conversation is unknown or another user's", body = ErrorBody),
        (status = 413, description = "`max_tree_entries`: the folder holds more entries than a listing answers", body = ErrorBody),
        (status = 422, description = "`query.thread_id` missing, or `query.path` has `..` or names a file", body = ErrorBody),
        (status = 503, description = "this facade reads no users' files, or the store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn tree(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ViewerQuery>,
) -> Result<Json<ViewerTree>, ApiError> {
    let (ids, data, target, path) = resolve(&state, &who, query).await?;
    let entries = blocking(move || {
        let (name, scope, rest) = match target {
            Target::Root => {
                let mut root = Vec::new();
                for (name, scope) in ROOT {
                    let opened =
                        ScopeDir::open(&data, &ids.sub_path(scope)).map_err(|e| answer(e, "query.path", &path))?;
                    root.push(ViewerEntry {
                        path: format!("/{name}/"),
                        name: name.to_string(),
                        is_dir: true,
                        size: 0,
                        modified_at: opened.map(|d| d.modified_at()).unwrap_or_default(),
                        artifact_url: None,
                    });
                }
                return Ok(root);
            }
            Target::In(name, scope, rest) => (name, scope, rest),
        };
        let listed =
            ScopeDir::list_in(&data, &ids.sub_path(scope), &rest, false).map_err(|e| answer(e, "query.path", &path))?;
        Ok(listed
            .into_iter()
            .map(|e| ViewerEntry {
                path: format!("/{name}/{}{}", e.rel, if e.is_dir { "/" } else { "" }),
                name: e.name,
                is_dir: e.is_dir,
                size: e.size,
                modified_at: e.modified_at,
                artifact_url: None,
            })
            .collect())
    })
    .await?;
    Ok(Json(ViewerTree { entries }))
}

/// The file the query names, opened. Errors as [`resolve`], and 404 for no such file, 422 naming
/// `query.path` for a folder.
async fn open(
    state: &FacadeState,
    who: &crate::access::Identity,
    query: ViewerQuery,
) -> Result<(crate::facade::services::scope::OpenedFile, String), ApiError> {
    let (ids, data, target, path) = resolve(state, who, query).await?;
    let Target::In(_, scope, rest) = target else {
        return Err(ApiError::invalid("query.path", format!("{path:?} is a folder, not a file")));
    };
    let name = rest.last().cloned().unwrap_or_default();
    let opened = blocking(move || {
        ScopeDir::open_file_in(&data, &ids.sub_path(scope), &rest).map_err(|e| answer(e, "query.path", &path))
    })
    .await?;
    Ok((opened, name))
}

/// `GET /api/viewer/filesystem/file`: a preview of one of the conversation's files.
#[utoipa::path(
    get,
    path = "/api/viewer/filesystem/file",
    operation_id = "viewer_file",
    tag = "files",
    params(ViewerQuery),
    responses(
        (status = 200, description = "text, Markdown or HTML as a JSON preview; an image or a PDF as its bytes (`X-Yuxi-Preview-Type`)",
         content((Preview = "application/json"), (FileBytes = "image/*"), (FileBytes = "application/pdf"))),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such file (links and special files are not files here), or the conversation is unknown or another user's", body = ErrorBody),
        (status = 413, description = "`max_preview_bytes`: the file is larger than a preview reads", body = ErrorBody),
        (status = 422, description = "`query.thread_id` missing, or `query.path` has `..` or names a folder", body = ErrorBody),
        (status = 503, description = "this facade reads no users' files, or the store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn file(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ViewerQuery>,
) -> Result<Response, ApiError> {
    let (opened, name) = open(&state, &who, query).await?;
    preview(opened, &name).await
}

/// `GET /api/viewer/filesystem/download`: one of the conversation's files, as an attachment.
#[utoipa::path(
    get,
    path = "/api/viewer/filesystem/download",
    operation_id = "viewer_download",
    tag = "files",
    params(ViewerQuery),
    responses(
        (status = 200, description = "the file's bytes, as the media type of its name", content((FileBytes = "*/*"))),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such file, or the conversation is unknown or another user's", body = ErrorBody),
        (status = 413, description = "`max_download_bytes`: the file is larger than a download sends", body = ErrorBody),
        (status = 422, description = "`query.thread_id` missing, or `query.path` has `..` or names a folder", body = ErrorBody),
        (status = 503, description = "this facade reads no users' files, or the store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn download(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ViewerQuery>,
) -> Result<Response, ApiError> {
    let (opened, name) = open(&state, &who, query).await?;
    download_file(opened, &name)
}
