//! The Yuxi JSON shape of an agent (the facade's `/api/agent`), and the one mapping between it and the
//! Agent resource (docs/concepts/agents.md). Yuxi spells fields in snake_case and enum values in lowercase
//! (`always_trust`, `department`); the resource follows Kubernetes conventions (`AlwaysTrust`,
//! `Department`).

use serde::{Deserialize, Serialize};

use super::{AccessLevel, AgentContext, AgentShare, ShareScope, ToolApprovalMode};

/// `config_json.context` as Yuxi spells it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct YuxiContext {
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// `<provider>/<model>`; empty for the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Granted tools; absent for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Knowledge bases; absent for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledges: Option<Vec<String>>,
    /// MCP servers; absent for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcps: Option<Vec<String>>,
    /// Per MCP server, the only tools of it the agent may call; a server not in it offers all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_tools: Option<std::collections::BTreeMap<String, Vec<String>>>,
    /// Skills; absent for all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<String>>,
    /// Skills put into the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preload_skills: Option<Vec<String>>,
    /// The subagent allowlist; absent or empty for all visible subagents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagents: Option<Vec<String>>,
    /// `default` or `always_trust`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_approval_mode: Option<YuxiApprovalMode>,
    /// Whether a user's run may be more trusting than `tool_approval_mode` (`toolApprovalModeLocked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_approval_mode_locked: Option<bool>,
    /// More tools a person must approve (`approvalRequired`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_required: Option<Vec<String>>,
    /// How long a paused run waits for decisions, in seconds (`approvalTimeoutSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_timeout_seconds: Option<u32>,
    /// The step limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_execution_steps: Option<u32>,
    /// Model call retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_retry_times: Option<u32>,
    /// Summary threshold, in thousands of tokens (kept, not applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_threshold: Option<u32>,
    /// Messages kept beside a summary (kept, not applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_keep_messages: Option<u32>,
    /// The summary prompt, with `{messages}` (kept, not applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_prompt: Option<String>,
    /// Tool results past this many tokens are cut when summarising (kept, not applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_tool_result_token_limit: Option<u32>,
    /// The share of the threshold that starts the second summary stage (kept, not applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_l2_trigger_ratio: Option<f64>,
}

impl From<ToolApprovalMode> for YuxiApprovalMode {
    fn from(mode: ToolApprovalMode) -> Self {
        match mode {
            ToolApprovalMode::Default => YuxiApprovalMode::Default,
            ToolApprovalMode::AlwaysTrust => YuxiApprovalMode::AlwaysTrust,
        }
    }
}

impl From<YuxiApprovalMode> for ToolApprovalMode {
    fn from(mode: YuxiApprovalMode) -> Self {
        match mode {
            YuxiApprovalMode::Default => ToolApprovalMode::Default,
            YuxiApprovalMode::AlwaysTrust => ToolApprovalMode::AlwaysTrust,
        }
    }
}

/// Yuxi's `tool_approval_mode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum YuxiApprovalMode {
    /// `default`.
    Default,
    /// `always_trust`.
    AlwaysTrust,
}

/// `config_json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct YuxiConfig {
    /// The runtime context.
    #[serde(default)]
    pub context: YuxiContext,
}

/// One share scope as Yuxi spells it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct YuxiScope {
    /// `global`, `department` or `user`.
    pub access_level: YuxiAccessLevel,
    /// Departments of a `department` scope. A number with a zero fraction (`29.0`) is the integer it
    /// equals, as JSON Schema's `integer` counts it.
    #[serde(default, deserialize_with = "integral_ids")]
    pub department_ids: Vec<i64>,
    /// Users of a `user` scope.
    #[serde(default)]
    pub user_uids: Vec<String>,
}

/// A list of integers, each written as an integer or as a number with a zero fraction. Errors: a
/// fraction, or a number outside the 64-bit range.
fn integral_ids<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<i64>, D::Error> {
    let numbers = Vec::<serde_json::Number>::deserialize(deserializer)?;
    numbers
        .iter()
        .map(|n| {
            n.as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18).map(|f| f as i64))
                .ok_or_else(|| serde::de::Error::custom(format!("{n} is not a 64-bit integer")))
        })
        .collect()
}

/// Yuxi's `access_level` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum YuxiAccessLevel {
    /// Everybody.
    Global,
    /// Members of some departments.
    Department,
    /// Some users.
    User,
}

/// `share_config` (version 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct YuxiShare {
    /// Always 2 (any other is read as 2).
    #[serde(default = "share_version")]
    #[schema(value_type = u64, maximum = 4_294_967_295_u64)]
    pub version: u32,
    /// Who may read; null for the owner only.
    #[serde(default)]
    pub read_scope: Option<YuxiScope>,
    /// Who may manage; null for the owner only.
    #[serde(default)]
    pub manage_scope: Option<YuxiScope>,
}

