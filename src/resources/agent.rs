//! The `Agent` custom resource (`agents.yuxi.dev/v1alpha1`).
//!
//! An Agent declares one agent of the Yuxi platform: its backend, its runtime context (model, tools,
//! knowledge bases, MCP servers, skills, system prompt), who may see and manage it, and, for main agents,
//! which subagents it may delegate to. A subagent is an Agent with `backend: SubAgentBackend` and
//! `isSubagent: true`; there is no second kind. `metadata.name` is the agent's slug.
//!
//! The single-object rules are carried twice, by design: as CEL `x-kubernetes-validations` in the CRD
//! (enforced by the API server even when the webhook is down) and in [`crate::resources::validation`]
//! (used by the webhook, the facade and the local mode, with precise field paths). A test keeps the two in
//! agreement over every example manifest.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{BACKEND_CHATBOT, BACKEND_SUBAGENT, GENERAL_PURPOSE};
use kube::core::ObjectMeta;

/// The desired state of an Agent.
// Each `printcolumn(...)` repeats the same keys, which clippy takes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "yuxi.dev",
    version = "v1alpha1",
    kind = "Agent",
    plural = "agents",
    singular = "agent",
    shortname = "ag",
    category = "yuxi",
    namespaced,
    status = "AgentStatus",
    doc = "An agent or subagent of the Yuxi platform: its backend, runtime context, sharing and (for main agents) the subagents it may delegate to. `metadata.name` is the agent's slug.",
    printcolumn(name = "Backend", type_ = "string", json_path = ".spec.backend", description = "The agent backend"),
    printcolumn(name = "Subagent", type_ = "boolean", json_path = ".spec.isSubagent", description = "Whether the agent is a subagent"),
    printcolumn(name = "Default", type_ = "boolean", json_path = ".spec.default", description = "Whether the agent is the namespace's default agent"),
    printcolumn(name = "Accepted", type_ = "string", json_path = ".status.conditions[?(@.type==\"Accepted\")].status", description = "Whether the spec is valid and its references resolve"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')")
        .message("an Agent's name is its slug and must be a DNS-1123 label (at most 63 lowercase letters, digits and '-')")
        .field_path(".metadata.name"),
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.isSubagent) || !self.isSubagent || self.backend == 'SubAgentBackend'")
        .message("true requires backend SubAgentBackend; an ordinary agent cannot pose as a subagent")
        .field_path(".isSubagent"),
    validation = Rule::new("!has(self.isSubagent) || self.isSubagent || self.backend != 'SubAgentBackend'")
        .message("backend SubAgentBackend requires isSubagent true (or omit it to derive it)")
        .field_path(".isSubagent"),
    validation = Rule::new("self.backend != 'SubAgentBackend' || !has(self.default) || !self.default")
        .message("a subagent cannot be the default agent")
        .field_path(".default"),
    validation = Rule::new("self.backend != 'SubAgentBackend' || !has(self.context) || !has(self.context.subagents)")
        .message("a subagent cannot configure subagents (no nesting)")
        .field_path(".context.subagents"),
    validation = Rule::new("!has(self.remote) || self.backend == 'SubAgentBackend'")
        .message("a remote agent is a subagent: backend SubAgentBackend")
        .field_path(".remote"),
)]
pub struct AgentSpec {
    /// Human-readable name shown in user interfaces (Yuxi `name`). Defaults to `metadata.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    pub display_name: Option<String>,

    /// What the agent is for. For a subagent this is what a parent's model reads when choosing whom to
    /// delegate to, so say when to use it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,

    /// The agent backend (Yuxi `backend_id`): `ChatbotAgent` for a main agent, `SubAgentBackend` for a
    /// subagent.
    #[schemars(extend("enum" = [BACKEND_CHATBOT, BACKEND_SUBAGENT]))]
    pub backend: String,

    /// Whether the agent is a subagent. Must be true exactly when `backend` is `SubAgentBackend`; when
    /// omitted, the mutating webhook derives it from `backend`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_subagent: Option<bool>,

    /// Whether this is the namespace's default agent. At most one Agent per namespace may be the default,
    /// and a subagent never is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,

