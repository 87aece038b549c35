//! The context fields an agent accepts, described for Yuxi's web client (`configurable_items` on an
//! agent's detail answer), and the two rules about them the facade enforces beyond validation: only
//! administrators change the admin-only ones (Yuxi's `auth: admin` fields), and the fields this system
//! keeps but does not apply are reported as such (`not_applied`) instead of refused.
//!
//! Yuxi's client renders each item by `kind` (`llm`: the model picker; `prompt`: a prompt editor; `tools`,
//! `knowledges`, `mcps`, `skills`, `subagents`: a multi-select of `options`, `null` meaning "all"), or
//! else by `type` (`string` with `options`: a select; `number`; `list`), and fills an absent value with
//! `default` before it saves the whole context back (web/src/stores/agent.js).

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::access::{Identity, Permission, Role, permission};
use crate::facade::http::error::ApiError;
use crate::facade::services::agent_views::{referenced, skills_of, used_by};
use crate::facade::services::state::FacadeState;
use crate::resources::tools::builtin_tools;
use crate::resources::yuxi::YuxiContext;
use crate::resources::{Agent, AgentContext};
use crate::run::inputs::{DEFAULT_MAX_STEPS, DEFAULT_MODEL_RETRIES};

/// One context field as Yuxi's client reads it.
#[derive(Clone, Debug, Serialize)]
pub struct ConfigurableItem {
    /// `string`, `number` or `list`.
    #[serde(rename = "type")]
    pub kind_of_value: &'static str,
    /// The label shown.
    pub name: &'static str,
    /// The choices: `{key, name, description}` objects (a select for a `string`, the items of a list).
    pub options: Vec<FieldOption>,
    /// The value the client fills in when the agent has none; `null` for "unset" (lists: everything).
    pub default: Value,
    /// What the field does, with its bounds.
    pub description: String,
    /// How the client renders it: `llm`, `prompt`, `tools`, `knowledges`, `mcps`, `skills`,
    /// `subagents`, or empty.
    pub kind: &'static str,
    /// `admin` for the admin-only fields (Yuxi's spelling), else empty.
    pub auth: &'static str,
    /// Whether only administrators may change it.
    pub admin_only: bool,
    /// Whether this system's runner applies it; a field kept but not applied is listed in an agent's
    /// `not_applied` when set.
    pub applied: bool,
}

/// One choice of a [`ConfigurableItem`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldOption {
    /// The value saved.
    pub key: String,
    /// The label shown.
    pub name: String,
    /// What it is.
    pub description: String,
}

impl FieldOption {
    /// A choice.
    pub fn new(key: impl Into<String>, name: impl Into<String>, description: impl Into<String>) -> Self {
        FieldOption { key: key.into(), name: name.into(), description: description.into() }
    }
}

/// The choices of the resource lists, for the caller (filled by the handler from what the caller may
/// see).
#[derive(Clone, Debug, Default)]
pub struct ResourceOptions {
    /// Built-in tools.
    pub tools: Vec<FieldOption>,
    /// Knowledge bases.
    pub knowledges: Vec<FieldOption>,
    /// MCP servers.
    pub mcps: Vec<FieldOption>,
    /// Skills.
    pub skills: Vec<FieldOption>,
    /// Subagents.
    pub subagents: Vec<FieldOption>,
}

/// The items of one agent, in the order the client shows them: a JSON object keyed by the context
/// field's Yuxi name.
#[derive(Clone, Debug, Default)]
pub struct ConfigurableItems(pub Vec<(&'static str, ConfigurableItem)>);

impl Serialize for ConfigurableItems {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, item) in &self.0 {
            map.serialize_entry(key, item)?;
        }
        map.end()
    }
}

/// The context fields only administrators change (Yuxi's `auth: admin`).
pub const ADMIN_ONLY: [&str; 9] = [
    "tool_approval_mode",
    "tool_approval_mode_locked",
    "summary_threshold",
    "summary_keep_messages",
    "summary_prompt",
    "summary_tool_result_token_limit",
    "summary_l2_trigger_ratio",
    "max_execution_steps",
    "model_retry_times",
];

/// The context fields kept but not applied by the runner: Yuxi's context summary (this runner does not
/// summarise).
pub const NOT_APPLIED: [&str; 5] = [
    "summary_threshold",
    "summary_keep_messages",
    "summary_prompt",
    "summary_tool_result_token_limit",
    "summary_l2_trigger_ratio",
];

const NOT_APPLIED_NOTE: &str = " Kept for Yuxi clients; this system does not apply it yet.";

