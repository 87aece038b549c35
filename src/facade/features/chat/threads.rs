//! Yuxi's chat-thread routes (`/api/chat/thread...`), over the threads the store keeps: create, list,
//! retitle or pin, delete and mark viewed; the history and state are in [`super::history`]. A thread
//! belongs to the user who created it (or whose first run used it); another user's thread answers 404,
//! like a missing one. Attachments are the attachments feature's.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::facade::http::auth::Caller;
use crate::facade::http::body::{JsonBody, QueryParams, json_within};
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::agent_views::visible;
use crate::facade::services::conversations::owned;
use crate::facade::services::state::FacadeState;
use crate::run::conversation::{
    self, Conversation, ConversationChange, DEFAULT_TITLE, MAX_METADATA_BYTES, MAX_TITLE_CHARS,
};
use crate::store::Store;

/// A conversation as Yuxi's `ThreadResponse` shapes it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ThreadView {
    /// The thread id.
    pub id: String,
    /// The thread id, as the run routes name it.
    pub thread_id: String,
    /// Its owner.
    pub uid: String,
    /// The agent's slug.
    pub agent_id: String,
    /// Its title.
    pub title: String,
    /// Whether it is pinned.
    pub is_pinned: bool,
    /// Always `null`: this system has no projects.
    pub project_id: Option<String>,
    /// Where its runs see the user's workspace.
    pub workdir_path: String,
    /// When it was created, RFC 3339.
    pub created_at: String,
    /// When it last changed, RFC 3339.
    pub updated_at: String,
    /// The client's metadata.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// `loading` while its latest run goes, `ready` when that ended unseen, `done` otherwise.
    pub thread_status: &'static str,
    /// The status of its latest run; `null` before its first.
    pub last_run_status: Option<crate::run::RunStatus>,
}

pub(super) async fn view(store: &Store, conversation: Conversation) -> Result<ThreadView, ApiError> {
    let status = match &conversation.last_run_id {
        Some(run) => store.run_record(run).await?.map(|r| r.status),
        None => None,
    };
    Ok(ThreadView {
        thread_status: conversation::thread_status(&conversation, status),
        last_run_status: status,
        id: conversation.thread_id.clone(),
        thread_id: conversation.thread_id,
        uid: conversation.uid,
        agent_id: conversation.agent_slug,
        title: conversation.title,
        is_pinned: conversation.is_pinned,
        project_id: None,
        workdir_path: format!("{}/workspace", crate::run::scope::USER_DATA),
        created_at: conversation.created_at,
        updated_at: conversation.updated_at,
        metadata: conversation.metadata,
    })
}

/// `POST /api/chat/thread` body (Yuxi's `ThreadCreate`).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateThread {
    /// The agent the conversation talks to: an ordinary agent the caller may see.
    #[schema(min_length = 1, max_length = 80)]
    pub agent_id: String,
    /// Its title (at most 200 characters); Yuxi's "新的对话" when absent.
    #[serde(default)]
    #[schema(max_length = 200)]
    pub title: Option<String>,
    /// The client's metadata (at most 8 KiB of JSON).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    /// The client's request id; accepted and not used (a new thread each time).
    #[serde(default)]
    #[schema(max_length = 64)]
    pub request_id: Option<String>,
    /// Must be absent, `null` or `""`: this system has no projects.
    #[serde(default)]
    #[schema(value_type = Option<String>, max_length = 0)]
    pub project_id: Option<Value>,
}

fn checked_title(title: &str) -> Result<String, ApiError> {
    let title = title.trim();
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(ApiError::invalid("title", format!("is longer than {MAX_TITLE_CHARS} characters")));
    }
    Ok(if title.is_empty() { DEFAULT_TITLE.to_string() } else { title.to_string() })
}

