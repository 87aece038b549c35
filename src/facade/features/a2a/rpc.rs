//! `POST /a2a/{namespace}/{slug}`: the agent's A2A JSON-RPC endpoint. The request is read as JSON-RPC
//! 2.0 (one request; no batches), its `A2A-Version` header, when given, must be 1.x, and its method is
//! one of A2A 1.0's: `SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask` and
//! `SubscribeToTask` are served; the push notification methods answer `PushNotificationNotSupported`
//! and `GetExtendedAgentCard` `ExtendedAgentCardNotConfigured`, as the card says; the 0.3 names
//! (`message/send`, ...) and anything else answer `MethodNotFound`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::tasks::{MAX_BLOCKING_WAIT, context_thread, send, task_run};
use super::view::{Reading, history_length, settled, task_of};
use super::{Failure, agent_for, agent_url};
use crate::access::Identity;
use crate::delegation::a2a::rpc::{Code, Request, RpcError, error_response, method, response};
use crate::delegation::a2a::wire::{
    GetTaskRequest, ListTasksRequest, ListTasksResponse, SendMessageRequest, StreamResponse, TaskIdRequest,
};
use crate::delegation::a2a::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, VERSION_HEADER};
use crate::facade::http::auth::Caller;
use crate::facade::http::error::ApiError;
use crate::facade::services::state::FacadeState;
use crate::resources::Agent;

/// The most conversations `ListTasks` looks through for the agent's tasks.
pub const MAX_LISTED_CONTEXTS: usize = 1000;
/// The most bytes of tasks one `ListTasks` page answers: a page ends before the task that would pass it
/// (it holds one task at least).
pub const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// The longest request id, in characters.
pub const MAX_ID_CHARS: usize = 256;

/// `POST /a2a/{namespace}/{slug}`.
pub async fn rpc(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path((namespace, slug)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let agent = match agent_for(&state, &who, &namespace, &slug).await {
        Ok(agent) => agent,
        Err(refused) => return refused.into_response(),
    };
    let request = match read(&headers, &body) {
        Ok(request) => request,
        Err((id, error)) => return Json(error_response(&id, &error)).into_response(),
    };
    let id = request.id.clone();
    let reading = Reading { history_length: None, artifacts: true, agent_url: agent_url(&headers, &namespace, &agent) };
    match call(state, who, agent, request, reading).await {
        Ok(answer) => answer,
        Err(Failure::Rpc(error)) => Json(error_response(&id, &error)).into_response(),
        Err(Failure::Http(refused)) => refused.into_response(),
    }
}

/// The request in `body`, or the error answer (with the id when one could be read).
fn read(headers: &HeaderMap, body: &[u8]) -> Result<Request, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| (Value::Null, RpcError::new(Code::Parse, format!("the body is not JSON: {e}"))))?;
    if value.is_array() {
        return Err((Value::Null, RpcError::new(Code::InvalidRequest, "batches are not served: send one request")));
    }
    // An id is a string of at most MAX_ID_CHARS characters or a number; without one the request would
    // be a notification, which A2A has none of.
    let id = match value.get("id") {
        Some(Value::String(id)) if id.chars().count() <= MAX_ID_CHARS => Value::String(id.clone()),
        Some(Value::Number(n)) => Value::Number(n.clone()),
        _ => {
            let why = format!("id must be a string of at most {MAX_ID_CHARS} characters or a number");
            return Err((Value::Null, RpcError::new(Code::InvalidRequest, why)));
        }
    };
    if value.get("params").is_some_and(|p| !p.is_object() && !p.is_null()) {
        return Err((id, RpcError::invalid("params", "must be an object")));
    }
    let request: Request = serde_json::from_value(value)
        .map_err(|e| (id.clone(), RpcError::new(Code::InvalidRequest, format!("not a JSON-RPC request: {e}"))))?;
    if request.jsonrpc != "2.0" {
        return Err((id, RpcError::new(Code::InvalidRequest, "jsonrpc must be \"2.0\"")));
    }
    if let Some(version) = headers.get(VERSION_HEADER).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty())
        && version.split('.').next() != Some("1")
    {
        return Err((
            id,
            RpcError::new(
                Code::VersionNotSupported,
                format!("A2A version {version:?} is not spoken; this server speaks 1.0"),
            ),
        ));
    }
    Ok(request)
}

