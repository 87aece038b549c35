//! A conversation's history in Yuxi's message shape (`GET /api/chat/thread/{thread_id}/history`) and its
//! agent state (`.../state`). Another user's thread answers 404, like a missing one.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::facade::http::auth::Caller;
use crate::facade::http::body::QueryParams;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::conversations::{message_id, owned};
use crate::facade::services::state::FacadeState;
use crate::run::RunStatus;
use crate::run::conversation::{self, Conversation};
use crate::run::hitl;
use crate::run::message::Message;
use crate::store::Store;

/// The answer of `GET /api/chat/thread/{thread_id}/history`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct History {
    /// The messages, oldest first: `{id, type: human | ai | tool, content, tool_calls?, tool_call_id?}`.
    #[schema(value_type = Vec<Object>)]
    pub history: Vec<Value>,
}

/// `GET /api/chat/thread/{thread_id}/history`: the conversation's messages in Yuxi's shape.
#[utoipa::path(
    get,
    path = "/api/chat/thread/{thread_id}/history",
    operation_id = "get_chat_thread_history",
    tag = "chat",
    params(("thread_id" = String, Path, description = "the thread id")),
    responses(
        (status = 200, description = "the messages", body = History),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn history(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<History>, ApiError> {
    let store = state.store()?;
    let conversation = owned(store, &who, &thread_id).await?;
    let (messages, latest) = readable(store, &conversation).await?;
    Ok(Json(History { history: yuxi_history(&messages, latest.as_ref()) }))
}

/// Where the thread's latest run's messages start in its history, and which run and request they are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatestRun {
    /// The index of its first message: its question, stored as it started; or, when it was not stored,
    /// the first message it said before it paused.
    pub from: usize,
    /// The run.
    pub run_id: String,
    /// Its request id.
    pub request_id: Option<String>,
    /// Whether the message at `from` is its question.
    pub question: bool,
}

/// The thread's messages as a reader sees them now: the stored ones (the latest run's question is
/// among them from its start), and, while the latest run waits for a person, what it said so far (its
/// checkpoint), with where the latest run's messages start.
pub async fn readable(
    store: &Store,
    conversation: &Conversation,
) -> Result<(Vec<Message>, Option<LatestRun>), ApiError> {
    let mut messages = store.thread_messages(&conversation.thread_id).await?;
    let Some(run_id) = &conversation.last_run_id else { return Ok((messages, None)) };
    let Some(record) = store.run_record(run_id).await? else { return Ok((messages, None)) };
    let question = if store.run_input_stored(run_id).await? {
        messages.iter().rposition(|m| matches!(m, Message::User { .. }))
    } else {
        None
    };
    let mut from = question;
    if record.status == RunStatus::Waiting
        && let Some(checkpoint) = store.run_checkpoint(run_id).await?
    {
        from = from.or(Some(messages.len()));
        messages.extend(checkpoint.added);
    }
    let latest = from.map(|from| LatestRun {
        from,
        run_id: record.run_id.clone(),
        request_id: record.request.request_id.clone(),
        question: question.is_some(),
    });
    Ok((messages, latest))
}

/// `messages` (chat-completions shapes) as Yuxi's history items: `human`, `ai` (with `tool_calls`,
/// each carrying its `tool_call_result` once a tool message answered it) and `tool`. System prompts
/// are left out. Each item's `id` is its place in the history, from 1. The items of the `latest` run
/// carry its `run_id` in `extra_metadata`, its question also its `request_id` (Yuxi's client matches
/// the question it shows while the run streams by it).
pub fn yuxi_history(messages: &[Message], latest: Option<&LatestRun>) -> Vec<Value> {
    let answers: std::collections::HashMap<&str, &str> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, content } => Some((tool_call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    let item = |index: usize, kind: &str, content: &str| {
        json!({"id": message_id(index), "type": kind, "content": content, "message_type": "text",
               "delivery_status": "delivered", "extra_metadata": {}, "image_content": null, "feedback": null})
    };
    let mark = |index: usize, mut item: Value| {
        if let Some(latest) = latest.filter(|l| index >= l.from) {
            item["extra_metadata"]["run_id"] = json!(latest.run_id);
            if index == latest.from && latest.question {
                item["extra_metadata"]["request_id"] = json!(latest.request_id);
            }
        }
        item
    };
    messages
        .iter()
        .enumerate()
        .filter_map(|(index, message)| match message {
            Message::System { .. } => None,
            Message::User { content } => Some(item(index, "human", content)),
            Message::Assistant { content, tool_calls } => {
                let mut out = item(index, "ai", content.as_deref().unwrap_or_default());
                if !tool_calls.is_empty() {
                    out["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            let args = serde_json::from_str::<Value>(&call.function.arguments)
                                .unwrap_or_else(|_| Value::String(call.function.arguments.clone()));
                            let answer = answers.get(call.id.as_str());
                            json!({
                                "id": call.id,
                                "name": call.function.name,
                                "function": {"name": call.function.name},
                                "args": args,
                                "tool_call_result": answer.map(|content| json!({"content": content})),
                                "status": if answer.is_some() { "success" } else { "pending" },
                            })
                        })
                        .collect();
                }
                Some(out)
            }
            Message::Tool { tool_call_id, content } => {
                let mut out = item(index, "tool", content);
                out["tool_call_id"] = json!(tool_call_id);
                Some(out)
            }
        })
        .map(|item| {
            let index = item["id"].as_str().and_then(|id| id.parse::<usize>().ok()).map_or(0, |id| id - 1);
            mark(index, item)
        })
        .collect()
}

/// `GET /api/chat/thread/{thread_id}/state` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StateQuery {
    /// Also return the history as `messages`.
    #[serde(default)]
    include_messages: Option<bool>,
}

