//! A run read back as an A2A task ([`task_of`]): its state, the question it waits on or its error, its
//! artifacts (the final answer, and the files the run wrote into the conversation's outputs) and its
//! context's messages, each bounded; and the wait of a blocking send ([`settled`]).

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::delegation::a2a::MAX_HISTORY;
use crate::delegation::a2a::map::{input_request, task_state};
use crate::delegation::a2a::rpc::RpcError;
use crate::delegation::a2a::wire::{Artifact, Message, Part, Role, Task, TaskState, TaskStatus};
use crate::facade::http::error::ApiError;
use crate::facade::services::scope::{ScopeDir, blocking};
use crate::facade::services::state::FacadeState;
use crate::run::scope::{Scope, ScopeIds};
use crate::run::{RunRecord, RunStatus};

/// The most output files a task carries as artifacts.
pub const MAX_ARTIFACT_FILES: usize = 32;
/// The most bytes of output files a task carries inline, in all; a file past what is left is named by
/// its download URL instead.
pub const MAX_INLINE_BYTES: u64 = 1024 * 1024;
/// The most bytes of message text a task's history carries: the newest messages that fit.
pub const MAX_HISTORY_BYTES: usize = 1024 * 1024;

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
        |parts| Some(Message::agent(format!("{}-status", record.run_id), &record.run_id, &context_of(record), parts));
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
        context_id: context_of(record),
        status: TaskStatus { state: state_now, message, timestamp: Some(jiff::Timestamp::now().to_string()) },
        artifacts,
        history,
        metadata: Some(metadata),
    })
}

/// The context's messages as A2A messages (the user's questions and the agent's answers with text),
/// the last `length` of them whose text fits in [`MAX_HISTORY_BYTES`]; none once the thread is no longer
/// the task's user's (a forgotten thread another user took since).
async fn history_of(state: &FacadeState, record: &RunRecord, length: Option<usize>) -> Result<Vec<Message>, ApiError> {
    let length = length.unwrap_or(MAX_HISTORY);
    let store = state.store()?;
    if length == 0 || store.thread_owner(&record.thread_id).await?.as_deref() != Some(record.uid.as_str()) {
        return Ok(Vec::new());
    }
    let messages = store.thread_messages(&record.thread_id).await?;
    let context = context_of(record);
    let mut history = Vec::new();
    let mut left = MAX_HISTORY_BYTES;
    for (at, m) in messages.iter().enumerate().rev() {
        let (role, text) = match m {
            crate::run::message::Message::User { content } => (Role::User, content),
            crate::run::message::Message::Assistant { content: Some(text), .. } if !text.is_empty() => {
                (Role::Agent, text)
            }
            _ => continue,
        };
        if history.len() == length || text.len() > left {
            break;
        }
        left -= text.len();
        let id = format!("{}-{}", record.thread_id, at + 1);
        let mut message = Message::agent(id, &record.run_id, &context, vec![Part::text(text.clone())]);
        message.role = role;
        history.push(message);
    }
    history.reverse();
    Ok(history)
}

/// The context id the task's client knows: the one it named, else the thread's.
pub fn context_of(record: &RunRecord) -> String {
    let named = record.request.meta.get(super::tasks::CONTEXT_META).and_then(Value::as_str);
    named.unwrap_or(&record.thread_id).to_string()
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
