//! Runs as A2A tasks: a client's message starts a run of the agent in its context (the thread; a new
//! one when the message names none), or gives the decisions a waiting task (`input-required`) asks for
//! ([`send`]); a task is the run read back ([`task_of`]): its state, the question it waits on or its
//! error, its artifacts (the final answer, and the files the run wrote into the conversation's
//! outputs), and its context's messages. Every read checks the task is the caller's and this agent's,
//! and answers an unknown task for anything else.

use std::time::Duration;

use kube::ResourceExt;
use serde_json::{Map, Value, json};

use super::Failure;
use crate::access::Identity;
use crate::delegation::a2a::map::{decisions_in, input_request, task_state};
use crate::delegation::a2a::rpc::{Code, RpcError};
use crate::delegation::a2a::wire::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};
use crate::delegation::a2a::{MAX_HISTORY, MAX_PARTS};
use crate::facade::http::error::ApiError;
use crate::facade::http::limits::run_limited;
use crate::facade::services::approvals::{DecisionBody, ResumeBody, ResumeContext, resume};
use crate::facade::services::conversations::note_run;
use crate::facade::services::launch::check_startable;
use crate::facade::services::model_access::check_run_model;
use crate::facade::services::owned_runs::mine;
use crate::facade::services::request_fields::request_id_of;
use crate::facade::services::run_starts::{check_quotas, launch_parent};
use crate::facade::services::scope::{ScopeDir, blocking};
use crate::facade::services::state::FacadeState;
use crate::resources::Agent;
use crate::run::scope::{Scope, ScopeIds};
use crate::run::thread_id::{MAX_PARENT_THREAD_ID_LEN, is_valid_id};
use crate::run::{Created, RunRecord, RunStatus};

/// The longest a client's message id, in characters.
pub const MAX_MESSAGE_ID_CHARS: usize = 128;
/// The most output files a task carries as artifacts.
pub const MAX_ARTIFACT_FILES: usize = 32;
/// The most bytes of output files a task carries inline, in all; a file past what is left is named by
/// its download URL instead.
pub const MAX_INLINE_BYTES: u64 = 1024 * 1024;
/// How long a blocking `SendMessage` waits for its task to end or ask for input before it answers the
/// task as it is (still `working`).
pub const MAX_BLOCKING_WAIT: Duration = Duration::from_secs(crate::delegation::MAX_AWAIT_SECONDS);

/// How a task is read back: how many of its context's messages it carries, whether its artifacts, and
/// the agent's URL its large files' download URLs start from.
#[derive(Clone, Debug)]
pub struct Reading {
    /// The most history messages (`None`: up to [`MAX_HISTORY`]).
    pub history_length: Option<usize>,
    /// Whether the artifacts are read.
    pub artifacts: bool,
    /// The agent's A2A URL (`http://host/a2a/ns/slug`).
    pub agent_url: String,
}

/// A history length a client asked for: 0 to [`MAX_HISTORY`] (more is cut to it); negative refused.
pub fn history_length(asked: Option<i64>, field: &str) -> Result<Option<usize>, RpcError> {
    match asked {
        None => Ok(None),
        Some(n) if n < 0 => Err(RpcError::invalid(field, "must not be negative")),
        Some(n) => Ok(Some((n as usize).min(MAX_HISTORY))),
    }
}

/// The run of task `id`, when it is the caller's and of `agent`; an unknown task otherwise.
pub async fn task_run(state: &FacadeState, who: &Identity, agent: &Agent, id: &str) -> Result<RunRecord, Failure> {
    let store = state.store()?;
    match mine(store, who, id).await {
        Ok(record) if record.agent_slug == agent.name_any() => Ok(record),
        Ok(_) | Err(ApiError::NotFound(_)) => Err(RpcError::task_not_found(id).into()),
        Err(other) => Err(other.into()),
    }
}

