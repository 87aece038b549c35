//! The MCP tools: their list for a caller and agent, and each call carried out by the logic of the
//! `/api/tools` handler of the same name (the subagents and run-knowledge services) with the caller's
//! identity and the session's parent.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use kube::ResourceExt;
use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, ProgressNotificationParam,
    Task, TaskStatus, Tool,
};
use rmcp::service::RequestContext;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::caller::{McpCaller, SessionParent};
use crate::access::{Permission, permission};
use crate::delegation::names;
use crate::delegation::wire::{RunBody, StartAnswer, StartBody, WaitAnyBody};
use crate::facade::http::body::decode;
use crate::facade::http::error::ApiError;
use crate::facade::services::run_knowledge::{self, BasesAnswer, KNOWLEDGE_SEARCH};
use crate::facade::services::state::FacadeState;
use crate::facade::services::subagents::{self, start, wait};

/// The agent `caller` reaches: the URL's `agent` (one it may see), else its run's, else the namespace's
/// default agent. Errors: 404 for an agent it may not see; 422 when none is named and there is no
/// default agent.
pub async fn agent_of(state: &FacadeState, caller: &McpCaller) -> Result<String, ApiError> {
    if let Some(run) = &caller.caller.run {
        return Ok(run.agent.clone());
    }
    let who = &caller.caller.who;
    let all = state.agents.all().await?;
    if let Some(named) = &caller.agent {
        return all
            .iter()
            .find(|a| a.name_any() == *named && permission(who, a) >= Permission::Read)
            .map(|a| a.name_any())
            .ok_or_else(|| ApiError::NotFound(format!("agent {named:?} does not exist")));
    }
    all.iter()
        .find(|a| a.spec.is_default() && permission(who, a) >= Permission::Read)
        .map(|a| a.name_any())
        .ok_or_else(|| ApiError::invalid("agent", "name the agent whose subagents to reach: /mcp?agent=<slug>"))
}

/// The delegation answer of `GET /api/tools` for `agent`.
async fn delegation(
    state: &FacadeState,
    caller: &McpCaller,
    agent: &str,
) -> Result<crate::delegation::wire::ToolsAnswer, ApiError> {
    subagents::list_tools(state, &caller.caller.who, agent.to_string()).await
}

/// The knowledge answer of `GET /api/tools/knowledge_bases` for `agent`; none where the facade keeps
/// no knowledge bases.
async fn knowledge(state: &FacadeState, caller: &McpCaller, agent: &str) -> Result<Option<BasesAnswer>, ApiError> {
    match run_knowledge::bases(state, &caller.caller, agent).await {
        Ok(answer) => Ok(Some(answer)),
        Err(ApiError::Unavailable(_)) if state.knowledge.is_none() => Ok(None),
        Err(err) => Err(err),
    }
}

/// The instructions the session's model reads: the subagents and the knowledge bases it may use.
pub async fn prompt(state: &FacadeState, caller: &McpCaller, agent: &str) -> Result<String, ApiError> {
    let mut sections = Vec::new();
    sections.extend(delegation(state, caller, agent).await?.prompt);
    sections.extend(knowledge(state, caller, agent).await?.and_then(|k| k.prompt));
    Ok(sections.join("\n\n"))
}

/// The tools `caller` gets for `agent`: the subagent tools when it may delegate, `knowledge_search`
/// when it has knowledge bases. A user's tools take an optional `parent` (one of its own).
pub async fn tools(state: &FacadeState, caller: &McpCaller, agent: &str) -> Result<Vec<Tool>, ApiError> {
    let mut schemas = delegation(state, caller, agent).await?.tools;
    schemas.extend(knowledge(state, caller, agent).await?.and_then(|k| k.tool));
    let user = caller.caller.run.is_none();
    Ok(schemas
        .into_iter()
        .map(|schema| {
            let name = schema["name"].as_str().unwrap_or_default().to_string();
            let mut parameters = schema["parameters"].as_object().cloned().unwrap_or_default();
            if user && name != KNOWLEDGE_SEARCH {
                let parent = json!({"type": "object", "additionalProperties": false,
                    "description": "A parent run of yours to act for; default: this session's",
                    "properties": {"run_id": {"type": "string"}, "thread_id": {"type": "string"},
                                   "file_thread_id": {"type": "string"}, "agent": {"type": "string"}},
                    "required": ["run_id", "thread_id"]});
                if let Some(properties) = parameters.get_mut("properties").and_then(Value::as_object_mut) {
                    properties.insert("parent".into(), parent);
                }
            }
            let description = schema["description"].as_str().unwrap_or_default().to_string();
            Tool::new(name, description, Arc::new(parameters))
        })
        .collect())
}

