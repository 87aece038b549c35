//! The A2A 1.0 shapes as JSON (the protocol's ProtoJSON: camelCase fields, enums by their full names
//! such as `TASK_STATE_WORKING`; the 0.3 spellings such as `working` are read too). Absent fields are
//! left out when written; unknown fields are ignored when read, as the protocol asks.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A task's state (`TaskState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    /// No state given.
    #[serde(rename = "TASK_STATE_UNSPECIFIED", alias = "unknown")]
    Unspecified,
    /// Accepted, not yet started.
    #[serde(rename = "TASK_STATE_SUBMITTED", alias = "submitted")]
    Submitted,
    /// Under way.
    #[serde(rename = "TASK_STATE_WORKING", alias = "working")]
    Working,
    /// Ended with an answer.
    #[serde(rename = "TASK_STATE_COMPLETED", alias = "completed")]
    Completed,
    /// Ended with an error.
    #[serde(rename = "TASK_STATE_FAILED", alias = "failed")]
    Failed,
    /// Stopped by a cancel.
    #[serde(rename = "TASK_STATE_CANCELED", alias = "canceled")]
    Canceled,
    /// Paused until the client sends the input it asks for.
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED", alias = "input-required")]
    InputRequired,
    /// Refused by the agent.
    #[serde(rename = "TASK_STATE_REJECTED", alias = "rejected")]
    Rejected,
    /// Paused until the client authenticates.
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED", alias = "auth-required")]
    AuthRequired,
}

impl TaskState {
    /// Whether the task has ended (completed, failed, canceled or rejected).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Canceled | Self::Rejected)
    }

    /// Whether the task waits for its client (input or authentication): a stream ends there too.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }
}

/// Who wrote a message (`Role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Not said.
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    /// The client.
    #[serde(rename = "ROLE_USER", alias = "user")]
    User,
    /// The agent.
    #[serde(rename = "ROLE_AGENT", alias = "agent")]
    Agent,
}

/// One piece of a message or an artifact: exactly one of `text`, `raw` (base64 bytes), `url` or
/// `data` (any JSON), with optional `filename` and `mediaType`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// Where the content is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Structured content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Data about the part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The file name of a file's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The content's media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part { text: Some(text.into()), ..Default::default() }
    }

    /// A structured part.
    pub fn data(data: Value) -> Part {
        Part { data: Some(data), ..Default::default() }
    }
}

/// A message of the client or the agent (`Message`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Its id, made by its writer.
    #[serde(default)]
    pub message_id: String,
    /// Its context (conversation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task it belongs to (a client's message continuing one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Who wrote it.
    pub role: Role,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Data about the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// Extensions it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Tasks it refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// An agent's message in a task.
    pub fn agent(message_id: String, task_id: &str, context_id: &str, parts: Vec<Part>) -> Message {
        Message {
            message_id,
            context_id: Some(context_id.to_string()),
            task_id: Some(task_id.to_string()),
            role: Role::Agent,
            parts,
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    /// The message's text parts, joined by blank lines.
    pub fn text(&self) -> String {
        self.parts.iter().filter_map(|p| p.text.as_deref()).collect::<Vec<_>>().join("\n\n")
    }
}

/// A task's state with its message and time (`TaskStatus`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// What the agent says about it (the question of an `input-required` task, the error of a failed one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// When the task reached it, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// Something a task made (`Artifact`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Its id, unique in the task.
    pub artifact_id: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its content.
    #[serde(default)]
    pub parts: Vec<Part>,
    /// Data about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A unit of work (`Task`): here, a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task id (the run id).
    pub id: String,
    /// Its context (the run's thread).
    #[serde(default)]
    pub context_id: String,
    /// Where it is.
    pub status: TaskStatus,
    /// What it made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// Its messages, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// Data about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// A change of a task's state, streamed (`TaskStatusUpdateEvent`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its context.
    #[serde(default)]
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
    /// Data about the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// An artifact made or extended, streamed (`TaskArtifactUpdateEvent`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    pub task_id: String,
    /// Its context.
    #[serde(default)]
    pub context_id: String,
    /// The artifact, or the parts added to it.
    pub artifact: Artifact,
    /// Whether the parts add to an artifact already sent.
    #[serde(default)]
    pub append: bool,
    /// Whether this is the artifact's last piece.
    #[serde(default)]
    pub last_chunk: bool,
    /// Data about the update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// One item of a stream, or the answer of `SendMessage` (which is a task or a message).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    /// The task as it is.
    Task(Task),
    /// A message with no task.
    Message(Message),
    /// A change of state.
    StatusUpdate(TaskStatusUpdateEvent),
    /// An artifact update.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// How a `SendMessage` is to be answered (`SendMessageConfiguration`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendConfiguration {
    /// The media types the client takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    /// The most history messages the answered task carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i64>,
    /// Answer at once with the task as it is, without waiting for it to end or pause.
    #[serde(default)]
    pub return_immediately: bool,
    /// A push notification configuration for the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_push_notification_config: Option<Value>,
}

/// `SendMessage` and `SendStreamingMessage` parameters (`SendMessageRequest`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    /// The message.
    pub message: Message,
    /// How to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendConfiguration>,
    /// Data about the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
}

/// `GetTask` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    /// The task.
    pub id: String,
    /// The most history messages to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i64>,
}

/// `CancelTask` and `SubscribeToTask` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdRequest {
    /// The task.
    pub id: String,
}

/// `ListTasks` parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    /// Only the tasks of this context.
    #[serde(default)]
    pub context_id: Option<String>,
    /// Only the tasks in this state.
    #[serde(default)]
    pub status: Option<TaskState>,
    /// Tasks per page, 1 to [`super::MAX_PAGE_SIZE`].
    #[serde(default)]
    pub page_size: Option<i64>,
    /// Where the page starts (the last answer's `nextPageToken`).
    #[serde(default)]
    pub page_token: Option<String>,
    /// The most history messages each task carries.
    #[serde(default)]
    pub history_length: Option<i64>,
    /// Only tasks whose status changed after this time, RFC 3339.
    #[serde(default)]
    pub status_timestamp_after: Option<String>,
    /// Whether the tasks carry their artifacts.
    #[serde(default)]
    pub include_artifacts: Option<bool>,
}

/// The answer of `ListTasks`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    /// The page's tasks, newest first.
    pub tasks: Vec<Task>,
    /// The token of the next page; empty on the last.
    pub next_page_token: String,
    /// The page size used.
    pub page_size: i64,
    /// How many tasks match in all.
    pub total_size: i64,
}