    /// The runtime configuration: model, tools, knowledge bases, MCP servers, skills, system prompt and,
    /// for main agents, the subagent allowlist. Empty fields resolve from the system defaults at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<AgentContext>,

    /// Who may see and who may manage this agent (Yuxi `share_config`). Omitted: only the owner and
    /// administrators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<AgentShare>,

    /// The user id (uid) of the agent's owner, who may always manage it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub owner: Option<String>,

    /// The token budget of the runs of this agent that start a run tree (a run a user starts, or a
    /// delegation from a parent outside the system); a run that names its own budget uses that.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<super::RunBudget>,

    /// For a subagent that runs elsewhere: the remote agent its runs are sent to (an A2A agent), in
    /// place of a model of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<super::remote::AgentRemote>,

    /// How the agent's runs are given their sandbox pods in a cluster: its warm pool. Omitted: the
    /// namespace's default (its `yuxi-warm-pool` ConfigMap), else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<AgentSandbox>,
}

/// How an agent's runs get their sandbox pods (`spec.sandbox`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AgentSandbox {
    /// Idle sandbox pods kept ready for the runs of this agent, so a run starts in a running pod
    /// rather than waiting for a new one (docs/concepts/warm-pools.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_pool: Option<WarmPool>,
}

/// The most idle pods one warm pool keeps per scope.
pub const MAX_WARM_POOL_SIZE: i32 = 16;
/// The fewest and the most seconds an idle pod may wait for a run.
pub const WARM_POOL_IDLE_SECONDS: std::ops::RangeInclusive<i64> = 30..=3600;
/// How long an idle pod waits for a run when its pool does not say, in seconds.
pub const DEFAULT_WARM_POOL_IDLE_SECONDS: i64 = 300;

/// A warm pool: how many idle pods are kept ready per scope (an agent, a user and a conversation's
/// files, docs/concepts/warm-pools.md) and how long one waits for a run before it is removed.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WarmPool {
    /// Idle pods per scope, 0 (no pool) to 16.
    #[schemars(range(min = 0, max = 16))]
    pub size: i32,
    /// How long an idle pod waits for a run before it is removed, 30 to 3600 s; default 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 3600))]
    pub max_idle_seconds: Option<i64>,
}

impl WarmPool {
    /// How long an idle pod of this pool waits, in seconds.
    pub fn idle_seconds(&self) -> i64 {
        self.max_idle_seconds.unwrap_or(DEFAULT_WARM_POOL_IDLE_SECONDS)
    }
}

