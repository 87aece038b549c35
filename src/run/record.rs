//! The run record: one per run (who started it, for which parent, in which thread, its status), what
//! creating one did, and the idempotency key of a start (Yuxi's request id). The run store keeps them and
//! the thread lock that allows one non-terminal run per thread.

use serde::{Deserialize, Serialize};

use super::status::RunStatus;
use crate::resources::ParentRef;

/// One run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunRecord {
    /// The run id.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The agent it runs.
    pub agent_slug: String,
    /// The user it runs for.
    pub uid: String,
    /// The delegating parent run, for a subagent run.
    pub parent: Option<ParentRef>,
    /// Where it is.
    pub status: RunStatus,
    /// Why it failed.
    pub error: Option<String>,
    /// When it was created, RFC 3339.
    pub created_at: String,
    /// What the client's start asked beyond the query (Yuxi's run request fields); empty for a
    /// subagent run and for records written before it existed.
    #[serde(default, skip_serializing_if = "RunRequest::is_empty")]
    pub request: RunRequest,
    /// The token budget of the run's tree ([`crate::run::budget`]), which its children inherit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    /// While the run waits for a person ([`RunStatus::Waiting`]): the calls and the deadline of the
    /// decisions. Stored as JSON text, as `meta` is.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "waiting_text")]
    pub waiting: Option<crate::run::approval::Waiting>,
    /// The decisions people made on the run's calls, oldest first, at most
    /// [`crate::run::approval::MAX_APPROVALS_KEPT`] (the oldest go first): what a conversation shows of
    /// its approvals once the run's events have expired. Stored as JSON text, as `meta` is.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "approvals_text")]
    pub approvals: Vec<crate::run::approval::ApprovalRecord>,
    /// When it ended, RFC 3339 (its `end` event's time); `None` until then, and for a run whose end
    /// was written before this was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The Kubernetes user who started the run's tree, when known: a facade writing as its callers
    /// creates the run's AgentRun (and its children's) as this user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(ignore)]
    pub principal: Option<crate::access::Principal>,
}

/// The approval records kept as their JSON text (a list is also read): Lua cannot tell an empty list
/// from an empty object.
mod approvals_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    use crate::run::approval::ApprovalRecord;

    pub fn serialize<S: Serializer>(records: &[ApprovalRecord], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&serde_json::to_string(records).map_err(serde::ser::Error::custom)?)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<ApprovalRecord>, D::Error> {
        match Option::<Value>::deserialize(deserializer)? {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::String(text)) => serde_json::from_str(&text).map_err(serde::de::Error::custom),
            Some(other) => serde_json::from_value(other).map_err(serde::de::Error::custom),
        }
    }
}

/// An optional [`crate::run::approval::Waiting`] kept as its JSON text (an object is also read).
mod waiting_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    use crate::run::approval::Waiting;

    pub fn serialize<S: Serializer>(waiting: &Option<Waiting>, serializer: S) -> Result<S::Ok, S::Error> {
        match waiting {
            Some(waiting) => {
                serializer.serialize_str(&serde_json::to_string(waiting).map_err(serde::ser::Error::custom)?)
            }
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Waiting>, D::Error> {
        match Option::<Value>::deserialize(deserializer)? {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => serde_json::from_str(&text).map(Some).map_err(serde::de::Error::custom),
            Some(other) => serde_json::from_value(other).map(Some).map_err(serde::de::Error::custom),
        }
    }
}

impl RunRecord {
    /// A run a user starts (no parent), `pending`, made now: `run_id` of `agent_slug` in `thread_id` for
    /// `who`, asking `request`, within `max_tokens`.
    pub fn started_by(
        who: &crate::access::Identity,
        run_id: String,
        thread_id: String,
        agent_slug: String,
        request: RunRequest,
        max_tokens: Option<i64>,
    ) -> RunRecord {
        RunRecord {
            run_id,
            thread_id,
            agent_slug,
            uid: who.uid.clone(),
            parent: None,
            status: RunStatus::Pending,
            error: None,
            created_at: jiff::Timestamp::now().to_string(),
            request,
            max_tokens,
            waiting: None,
            approvals: Vec::new(),
            ended_at: None,
            principal: who.principal.clone(),
        }
    }

    /// The root of the run's tree: its parent's root, or itself.
    pub fn root_run_id(&self) -> &str {
        self.parent.as_ref().map_or(&self.run_id, |p| p.root())
    }
}

/// The fields of Yuxi's `POST /api/agent/runs` that a run keeps: `request_id`, `meta`,
/// `created_by_run_id`, and the per-run overrides `model_spec` and `tool_approval_mode`. All optional;
/// the facade bounds them before they get here ([`MAX_META_BYTES`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunRequest {
    /// The client's request id (`meta.request_id`, or one the facade made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The client's `meta` object, as sent (at most [`MAX_META_BYTES`] of JSON). Stored as JSON text:
    /// the store's scripts rewrite records, and Lua cannot tell an empty list from an empty object.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty", with = "json_text")]
    #[schema(value_type = Object)]
    pub meta: serde_json::Map<String, serde_json::Value>,
    /// The run of the same thread this one follows from (Yuxi: the run a resume continues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by_run_id: Option<String>,
    /// The model (`<provider>/<model>`) that replaces the agent's for this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_spec: Option<String>,
    /// The approval mode that replaces the agent's for this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_approval_mode: Option<crate::resources::yuxi::YuxiApprovalMode>,
    /// The mode the start asked for when the run did not get it: the agent's mode is locked
    /// ([`crate::run::approval::run_mode`]), and the run keeps it (`tool_approval_mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_approval_mode_asked: Option<crate::resources::yuxi::YuxiApprovalMode>,
    /// The W3C `traceparent` the run's span is a child of ([`crate::run::trace`]): the starting
    /// request's, or the delegating tool call's for a subagent run; checked, or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The start of the run's input (the question of a chat run, the task of a subagent run), at most
    /// [`MAX_SUMMARY_CHARS`] characters, whitespace folded: what finds the run in a list of runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// A JSON object kept as its JSON text (an object is also read, as records written before were): what
/// the store's Lua scripts rewrite must not hold JSON that Lua cannot tell apart (`[]` from `{}`).
pub(crate) mod json_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::{Map, Value};

    pub fn serialize<S: Serializer>(map: &Map<String, Value>, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&Value::Object(map.clone()).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Map<String, Value>, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::String(text) => serde_json::from_str(&text).map_err(serde::de::Error::custom),
            Value::Object(map) => Ok(map),
            other => Err(serde::de::Error::custom(format!("meta: {other} is not an object"))),
        }
    }
}