/// The items of an agent for `who`: every context field the facade accepts for its kind (a subagent has
/// no `subagents`), the admin-only ones only for administrators (as Yuxi's client expects), the lists'
/// options from `resources`.
pub fn configurable_items(who: &Identity, is_subagent: bool, resources: ResourceOptions) -> ConfigurableItems {
    let item = |kind_of_value, name, kind, default: Value, description: String, key: &str| ConfigurableItem {
        kind_of_value,
        name,
        options: Vec::new(),
        default,
        description: if NOT_APPLIED.contains(&key) { format!("{description}{NOT_APPLIED_NOTE}") } else { description },
        kind,
        auth: if ADMIN_ONLY.contains(&key) { "admin" } else { "" },
        admin_only: ADMIN_ONLY.contains(&key),
        applied: !NOT_APPLIED.contains(&key),
    };
    let with = |mut item: ConfigurableItem, options: Vec<FieldOption>| {
        item.options = options;
        item
    };
    let mut items: Vec<(&'static str, ConfigurableItem)> = vec![
        ("system_prompt", item("string", "System prompt", "prompt", Value::Null, "The agent's role and behaviour; empty for the backend's default prompt (at most 65536 characters).".into(), "system_prompt")),
        ("model", item("string", "Model", "llm", Value::from(""), "The chat model as <provider>/<model>; empty for the system's default model (at most 256 characters).".into(), "model")),
        ("tool_approval_mode", with(item("string", "Tool approval mode", "", Value::from("default"), "Whether sensitive tools (write_file, edit_file, execute and those of approval_required) need a person's approval: a main agent's run pauses before them; a subagent in default mode goes without write_file, edit_file and execute.".into(), "tool_approval_mode"), vec![
            FieldOption::new("default", "Default", "Sensitive tools need approval"),
            FieldOption::new("always_trust", "Always trust", "Every granted tool runs without approval"),
        ])),
        ("tool_approval_mode_locked", item("bool", "Lock the approval mode", "", Value::Bool(false), "Whether users' runs must keep tool_approval_mode rather than trust more (a stricter run is always allowed; administrators may still choose).".into(), "tool_approval_mode_locked")),
        ("approval_required", item("list", "Tools needing approval", "tools", Value::Null, "More tools a person must approve in default mode: tool names, <server>/<tool> for one tool of an MCP server, or <server>/* for all of them (at most 256).".into(), "approval_required")),
        ("approval_timeout_seconds", item("number", "Approval time-out (seconds)", "", Value::from(crate::run::approval::DEFAULT_APPROVAL_TIMEOUT_SECONDS), "How long a paused run waits for a person's decisions before it ends (60..604800; default 86400).".into(), "approval_timeout_seconds")),
        ("tools", with(item("list", "Tools", "tools", Value::Null, "The built-in tools the agent may call; null for all of them (at most 256).".into(), "tools"), resources.tools)),
        ("knowledges", with(item("list", "Knowledge bases", "knowledges", Value::Null, "The knowledge bases the agent may search; null for all the user may read (at most 256).".into(), "knowledges"), resources.knowledges)),
        ("mcps", with(item("list", "MCP servers", "mcps", Value::Null, "The MCP servers whose tools the agent may call; null for every configured server (at most 256).".into(), "mcps"), resources.mcps)),
        ("mcp_tools", item("object", "MCP tools", "mcps", Value::Null, "Per MCP server, the only tools of it the agent may call, as {server: [tool, ...]}; a server not named offers every tool (at most 64 servers, 256 tools each).".into(), "mcp_tools")),
        ("skills", with(item("list", "Skills", "skills", Value::Null, "The skills projected into the agent's skills folder; null for all (at most 256).".into(), "skills"), resources.skills.clone())),
        ("preload_skills", with(item("list", "Preloaded skills", "skills", Value::Array(vec![]), "Skills whose SKILL.md goes into the system prompt up front (at most 256).".into(), "preload_skills"), resources.skills)),
        ("summary_threshold", item("number", "Summary threshold (K tokens)", "", Value::Null, "The context size, in thousands of tokens, past which older messages are summarised (1..10000; Yuxi's default 100).".into(), "summary_threshold")),
        ("summary_keep_messages", item("number", "Messages kept after a summary", "", Value::Null, "How many recent messages are kept beside the summary (0..1000; Yuxi's default 10).".into(), "summary_keep_messages")),
        ("summary_prompt", item("string", "Summary prompt", "prompt", Value::Null, "The prompt that asks for a summary; it must contain {messages} (at most 65536 characters).".into(), "summary_prompt")),
        ("summary_tool_result_token_limit", item("number", "Summary tool result token limit", "", Value::Null, "Tool results longer than this many tokens are cut to a preview when summarising (1..1000000; Yuxi's default 300).".into(), "summary_tool_result_token_limit")),
        ("summary_l2_trigger_ratio", item("number", "Second summary stage ratio", "", Value::Null, "The share of the summary threshold past which the second summary stage runs (0.1..1.0; Yuxi's default 0.4).".into(), "summary_l2_trigger_ratio")),
        ("max_execution_steps", item("number", "Most execution steps", "", Value::from(DEFAULT_MAX_STEPS), format!("The most model-and-tools steps one run may take (1..10000; default {DEFAULT_MAX_STEPS})."), "max_execution_steps")),
        ("model_retry_times", item("number", "Model retries", "", Value::from(DEFAULT_MODEL_RETRIES), format!("How many times a failed model call is retried (0..10; default {DEFAULT_MODEL_RETRIES})."), "model_retry_times")),
    ];
    if !is_subagent {
        items.push(("subagents", with(item("list", "Subagents", "subagents", Value::Null, "The subagents this agent may delegate to; null or empty for every subagent the user may see (at most 256).".into(), "subagents"), resources.subagents)));
    }
    if who.role < Role::Admin {
        items.retain(|(key, _)| !ADMIN_ONLY.contains(key));
    }
    ConfigurableItems(items)
}