/// Checks the client's message: from the user, with an id, 1 to [`MAX_PARTS`] parts of text or data
/// (a file's bytes or URL answers `ContentTypeNotSupported` naming the part).
fn check_message(message: &Message) -> Result<(), RpcError> {
    if message.role != Role::User {
        return Err(RpcError::invalid("message.role", "must be ROLE_USER"));
    }
    if message.message_id.is_empty() || message.message_id.chars().count() > MAX_MESSAGE_ID_CHARS {
        return Err(RpcError::invalid("message.messageId", format!("must be 1 to {MAX_MESSAGE_ID_CHARS} characters")));
    }
    if message.parts.is_empty() || message.parts.len() > MAX_PARTS {
        return Err(RpcError::invalid("message.parts", format!("must hold 1 to {MAX_PARTS} parts")));
    }
    for (at, part) in message.parts.iter().enumerate() {
        let given = [part.text.is_some(), part.raw.is_some(), part.url.is_some(), part.data.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(RpcError::invalid(
                format!("message.parts[{at}]"),
                "must hold exactly one of text, raw, url, data",
            ));
        }
        if part.raw.is_some() || part.url.is_some() {
            let mut refused = RpcError::new(
                Code::ContentTypeNotSupported,
                format!(
                    "message.parts[{at}]: files are not taken in a message; upload them to the conversation (POST /api/chat/thread/{{thread_id}}/attachments) and name them in the text"
                ),
            );
            refused.field = Some(format!("message.parts[{at}]"));
            return Err(refused);
        }
    }
    Ok(())
}

/// The run's question: the text parts, then each data part as JSON, separated by blank lines.
fn query_of(message: &Message) -> String {
    let pieces: Vec<String> = message
        .parts
        .iter()
        .filter_map(|p| p.text.clone().or_else(|| p.data.as_ref().map(|d| format!("```json\n{d}\n```"))))
        .collect();
    pieces.join("\n\n")
}

/// `SendMessage` and `SendStreamingMessage`: a message naming a task answers it (a waiting task takes
/// the decisions it asks for; any other state is refused); otherwise it starts a run of `agent` in its
/// context. Returns the run, as it was just started or resumed.
pub async fn send(state: &FacadeState, who: &Identity, agent: Agent, message: &Message) -> Result<RunRecord, Failure> {
    check_message(message)?;
    if let Some(task_id) = &message.task_id {
        return answer(state, who, &agent, message, task_id).await;
    }
    let store = state.store()?;
    let query = query_of(message);
    if query.trim().is_empty() {
        return Err(RpcError::invalid("message.parts", "hold no text").into());
    }
    let thread_id = match &message.context_id {
        None => format!("t-{}", uuid::Uuid::new_v4().simple()),
        Some(context)
            if !is_valid_id(context) || context.contains("_sub_") || context.len() > MAX_PARENT_THREAD_ID_LEN =>
        {
            return Err(RpcError::invalid("message.contextId", format!("{context:?} is not a context id (letters, digits, '.', '_', '-'; at most {MAX_PARENT_THREAD_ID_LEN} characters)")).into());
        }
        Some(context) => context.clone(),
    };
    let mut meta = Map::new();
    meta.insert("a2a_message_id".into(), Value::String(message.message_id.clone()));
    check_run_model(state, who, &agent, None).await?;
    check_quotas(state, &who.uid).await?;
    let request = crate::run::RunRequest {
        request_id: Some(request_id_of(&Map::new())?),
        meta,
        traceparent: crate::telemetry::current_traceparent(),
        ..Default::default()
    };
    let record = RunRecord {
        run_id: uuid::Uuid::new_v4().simple().to_string(),
        thread_id: thread_id.clone(),
        agent_slug: agent.name_any(),
        uid: who.uid.clone(),
        parent: None,
        status: RunStatus::Pending,
        error: None,
        created_at: jiff::Timestamp::now().to_string(),
        request,
        max_tokens: agent.spec.budget.as_ref().and_then(|b| b.max_tokens),
        waiting: None,
        principal: who.principal.clone(),
    };
    check_startable(&record, &query, "message.parts")?;
    // The context is the caller's, or nobody's yet and now the caller's; another user's answers as an
    // unknown one does when it is named again.
    if !store.claim_thread(&thread_id, &who.uid).await? {
        return Err(RpcError::invalid("message.contextId", format!("context {thread_id:?} does not exist")).into());
    }
    match store.create_run(&record, None, state.limits.runs).await? {
        Created::Started => {}
        Created::Limited(limit) => return Err(run_limited(limit, &state.limits.runs).into()),
        Created::Busy(active) | Created::Existing(active) => {
            return Err(RpcError::new(
                Code::UnsupportedOperation,
                format!("context {thread_id:?} has the unfinished task {active}: follow it (SubscribeToTask), answer it, or cancel it first"),
            )
            .into());
        }
    }
    note_run(store, &record, &query).await?;
    launch_parent(state, who, agent, &record, query);
    Ok(record)
}

