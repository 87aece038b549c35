//! The body of `POST /api/agent/runs` as Yuxi's web client sends it, and the checks of its fields
//! beyond the query: `meta` (bounded, stored), `model_spec` and `tool_approval_mode` (within what the
//! agent allows), `image_content`, `resume`, `created_by_run_id` and `queue_policy`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::access::{Identity, Role};
use crate::facade::http::body::json_within;
use crate::facade::http::error::ApiError;
use crate::facade::services::request_fields::{MAX_MODEL_SPEC_LEN, is_model_spec, request_id_of};
use crate::facade::services::run_queue::QueuePolicy;
use crate::resources::yuxi::YuxiApprovalMode;
use crate::resources::{Agent, ToolApprovalMode};
use crate::run::approval::{RunMode, run_mode};
use crate::run::record::MAX_META_BYTES;
use crate::run::{RunRecord, RunRequest};

/// `POST /api/agent/runs` body (Yuxi's `AgentRunCreate`).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRun {
    /// What the user asks: not blank, at most 262,144 characters; `null` or blank with `resume`.
    #[serde(default)]
    #[schema(max_length = 262_144)]
    pub query: Option<String>,
    /// The agent: an ordinary agent the caller may see (subagents run through the tools); ignored with
    /// `resume`.
    #[serde(default)]
    #[schema(max_length = 80)]
    pub agent_slug: String,
    /// Continue this conversation (one of the caller's threads); a new one when absent. An id without
    /// `_sub_` (which marks a subagent's thread).
    #[serde(default)]
    #[schema(pattern = "^(?!.*_sub_)[A-Za-z0-9][A-Za-z0-9._-]*$", max_length = 176)]
    pub thread_id: Option<String>,
    /// The client's tracking data, stored with the run and returned with it (at most 16 KiB of JSON);
    /// `meta.request_id` (at most 64 characters: letters, digits, `.`, `_`, `-`) is the run's request id.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<Map<String, Value>>,
    /// A base64 image for models that take images (`POST /api/chat/image/upload` answers it). No model
    /// a run starts here is given images yet: only `null` or `""`; anything else answers 422 naming the
    /// field and the run's model.
    #[serde(default)]
    #[schema(max_length = 0)]
    pub image_content: Option<String>,
    /// A model (`<provider>/<model>`, at most 256 characters; `""` for the agent's) for this run:
    /// allowed when the agent names no model of its own, or names this one; otherwise 403
    /// (administrators may always choose).
    #[serde(default)]
    #[schema(max_length = 256, pattern = "^([!-.0-~]+/[!-~]+)?$")]
    pub model_spec: Option<String>,
    /// The approval mode for this run: a stricter one than the agent's (`default` where it trusts)
    /// always; a more trusting one unless the agent's mode is locked (`tool_approval_mode_locked`; for
    /// administrators always). On a locked agent the run keeps the agent's mode and says so (a
    /// `warning` chunk); the start is not refused.
    #[serde(default)]
    pub tool_approval_mode: Option<YuxiApprovalMode>,
    /// A person's decisions on the tool calls a waiting run asks about: the run goes on, the same run,
    /// from where it paused (docs/concepts/approvals.md). With it, `query`, `tool_approval_mode`,
    /// `model_spec`, `image_content` and `budget` must be absent (or null, or blank), `queue_policy`
    /// absent or `enqueue`; `agent_slug` and `meta` are not read.
    #[serde(default)]
    pub resume: Option<crate::facade::services::approvals::ResumeBody>,
    /// An earlier run of the same thread (one of the caller's) that this one follows; another answers
    /// 404, as a missing run. With `resume`: the waiting run (Yuxi's client names it so).
    #[serde(default)]
    #[schema(max_length = 128)]
    pub created_by_run_id: Option<String>,
    /// What happens when the thread has an unfinished run (default `reject`).
    #[serde(default)]
    pub queue_policy: Option<QueuePolicy>,
    /// The token budget of this run and every run it starts (`{max_tokens}`, 1 to 10^12); absent: the
    /// agent's `spec.budget`. Above the agent's own budget only for administrators (403 otherwise).
    #[serde(default)]
    pub budget: Option<BudgetBody>,
}

/// A token budget, as the facade takes it.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetBody {
    /// The most tokens the run tree may use, 1 to 10^12.
    #[schema(minimum = 1, maximum = 1_000_000_000_000i64)]
    pub max_tokens: i64,
}