/// `context` in Yuxi's spelling, as a JSON object.
fn fields_of(context: &AgentContext) -> Map<String, Value> {
    match serde_json::to_value(YuxiContext::from(context)) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// The context a write saves, for `who`: `new` as sent, except that an admin-only field a
/// non-administrator leaves out keeps its stored value (`old`), so a Yuxi client that never shows a user
/// those fields does not clear them. Errors: 403 naming `config_json.context.<field>` when a
/// non-administrator sends an admin-only field with a value other than the stored one.
pub fn guard_admin_fields(
    who: &Identity,
    old: Option<&AgentContext>,
    new: AgentContext,
) -> Result<AgentContext, ApiError> {
    if who.role >= Role::Admin {
        return Ok(new);
    }
    let before = old.map(fields_of).unwrap_or_default();
    let mut after = fields_of(&new);
    for field in ADMIN_ONLY {
        match (after.get(field), before.get(field)) {
            (None, Some(kept)) => {
                after.insert(field.to_string(), kept.clone());
            }
            (Some(sent), kept) if Some(sent) != kept => {
                return Err(ApiError::Forbidden(format!(
                    "config_json.context.{field}: only administrators may change this field"
                )));
            }
            _ => {}
        }
    }
    let merged: YuxiContext = serde_json::from_value(Value::Object(after))
        .map_err(|e| ApiError::invalid("config_json.context", e.to_string()))?;
    Ok(AgentContext::from(&merged))
}

/// The context fields `context` sets that the runner does not apply ([`NOT_APPLIED`]), in Yuxi's
/// spelling.
pub fn not_applied(context: &AgentContext) -> Vec<&'static str> {
    let fields = fields_of(context);
    NOT_APPLIED.into_iter().filter(|field| fields.get(*field).is_some_and(|v| !v.is_null())).collect()
}

/// The MCP servers `who` may use ([`crate::facade::services::mcp_servers::usable`]), as the options of
/// `configurable_items`' `mcps`; none when they cannot be read.
pub async fn mcp_options(state: &FacadeState, who: &Identity) -> Vec<FieldOption> {
    match crate::facade::services::mcp_servers::usable(state, who).await {
        Ok(found) => found
            .into_iter()
            .map(|server| FieldOption::new(server.name.clone(), server.name.clone(), server.description()))
            .collect(),
        Err(err) => {
            tracing::warn!(error = %err, "cannot list the MCP servers for an agent's options");
            Vec::new()
        }
    }
}

/// The knowledge bases `who` may read, as the options of `configurable_items`' `knowledges`; none when
/// this facade serves none or they cannot be read.
pub async fn knowledge_options(state: &FacadeState, who: &Identity) -> Vec<FieldOption> {
    let Some(knowledge) = state.knowledge.as_ref() else { return Vec::new() };
    let all = match knowledge.catalog.all().await {
        Ok(all) => all,
        Err(err) => {
            tracing::warn!(error = %err, "cannot list the knowledge bases for an agent's options");
            return Vec::new();
        }
    };
    all.iter()
        .filter(|kb| crate::access::knowledge_permission(who, kb) >= Permission::Read)
        .map(|kb| {
            let name = kb.spec.display_name.clone().unwrap_or_else(|| kb.name_any());
            FieldOption::new(kb.name_any(), name, kb.spec.description.clone().unwrap_or_default())
        })
        .collect()
}