/// The parameters of `request` as `T`, or invalid parameters naming the field that is wrong
/// (`configuration.historyLength`, `message.parts[0].text`).
fn params<T: DeserializeOwned>(request: &Request) -> Result<T, RpcError> {
    let params = if request.params.is_null() { Value::Object(Default::default()) } else { request.params.clone() };
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "params".to_string() } else { path };
        RpcError::invalid(field, e.into_inner())
    })
}

/// Answers one request.
async fn call(
    state: FacadeState,
    who: Identity,
    agent: Agent,
    request: Request,
    mut reading: Reading,
) -> Result<Response, Failure> {
    let id = request.id.clone();
    // These plain shapes serialize whole (no map with keys that are not strings).
    let answer = |result: Value| Ok(Json(response(&id, result)).into_response());
    match request.method.as_str() {
        method::SEND_MESSAGE => {
            let body: SendMessageRequest = params(&request)?;
            let configuration = body.configuration.clone().unwrap_or_default();
            reading.history_length = history_length(configuration.history_length, "configuration.historyLength")?;
            let run_id = uuid::Uuid::new_v4().simple().to_string();
            let record = send(&state, &who, agent, &body.message, run_id).await?;
            let record = if configuration.return_immediately { record } else { settled(&state, &record.run_id, MAX_BLOCKING_WAIT).await? };
            let task = task_of(&state, &record, &reading).await?;
            answer(serde_json::to_value(StreamResponse::Task(task)).unwrap_or_default())
        }
        method::SEND_STREAMING_MESSAGE => {
            let body: SendMessageRequest = params(&request)?;
            reading.history_length = history_length(body.configuration.as_ref().and_then(|c| c.history_length), "configuration.historyLength")?;
            let store = state.store()?.clone();
            let resumed = body.message.task_id.clone();
            // The stream's place is taken first: a start refused a stream starts nothing.
            let run_id = resumed.clone().unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
            let permit = state.streams.open(&who.uid, &run_id, &state.limits)?;
            let record = send(&state, &who, agent, &body.message, run_id).await?;
            // A task that goes on after its question streams from where it paused.
            let cursor = if resumed.is_some() { latest(&store, &record.run_id).await? } else { "0-0".to_string() };
            Ok(super::stream::follow(state, record, cursor, id, reading, permit))
        }
        method::GET_TASK => {
            let body: GetTaskRequest = params(&request)?;
            reading.history_length = history_length(body.history_length, "historyLength")?;
            let record = task_run(&state, &who, &agent, &body.id).await?;
            answer(serde_json::to_value(task_of(&state, &record, &reading).await?).unwrap_or_default())
        }
        method::LIST_TASKS => {
            let body: ListTasksRequest = params(&request)?;
            answer(serde_json::to_value(list(&state, &who, &agent, body, reading).await?).unwrap_or_default())
        }
        method::CANCEL_TASK => {
            let body: TaskIdRequest = params(&request)?;
            let record = task_run(&state, &who, &agent, &body.id).await?;
            if record.status.is_terminal() {
                return Err(RpcError::new(Code::TaskNotCancelable, format!("task {:?} has ended ({})", body.id, record.status)).into());
            }
            let store = state.store()?;
            let record = store.cancel_run(&record.run_id).await?.unwrap_or(record);
            store.cancel_children(&record.run_id).await?;
            let record = settled(&state, &record.run_id, std::time::Duration::from_secs(5)).await?;
            answer(serde_json::to_value(task_of(&state, &record, &reading).await?).unwrap_or_default())
        }
        method::SUBSCRIBE_TO_TASK => {
            let body: TaskIdRequest = params(&request)?;
            let record = task_run(&state, &who, &agent, &body.id).await?;
            if record.status.is_terminal() {
                return Err(RpcError::new(Code::UnsupportedOperation, format!("task {:?} has ended ({}); read it with GetTask", body.id, record.status)).into());
            }
            let cursor = latest(state.store()?, &record.run_id).await?;
            let permit = state.streams.open(&who.uid, &record.run_id, &state.limits)?;
            Ok(super::stream::follow(state, record, cursor, id, reading, permit))
        }
        m if method::PUSH_CONFIG.contains(&m) => {
            Err(RpcError::new(Code::PushNotificationNotSupported, "push notifications are not served: follow a task with SubscribeToTask or GetTask").into())
        }
        method::GET_EXTENDED_AGENT_CARD => {
            Err(RpcError::new(Code::ExtendedAgentCardNotConfigured, "the card at .well-known/agent-card.json is already the caller's").into())
        }
        other => Err(RpcError::new(Code::MethodNotFound, format!("no method {other:?}: A2A 1.0's methods are served (SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask)")).into()),
    }
}

