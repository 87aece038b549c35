//! The delegation tools' wire contract: the request bodies the facade accepts and the answers it gives,
//! shared by the facade (which serves them) and the runner's client (which sends and reads them). JSON
//! in Yuxi's snake_case; unknown request fields are refused, naming the field.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::run::{EventKind, RunStatus};

/// How a start found its run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartStatus {
    /// A new run was started.
    Started,
    /// A retried tool call found the run the first call started.
    Existing,
}

/// The status of a start refused because the thread has an unfinished run: always `busy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Busy {
    /// `busy`.
    Busy,
}

/// The status of an answer that has no other: always `ok`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnswerOk {
    /// `ok`.
    Ok,
}

/// What a progress message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProgressKind {
    /// The text of one assistant message, its deltas joined.
    AssistantMessage,
    /// A tool call: `name(arguments)`.
    ToolCall,
}

/// The run's event stream, as the facade serves it: `/api/agent/runs/<run_id>/events`.
pub fn events_url(run_id: &str) -> String {
    format!("/api/agent/runs/{run_id}/events")
}

/// The run's result, as the facade serves it: `/api/agent/runs/<run_id>/result`.
pub fn result_url(run_id: &str) -> String {
    format!("/api/agent/runs/{run_id}/result")
}

/// The calling parent, as every tool body names it. A run this system started calls with its own
/// credentials; then only `tool_call_id` is read, the rest comes from the credentials (and may be left
/// out). Any other caller gives `agent`, `run_id` and `thread_id`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Parent {
    /// The parent agent's slug.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The parent run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The parent conversation's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The conversation whose uploads and outputs the child shares; the parent's thread when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_thread_id: Option<String>,
    /// The parent model's tool call; a retried call with the same id finds the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// [`Parent`] in a `subagent_start` or `task` body, as the OpenAPI document states it for a caller with a
/// user's token, who names the parent: `agent`, `run_id` and `thread_id` are required (422 naming the one
/// missing). A run calling with its own credentials sends `tool_call_id` alone. For the document only:
/// the body's `parent` is read as a [`Parent`].
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartParent {
    /// The parent agent's slug (a DNS-1123 label).
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63)]
    pub agent: String,
    /// The parent run (letters, digits, `.`, `_`, `-`, starting with a letter or digit).
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 253)]
    pub run_id: String,
    /// The parent conversation's thread (an id as `run_id`, short enough for its children's ids).
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 176)]
    pub thread_id: String,
    /// The conversation whose uploads and outputs the child shares; the parent's thread when absent.
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 253)]
    pub file_thread_id: Option<String>,
    /// The parent model's tool call; a retried call with the same id finds the same run.
    #[schema(min_length = 1, max_length = 256)]
    pub tool_call_id: Option<String>,
}

/// [`Parent`] in the body of a run-id tool, as the OpenAPI document states it for a caller with a user's
/// token: `run_id` is required (422 when missing), the other fields are read from no caller. A run
/// calling with its own credentials may leave `parent` out. For the document only.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunParent {
    /// Not read.
    pub agent: Option<String>,
    /// The parent run that started the run asked about.
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 253)]
    pub run_id: String,
    /// Not read.
    pub thread_id: Option<String>,
    /// Not read.
    pub file_thread_id: Option<String>,
    /// Not read.
    pub tool_call_id: Option<String>,
}

/// `subagent_start` and `task`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// The calling parent.
    #[serde(default)]
    #[schema(value_type = StartParent, required = true)]
    pub parent: Parent,
    /// The task, self-contained: the subagent sees nothing else of the conversation (not blank, at most
    /// 262,144 characters).
    #[schema(pattern = "\\S", max_length = 262_144)]
    pub description: String,
    /// The subagent, one of the parent's allowlist (422 naming the allowed ones otherwise).
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63)]
    pub subagent_slug: String,
    /// Continue this child thread (made earlier for the same parent thread and subagent:
    /// `<parent thread>_sub_<subagent>_<8 hex digits>`).
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*_sub_[a-z0-9]([-a-z0-9]*[a-z0-9])?_[0-9a-f]{8}$", max_length = 253)]
    pub thread_id: Option<String>,
    /// `task` only: how long to wait, in seconds (1..1800, default 1800).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1800)]
    pub timeout_seconds: Option<u64>,
}