/// The most bytes a run's `meta` takes as JSON (16 KiB): it is stored with the run and returned with it.
pub const MAX_META_BYTES: usize = 16 * 1024;

/// The most characters of a run's input its [`RunRequest::summary`] keeps.
pub const MAX_SUMMARY_CHARS: usize = 200;

impl RunRequest {
    /// Whether nothing was asked beyond the query.
    pub fn is_empty(&self) -> bool {
        *self == RunRequest::default()
    }

    /// The request with its summary made from `input`: whitespace folded to single spaces, cut at
    /// [`MAX_SUMMARY_CHARS`] characters (with `…` when cut); none for a blank input.
    pub fn summarized(self, input: &str) -> RunRequest {
        let (start, cut) = folded_start(input, MAX_SUMMARY_CHARS);
        let summary = match (start.is_empty(), cut) {
            (true, _) => None,
            (false, true) => Some(format!("{start}…")),
            (false, false) => Some(start),
        };
        RunRequest { summary, ..self }
    }
}

/// The first `max_chars` characters of `text` with its whitespace folded to single spaces, and whether
/// more followed: a one-line start of a question (a run's summary, a conversation's title).
pub fn folded_start(text: &str, max_chars: usize) -> (String, bool) {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match folded.char_indices().nth(max_chars) {
        Some((cut, _)) => (folded[..cut].to_string(), true),
        None => (folded, false),
    }
}

/// What creating a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Created {
    /// A new run was recorded and holds its thread.
    Started,
    /// The same tool call already started this run.
    Existing(String),
    /// The thread already has this non-terminal run.
    Busy(String),
    /// A limit of unfinished runs is reached; nothing was recorded.
    Limited(RunLimit),
}

/// Which limit of unfinished runs stopped a start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunLimit {
    /// The user's own ([`RunLimits::per_user`]).
    PerUser,
    /// Everyone's together ([`RunLimits::total`]).
    Total,
}

/// How many unfinished runs (pending, running, cancel requested) the store admits: per user, and in
/// total. Checked in the same step that records a run, so a burst cannot overshoot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// Unfinished runs of one user at most (`--max-runs-per-user`; default 20).
    pub per_user: usize,
    /// Unfinished runs of all users at most (`--max-runs`; default 200).
    pub total: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self { per_user: 20, total: 200 }
    }
}

/// The idempotency key of a start: the caller's uid, the parent run, the thread scope and the parent's
/// tool call (Yuxi: request id = hash(creator_run:child_thread:tool_call_id), with the caller added so
/// that a retry finds only the caller's own run), as a hex SHA-256 digest.
pub fn start_key(uid: &str, parent_run_id: &str, thread_scope: &str, tool_call_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in [uid, parent_run_id, thread_scope, tool_call_id] {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