/// The stream id of the run's latest event (`0-0` when it has none).
async fn latest(store: &crate::store::Store, run_id: &str) -> Result<String, ApiError> {
    Ok(store.recent_events(run_id, 1).await?.last().map_or_else(|| "0-0".to_string(), |e| e.seq.clone()))
}

/// `ListTasks`: the caller's tasks of this agent, newest first: the latest run of each of the caller's
/// conversations with the agent (at most [`MAX_LISTED_CONTEXTS`] looked through), filtered by context,
/// state and time; pages of `pageSize` (1 to [`MAX_PAGE_SIZE`]), `pageToken` the offset.
async fn list(
    state: &FacadeState,
    who: &Identity,
    agent: &Agent,
    body: ListTasksRequest,
    mut reading: Reading,
) -> Result<ListTasksResponse, Failure> {
    let size = match body.page_size {
        None => DEFAULT_PAGE_SIZE,
        Some(n) if (1..=MAX_PAGE_SIZE as i64).contains(&n) => n as usize,
        Some(_) => return Err(RpcError::invalid("pageSize", format!("must be 1 to {MAX_PAGE_SIZE}")).into()),
    };
    let offset = match body.page_token.as_deref().filter(|t| !t.is_empty()) {
        None => 0,
        Some(token) => {
            token.parse::<usize>().map_err(|_| RpcError::invalid("pageToken", "is not a token this server gave"))?
        }
    };
    let after = match body.status_timestamp_after.as_deref() {
        None => None,
        Some(time) => Some(time.parse::<jiff::Timestamp>().map_err(|e| RpcError::invalid("statusTimestampAfter", e))?),
    };
    reading.history_length = history_length(body.history_length, "historyLength")?.or(Some(0));
    reading.artifacts = body.include_artifacts.unwrap_or(false);
    let store = state.store()?;
    let slug = agent.name_any();
    let thread = match &body.context_id {
        Some(context) => Some(context_thread(state, who, context).await?),
        None => None,
    };
    let mut matching = Vec::new();
    for conversation in store.user_conversations(&who.uid, 0, MAX_LISTED_CONTEXTS).await? {
        if conversation.agent_slug != slug || thread.as_ref().is_some_and(|t| *t != conversation.thread_id) {
            continue;
        }
        let Some(run) = conversation.last_run_id.as_deref() else { continue };
        let Some(record) = store.run_record(run).await? else { continue };
        if record.uid != who.uid
            || after.is_some_and(|after| record.created_at.parse::<jiff::Timestamp>().is_ok_and(|t| t <= after))
        {
            continue;
        }
        if let Some(wanted) = body.status {
            let result = if record.status.is_terminal() { store.run_result(&record.run_id).await? } else { None };
            let reason = result.as_ref().and_then(|r| r.reason.as_deref());
            if crate::delegation::a2a::map::task_state(record.status, reason) != wanted {
                continue;
            }
        }
        matching.push(record);
    }
    let total = matching.len();
    let mut tasks = Vec::new();
    let mut bytes = 0;
    for record in matching.iter().skip(offset).take(size) {
        let task = task_of(state, record, &reading).await?;
        bytes += serde_json::to_vec(&task).map_or(0, |t| t.len());
        if bytes > MAX_PAGE_BYTES && !tasks.is_empty() {
            break;
        }
        tasks.push(task);
    }
    let next = offset + tasks.len();
    Ok(ListTasksResponse {
        tasks,
        next_page_token: if next < total { next.to_string() } else { String::new() },
        page_size: size as i64,
        total_size: total as i64,
    })
}
