//! The `AgentRun` custom resource (`agentruns.yuxi.dev/v1alpha1`).
//!
//! One AgentRun is one execution of one Agent: a delegation from a parent agent (the `task` and
//! `subagent_start` tools) or a run a user started. Its reconciler runs the agent's graph in a sandboxed
//! pod and records the outcome in `status`. The spec is immutable after creation except `cancel`, which
//! may only go from false to true.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bounds of `spec.timeoutSeconds`, in seconds (one second to one day).
pub const TIMEOUT_SECONDS_RANGE: std::ops::RangeInclusive<i64> = 1..=86_400;

/// The desired state of an AgentRun.
// Each `printcolumn(...)` repeats the same keys, which clippy takes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "yuxi.dev",
    version = "v1alpha1",
    kind = "AgentRun",
    plural = "agentruns",
    singular = "agentrun",
    shortname = "ar",
    category = "yuxi",
    namespaced,
    status = "AgentRunStatus",
    doc = "One execution of one Agent: a delegation from a parent agent (`task`, `subagent_start`) or a run a user started. The spec is immutable after creation, except `cancel`.",
    printcolumn(name = "Agent", type_ = "string", json_path = ".spec.agent", description = "The agent that runs"),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Where the run is in its lifecycle"
    ),
    printcolumn(
        name = "Thread",
        type_ = "string",
        json_path = ".spec.threadId",
        description = "The conversation thread the run belongs to"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = immutable("agent"),
    validation = immutable("input"),
    validation = immutable("threadId"),
    validation = immutable("parent"),
    validation = immutable("uid"),
    validation = immutable("timeoutSeconds"),
    validation = immutable("ttlSecondsAfterFinished"),
    validation = immutable("model"),
    validation = immutable("budget"),
    validation = Rule::new("!has(oldSelf.cancel) || !oldSelf.cancel || (has(self.cancel) && self.cancel)")
        .message("a requested cancel cannot be withdrawn")
        .field_path(".cancel")
        .reason(kube::core::Reason::FieldValueForbidden),
    validation = Rule::new("!has(self.parent) || !has(self.threadId) || (self.threadId.startsWith(self.parent.threadId + '_sub_' + self.agent + '_') && size(self.threadId) == size(self.parent.threadId) + size(self.agent) + 14 && self.threadId.matches('_[0-9a-f]{8}$'))")
        .message("a child run's thread id must be <parent.threadId>_sub_<agent>_<8 hex digits>")
        .field_path(".threadId"),
)]
pub struct AgentRunSpec {
    /// The slug (`metadata.name`) of the Agent to run, in the run's namespace.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub agent: String,

    /// The task: the user message the run starts from (the `description` of a `task` call).
    #[schemars(length(min = 1, max = 262144))]
    pub input: String,

    /// The conversation thread. For a child run: `<parent.threadId>_sub_<agent>_<8 hex digits>`; reusing
    /// an earlier child thread continues that conversation. Omitted: the run gets a new thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub thread_id: Option<String>,

    /// The parent run that delegated this one; absent for a run a user started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentRef>,

    /// The user (uid) on whose behalf the run executes; it decides the workspace and what is visible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub uid: Option<String>,

    /// How long the run may take, in seconds (1 to 86400). Omitted: the controller's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: Option<i64>,

    /// Set to true to cancel the run. The only field that may change after creation, and only to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<bool>,

    /// How long a finished run is kept, in seconds, before it is deleted. Omitted: kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i64>,

    /// A model that overrides the agent's for this run only: a Model's name, or `<provider>/<model>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub model: Option<String>,

    /// The token budget of the run's tree: this run and every run it starts, and theirs, share it; the
    /// run that would go past it stops with reason `BudgetExceeded`, and its children with it. A child
    /// started through the facade carries its tree's budget. Omitted: the Agent's `spec.budget` for a
    /// run without a parent, else no budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<RunBudget>,
}

/// The most `maxTokens` a budget may set (10^12).
pub const MAX_BUDGET_TOKENS: i64 = 1_000_000_000_000;

/// A token budget.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunBudget {
    /// The most tokens (prompt and completion, summed over every model call of the tree), 1 to 10^12.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000_000_000i64))]
    pub max_tokens: Option<i64>,

    /// The most the tree's model calls may cost, priced by their Models (runs on models without a
    /// price count nothing); reached, the tree stops as at `maxTokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<CostAmount>,
}

/// An amount of money.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CostAmount {
    /// The ISO 4217 code of its currency (`USD`, `CNY`): a Model's `pricing.currency`.
    #[schemars(length(min = 3, max = 3), regex(pattern = r"^[A-Z]{3}$"))]
    pub currency: String,
    /// The amount, a decimal of at most 6 integer and 12 fractional digits (`"1.5"`, `"0.001580"`).
    #[schemars(length(min = 1, max = 19), regex(pattern = r"^(0|[1-9][0-9]{0,5})(\.[0-9]{1,12})?$"))]
    pub amount: String,
}