/// The token budget of a run of `agent` started with `asked` for `who`: what was asked, else the
/// agent's own. Errors: 422 naming `budget.max_tokens` outside 1..=10^12; 403 for a non-administrator
/// asking more than the agent's own budget.
pub fn budget_of(asked: Option<BudgetBody>, agent: &Agent, who: &Identity) -> Result<Option<i64>, ApiError> {
    let own = agent.spec.budget.as_ref().and_then(|b| b.max_tokens);
    let Some(asked) = asked else { return Ok(own) };
    if !(1..=crate::resources::MAX_BUDGET_TOKENS).contains(&asked.max_tokens) {
        return Err(ApiError::invalid(
            "budget.max_tokens",
            format!("must be within 1..{} (is {})", crate::resources::MAX_BUDGET_TOKENS, asked.max_tokens),
        ));
    }
    let admin = matches!(who.role, Role::Admin | Role::Superadmin);
    if let Some(own) = own
        && asked.max_tokens > own
        && !admin
    {
        return Err(ApiError::Forbidden(format!(
            "budget.max_tokens: agent {:?} allows {own} tokens a run; only administrators allow more",
            agent.metadata.name.as_deref().unwrap_or_default()
        )));
    }
    Ok(Some(asked.max_tokens))
}

/// The request fields of `body`, checked against `agent` for `who`, with a request id made when the
/// client sent none. `earlier` looks up one of the caller's runs (for `created_by_run_id`);
/// `default_model` is the model of agents that name none (named when an image cannot be given to it).
///
/// Errors: 413 for `meta` past [`MAX_META_BYTES`]; 422 naming `meta.request_id`, `model_spec`,
/// `image_content` or `resume`; 403 naming `model_spec` when the agent does not allow the caller that
/// choice; 404 for a `created_by_run_id` that is not one of the caller's runs of
/// the thread.
pub fn checked(
    body: &StartRun,
    who: &Identity,
    agent: &Agent,
    thread_id: &str,
    earlier: Option<&RunRecord>,
    default_model: Option<&str>,
) -> Result<RunRequest, ApiError> {
    let admin = matches!(who.role, Role::Admin | Role::Superadmin);
    let meta = body.meta.clone().unwrap_or_default();
    json_within("meta", &meta, MAX_META_BYTES)?;
    let request_id = request_id_of(&meta)?;
    let context = agent.spec.context();
    if body.image_content.as_deref().is_some_and(|image| !image.is_empty()) {
        // The run's input is text: no model is given images yet, whichever would run.
        let model = [body.model_spec.as_deref(), context.model.as_deref(), default_model]
            .into_iter()
            .flatten()
            .find(|m| !m.is_empty())
            .map_or_else(|| "the default model".to_string(), |m| format!("the model {m:?}"));
        return Err(ApiError::invalid(
            "image_content",
            format!("{model} of agent {:?} does not take images", body.agent_slug),
        ));
    }
    let model_spec = match body.model_spec.as_deref().filter(|m| !m.is_empty()) {
        None => None,
        // A Model resource's name: whether the caller may use it is the Model's share
        // (`services::model_access`), checked with the Models at hand.
        Some(model) if crate::resources::validation::is_dns1123_label(model) => Some(model.to_string()),
        Some(model) if !is_model_spec(model) => {
            return Err(ApiError::invalid(
                "model_spec",
                format!(
                    "{model:?} is neither <provider>/<model> (at most {MAX_MODEL_SPEC_LEN} characters) nor the name of a Model"
                ),
            ));
        }
        Some(model) => {
            let own = context.model.as_deref().filter(|m| !m.is_empty());
            if own.is_some_and(|own| own != model) && !admin {
                return Err(ApiError::Forbidden(format!(
                    "model_spec: agent {:?} runs on {:?}; only administrators choose another model",
                    body.agent_slug,
                    own.unwrap_or_default()
                )));
            }
            Some(model.to_string())
        }
    };
    let (tool_approval_mode, tool_approval_mode_asked) = match body.tool_approval_mode {
        None => (None, None),
        Some(asked) => {
            let agent_mode = context.tool_approval_mode.unwrap_or_default();
            let locked = context.tool_approval_mode_locked.unwrap_or(false);
            match run_mode(agent_mode, locked, ToolApprovalMode::from(asked), admin) {
                RunMode::Given(mode) => (Some(mode.into()), None),
                RunMode::Kept(mode) => (Some(mode.into()), Some(asked)),
            }
        }
    };
    let created_by_run_id = match body.created_by_run_id.as_deref().filter(|id| !id.is_empty()) {
        None => None,
        Some(id) => match earlier {
            Some(run) if run.run_id == id && run.thread_id == thread_id => Some(id.to_string()),
            _ => {
                return Err(ApiError::NotFound(format!(
                    "created_by_run_id: run {id:?} does not exist in thread {thread_id:?}"
                )));
            }
        },
    };
    Ok(RunRequest {
        request_id: Some(request_id),
        meta,
        created_by_run_id,
        model_spec,
        tool_approval_mode,
        tool_approval_mode_asked,
        // The request's span, when traces are exported: the run's span goes under it.
        traceparent: crate::telemetry::current_traceparent(),
        summary: None,
    })
}
