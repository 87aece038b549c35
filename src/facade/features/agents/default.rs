//! The default agent: `GET /api/agent/default` and `POST /api/agent/{slug}/set_default`.
//!
//! The default is the Agent whose `spec.default` is true (at most one per namespace, a rule of the
//! validation module and the webhook). Setting it (here, or `set_default` on `POST /api/agent`) clears
//! `spec.default` on the previous default first and then sets it on the new one, so no write ever has
//! two defaults; if the second write fails the first is undone. In the local mode an agent of the manifests folder cannot be changed through the API, so
//! the default moves away from it only when its file is changed (409 otherwise).

use axum::Json;
use axum::extract::{Path, State};
use kube::ResourceExt;

use super::rules::judge;
use super::view::{AgentAnswer, detail, stamp};
use crate::facade::http::auth::{Caller, administrator};
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::agent_views::visible;
use crate::facade::services::state::FacadeState;

/// `GET /api/agent/default`: the namespace's default agent, when the caller may see it.
#[utoipa::path(
    get,
    path = "/api/agent/default",
    operation_id = "get_default_agent",
    tag = "agents",
    responses(
        (status = 200, description = "the default agent", body = AgentAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "run credentials", body = ErrorBody),
        (status = 404, description = "no default, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn get_default(State(state): State<FacadeState>, Caller(who): Caller) -> Result<Json<AgentAnswer>, ApiError> {
    let all = state.agents.all().await?;
    let default = all.iter().find(|a| a.spec.is_default()).cloned();
    let agent =
        visible(default, &who, "default").map_err(|_| ApiError::NotFound("there is no default agent".into()))?;
    Ok(Json(detail(&state, &agent, &who, &all).await))
}

/// `POST /api/agent/{slug}/set_default`: makes `slug` the one default agent. Administrators only (403);
/// a subagent cannot be the default (422 naming `slug`); an agent the caller cannot see answers 404.
#[utoipa::path(
    post,
    path = "/api/agent/{slug}/set_default",
    operation_id = "set_default_agent",
    tag = "agents",
    params(("slug" = String, Path, description = "the agent's slug")),
    responses(
        (status = 200, description = "the new default agent", body = AgentAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not an administrator", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 409, description = "an agent to change is defined by a manifest file, or changed meanwhile", body = ErrorBody),
        (status = 422, description = "a subagent", body = ErrorBody),
        (status = 503, description = "the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn set_default(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
) -> Result<Json<AgentAnswer>, ApiError> {
    let all = state.agents.all().await?;
    let mut agent = visible(all.iter().find(|a| a.name_any() == slug).cloned(), &who, &slug)?;
    administrator(&who, "may set the default agent")?;
    if agent.spec.is_subagent() {
        return Err(ApiError::invalid(
            "slug",
            format!("{slug:?} is a subagent, and a subagent cannot be the default agent"),
        ));
    }
    if agent.spec.is_default() {
        return Ok(Json(detail(&state, &agent, &who, &all).await));
    }
    let cleared = clear_defaults(&state, &who, &all).await?;
    agent.spec.default = Some(true);
    stamp(&mut agent.metadata, &who, false);
    let others: Vec<_> = all
        .iter()
        .filter(|a| a.name_any() != slug)
        .map(|a| cleared.iter().find(|c| c.name_any() == a.name_any()).unwrap_or(a).clone())
        .collect();
    let outcome = match judge(&state, &who, &agent, &others).await {
        Ok(()) => state.agents.replace(agent, &who).await.map_err(ApiError::from),
        Err(err) => Err(err),
    };
    match outcome {
        Ok(agent) => {
            let mut all = others;
            all.push(agent.clone());
            Ok(Json(detail(&state, &agent, &who, &all).await))
        }
        Err(err) => {
            restore(&state, &who, cleared).await;
            Err(err)
        }
    }
}

/// Clears `spec.default` on every agent of `all` that has it, as `who`: the agents as written. When one
/// write fails, the ones done are undone and its error answered (409 for a manifest-folder agent in the
/// local mode or a concurrent change, 503 when the Kubernetes API does not answer).
pub(super) async fn clear_defaults(
    state: &FacadeState,
    who: &crate::access::Identity,
    all: &[crate::resources::Agent],
) -> Result<Vec<crate::resources::Agent>, ApiError> {
    let mut cleared = Vec::new();
    for previous in all.iter().filter(|a| a.spec.is_default()) {
        let mut previous = previous.clone();
        previous.spec.default = None;
        stamp(&mut previous.metadata, who, false);
        match state.agents.replace(previous, who).await {
            Ok(done) => cleared.push(done),
            Err(err) => {
                restore(state, who, cleared).await;
                return Err(err.into());
            }
        }
    }
    Ok(cleared)
}

/// Gives the agents whose `spec.default` was cleared their default back, after the new default could
/// not be set. A failure is logged: the namespace then has no default until an administrator sets one.
pub(super) async fn restore(state: &FacadeState, who: &crate::access::Identity, cleared: Vec<crate::resources::Agent>) {
    for mut agent in cleared {
        agent.spec.default = Some(true);
        let slug = agent.name_any();
        if let Err(err) = state.agents.replace(agent, who).await {
            tracing::warn!(slug = %slug, error = %err, "cannot give the previous default agent its default back");
        }
    }
}