fn share_version() -> u32 {
    2
}

impl From<&AgentContext> for YuxiContext {
    fn from(c: &AgentContext) -> Self {
        YuxiContext {
            system_prompt: c.system_prompt.clone(),
            model: c.model.clone(),
            tools: c.tools.clone(),
            knowledges: c.knowledges.clone(),
            mcps: c.mcps.clone(),
            mcp_tools: c
                .mcp_tools
                .as_ref()
                .map(|entries| entries.iter().map(|e| (e.server.clone(), e.tools.clone())).collect()),
            skills: c.skills.clone(),
            preload_skills: c.preload_skills.clone(),
            subagents: c.subagents.clone(),
            tool_approval_mode: c.tool_approval_mode.map(YuxiApprovalMode::from),
            tool_approval_mode_locked: c.tool_approval_mode_locked,
            approval_required: c.approval_required.clone(),
            approval_timeout_seconds: c.approval_timeout_seconds,
            max_execution_steps: c.max_execution_steps,
            model_retry_times: c.model_retry_times,
            summary_threshold: c.summary_threshold,
            summary_keep_messages: c.summary_keep_messages,
            summary_prompt: c.summary_prompt.clone(),
            summary_tool_result_token_limit: c.summary_tool_result_token_limit,
            summary_l2_trigger_ratio: c.summary_l2_trigger_ratio,
        }
    }
}

impl From<&YuxiContext> for AgentContext {
    fn from(c: &YuxiContext) -> Self {
        AgentContext {
            system_prompt: c.system_prompt.clone(),
            model: c.model.clone(),
            tools: c.tools.clone(),
            knowledges: c.knowledges.clone(),
            mcps: c.mcps.clone(),
            mcp_tools: c.mcp_tools.as_ref().map(|by_server| {
                by_server
                    .iter()
                    .map(|(server, tools)| super::agent::McpToolAllowlist {
                        server: server.clone(),
                        tools: tools.clone(),
                    })
                    .collect()
            }),
            skills: c.skills.clone(),
            preload_skills: c.preload_skills.clone(),
            subagents: c.subagents.clone(),
            tool_approval_mode: c.tool_approval_mode.map(ToolApprovalMode::from),
            tool_approval_mode_locked: c.tool_approval_mode_locked,
            approval_required: c.approval_required.clone(),
            approval_timeout_seconds: c.approval_timeout_seconds,
            max_execution_steps: c.max_execution_steps,
            model_retry_times: c.model_retry_times,
            summary_threshold: c.summary_threshold,
            summary_keep_messages: c.summary_keep_messages,
            summary_prompt: c.summary_prompt.clone(),
            summary_tool_result_token_limit: c.summary_tool_result_token_limit,
            summary_l2_trigger_ratio: c.summary_l2_trigger_ratio,
        }
    }
}

impl From<&ShareScope> for YuxiScope {
    fn from(s: &ShareScope) -> Self {
        YuxiScope {
            access_level: match s.access_level {
                AccessLevel::Global => YuxiAccessLevel::Global,
                AccessLevel::Department => YuxiAccessLevel::Department,
                AccessLevel::User => YuxiAccessLevel::User,
            },
            department_ids: s.department_ids.clone(),
            user_uids: s.user_uids.clone(),
        }
    }
}

impl From<&YuxiScope> for ShareScope {
    fn from(s: &YuxiScope) -> Self {
        ShareScope {
            access_level: match s.access_level {
                YuxiAccessLevel::Global => AccessLevel::Global,
                YuxiAccessLevel::Department => AccessLevel::Department,
                YuxiAccessLevel::User => AccessLevel::User,
            },
            department_ids: s.department_ids.clone(),
            user_uids: s.user_uids.clone(),
        }
    }
}

impl From<&AgentShare> for YuxiShare {
    fn from(s: &AgentShare) -> Self {
        YuxiShare {
            version: 2,
            read_scope: s.read_scope.as_ref().map(Into::into),
            manage_scope: s.manage_scope.as_ref().map(Into::into),
        }
    }
}

impl From<&YuxiShare> for AgentShare {
    fn from(s: &YuxiShare) -> Self {
        AgentShare {
            read_scope: s.read_scope.as_ref().map(Into::into),
            manage_scope: s.manage_scope.as_ref().map(Into::into),
        }
    }
}