/// The CEL transition rule that keeps the spec field `field` as it was: present in both with equal values,
/// or absent from both (a plain `self.f == oldSelf.f` would miss the field being added or removed).
fn immutable(field: &str) -> kube::core::Rule {
    kube::core::Rule::new(format!(
        "has(self.{field}) == has(oldSelf.{field}) && (!has(self.{field}) || self.{field} == oldSelf.{field})"
    ))
    .message("is immutable after creation; create a new AgentRun instead (only cancel may change)")
    .field_path(format!(".{field}"))
    .reason(kube::core::Reason::FieldValueForbidden)
}

/// The parent run of a delegated run: who delegated, from which conversation, with which tool call.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParentRef {
    /// The parent run's id (the name of its AgentRun, or the external run id of a parent outside the
    /// cluster).
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub run_id: String,

    /// The parent conversation's thread id (at most 176 characters, so its child thread ids fit 253).
    #[schemars(length(min = 1, max = 176), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub thread_id: String,

    /// The parent agent's slug.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub agent: String,

    /// The parent conversation's file scope, whose uploads and outputs the child shares. Omitted: the
    /// parent's `threadId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub file_thread_id: Option<String>,

    /// The id of the tool call that started this run; a retried call with the same id returns this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub tool_call_id: Option<String>,

    /// The root of the run tree this run belongs to, whose token budget and usage it shares. Omitted:
    /// `runId` (the parent is the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"))]
    pub root_run_id: Option<String>,
}

impl ParentRef {
    /// The root of the run tree a child of this parent belongs to.
    pub fn root(&self) -> &str {
        self.root_run_id.as_deref().unwrap_or(&self.run_id)
    }
}

/// Where a run is in its lifecycle. `Completed`, `Failed`, `Cancelled` and `Interrupted` are terminal.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AgentRunPhase {
    Pending,
    Running,
    CancelRequested,
    /// Paused for a person's approval of a tool call; no pod runs it (reason `ApprovalRequired`).
    Waiting,
    Completed,
    Failed,
    Cancelled,
    Interrupted,
}

impl AgentRunPhase {
    /// Whether the run has ended and will not change phase again.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled | Self::Interrupted)
    }
}

/// Tokens the run's model calls used, summed over the run.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    /// Tokens sent to the model, those read from the provider's prompt cache included.
    pub prompt_tokens: i64,
    /// Tokens the model produced, reasoning tokens included.
    pub completion_tokens: i64,
    /// `promptTokens + completionTokens`.
    pub total_tokens: i64,
    /// Of `promptTokens`, those the provider read from its prompt cache (priced at the Model's
    /// `cachedInputPerMillion`); 0 when the provider reports none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_prompt_tokens: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The observed state of an AgentRun, written by its reconciler.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentRunStatus {
    /// `Pending`, `Running`, `CancelRequested`; terminal: `Completed`, `Failed`, `Cancelled`,
    /// `Interrupted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentRunPhase>,

    /// A CamelCase word saying why the run is in its phase (for example `DeadlineExceeded`,
    /// `AgentNotFound`, `OOMKilled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// A human-readable explanation of the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// The `metadata.generation` the status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Conditions of the run, keyed by `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// The name of the sandbox pod that runs (or ran) the graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,

    /// When the run started executing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the run reached its terminal phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// The final assistant text, cut to its first 32768 characters; the whole text is in the run's
    /// history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,

    /// The id of the last event written to the run's Redis stream (the `after_seq` cursor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event_seq: Option<String>,

    /// How many sandbox pods were started for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i32>,

    /// Tokens the run's model calls used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<TokenUsage>,

    /// On the root of a run tree: the tokens the whole tree used, this run's and every descendant's,
    /// as counted when the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_token_usage: Option<TokenUsage>,

    /// On the root of a run tree: what the whole tree's model calls cost, priced by their Models, one
    /// amount per currency.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tree_cost: Vec<CostAmount>,

    /// While the run waits for a person (phase `Waiting`): the calls waiting and when the decisions are
    /// due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_approval: Option<PendingApproval>,
}

/// The calls a waiting run asks a person about.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    /// The calls, by tool call id and tool.
    pub tool_calls: Vec<PendingCall>,
    /// When the decisions are due (RFC 3339); past it the run fails with reason `ApprovalTimeout`.
    pub expires_at: String,
}

/// One call waiting for a person.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    /// The model's tool call id.
    pub tool_call_id: String,
    /// The tool.
    pub name: String,
}

impl AgentRunSpec {
    /// Whether cancellation was requested.
    pub fn is_cancel_requested(&self) -> bool {
        self.cancel.unwrap_or(false)
    }
}