/// The options of the resource lists in an agent's `configurable_items`, for `who`: the built-in tools,
/// the skills `who`'s agents reference, the subagents `who` may see (the knowledge bases are
/// [`knowledge_options`], the MCP servers [`mcp_options`]).
pub fn resource_options(all: &[Agent], who: &Identity) -> ResourceOptions {
    let options = |found: BTreeMap<String, Vec<String>>| -> Vec<FieldOption> {
        found.into_iter().map(|(name, agents)| FieldOption::new(name.clone(), name, used_by(&agents))).collect()
    };
    ResourceOptions {
        tools: builtin_tools().into_iter().map(|t| FieldOption::new(t.name, t.name, t.description)).collect(),
        knowledges: Vec::new(),
        mcps: Vec::new(),
        skills: options(referenced(all, who, skills_of)),
        subagents: all
            .iter()
            .filter(|a| a.spec.is_subagent() && permission(who, a) >= Permission::Read)
            .map(|a| {
                let name = a.spec.display_name.clone().unwrap_or_else(|| a.name_any());
                FieldOption::new(a.name_any(), name, a.spec.description.clone().unwrap_or_default())
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(role: Role) -> Identity {
        Identity::new("u", role, None)
    }

    #[test]
    fn non_admins_see_no_admin_only_items_and_subagents_no_subagents() {
        let keys = |items: ConfigurableItems| items.0.iter().map(|(k, _)| *k).collect::<Vec<_>>();
        let user = keys(configurable_items(&who(Role::User), false, ResourceOptions::default()));
        assert!(user.iter().all(|k| !ADMIN_ONLY.contains(k)), "{user:?}");
        assert!(user.contains(&"subagents"));
        let admin = keys(configurable_items(&who(Role::Admin), true, ResourceOptions::default()));
        assert!(ADMIN_ONLY.iter().all(|k| admin.contains(k)), "{admin:?}");
        assert!(!admin.contains(&"subagents"));
    }

    #[test]
    fn every_yuxi_context_field_is_described() {
        let items = configurable_items(&who(Role::Admin), false, ResourceOptions::default());
        let mut described: Vec<&str> = items.0.iter().map(|(k, _)| *k).collect();
        described.sort();
        let full = AgentContext {
            system_prompt: Some("p".into()),
            model: Some("m".into()),
            tools: Some(vec![]),
            knowledges: Some(vec![]),
            mcps: Some(vec![]),
            mcp_tools: Some(vec![]),
            skills: Some(vec![]),
            preload_skills: Some(vec![]),
            subagents: Some(vec![]),
            tool_approval_mode: Some(crate::resources::ToolApprovalMode::Default),
            tool_approval_mode_locked: Some(true),
            approval_required: Some(vec![]),
            approval_timeout_seconds: Some(60),
            max_execution_steps: Some(1),
            model_retry_times: Some(1),
            summary_threshold: Some(1),
            summary_keep_messages: Some(1),
            summary_prompt: Some("{messages}".into()),
            summary_tool_result_token_limit: Some(1),
            summary_l2_trigger_ratio: Some(0.5),
        };
        let mut accepted: Vec<String> = fields_of(&full).keys().cloned().collect();
        accepted.sort();
        assert_eq!(described, accepted);
    }

    #[test]
    fn a_non_admin_keeps_admin_fields_it_leaves_out_and_cannot_change_them() {
        let old = AgentContext { max_execution_steps: Some(50), ..AgentContext::default() };
        let kept = guard_admin_fields(&who(Role::User), Some(&old), AgentContext::default()).expect("kept");
        assert_eq!(kept.max_execution_steps, Some(50));
        let same = AgentContext { max_execution_steps: Some(50), ..AgentContext::default() };
        assert!(guard_admin_fields(&who(Role::User), Some(&old), same).is_ok(), "an unchanged value is no change");
        let changed = AgentContext { max_execution_steps: Some(51), ..AgentContext::default() };
        let err = guard_admin_fields(&who(Role::User), Some(&old), changed.clone()).expect_err("refused");
        assert!(matches!(&err, ApiError::Forbidden(m) if m.starts_with("config_json.context.max_execution_steps")));
        assert_eq!(
            guard_admin_fields(&who(Role::Admin), Some(&old), changed).expect("admin").max_execution_steps,
            Some(51)
        );
    }

    #[test]
    fn fields_kept_but_not_applied_are_reported() {
        let context =
            AgentContext { summary_threshold: Some(100), max_execution_steps: Some(10), ..AgentContext::default() };
        assert_eq!(not_applied(&context), ["summary_threshold"]);
        assert!(not_applied(&AgentContext::default()).is_empty());
    }
}