/// The runtime configuration of an agent (Yuxi `config_json.context`).
///
/// List semantics follow Yuxi: an absent `tools`, `knowledges`, `mcps` or `skills` list means everything
/// the user may use; an absent or empty `subagents` list means every subagent visible to the user, the
/// built-in `general-purpose` included.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentContext {
    /// The system prompt. Empty: the backend's default prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub system_prompt: Option<String>,

    /// The chat model: the name of a Model in the agent's namespace (`deepseek-chat`), or
    /// `<provider>/<model>` on the installation's own endpoint (`openai/gpt-4o-mini`, `scripted/echo`).
    /// Empty: the system's default model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub model: Option<String>,

    /// Names of the tools the agent may call. Absent: every tool the user may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub tools: Option<Vec<String>>,

    /// Names of the knowledge bases the agent may query. Absent: every knowledge base the user may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub knowledges: Option<Vec<String>>,

    /// Names of the MCP servers whose tools the agent may call. Absent: every MCP server the user may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub mcps: Option<Vec<String>>,

    /// Per MCP server, the only tools of it the agent may call (each entry a server and its tool
    /// names); a server not listed offers every tool it lists (less its own `tools` filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["server".into()]))]
    pub mcp_tools: Option<Vec<McpToolAllowlist>>,

    /// Names of the skills (folders with a `SKILL.md` in the skills library) projected into the agent's
    /// skills scope. Absent: every skill the user may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub skills: Option<Vec<String>>,

    /// Skills whose `SKILL.md` is put into the system prompt up front rather than read on demand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub preload_skills: Option<Vec<String>>,

    /// Slugs of the subagents this main agent may delegate to (its allowlist). Absent or empty: every
    /// subagent visible to the user, `general-purpose` included. Subagents cannot set this field.
    /// Entries that name no subagent in the namespace are admitted with a warning and never resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 63)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub subagents: Option<Vec<String>>,

    /// Which tools run without approval: `Default` pauses a main agent's run before `write_file`,
    /// `edit_file`, `execute` and the tools `approvalRequired` names until a person decides, and turns
    /// those three off for subagents (no person watches them); `AlwaysTrust` runs every granted tool
    /// (set by administrators). Absent: `Default`. A user's run may ask for its own mode (Yuxi's
    /// `tool_approval_mode` of a run): a stricter one always, a more trusting one unless
    /// `toolApprovalModeLocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_approval_mode: Option<ToolApprovalMode>,

    /// `true`: a user's run cannot be more trusting than `toolApprovalMode` (it may still be stricter);
    /// a run that asks keeps the agent's mode, and says so. Administrators set it, and their own runs
    /// may still choose. Absent: `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_approval_mode_locked: Option<bool>,

    /// More tools a person must approve in `Default` mode: tool names (of MCP servers, or built in), or
    /// `<server>/*` for every tool of the MCP server `<server>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 130)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub approval_required: Option<Vec<String>>,

    /// How long a paused run waits for a person's decisions, in seconds (60 to 604800, a week; default
    /// 86400); past it the run ends `failed` with reason `ApprovalTimeout`. The run's own deadline does
    /// not run while it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 604_800))]
    pub approval_timeout_seconds: Option<u32>,

    /// The most model-and-tools steps one run may take before it stops (Yuxi default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub max_execution_steps: Option<u32>,

    /// How many times a model call is retried on transient errors (429, 5xx, time-outs) (Yuxi default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10))]
    pub model_retry_times: Option<u32>,

    /// Yuxi's context summary: the context size, in thousands of tokens, past which older messages are
    /// summarised (Yuxi default 100). Kept for Yuxi clients; the runner does not summarise yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub summary_threshold: Option<u32>,

    /// Yuxi's context summary: how many recent messages are kept beside the summary (Yuxi default 10).
    /// Kept for Yuxi clients; the runner does not summarise yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000))]
    pub summary_keep_messages: Option<u32>,

    /// Yuxi's context summary: the prompt that asks for a summary; it must contain `{messages}`, where
    /// the messages to summarise go. Kept for Yuxi clients; the runner does not summarise yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 65536))]
    pub summary_prompt: Option<String>,

    /// Yuxi's context summary: tool results longer than this many tokens are cut to a preview when the
    /// history is summarised (Yuxi default 300). Kept for Yuxi clients; the runner does not summarise yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000))]
    pub summary_tool_result_token_limit: Option<u32>,

    /// Yuxi's context summary: the share of `summaryThreshold`, from 0.1 to 1, past which the second
    /// summary stage runs (Yuxi default 0.4). Kept for Yuxi clients; the runner does not summarise yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.1, max = 1.0))]
    pub summary_l2_trigger_ratio: Option<f64>,
}

/// Whether tools that write or execute need approval (Yuxi `tool_approval_mode`: `default`,
/// `always_trust`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolApprovalMode {
    // Subagents get no write_file, edit_file or execute.
    #[default]
    Default,
    // Every granted tool runs.
    AlwaysTrust,
}

/// Who may see and who may manage an agent (Yuxi `share_config` version 2).
///
/// The owner (`spec.owner`) and administrators may always manage. `manageScope` must lie within
/// `readScope`: whoever may manage may also read (see [`crate::resources::validation::scope_within`]).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(MANAGE_WITHIN_READ_RULE)
        .message("must lie within readScope: a Global read scope includes every scope; otherwise both scopes need the same accessLevel and manageScope may only list departments or users that readScope lists")
        .field_path(".manageScope"),
)]
pub struct AgentShare {
    /// Who may see and use the agent. Omitted: only the owner and administrators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_scope: Option<ShareScope>,

