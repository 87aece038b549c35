//! Who may run on which Model resource (issue 34): a run on a Model (`model_spec`, or its agent's
//! `context.model`, or the installation's default) is started only for a user the Model's share admits
//! ([`crate::access::model_permission`]). A Model that does not exist and one the caller may not use
//! answer alike, so that a Model's name says nothing to whom it is not shared with.

use crate::access::{Identity, Permission, model_permission};
use crate::facade::http::error::ApiError;
use crate::facade::services::state::FacadeState;
use crate::resources::model::{effective, resource_name};
use crate::resources::{Agent, Model};

/// The Model named `name`, if `who` may run on it.
pub async fn usable(state: &FacadeState, who: &Identity, name: &str) -> Result<Option<Model>, ApiError> {
    let found = state.model_resources.get(name).await?;
    Ok(found.filter(|model| model_permission(who, model) >= Permission::Read))
}

/// Checks that `who` may run `agent` with `asked` (a run's `model_spec`, when it names one).
///
/// Errors: 403 naming `model_spec` when `asked` names a Model the caller may not use (or that does not
/// exist); 403 naming the agent's `context.model` (or the default model) when that is such a Model.
pub async fn check_run_model(
    state: &FacadeState,
    who: &Identity,
    agent: &Agent,
    asked: Option<&str>,
) -> Result<(), ApiError> {
    let context = agent.spec.context();
    let model = effective(asked, context.model.as_deref(), state.models.default_model());
    let Some(name) = model.and_then(resource_name) else { return Ok(()) };
    if usable(state, who, name).await?.is_some() {
        return Ok(());
    }
    let slug = agent.metadata.name.as_deref().unwrap_or_default();
    Err(ApiError::Forbidden(match asked.filter(|m| !m.is_empty()) {
        Some(_) => format!("model_spec: {name:?} is not a Model you may use"),
        None if context.model.as_deref().is_some_and(|m| !m.is_empty()) => {
            format!("model_spec: agent {slug:?} runs on the Model {name:?}, which you may not use (context.model)")
        }
        None => format!("model_spec: the default model {name:?} is not a Model you may use"),
    }))
}

/// The Models `who` may run on, sorted by name.
pub async fn usable_models(state: &FacadeState, who: &Identity) -> Result<Vec<Model>, ApiError> {
    let all = state.model_resources.all().await?;
    Ok(all.into_iter().filter(|model| model_permission(who, model) >= Permission::Read).collect())
}