/// The run-id tools.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    /// The calling parent.
    #[serde(default)]
    #[schema(value_type = RunParent, required = true)]
    pub parent: Parent,
    /// A run this parent run started.
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 253)]
    pub run_id: String,
    /// `subagent_await` only: how long to wait, in seconds (1..1800, default 1800).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1800)]
    pub timeout_seconds: Option<u64>,
}

/// The answer of `subagent_start`: the run started or found, or the thread busy with another run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum StartAnswer {
    /// `started` or `existing`.
    Run(StartedRun),
    /// `busy`.
    Busy(BusyThread),
}

/// A run `subagent_start` started, or found for a retried tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StartedRun {
    /// `started` or `existing`.
    pub status: StartStatus,
    /// The run.
    pub run_id: String,
    /// The child thread.
    pub thread_id: String,
    /// The subagent.
    pub subagent_slug: String,
    /// The subagent's display name.
    pub subagent_name: String,
    /// The parent run.
    pub created_by_run_id: String,
    /// The run's status.
    pub run_status: RunStatus,
    /// Whether an existing child thread is continued.
    pub continuing: bool,
    /// Where the run's events stream: `/api/agent/runs/<run_id>/events`.
    #[serde(default)]
    pub events_url: String,
    /// Where its result is read once it ends: `/api/agent/runs/<run_id>/result`.
    #[serde(default)]
    pub result_url: String,
}

/// The thread already has an unfinished run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BusyThread {
    /// `busy`.
    pub status: Busy,
    /// The thread.
    pub thread_id: String,
    /// Its unfinished run.
    pub active_run_id: String,
    /// That run's status.
    pub active_run_status: RunStatus,
    /// What to do.
    pub message: String,
}

/// One readable progress message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ProgressMessage {
    /// The stream id of its last event.
    pub seq: String,
    /// `assistant_message` or `tool_call`.
    pub kind: ProgressKind,
    /// The message's or tool call's id.
    pub message_id: Value,
    /// Its text, cut to its last 800 characters.
    pub content: String,
}

/// The latest readable messages of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// The stream id of the run's last event (`0-0` before any).
    pub last_seq: String,
    /// The last 3 readable messages, oldest first.
    pub messages: Vec<ProgressMessage>,
}

/// A run as `subagent_status` and `subagent_await` show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Snapshot {
    /// The run's status.
    pub status: RunStatus,
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The subagent.
    pub subagent_slug: String,
    /// Why it failed.
    pub error: Option<String>,
    /// Its latest messages.
    pub progress: Progress,
    /// Where the run's events stream: `/api/agent/runs/<run_id>/events`.
    #[serde(default)]
    pub events_url: String,
    /// Where its result is read once it ends: `/api/agent/runs/<run_id>/result`.
    #[serde(default)]
    pub result_url: String,
    /// The final answer, once the run has ended (`null` when it ended without one); absent before.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub result: Option<Value>,
    /// `subagent_await`: `true` when the wait ended before the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_timed_out: Option<bool>,
    /// `subagent_await`: what to do when the wait timed out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The answer of `subagent_cancel` and of a run's cancel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CancelAnswer {
    /// `cancelled` (a pending run), `cancel_requested` (a running one), or the status of an ended one.
    pub status: RunStatus,
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// Where the run's events stream: `/api/agent/runs/<run_id>/events`.
    #[serde(default)]
    pub events_url: String,
    /// Where its result is read once it ends: `/api/agent/runs/<run_id>/result`.
    #[serde(default)]
    pub result_url: String,
}

impl CancelAnswer {
    /// The answer for `record` after its cancel.
    pub fn of(record: crate::run::RunRecord) -> CancelAnswer {
        CancelAnswer {
            status: record.status,
            events_url: events_url(&record.run_id),
            result_url: result_url(&record.run_id),
            run_id: record.run_id,
            thread_id: record.thread_id,
        }
    }
}

/// One event as `subagent_events` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventItem {
    /// The stream id within its run: the cursor for `after_seq` (with `tree`, `cursor` is).
    pub seq: String,
    /// With `tree`: the run whose event it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// With `tree`: the run that started that run (absent for the run asked about).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<String>,
    /// With `tree`: the tool call of the parent run that started that run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<String>,
    /// With `tree`: the tree cursor after this event, to resume from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// `metadata`, `messages`, `custom`, `error` or `end`.
    pub event: EventKind,
    /// The event's data.
    pub payload: Value,
    /// When it was written, RFC 3339.
    pub created_at: String,
}