    /// Who may edit and delete the agent, beyond the owner and administrators. Omitted: nobody else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manage_scope: Option<ShareScope>,
}

/// The CEL form of [`crate::resources::validation::scope_within`] for `manageScope` in `readScope`.
const MANAGE_WITHIN_READ_RULE: &str = "!has(self.manageScope) || (has(self.readScope) && (self.readScope.accessLevel == 'Global' || (self.readScope.accessLevel == self.manageScope.accessLevel && (self.manageScope.accessLevel == 'Department' ? (!has(self.manageScope.departmentIds) || self.manageScope.departmentIds.all(d, has(self.readScope.departmentIds) && d in self.readScope.departmentIds)) : (!has(self.manageScope.userUids) || self.manageScope.userUids.all(u, has(self.readScope.userUids) && u in self.readScope.userUids))))))";

/// One share scope: everybody, members of some departments, or some users.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.accessLevel != 'Department' || (has(self.departmentIds) && size(self.departmentIds) > 0)")
        .message("a Department scope needs at least one department id")
        .field_path(".departmentIds"),
    validation = Rule::new("self.accessLevel != 'User' || (has(self.userUids) && size(self.userUids) > 0)")
        .message("a User scope needs at least one user uid")
        .field_path(".userUids"),
)]
pub struct ShareScope {
    /// `Global` (every user), `Department` (members of `departmentIds`) or `User` (the users in `userUids`).
    pub access_level: AccessLevel,

    /// The departments of a `Department` scope; at least one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub department_ids: Vec<i64>,

    /// The user uids of a `User` scope; at least one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub user_uids: Vec<String>,
}

/// The reach of a share scope (Yuxi `access_level`: `global`, `department`, `user`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessLevel {
    Global,
    Department,
    User,
}

/// The observed state of an Agent, written by the Agent reconciler.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// The `metadata.generation` the conditions were computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Accepted` (the spec is valid and its references resolve; the reason says why not) and `Ready`
    /// (the agent can run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

impl AgentSpec {
    /// The context, or an empty one when the spec has none.
    pub fn context(&self) -> std::borrow::Cow<'_, AgentContext> {
        match &self.context {
            Some(context) => std::borrow::Cow::Borrowed(context),
            None => std::borrow::Cow::Owned(AgentContext::default()),
        }
    }

    /// Whether `backend` names the subagent backend.
    pub fn has_subagent_backend(&self) -> bool {
        self.backend == BACKEND_SUBAGENT
    }

    /// `isSubagent` as set, or derived from `backend` when omitted (the mutating webhook's rule).
    pub fn is_subagent(&self) -> bool {
        self.is_subagent.unwrap_or_else(|| self.has_subagent_backend())
    }

    /// Whether the spec asks to be the namespace's default agent.
    pub fn is_default(&self) -> bool {
        self.default.unwrap_or(false)
    }
}

/// The built-in subagent: an empty context, resolved from the defaults at run time; everybody may use it.
pub fn builtin_general_purpose() -> Agent {
    let mut agent = Agent::new(
        GENERAL_PURPOSE,
        AgentSpec {
            display_name: Some("General purpose".into()),
            description: Some(
                "A general-purpose subagent for analysis, writing and file work; give it a self-contained task.".into(),
            ),
            backend: BACKEND_SUBAGENT.into(),
            is_subagent: Some(true),
            share: Some(AgentShare {
                read_scope: Some(ShareScope {
                    access_level: AccessLevel::Global,
                    department_ids: vec![],
                    user_uids: vec![],
                }),
                manage_scope: None,
            }),
            ..AgentSpec::default()
        },
    );
    agent.metadata = ObjectMeta { name: Some(GENERAL_PURPOSE.into()), ..ObjectMeta::default() };
    agent
}

/// The tools of one MCP server an agent may call (`context.mcpTools`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct McpToolAllowlist {
    /// The server, as `context.mcps` names it.
    #[schemars(length(min = 1, max = 128))]
    pub server: String,
    /// Its tools the agent may call; empty: none.
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub tools: Vec<String>,
}