/// A message to the task `task_id`: the decisions of a waiting task; refused for a task in any other
/// state, and for a message naming another context than the task's.
async fn answer(
    state: &FacadeState,
    who: &Identity,
    agent: &Agent,
    message: &Message,
    task_id: &str,
) -> Result<RunRecord, Failure> {
    let record = task_run(state, who, agent, task_id).await?;
    if message.context_id.as_ref().is_some_and(|c| *c != record.thread_id) {
        return Err(RpcError::invalid("message.contextId", format!("task {task_id:?} is not of this context")).into());
    }
    let Some(waiting) = record.waiting.as_ref().filter(|_| record.status == RunStatus::Waiting) else {
        let state = task_state(record.status, None);
        return Err(RpcError::new(
            Code::UnsupportedOperation,
            format!("task {task_id:?} is {state:?} and takes no input; send a message without taskId in its context to go on"),
        )
        .into());
    };
    let decisions =
        decisions_in(message, &waiting.action_requests).map_err(|(field, why)| RpcError::invalid(field, why))?;
    let decisions = decisions
        .into_iter()
        .map(|d| DecisionBody {
            tool_call_id: Some(d.tool_call_id),
            decision: Some(d.decision),
            arguments: d.arguments,
            message: d.message,
            kind: None,
            edited_action: None,
        })
        .collect();
    let body = ResumeBody { run_id: Some(record.run_id.clone()), decisions };
    Ok(resume(state, who, body, ResumeContext { created_by_run_id: None, thread_id: None }).await?)
}

/// Waits until the run has ended or waits for a person, at most `limit`; the run as it then is.
pub async fn settled(state: &FacadeState, run_id: &str, limit: Duration) -> Result<RunRecord, ApiError> {
    let store = state.store()?;
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let watch = store.watch(run_id);
        let changed = watch.changed(crate::store::notices::RunWatch::SAFETY_NET);
        let record = store
            .run_record(run_id)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("run {run_id:?} does not exist")))?;
        if record.status.is_terminal() || record.status == RunStatus::Waiting || tokio::time::Instant::now() >= deadline
        {
            return Ok(record);
        }
        let _ = tokio::time::timeout_at(deadline, changed).await;
    }
}

/// The task of `record` as `reading` asks.
pub async fn task_of(state: &FacadeState, record: &RunRecord, reading: &Reading) -> Result<Task, ApiError> {
    let store = state.store()?;
    let result = if record.status.is_terminal() { store.run_result(&record.run_id).await? } else { None };
    let status = result.as_ref().map_or(record.status, |r| r.status);
    let reason = result.as_ref().and_then(|r| r.reason.clone());
    let state_now = task_state(status, reason.as_deref());
    let said =
        |parts| Some(Message::agent(format!("{}-status", record.run_id), &record.run_id, &record.thread_id, parts));
    let message = match state_now {
        TaskState::InputRequired => {
            record.waiting.as_ref().and_then(|w| said(input_request(&w.action_requests, &w.expires_at)))
        }
        TaskState::Failed | TaskState::Rejected | TaskState::Canceled => {
            let why = result.as_ref().and_then(|r| r.error.clone()).or_else(|| record.error.clone());
            why.and_then(|why| said(vec![Part::text(why)]))
        }
        _ => None,
    };
    let mut artifacts = Vec::new();
    if reading.artifacts && state_now.is_terminal() {
        if let Some(output) = result.as_ref().map(|r| r.output.clone()).filter(|o| !o.is_empty()) {
            artifacts.push(Artifact {
                artifact_id: "answer".into(),
                name: Some("answer".into()),
                description: Some("The agent's final answer.".into()),
                parts: vec![Part::text(output)],
                metadata: None,
            });
        }
        artifacts.extend(output_files(state, record, &reading.agent_url).await?);
    }
    let history = history_of(state, record, reading.history_length).await?;
    let mut metadata = Map::new();
    let mut run = json!({"run_id": record.run_id, "status": status.as_str(), "agent_slug": record.agent_slug});
    if let Some(result) = &result {
        run["token_usage"] = serde_json::to_value(&result.token_usage).unwrap_or(Value::Null);
        if let Some(reason) = &result.reason {
            run["reason"] = Value::String(reason.clone());
        }
    }
    metadata.insert("yuxi.dev/run".into(), run);
    Ok(Task {
        id: record.run_id.clone(),
        context_id: record.thread_id.clone(),
        status: TaskStatus { state: state_now, message, timestamp: Some(jiff::Timestamp::now().to_string()) },
        artifacts,
        history,
        metadata: Some(metadata),
    })
}

