//! How `/api/agent` shows an agent (Yuxi's item: the agent's fields, the caller's rights, and on a
//! detail answer the `configurable_items` of [`super::config`]), and the item fields kept as
//! annotations on the Agent: `icon`, `pics`, and when and by whom the facade last changed it.

use kube::ResourceExt;
use kube::core::ObjectMeta;
use serde::Serialize;

use super::config::{
    ConfigurableItems, configurable_items, knowledge_options, mcp_options, not_applied, resource_options,
};
use crate::access::{Identity, Permission, permission};
use crate::facade::http::error::ApiError;
use crate::facade::services::catalog::Fixed;
use crate::facade::services::state::FacadeState;
use crate::resources::names::{
    CREATED_AT_ANNOTATION, ICON_ANNOTATION, PICS_ANNOTATION, UPDATED_AT_ANNOTATION, UPDATED_BY_ANNOTATION,
};
use crate::resources::yuxi::YuxiAgent;
use crate::resources::{Agent, GENERAL_PURPOSE};

/// The longest `icon`, in characters (a URL, or a small data URL).
pub const MAX_ICON_CHARS: usize = 16 * 1024;
/// The most `pics`.
pub const MAX_PICS: usize = 16;
/// The longest entry of `pics`, in characters.
pub const MAX_PIC_CHARS: usize = 2048;

/// An agent as the caller sees it: the Yuxi fields plus the caller's rights.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AgentView {
    #[serde(flatten)]
    agent: YuxiAgent,
    /// Whether the caller may edit and delete it: the caller manages it and it is not fixed
    /// (`read_only_because`).
    can_manage: bool,
    /// Why nobody may change it through the API, whatever their rights: `built_in` or `manifest_file`
    /// (the local mode's; [`super::catalog::Catalog::fixed`]); absent when only the caller's rights
    /// matter.
    #[serde(skip_serializing_if = "Option::is_none")]
    read_only_because: Option<Fixed>,
    /// `read` or `manage`.
    effective_permission: Permission,
    /// Whether it is the built-in `general-purpose`.
    is_builtin: bool,
    /// Whether its sharing is fixed (Yuxi: the built-in agents').
    permission_locked: bool,
    /// What the backend offers the client beyond chat (Yuxi's `file_upload`, `files`): `file_upload` for
    /// a main agent where this facade keeps attachments ([`super::attachments`], the local mode); never
    /// `files`, since the facade serves no file panel routes.
    capabilities: Vec<String>,
    /// The context fields it sets that this system keeps but does not apply (Yuxi spelling, such as
    /// `summary_threshold`).
    not_applied: Vec<&'static str>,
    /// On detail answers only: every context field the facade accepts, keyed by name
    /// ([`super::agent_config`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    configurable_items: Option<ConfigurableItems>,
    /// The Agent's `Accepted` and `Ready` conditions, as the controller wrote them (in a cluster);
    /// absent when it has none, as in the local mode.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    conditions: Vec<AgentCondition>,
}

/// One condition of an Agent's status, as the agent items show it.
#[derive(Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct AgentCondition {
    /// `Accepted` or `Ready`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, in one word.
    pub reason: String,
    /// Why, in words.
    pub message: String,
}

/// The `Accepted` and `Ready` conditions of `agent`'s status, in its order.
fn conditions(agent: &Agent) -> Vec<AgentCondition> {
    let Some(status) = &agent.status else { return Vec::new() };
    status
        .conditions
        .iter()
        .filter(|c| c.type_ == "Accepted" || c.type_ == "Ready")
        .map(|c| AgentCondition {
            kind: c.type_.clone(),
            status: c.status.clone(),
            reason: c.reason.clone(),
            message: c.message.clone(),
        })
        .collect()
}

/// A detail answer (Yuxi's `GET`, `POST`, `PUT /api/agent[/{slug}]`, `GET /api/agent/default`,
/// `POST /api/agent/{slug}/set_default`): `{agent: <item>}`, which Yuxi's client reads as
/// `response.agent`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AgentAnswer {
    /// The agent, with its `configurable_items`.
    pub agent: AgentView,
}

/// The list item of `agent` for `who` (no `configurable_items`); `uploads` when this facade keeps
/// attachments; `fixed` when the catalog allows no change of it
/// ([`crate::facade::services::catalog::Catalog::fixed`]).
pub fn view(agent: &Agent, who: &Identity, uploads: bool, fixed: Option<Fixed>) -> AgentView {
    let effective = permission(who, agent);
    let builtin = agent.name_any() == GENERAL_PURPOSE;
    AgentView {
        agent: YuxiAgent::from_agent(agent),
        can_manage: effective == Permission::Manage && fixed.is_none(),
        read_only_because: fixed,
        effective_permission: effective,
        is_builtin: builtin,
        permission_locked: builtin,
        capabilities: if uploads && !agent.spec.is_subagent() { vec!["file_upload".into()] } else { Vec::new() },
        not_applied: not_applied(agent.spec.context().as_ref()),
        configurable_items: None,
        conditions: conditions(agent),
    }
}