/// An agent as `/api/agent` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct YuxiAgent {
    /// `metadata.name`.
    pub slug: String,
    /// `spec.displayName`, or the slug.
    pub name: String,
    /// `spec.description`.
    pub description: String,
    /// `spec.backend`.
    pub backend_id: String,
    /// `spec.isSubagent`, derived from the backend when unset.
    pub is_subagent: bool,
    /// `spec.default`.
    pub is_default: bool,
    /// `{context: spec.context}`.
    pub config_json: YuxiConfig,
    /// `spec.share`.
    pub share_config: YuxiShare,
    /// `spec.owner`.
    pub created_by: Option<String>,
    /// The icon (a URL or a data URL), from the annotation [`super::names::ICON_ANNOTATION`].
    pub icon: Option<String>,
    /// Pictures (URLs), from the annotation [`super::names::PICS_ANNOTATION`] (a JSON list); empty when
    /// it is absent or not a list of strings.
    pub pics: Vec<String>,
    /// When the agent was created (RFC 3339): `metadata.creationTimestamp`, else the annotation
    /// [`super::names::CREATED_AT_ANNOTATION`] the local mode writes.
    pub created_at: Option<String>,
    /// When the facade last changed it (RFC 3339), from [`super::names::UPDATED_AT_ANNOTATION`].
    pub updated_at: Option<String>,
    /// Who last changed it through the facade (a uid), from [`super::names::UPDATED_BY_ANNOTATION`].
    pub updated_by: Option<String>,
}

impl YuxiAgent {
    /// The Yuxi view of `agent`.
    pub fn from_agent(agent: &super::Agent) -> Self {
        let spec = &agent.spec;
        let slug = kube::ResourceExt::name_any(agent);
        let annotation = |key: &str| kube::ResourceExt::annotations(agent).get(key).cloned();
        YuxiAgent {
            name: spec.display_name.clone().unwrap_or_else(|| slug.clone()),
            slug,
            description: spec.description.clone().unwrap_or_default(),
            backend_id: spec.backend.clone(),
            is_subagent: spec.is_subagent(),
            is_default: spec.is_default(),
            config_json: YuxiConfig { context: YuxiContext::from(spec.context().as_ref()) },
            share_config: spec.share.as_ref().map(YuxiShare::from).unwrap_or(YuxiShare {
                version: 2,
                read_scope: None,
                manage_scope: None,
            }),
            created_by: spec.owner.clone(),
            icon: annotation(super::names::ICON_ANNOTATION),
            pics: annotation(super::names::PICS_ANNOTATION)
                .and_then(|text| serde_json::from_str(&text).ok())
                .unwrap_or_default(),
            created_at: agent
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .or_else(|| annotation(super::names::CREATED_AT_ANNOTATION)),
            updated_at: annotation(super::names::UPDATED_AT_ANNOTATION),
            updated_by: annotation(super::names::UPDATED_BY_ANNOTATION),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn department_ids_written_as_integral_numbers_are_integers_and_fractions_are_refused() {
        let scope = |ids: &str| {
            serde_json::from_str::<YuxiScope>(&format!(r#"{{"access_level": "department", "department_ids": {ids}}}"#))
        };
        assert_eq!(scope("[1, 29.0, -3.0]").expect("integral").department_ids, [1, 29, -3]);
        let refused = scope("[2.5]").expect_err("a fraction").to_string();
        assert!(refused.contains("2.5 is not a 64-bit integer"), "{refused}");
        assert!(scope("[1e300]").is_err());
    }

    #[test]
    fn context_and_share_round_trip_between_the_two_spellings() {
        let yuxi: YuxiContext = serde_json::from_value(serde_json::json!({
            "system_prompt": "p", "model": "openai/m", "tools": ["ls"], "subagents": ["x"],
            "tool_approval_mode": "always_trust", "max_execution_steps": 5, "model_retry_times": 1
        }))
        .expect("Yuxi context");
        let context = AgentContext::from(&yuxi);
        assert_eq!(context.tool_approval_mode, Some(ToolApprovalMode::AlwaysTrust));
        assert_eq!(YuxiContext::from(&context), yuxi);

        let share: YuxiShare = serde_json::from_value(serde_json::json!({
            "version": 2, "read_scope": {"access_level": "department", "department_ids": [1]}, "manage_scope": null
        }))
        .expect("share");
        let agent_share = AgentShare::from(&share);
        assert_eq!(agent_share.read_scope.as_ref().map(|s| s.access_level), Some(AccessLevel::Department));
        assert_eq!(YuxiShare::from(&agent_share), share);
    }

    #[test]
    fn unknown_fields_are_refused() {
        let err = serde_json::from_value::<YuxiContext>(serde_json::json!({"tool": ["ls"]})).expect_err("unknown");
        assert!(err.to_string().contains("unknown field `tool`"), "{err}");
    }
}