/// The context's messages as A2A messages (the user's questions and the agent's answers with text),
/// the last `length` of them.
async fn history_of(state: &FacadeState, record: &RunRecord, length: Option<usize>) -> Result<Vec<Message>, ApiError> {
    let length = length.unwrap_or(MAX_HISTORY);
    if length == 0 {
        return Ok(Vec::new());
    }
    let messages = state.store()?.thread_messages(&record.thread_id).await?;
    let mut history: Vec<Message> = messages
        .iter()
        .enumerate()
        .filter_map(|(at, m)| {
            let (role, text) = match m {
                crate::run::message::Message::User { content } => (Role::User, content.clone()),
                crate::run::message::Message::Assistant { content: Some(text), .. } if !text.is_empty() => {
                    (Role::Agent, text.clone())
                }
                _ => return None,
            };
            let mut message = Message::agent(
                format!("{}-{}", record.thread_id, at + 1),
                &record.run_id,
                &record.thread_id,
                vec![Part::text(text)],
            );
            message.role = role;
            Some(message)
        })
        .collect();
    let keep = history.len().saturating_sub(length);
    Ok(history.split_off(keep))
}

/// The files the run wrote into its conversation's outputs (changed since the run was made), at most
/// [`MAX_ARTIFACT_FILES`]: inline while [`MAX_INLINE_BYTES`] last (text as text, else base64), named by
/// their download URL after. None when this facade reads no users' files.
async fn output_files(state: &FacadeState, record: &RunRecord, agent_url: &str) -> Result<Vec<Artifact>, ApiError> {
    let Some(data) = state.user_files.clone() else { return Ok(Vec::new()) };
    let ids = ScopeIds::new(&record.uid, "contextId", &record.thread_id, record.parent.as_ref())
        .map_err(|e| ApiError::invalid("contextId", e.to_string()))?;
    let sub_path = ids.sub_path(Scope::Outputs);
    let since = record.created_at.parse::<jiff::Timestamp>().ok();
    let origin = agent_url.split("/a2a/").next().unwrap_or_default().to_string();
    let thread = record.thread_id.clone();
    blocking(move || {
        let Some(dir) = ScopeDir::open(&data, &sub_path).map_err(|e| ApiError::Unavailable(e.to_string()))? else {
            return Ok(Vec::new());
        };
        let entries = dir.walk(&[]).map_err(|e| ApiError::Unavailable(e.to_string()))?;
        let mut left = MAX_INLINE_BYTES;
        let mut artifacts = Vec::new();
        for entry in entries.into_iter().filter(|e| !e.is_dir) {
            let changed = entry.modified_at.parse::<jiff::Timestamp>().ok();
            if since.zip(changed).is_some_and(|(since, changed)| changed < since) {
                continue;
            }
            if artifacts.len() == MAX_ARTIFACT_FILES {
                break;
            }
            let media = crate::facade::services::files::media_type(&entry.name);
            let mut part = Part {
                filename: Some(entry.name.clone()),
                media_type: Some(media.split(';').next().unwrap_or(media).to_string()),
                ..Default::default()
            };
            let rel: Vec<String> = entry.rel.split('/').map(str::to_string).collect();
            let bytes = (entry.size <= left).then(|| dir.open_file(&rel).ok()).flatten().and_then(|opened| {
                use std::io::Read;
                let mut bytes = Vec::new();
                opened.file.take(left).read_to_end(&mut bytes).ok().map(|_| bytes)
            });
            match bytes {
                Some(bytes) => {
                    left -= bytes.len() as u64;
                    match String::from_utf8(bytes) {
                        Ok(text) => part.text = Some(text),
                        Err(bytes) => {
                            use base64::Engine;
                            part.raw = Some(base64::engine::general_purpose::STANDARD.encode(bytes.into_bytes()));
                        }
                    }
                }
                None => {
                    let path: String = format!("/outputs/{}", entry.rel);
                    let query = serde_urlencoded::to_string([("thread_id", thread.as_str()), ("path", path.as_str())])
                        .unwrap_or_default();
                    part.url = Some(format!("{origin}/api/viewer/filesystem/download?{query}"));
                }
            }
            artifacts.push(Artifact {
                artifact_id: format!("outputs/{}", entry.rel),
                name: Some(entry.rel.clone()),
                description: Some(format!("{} bytes the run wrote to outputs/{}", entry.size, entry.rel)),
                parts: vec![part],
                metadata: None,
            });
        }
        Ok(artifacts)
    })
    .await
}