/// The detail answer of `agent` for `who`, the list options from the agents `all` that `who` may see;
/// `uploads` when this facade keeps attachments.
pub async fn detail(state: &FacadeState, agent: &Agent, who: &Identity, all: &[Agent]) -> AgentAnswer {
    let mut shown = view(agent, who, state.keeps_files(), state.agents.fixed(&agent.name_any()));
    let mut options = resource_options(all, who);
    options.knowledges = knowledge_options(state, who).await;
    options.mcps = mcp_options(state, who).await;
    shown.configurable_items = Some(configurable_items(who, agent.spec.is_subagent(), options));
    AgentAnswer { agent: shown }
}

/// Sets the `icon` annotation (`Some(None)` removes it) and the `pics` annotation (an empty list removes
/// it) on `meta`. Errors: 422 naming `icon`, `pics` or `pics[i]` past [`MAX_ICON_CHARS`], [`MAX_PICS`]
/// or [`MAX_PIC_CHARS`].
pub fn set_pictures(
    meta: &mut ObjectMeta,
    icon: Option<Option<String>>,
    pics: Option<Vec<String>>,
) -> Result<(), ApiError> {
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    match icon {
        Some(Some(icon)) if icon.chars().count() > MAX_ICON_CHARS => {
            return Err(ApiError::invalid(
                "icon",
                format!("must be at most {MAX_ICON_CHARS} characters (is {})", icon.chars().count()),
            ));
        }
        Some(Some(icon)) if !icon.is_empty() => {
            annotations.insert(ICON_ANNOTATION.into(), icon);
        }
        Some(_) => {
            annotations.remove(ICON_ANNOTATION);
        }
        None => {}
    }
    if let Some(pics) = pics {
        if pics.len() > MAX_PICS {
            return Err(ApiError::invalid(
                "pics",
                format!("must have at most {MAX_PICS} entries (has {})", pics.len()),
            ));
        }
        if let Some((i, pic)) = pics.iter().enumerate().find(|(_, p)| p.chars().count() > MAX_PIC_CHARS) {
            return Err(ApiError::invalid(
                format!("pics[{i}]"),
                format!("must be at most {MAX_PIC_CHARS} characters (is {})", pic.chars().count()),
            ));
        }
        if pics.is_empty() {
            annotations.remove(PICS_ANNOTATION);
        } else {
            let text = serde_json::to_string(&pics).map_err(|e| ApiError::invalid("pics", e.to_string()))?;
            annotations.insert(PICS_ANNOTATION.into(), text);
        }
    }
    Ok(())
}

/// Records on `meta` that `who` changed the agent now (and, for a new one, that it was created now).
pub fn stamp(meta: &mut ObjectMeta, who: &Identity, created: bool) {
    let now = jiff::Timestamp::now().to_string();
    let annotations = meta.annotations.get_or_insert_with(Default::default);
    if created {
        annotations.insert(CREATED_AT_ANNOTATION.into(), now.clone());
    }
    annotations.insert(UPDATED_AT_ANNOTATION.into(), now);
    annotations.insert(UPDATED_BY_ANNOTATION.into(), who.uid.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_show_the_accepted_and_ready_conditions_and_none_without_a_status() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
        let who = Identity::new("alice", crate::access::Role::User, None);
        let mut agent = Agent::new("helper", Default::default());
        let item = serde_json::to_value(view(&agent, &who, false, None)).expect("serializes");
        assert!(item.get("conditions").is_none(), "{item}");
        let condition = |kind: &str, status: &str| Condition {
            type_: kind.into(),
            status: status.into(),
            reason: format!("{kind}Reason"),
            message: format!("{kind} is {status}"),
            last_transition_time: Time(Default::default()),
            observed_generation: None,
        };
        agent.status = Some(crate::resources::agent::AgentStatus {
            observed_generation: Some(1),
            conditions: vec![condition("Accepted", "True"), condition("Other", "True"), condition("Ready", "False")],
        });
        let item = serde_json::to_value(view(&agent, &who, false, None)).expect("serializes");
        assert_eq!(
            item["conditions"],
            serde_json::json!([
                {"type": "Accepted", "status": "True", "reason": "AcceptedReason", "message": "Accepted is True"},
                {"type": "Ready", "status": "False", "reason": "ReadyReason", "message": "Ready is False"}
            ])
        );
    }

    #[test]
    fn pictures_past_their_bounds_name_the_field() {
        let mut meta = ObjectMeta::default();
        let field = |err: ApiError| match err {
            ApiError::Invalid { field, .. } => field,
            other => panic!("{other:?}"),
        };
        let big = "x".repeat(MAX_ICON_CHARS + 1);
        assert_eq!(field(set_pictures(&mut meta, Some(Some(big)), None).expect_err("icon")), "icon");
        let many = vec!["p".to_string(); MAX_PICS + 1];
        assert_eq!(field(set_pictures(&mut meta, None, Some(many)).expect_err("pics")), "pics");
        let long = vec!["p".to_string(), "x".repeat(MAX_PIC_CHARS + 1)];
        assert_eq!(field(set_pictures(&mut meta, None, Some(long)).expect_err("pic")), "pics[1]");
        set_pictures(&mut meta, Some(Some("i.png".into())), Some(vec!["a.png".into()])).expect("fits");
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(annotations[ICON_ANNOTATION], "i.png");
        assert_eq!(annotations[PICS_ANNOTATION], r#"["a.png"]"#);
        set_pictures(&mut meta, Some(None), Some(vec![])).expect("cleared");
        assert!(meta.annotations.unwrap_or_default().is_empty());
    }
}
