//! `subagent_start` as an MCP task (the tasks extension, `io.modelcontextprotocol/tasks`): the task id is
//! the run id; `tasks/get` reads the run (working while it runs, its result once it has ended),
//! `tasks/cancel` cancels it. A task is the caller's when its run is: the caller's user's, and, for a
//! run token, a child of that run; any other id, a stranger's included, answers "no such task".
//!
//! A run that completed is a completed task whose result is what `subagent_status` answers; one that
//! failed or was interrupted is a completed task whose result has `isError` (the call itself worked; the
//! run did not), and one cancelled is a cancelled task.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, DetailedTask, GetTaskResult, Task, TaskPayload, TaskStatus};

use crate::facade::http::auth::ParentCaller;
use crate::facade::services::state::FacadeState;
use crate::run::RunStatus;
use crate::run::thread_id::is_valid_id;
use crate::store::RunView;

fn no_such_task() -> McpError {
    McpError::invalid_params("no such task", None)
}

/// The run of `task_id` when it is `caller`'s task.
async fn owned(state: &FacadeState, caller: &ParentCaller, task_id: &str) -> Result<RunView, McpError> {
    let store = state.store().map_err(|e| McpError::internal_error(e.to_string(), None))?;
    if !is_valid_id(task_id) {
        return Err(no_such_task());
    }
    let view = store
        .run_view(task_id, crate::delegation::progress::PROGRESS_SCAN)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?
        .ok_or_else(no_such_task)?;
    let record = &view.record;
    let parent = record.parent.as_ref().map(|p| p.run_id.as_str());
    let mine = record.uid == caller.who.uid
        && parent.is_some()
        && caller.run.as_ref().is_none_or(|run| parent == Some(run.run_id.as_str()));
    if mine { Ok(view) } else { Err(no_such_task()) }
}

/// `tasks/get`.
pub async fn get(state: &FacadeState, caller: &ParentCaller, task_id: &str) -> Result<GetTaskResult, McpError> {
    let view = owned(state, caller, task_id).await?;
    let snapshot = crate::facade::services::subagents::snapshot_of(&view);
    let latest = snapshot.progress.messages.last().map(|m| m.content.chars().take(200).collect::<String>());
    let record = &view.record;
    let as_result = |error: bool| {
        let value = serde_json::to_value(&snapshot).unwrap_or_default();
        let result = if error { CallToolResult::structured_error(value) } else { CallToolResult::structured(value) };
        serde_json::to_value(result).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default()
    };
    let payload = match record.status {
        RunStatus::Completed => TaskPayload::Completed { result: as_result(false) },
        RunStatus::Failed | RunStatus::Interrupted => TaskPayload::Completed { result: as_result(true) },
        RunStatus::Cancelled => TaskPayload::Cancelled,
        _ => TaskPayload::Working,
    };
    let now = jiff::Timestamp::now().to_string();
    let mut task = Task::new(record.run_id.clone(), TaskStatus::Working, record.created_at.clone(), now)
        .with_poll_interval_ms(1000);
    if let Some(line) = latest.or_else(|| record.error.clone()) {
        task = task.with_status_message(line);
    }
    Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
}

/// `tasks/cancel`: cancels the run (a run that has ended stays as it ended).
pub async fn cancel(state: &FacadeState, caller: &ParentCaller, task_id: &str) -> Result<(), McpError> {
    let view = owned(state, caller, task_id).await?;
    let store = state.store().map_err(|e| McpError::internal_error(e.to_string(), None))?;
    store.cancel_run(&view.record.run_id).await.map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Ok(())
}