/// `GET /api/chat/thread/{thread_id}/state`: the conversation's agent state. Runs here keep no to-do
/// list or file list of their own (their files are the user's folders), so `todos` and `files` are
/// empty; `status` is the thread's and `active_run_id` its unfinished run; while that run waits for a
/// person, `interrupt` is Yuxi's `human_approval_required` chunk (its `approval` and `run_id`).
#[utoipa::path(
    get,
    path = "/api/chat/thread/{thread_id}/state",
    operation_id = "get_chat_thread_state",
    tag = "chat",
    params(("thread_id" = String, Path, description = "the thread id"), StateQuery),
    responses(
        (status = 200, description = "`{agent_state: {todos, files}, thread_status, active_run_id, interrupt?, messages?}`", body = Object),
        (status = 400, description = "malformed query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn thread_state(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
    QueryParams(query): QueryParams<StateQuery>,
) -> Result<Json<Value>, ApiError> {
    let store = state.store()?;
    let conversation = owned(store, &who, &thread_id).await?;
    let last = match &conversation.last_run_id {
        Some(run) => store.run_record(run).await?,
        None => None,
    };
    let active = last.as_ref().filter(|r| !r.status.is_terminal()).map(|r| r.run_id.clone());
    let status = conversation::thread_status(&conversation, last.as_ref().map(|r| r.status));
    let mut out = json!({
        "agent_state": {"todos": [], "files": {}},
        "thread_id": conversation.thread_id,
        "thread_status": status,
        "active_run_id": active,
    });
    // What a reload shows of a run that waits for a person (Yuxi: the interrupt of the checkpoint).
    if let Some(record) = last.as_ref().filter(|r| r.status == RunStatus::Waiting)
        && let Some(waiting) = &record.waiting
    {
        out["interrupt"] = hitl::approval_chunk(&record.run_id, &record.thread_id, waiting);
    }
    if query.include_messages.unwrap_or(false) {
        let (messages, latest) = readable(store, &conversation).await?;
        out["messages"] = Value::Array(yuxi_history(&messages, latest.as_ref()));
    }
    Ok(Json(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::message::ToolCall;

    #[test]
    fn history_items_are_human_ai_and_tool_with_each_call_carrying_its_result() {
        let messages = vec![
            Message::System { content: "be brief".into() },
            Message::User { content: "list".into() },
            Message::Assistant { content: None, tool_calls: vec![ToolCall::new("c1", "ls", r#"{"path":"/"}"#)] },
            Message::Tool { tool_call_id: "c1".into(), content: "a b".into() },
            Message::Assistant { content: Some("done".into()), tool_calls: vec![] },
        ];
        let history = yuxi_history(&messages, None);
        assert_eq!(history.len(), 4, "the system prompt is left out: {history:?}");
        assert_eq!(history[0]["type"], "human");
        assert_eq!(history[0]["id"], "2");
        assert_eq!(history[1]["type"], "ai");
        assert_eq!(history[1]["tool_calls"][0]["args"], json!({"path": "/"}));
        assert_eq!(history[1]["tool_calls"][0]["tool_call_result"]["content"], "a b");
        assert_eq!(history[2]["type"], "tool");
        assert_eq!(history[2]["tool_call_id"], "c1");
        assert_eq!(history[3]["content"], "done");
    }

    #[test]
    fn the_latest_runs_items_carry_its_run_and_its_question_its_request() {
        let messages = vec![
            Message::User { content: "first".into() },
            Message::Assistant { content: Some("one".into()), tool_calls: vec![] },
            Message::User { content: "second".into() },
            Message::Assistant { content: None, tool_calls: vec![ToolCall::new("c1", "write_file", "{}")] },
        ];
        let latest = LatestRun { from: 2, run_id: "r2".into(), request_id: Some("q2".into()), question: true };
        let history = yuxi_history(&messages, Some(&latest));
        assert_eq!(history[0]["extra_metadata"], json!({}), "an earlier run's question is not marked");
        assert_eq!(history[2]["extra_metadata"], json!({"run_id": "r2", "request_id": "q2"}));
        assert_eq!(history[3]["extra_metadata"], json!({"run_id": "r2"}));
        assert_eq!(history[3]["tool_calls"][0]["status"], "pending");
    }
}