/// `POST /api/chat/thread`: a new conversation of the caller with an agent.
#[utoipa::path(
    post,
    path = "/api/chat/thread",
    operation_id = "create_chat_thread",
    tag = "chat",
    request_body = CreateThread,
    responses(
        (status = 200, description = "the new conversation", body = ThreadView),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "the agent is unknown, or invisible to the caller", body = ErrorBody),
        (status = 413, description = "body or `metadata` too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn create(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CreateThread>,
) -> Result<Json<ThreadView>, ApiError> {
    let store = state.store()?;
    let agent = visible(state.agents.get(&body.agent_id).await?, &who, &body.agent_id)?;
    if agent.spec.is_subagent() {
        return Err(ApiError::invalid(
            "agent_id",
            format!("{:?} is a subagent: conversations are with main agents", body.agent_id),
        ));
    }
    if body.project_id.as_ref().is_some_and(|p| !p.is_null() && p.as_str() != Some("")) {
        return Err(ApiError::invalid("project_id", "this system has no projects"));
    }
    let metadata = body.metadata.unwrap_or_default();
    json_within("metadata", &metadata, MAX_METADATA_BYTES)?;
    let title = checked_title(body.title.as_deref().unwrap_or_default())?;
    let thread_id = format!("t-{}", uuid::Uuid::new_v4().simple());
    if !store.claim_thread(&thread_id, &who.uid).await? {
        return Err(ApiError::Conflict(format!("thread {thread_id:?} could not be created; try again")));
    }
    let now = jiff::Timestamp::now().to_string();
    let conversation = Conversation {
        thread_id,
        uid: who.uid.clone(),
        agent_slug: body.agent_id,
        title,
        is_pinned: false,
        metadata,
        created_at: now.clone(),
        updated_at: now,
        last_run_id: None,
        viewed_run_id: None,
        queue_paused: false,
    };
    store.put_conversation(&conversation).await?;
    Ok(Json(view(store, conversation).await?))
}

/// `GET /api/chat/threads` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListThreads {
    /// Only the conversations with this agent.
    #[serde(default)]
    #[param(max_length = 80)]
    agent_id: Option<String>,
    /// How many, 1 to 500 (default 100).
    #[serde(default)]
    #[param(minimum = 1, maximum = 500)]
    limit: Option<u32>,
    /// How many to skip (default 0; at most 1000).
    #[serde(default)]
    #[param(minimum = 0, maximum = 1000)]
    offset: Option<u32>,
}

/// `GET /api/chat/threads`: the caller's conversations, most recently updated first.
#[utoipa::path(
    get,
    path = "/api/chat/threads",
    operation_id = "list_chat_threads",
    tag = "chat",
    params(ListThreads),
    responses(
        (status = 200, description = "the caller's conversations", body = Vec<ThreadView>),
        (status = 400, description = "malformed query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 422, description = "`limit` or `offset` out of range", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ListThreads>,
) -> Result<Json<Vec<ThreadView>>, ApiError> {
    let store = state.store()?;
    let limit = query.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be 1 to 500"));
    }
    let offset = query.offset.unwrap_or(0);
    if offset > 1000 {
        return Err(ApiError::invalid("offset", "must be 0 to 1000"));
    }
    if query.agent_id.as_deref().is_some_and(|agent| agent.chars().count() > 80) {
        return Err(ApiError::invalid("agent_id", "is longer than 80 characters"));
    }
    let mut out = Vec::new();
    // Filtering by agent reads past the page until it is full (the list holds 1,000 at most).
    let (mut skip, mut from) = (offset as usize, 0);
    let want = limit as usize;
    while out.len() < want {
        let page = store.user_conversations(&who.uid, from, 100).await?;
        if page.is_empty() {
            break;
        }
        from += page.len();
        for conversation in page {
            if query.agent_id.as_deref().is_some_and(|agent| agent != conversation.agent_slug) {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            if out.len() < want {
                out.push(view(store, conversation).await?);
            }
        }
    }
    Ok(Json(out))
}

/// `PUT /api/chat/thread/{thread_id}` body (Yuxi's `ThreadUpdate`): what is given changes.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateThread {
    /// A new title (at most 200 characters).
    #[serde(default)]
    #[schema(max_length = 200)]
    pub title: Option<String>,
    /// Pin or unpin.
    #[serde(default)]
    pub is_pinned: Option<bool>,
    /// Accepted and not kept: a thread carries no approval mode of its own here (a run's start may
    /// name one).
    #[serde(default)]
    pub tool_approval_mode: Option<crate::resources::yuxi::YuxiApprovalMode>,
}