/// The answer of `subagent_events`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventsAnswer {
    /// `ok`.
    pub status: AnswerOk,
    /// The run.
    pub run_id: String,
    /// The cursor asked for.
    pub after_seq: String,
    /// The cursor to ask for next: the last event's stream id, or `after_seq` when none came.
    pub last_seq: String,
    /// At most `limit` events, in stream order.
    pub events: Vec<EventItem>,
}

/// The answer of `task`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskAnswer {
    /// What the parent's model reads: `> 子智能体线程 ID: <thread_id>` then `---` then the final text, the
    /// error, or how to follow a run still going.
    pub content: String,
    /// The run (the thread's unfinished run when it is busy).
    pub run_id: String,
    /// The child thread.
    pub thread_id: String,
    /// The run's status, or `busy`.
    pub status: String,
    /// The final text, when the run completed with one.
    pub result: Option<String>,
}

/// The answer of `GET /api/tools`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolsAnswer {
    /// The agent.
    pub agent: String,
    /// The subagents it may call for the caller.
    pub subagents: Vec<String>,
    /// The tools' OpenAI function schemas; empty when it may call none.
    pub tools: Vec<Value>,
    /// The system-prompt section listing the subagents; `null` when there are none.
    pub prompt: Option<String>,
}
/// `subagent_events`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsBody {
    /// The calling parent.
    #[serde(default)]
    #[schema(value_type = RunParent, required = true)]
    pub parent: Parent,
    /// A run this parent run started.
    #[schema(pattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 253)]
    pub run_id: String,
    /// Events after this stream id (`0-0`, the default, for all): `<milliseconds>-<sequence>`, each a
    /// 64-bit unsigned number (the document allows up to 19 digits, which always fit).
    #[serde(default = "start_of_stream")]
    #[schema(default = "0-0", pattern = "^[0-9]{1,19}-[0-9]{1,19}$")]
    pub after_seq: String,
    /// At most this many events, 1..50.
    #[serde(default = "default_limit")]
    #[schema(default = 20, minimum = 1, maximum = 50)]
    pub limit: usize,
    /// Also the events of every run it started, and theirs; `after_seq` and `last_seq` are then tree
    /// cursors ([`super::tree`]; `0-0` starts at the beginning of every run).
    #[serde(default)]
    pub tree: bool,
}

/// `subagent_wait_any`: wait until the first of `run_ids` ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitAnyBody {
    /// The calling parent.
    #[serde(default)]
    #[schema(value_type = RunParent, required = true)]
    pub parent: Parent,
    /// Runs this parent run started, 1 to 50.
    #[schema(min_items = 1, max_items = 50)]
    pub run_ids: Vec<String>,
    /// How long to wait, 0..1800 seconds (0: answer at once); 1800 when absent.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1800)]
    pub timeout_seconds: Option<u64>,
}

/// A run found ended by `subagent_wait_any`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunEnded {
    /// The run.
    pub run_id: String,
    /// Its terminal status.
    pub status: RunStatus,
    /// Its subagent.
    pub subagent_slug: String,
}

/// The answer of `subagent_wait_any`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WaitAnyAnswer {
    /// `ok`.
    pub status: AnswerOk,
    /// The run that ended first (of those found ended, the first in `run_ids`), with its result; `null`
    /// when the wait ended before any.
    pub run: Option<Snapshot>,
    /// Every run of `run_ids` that has ended, in the order given, with how it ended.
    pub ended: Vec<RunEnded>,
    /// The runs still going, in the order given.
    pub pending: Vec<String>,
    /// `true` when the wait ended before any run did.
    pub wait_timed_out: bool,
}

fn start_of_stream() -> String {
    "0-0".into()
}

fn default_limit() -> usize {
    super::DEFAULT_EVENTS_LIMIT
}

/// Whether `seq` is a stream id, `<milliseconds>-<sequence>`.
pub fn is_stream_id(seq: &str) -> bool {
    seq.split_once('-').is_some_and(|(ms, n)| {
        [ms, n]
            .iter()
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && part.parse::<u64>().is_ok())
    })
}