/// The parent of a user's call: the one its arguments name, the session's, or (without a session) the
/// user's own for this agent; a run's is its run (the handler takes it from the grant).
fn parent_of(
    caller: &McpCaller,
    session: Option<&SessionParent>,
    agent: &str,
    arguments: &mut Map<String, Value>,
) -> Result<Value, ApiError> {
    let named = arguments.remove("parent");
    if caller.caller.run.is_some() {
        if named.is_some() {
            return Err(ApiError::invalid("parent", "is not accepted with run credentials: the run is the parent"));
        }
        return Ok(json!({}));
    }
    if let Some(session) = session
        && session.uid != caller.caller.who.uid
    {
        return Err(ApiError::NotFound("this MCP session does not exist".into()));
    }
    let agent = session.map_or(agent, |s| s.agent.as_str()).to_string();
    match named {
        Some(Value::Object(mut parent)) => {
            parent.entry("agent").or_insert(Value::String(agent));
            Ok(Value::Object(parent))
        }
        Some(_) => Err(ApiError::invalid("parent", "must be an object {run_id, thread_id}")),
        None => Ok(match session {
            Some(session) => json!({"agent": agent, "run_id": session.run_id, "thread_id": session.thread_id}),
            None => {
                let id = default_parent(&caller.caller.who.uid, &agent);
                json!({"agent": agent, "run_id": id, "thread_id": id})
            }
        }),
    }
}

/// The parent of `caller`'s calls without a session: its run's for a run token, else one per user and
/// agent ([`default_parent`]).
pub fn own_parent(caller: &McpCaller, agent: &str) -> SessionParent {
    let uid = caller.caller.who.uid.clone();
    match &caller.caller.run {
        Some(run) => SessionParent {
            uid,
            agent: run.agent.clone(),
            run_id: run.run_id.clone(),
            thread_id: run.thread_id.clone(),
        },
        None => {
            let id = default_parent(&uid, agent);
            SessionParent { uid, agent: agent.to_string(), run_id: id.clone(), thread_id: id }
        }
    }
}

/// The parent run of a user's calls without a session: one per user and agent, `mcp-` and 24 hex
/// digits of a hash of both.
pub fn default_parent(uid: &str, agent: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{uid}\n{agent}").as_bytes());
    format!("mcp-{}", digest.iter().take(12).map(|b| format!("{b:02x}")).collect::<String>())
}

/// A handler's answer as a tool result: the JSON as structured content and as text; a refusal as an
/// error result holding the facade's error body, as `/api/tools` answers it.
async fn result<T: Serialize>(answer: Result<T, ApiError>) -> CallToolResult {
    match answer {
        Ok(value) => CallToolResult::structured(serde_json::to_value(value).unwrap_or(Value::Null)),
        Err(err) => CallToolResult::structured_error(error_body(err).await),
    }
}