/// `PUT /api/chat/thread/{thread_id}`: retitles or pins one of the caller's conversations.
#[utoipa::path(
    put,
    path = "/api/chat/thread/{thread_id}",
    operation_id = "update_chat_thread",
    tag = "chat",
    params(("thread_id" = String, Path, description = "the thread id")),
    request_body = UpdateThread,
    responses(
        (status = 200, description = "the conversation after the change", body = ThreadView),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn update(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
    JsonBody(body): JsonBody<UpdateThread>,
) -> Result<Json<ThreadView>, ApiError> {
    let store = state.store()?;
    owned(store, &who, &thread_id).await?;
    let title = body.title.as_deref().map(checked_title).transpose()?;
    // Field by field, each in one store step: a run or the queue changing the conversation meanwhile
    // keeps its change.
    let changes =
        title.map(ConversationChange::Title).into_iter().chain(body.is_pinned.map(ConversationChange::Pinned));
    for change in changes {
        store.change_conversation(&thread_id, &change).await?;
    }
    Ok(Json(view(store, owned(store, &who, &thread_id).await?).await?))
}

/// The answer of `DELETE /api/chat/thread/{thread_id}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Deleted {
    /// What was done.
    pub message: String,
}

/// `DELETE /api/chat/thread/{thread_id}`: removes one of the caller's conversations and its messages
/// (409 `run_busy` while it has an unfinished run), and cancels the requests waiting in its queue. Its id
/// stays the caller's.
#[utoipa::path(
    delete,
    path = "/api/chat/thread/{thread_id}",
    operation_id = "delete_chat_thread",
    tag = "chat",
    params(("thread_id" = String, Path, description = "the thread id")),
    responses(
        (status = 200, description = "deleted", body = Deleted),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 409, description = "`run_busy`: the thread has an unfinished run", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn delete(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<Deleted>, ApiError> {
    let store = state.store()?;
    let conversation = owned(store, &who, &thread_id).await?;
    // The thread's lock names its unfinished run even when the conversation's `last_run_id` lags (a
    // retitle that read the conversation before a run started and wrote it after).
    let locked = store.thread_active_run(&thread_id).await?;
    for run in [locked, conversation.last_run_id.clone()].into_iter().flatten() {
        if let Some(record) = store.run_record(&run).await?
            && !record.status.is_terminal()
        {
            return Err(ApiError::RunBusy {
                thread_id,
                active_run_id: record.run_id,
                active_run_status: record.status.as_str().into(),
                agent_slug: record.agent_slug,
            });
        }
    }
    // What waits in its queue goes with it: a paused queue would otherwise go on once the conversation
    // (which holds the pause) is gone.
    for mut request in store.thread_requests(&thread_id, &conversation.uid).await? {
        if store.remove_request(&thread_id, &request.request_id).await? {
            request.status = crate::run::queue::RequestStatus::Cancelled;
            store.put_request(&request).await?;
        }
    }
    store.delete_conversation(&conversation).await?;
    Ok(Json(Deleted { message: format!("thread {thread_id:?} was deleted") }))
}

/// `POST /api/chat/thread/{thread_id}/viewed`: notes that the caller has seen the end of the latest
/// run (the sidebar's `ready` turns `done`).
#[utoipa::path(
    post,
    path = "/api/chat/thread/{thread_id}/viewed",
    operation_id = "mark_chat_thread_viewed",
    tag = "chat",
    params(("thread_id" = String, Path, description = "the thread id")),
    responses(
        (status = 200, description = "the conversation", body = ThreadView),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or another user's", body = ErrorBody),
        (status = 503, description = "the run store is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn viewed(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(thread_id): Path<String>,
) -> Result<Json<ThreadView>, ApiError> {
    let store = state.store()?;
    let mut conversation = owned(store, &who, &thread_id).await?;
    let last = match &conversation.last_run_id {
        Some(run) => store.run_record(run).await?,
        None => None,
    };
    if let Some(record) = last.filter(|r| r.status.is_terminal())
        && conversation.viewed_run_id.as_deref() != Some(record.run_id.as_str())
    {
        store.change_conversation(&thread_id, &ConversationChange::Viewed(record.run_id.clone())).await?;
        conversation.viewed_run_id = Some(record.run_id);
    }
    Ok(Json(view(store, conversation).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_trimmed_defaulted_and_bounded() {
        assert_eq!(checked_title("  hi ").expect("ok"), "hi");
        assert_eq!(checked_title("").expect("ok"), DEFAULT_TITLE);
        assert!(checked_title(&"字".repeat(201)).is_err());
    }
}
