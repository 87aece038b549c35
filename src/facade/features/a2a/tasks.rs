//! Runs as A2A tasks: a client's message starts a run of the agent in its context (the thread; a new
//! one when the message names none), or gives the decisions a waiting task (`input-required`) asks for
//! ([`send`]); a task is the run read back ([`task_of`]): its state, the question it waits on or its
//! error, its artifacts (the final answer, and the files the run wrote into the conversation's
//! outputs), and its context's messages. Every read checks the task is the caller's and this agent's,
//! and answers an unknown task for anything else.

use std::time::Duration;

use kube::ResourceExt;
use serde_json::{Map, Value};

use super::Failure;
use crate::access::Identity;
use crate::delegation::a2a::MAX_PARTS;
use crate::delegation::a2a::map::{decisions_in, task_state};
use crate::delegation::a2a::rpc::{Code, RpcError};
use crate::delegation::a2a::wire::{Message, Role, TaskState};
use crate::facade::http::error::ApiError;
use crate::facade::http::limits::run_limited;
use crate::facade::services::approvals::{DecisionBody, ResumeBody, ResumeContext, resume};
use crate::facade::services::conversations::note_run;
use crate::facade::services::launch::check_startable;
use crate::facade::services::model_access::check_run_model;
use crate::facade::services::owned_runs::mine;
use crate::facade::services::request_fields::request_id_of;
use crate::facade::services::run_starts::{check_quotas, launch_parent};
use crate::facade::services::state::FacadeState;
use crate::resources::Agent;
use crate::run::approval::check_decisions;
use crate::run::thread_id::{MAX_PARENT_THREAD_ID_LEN, is_valid_id};
use crate::run::{Created, RunRecord, RunStatus};

/// The longest a client's message id, in characters.
pub const MAX_MESSAGE_ID_CHARS: usize = 128;
/// The longest context id a client may name, in characters.
pub const MAX_CONTEXT_ID_CHARS: usize = 256;
/// How long a blocking `SendMessage` waits for its task to end or ask for input before it answers the
/// task as it is (still `working`).
pub const MAX_BLOCKING_WAIT: Duration = Duration::from_secs(crate::delegation::MAX_AWAIT_SECONDS);

/// The run of task `id`, when it is the caller's own (a superadmin's too: over A2A nobody reads or
/// answers another user's task) and of `agent`; an unknown task otherwise.
pub async fn task_run(state: &FacadeState, who: &Identity, agent: &Agent, id: &str) -> Result<RunRecord, Failure> {
    let store = state.store()?;
    match mine(store, who, id).await {
        Ok(record) if record.agent_slug == agent.name_any() && record.uid == who.uid => Ok(record),
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
/// context, with the id `run_id`. Returns the run, as it was just started or resumed.
pub async fn send(
    state: &FacadeState,
    who: &Identity,
    agent: Agent,
    message: &Message,
    run_id: String,
) -> Result<RunRecord, Failure> {
    check_message(message)?;
    if let Some(task_id) = &message.task_id {
        return answer(state, who, &agent, message, task_id).await;
    }
    let store = state.store()?;
    let query = query_of(message);
    if query.trim().is_empty() {
        return Err(RpcError::invalid("message.parts", "hold no text").into());
    }
    let (thread_id, context) = match &message.context_id {
        None => (format!("t-{}", uuid::Uuid::new_v4().simple()), None),
        Some(context) => (context_thread(state, who, context).await?, Some(context.clone())),
    };
    let mut meta = Map::new();
    meta.insert("a2a_message_id".into(), Value::String(message.message_id.clone()));
    if let Some(context) = context.filter(|c| *c != thread_id) {
        meta.insert(CONTEXT_META.into(), Value::String(context));
    }
    check_run_model(state, who, &agent, None).await?;
    check_quotas(state, &who.uid).await?;
    let request = crate::run::RunRequest {
        request_id: Some(request_id_of(&Map::new())?),
        meta,
        traceparent: crate::telemetry::current_traceparent(),
        ..Default::default()
    }
    .summarized(&query);
    let max_tokens = agent.spec.budget.as_ref().and_then(|b| b.max_tokens);
    let record = RunRecord::started_by(who, run_id, thread_id.clone(), agent.name_any(), request, max_tokens);
    check_startable(&record, &query, "message.parts")?;
    // The thread is the caller's own, or made for the caller from the context's name: never another's.
    if !store.claim_thread(&thread_id, &who.uid).await? {
        return Err(RpcError::invalid("message.contextId", "names no context of yours").into());
    }
    match store.create_run(&record, None, state.limits.runs).await? {
        Created::Started => {}
        Created::Limited(limit) => return Err(run_limited(limit, &state.limits.runs).into()),
        Created::Busy(active) | Created::Existing(active) => {
            return Err(RpcError::new(
                Code::UnsupportedOperation,
                format!("the context has the unfinished task {active}: follow it (SubscribeToTask), answer it, or cancel it first"),
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
    if message.context_id.as_ref().is_some_and(|c| {
        *c != record.thread_id
            && Some(c) != record.request.meta.get(CONTEXT_META).and_then(Value::as_str).map(str::to_string).as_ref()
    }) {
        return Err(RpcError::invalid("message.contextId", format!("task {task_id:?} is not of this context")).into());
    }
    let Some(waiting) = record.waiting.as_ref().filter(|_| record.status == RunStatus::Waiting) else {
        let state = state_name(task_state(record.status, None));
        return Err(RpcError::new(
            Code::UnsupportedOperation,
            format!(
                "task {task_id:?} is {state} and takes no input; send a message without taskId in its context to go on"
            ),
        )
        .into());
    };
    let decisions =
        decisions_in(message, &waiting.action_requests).map_err(|(field, why)| RpcError::invalid(field, why))?;
    // Checked here, so that a refusal names this message's field.
    let field = "message.parts";
    if decisions.len() > crate::facade::services::approvals::MAX_DECISIONS {
        let most = crate::facade::services::approvals::MAX_DECISIONS;
        return Err(RpcError::invalid(field, format!("at most {most} decisions")).into());
    }
    check_decisions(&waiting.action_requests, &decisions).map_err(|e| RpcError::invalid(field, e))?;
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

/// Where a task records the context id its client named, when the thread it runs in is another.
pub const CONTEXT_META: &str = "a2a_context_id";

/// The thread of the context a client names: the caller's own thread of that id, else a thread made for
/// the caller from it (`a2a-` and a hash of the caller and the name). Another user's thread is never
/// reached, and naming one answers as naming an unused name does: it becomes the caller's own context.
/// Errors: a name that is empty, too long or holds control characters, naming `message.contextId`.
pub async fn context_thread(state: &FacadeState, who: &Identity, context: &str) -> Result<String, Failure> {
    if context.is_empty() || context.chars().count() > MAX_CONTEXT_ID_CHARS || context.chars().any(char::is_control) {
        return Err(RpcError::invalid(
            "message.contextId",
            format!("must be 1 to {MAX_CONTEXT_ID_CHARS} characters, none a control character"),
        )
        .into());
    }
    let own = is_valid_id(context) && !context.contains("_sub_") && context.len() <= MAX_PARENT_THREAD_ID_LEN;
    if own && state.store()?.thread_owner(context).await?.as_deref() == Some(who.uid.as_str()) {
        return Ok(context.to_string());
    }
    Ok(format!("a2a-{}", crate::delegation::outside_parent_run_id(&who.uid, context)))
}

/// A state as the protocol spells it (`TASK_STATE_WORKING`).
pub fn state_name(state: TaskState) -> String {
    serde_json::to_value(state).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}
