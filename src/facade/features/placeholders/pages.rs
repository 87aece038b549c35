//! The empty pages of [the module](super). Yuxi's projects bind conversations to shared working folders;
//! here each conversation has its own uploads and outputs and the user one workspace, so there are no
//! projects to list. Yuxi's task list shows its background jobs (knowledge base imports and the like) to
//! administrators; here the runs are the work, listed by `/api/agent/runs`, and knowledge bases index in
//! the facade, so there are no tasks.

use axum::Json;
use axum::extract::Path;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::facade::http::auth::{Caller, administrator};
use crate::facade::http::error::{ApiError, ErrorBody};

/// `GET /api/projects`: the caller's projects, always none.
#[utoipa::path(
    get,
    path = "/api/projects",
    operation_id = "list_projects",
    tag = "placeholders",
    responses(
        (status = 200, description = "always `[]`", body = Vec<Object>),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn projects(Caller(_): Caller) -> Json<Vec<Value>> {
    Json(Vec::new())
}

/// The answer of `GET /api/projects/history-candidates`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Candidates {
    /// Always empty.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<Value>,
    /// Always false.
    pub has_more: bool,
}

/// `GET /api/projects/history-candidates`: conversations a new project could start from, always none
/// (`q`, `limit` and `offset` are accepted and not used).
#[utoipa::path(
    get,
    path = "/api/projects/history-candidates",
    operation_id = "list_project_candidates",
    tag = "placeholders",
    responses(
        (status = 200, description = "always `{items: [], has_more: false}`", body = Candidates),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn history_candidates(Caller(_): Caller) -> Json<Candidates> {
    Json(Candidates { items: Vec::new(), has_more: false })
}

/// The counts of [`TaskList`].
#[derive(Serialize, utoipa::ToSchema)]
pub struct TaskSummary {
    /// Always 0.
    pub total: u64,
    /// Always 0.
    pub filtered_total: u64,
    /// Always `{}`.
    #[schema(value_type = Object)]
    pub status_counts: Map<String, Value>,
    /// Always `{}`.
    #[schema(value_type = Object)]
    pub type_counts: Map<String, Value>,
}

/// The answer of `GET /api/tasks`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct TaskList {
    /// Always empty.
    #[schema(value_type = Vec<Object>)]
    pub tasks: Vec<Value>,
    /// The counts.
    pub summary: TaskSummary,
}

/// `GET /api/tasks`: the background tasks, for administrators; always none (`status` and `limit` are
/// accepted and not used).
#[utoipa::path(
    get,
    path = "/api/tasks",
    operation_id = "list_tasks",
    tag = "placeholders",
    responses(
        (status = 200, description = "always no tasks", body = TaskList),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not an administrator, or run credentials", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn tasks(Caller(who): Caller) -> Result<Json<TaskList>, ApiError> {
    administrator(&who, "list the background tasks")?;
    Ok(Json(TaskList {
        tasks: Vec::new(),
        summary: TaskSummary { total: 0, filtered_total: 0, status_counts: Map::new(), type_counts: Map::new() },
    }))
}

/// `GET /api/tasks/{task_id}`: for administrators; there are no tasks, so always 404.
#[utoipa::path(
    get,
    path = "/api/tasks/{task_id}",
    operation_id = "get_task",
    tag = "placeholders",
    params(("task_id" = String, Path, description = "the task")),
    responses(
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not an administrator, or run credentials", body = ErrorBody),
        (status = 404, description = "always: there are no tasks", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn task(Caller(who): Caller, Path(task_id): Path<String>) -> Result<Json<Value>, ApiError> {
    administrator(&who, "list the background tasks")?;
    Err(ApiError::NotFound(format!("task {task_id:?} does not exist")))
}