/// The JSON body the facade answers for `err`.
async fn error_body(err: ApiError) -> Value {
    use axum::response::IntoResponse;
    let bytes = err.into_response().into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

/// Carries out one tool call.
pub async fn call(
    state: &FacadeState,
    caller: &McpCaller,
    session: Option<SessionParent>,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let name = request.name.to_string();
    let mut arguments = request.arguments.unwrap_or_default();
    let agent = match &session {
        Some(session) => session.agent.clone(),
        None => match agent_of(state, caller).await {
            Ok(agent) => agent,
            Err(err) => return Ok(result::<()>(Err(err)).await.into()),
        },
    };
    if name == KNOWLEDGE_SEARCH {
        arguments.insert("agent".into(), Value::String(agent));
        let answer = match decode(Value::Object(arguments)) {
            Ok(body) => run_knowledge::search(state, &caller.caller, body).await,
            Err(err) => Err(err),
        };
        return Ok(result(answer).await.into());
    }
    if !names::ALL.contains(&name.as_str()) {
        return Err(McpError::invalid_params(format!("no tool {name:?}"), None));
    }
    let parent = match parent_of(caller, session.as_ref(), &agent, &mut arguments) {
        Ok(parent) => parent,
        Err(err) => return Ok(result::<()>(Err(err)).await.into()),
    };
    arguments.insert("parent".into(), parent);
    let body = Value::Object(arguments);
    let who = &caller.caller;
    let supports_tasks = context.client_capabilities().is_some_and(|c| c.supports_tasks());
    let answer = match name.as_str() {
        names::TASK => return task(state, caller, body, context).await,
        names::SUBAGENT_START => match decode::<StartBody>(body) {
            Ok(body) => match start::start(state, who, &body).await {
                Ok(StartAnswer::Run(run)) if supports_tasks => {
                    let now = jiff::Timestamp::now().to_string();
                    let task = Task::new(run.run_id, TaskStatus::Working, now.clone(), now).with_poll_interval_ms(1000);
                    return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
                }
                other => result(other).await,
            },
            Err(err) => result::<()>(Err(err)).await,
        },
        names::SUBAGENT_STATUS => match decode(body) {
            Ok(body) => result(subagents::status(state, who, &body).await).await,
            Err(err) => result::<()>(Err(err)).await,
        },
        names::SUBAGENT_EVENTS => match decode(body) {
            Ok(body) => result(subagents::events(state, who, body).await).await,
            Err(err) => result::<()>(Err(err)).await,
        },
        names::SUBAGENT_CANCEL => match decode(body) {
            Ok(body) => result(subagents::cancel(state, who, &body).await).await,
            Err(err) => result::<()>(Err(err)).await,
        },
        names::SUBAGENT_AWAIT => match decode::<RunBody>(body) {
            Ok(body) => {
                let runs = vec![body.run_id.clone()];
                // Whose runs they are is settled before any of their progress is told.
                if let Err(err) = wait::check_owned(state, who, &body.parent, &runs).await {
                    return Ok(result::<()>(Err(err)).await.into());
                }
                let waiting = wait::await_run(state, who, &body);
                match with_progress(state, &context, runs, waiting).await {
                    Some(answer) => result(answer).await,
                    None => return Err(cancelled()),
                }
            }
            Err(err) => result::<()>(Err(err)).await,
        },
        _ => match decode::<WaitAnyBody>(body) {
            Ok(body) => {
                let runs = body.run_ids.clone();
                // Too many is refused before anything is watched; the others' owners are settled first.
                if runs.len() > crate::delegation::MAX_WAIT_ANY_RUNS {
                    return Ok(result(wait::wait_any(state, who, &body).await).await.into());
                }
                if let Err(err) = wait::check_owned(state, who, &body.parent, &runs).await {
                    return Ok(result::<()>(Err(err)).await.into());
                }
                let waiting = wait::wait_any(state, who, &body);
                match with_progress(state, &context, runs, waiting).await {
                    Some(answer) => result(answer).await,
                    None => return Err(cancelled()),
                }
            }
            Err(err) => result::<()>(Err(err)).await,
        },
    };
    Ok(answer.into())
}

fn cancelled() -> McpError {
    McpError::internal_error("the call was cancelled", None)
}

/// `task`: starts the run, then waits for it with progress; a cancelled call cancels its run. The
/// result's text is what the model reads (`content`), its structured content the whole answer.
async fn task(
    state: &FacadeState,
    caller: &McpCaller,
    body: Value,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let prepared = async {
        let body: StartBody = decode(body)?;
        let timeout = wait::await_timeout(body.timeout_seconds)?;
        let store = state.store()?.clone();
        let started = start::start(state, &caller.caller, &body).await?;
        Ok::<_, ApiError>((started, timeout, store))
    };
    let (started, timeout, store) = match prepared.await {
        Ok(prepared) => prepared,
        Err(err) => return Ok(result::<()>(Err(err)).await.into()),
    };
    let run = match started {
        StartAnswer::Run(run) => run,
        busy @ StartAnswer::Busy(_) => return Ok(result(Ok(busy)).await.into()),
    };
    let waiting = wait::task_answer(&store, &run.run_id, timeout);
    match with_progress(state, &context, vec![run.run_id.clone()], waiting).await {
        Some(Ok(answer)) => {
            let mut done = CallToolResult::structured(serde_json::to_value(&answer).unwrap_or(Value::Null));
            done.content = vec![ContentBlock::text(answer.content)];
            Ok(done.into())
        }
        Some(Err(err)) => Ok(result::<()>(Err(err)).await.into()),
        None => {
            if let Err(err) = store.cancel_run(&run.run_id).await {
                tracing::warn!(run_id = %run.run_id, error = %err, "cannot cancel the run of a cancelled task call");
            }
            Err(cancelled())
        }
    }
}

/// Runs `work` while sending a progress notification each time one of `runs` writes (its latest
/// progress line), when the call has a progress token; `None` when the call is cancelled first.
async fn with_progress<T>(
    state: &FacadeState,
    context: &RequestContext<RoleServer>,
    runs: Vec<String>,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    let token = context.meta.get_progress_token();
    let store = state.runs.as_ref().map(|r| r.store.clone());
    let report = async {
        let (Some(token), Some(store)) = (token, store) else { return std::future::pending().await };
        let watches: Vec<_> = runs.iter().map(|r| store.watch(r)).collect();
        let mut step = 0u32;
        loop {
            let changed: Vec<_> = watches.iter().map(|w| w.changed(Duration::from_secs(15))).collect();
            futures::future::select_all(changed).await;
            step += 1;
            // One line a run: its id, then its latest progress (or its status).
            let mut lines = Vec::new();
            for run in &runs {
                let recent = store.recent_events(run, crate::delegation::progress::PROGRESS_SCAN).await;
                let latest = recent.ok().and_then(|recent| {
                    let messages = crate::delegation::progress::summarize(&recent).messages;
                    messages.last().map(|m| m.content.chars().take(200).collect::<String>())
                });
                let status = || store.run_record(run);
                let line = match latest {
                    Some(line) => line,
                    None => status().await.ok().flatten().map_or("unknown".into(), |r| r.status.as_str().to_string()),
                };
                lines.push(format!("{run}: {line}"));
            }
            let note = ProgressNotificationParam::new(token.clone(), f64::from(step)).with_message(lines.join("\n"));
            if context.peer.notify_progress(note).await.is_err() {
                return std::future::pending().await;
            }
        }
    };
    tokio::select! {
        done = work => Some(done),
        () = report => None,
        () = context.ct.cancelled() => None,
    }
}
