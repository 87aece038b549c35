//! The facade: the Yuxi-compatible HTTP API (`/api/agent`, and the subagent tool endpoints to come),
//! served by axum.

pub mod agents;
pub mod auth;
pub mod body;
pub mod catalog;
pub mod error;
pub mod launch;
pub mod runs;
pub mod tools;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef};
use axum::routing::get;

pub use auth::Users;
pub use catalog::AgentCatalog;
pub use error::ApiError;

/// The largest request body, in bytes.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler can reach.
#[derive(Clone)]
pub struct FacadeState {
    /// How bearer tokens are checked.
    pub auth: auth::Authenticator,
    /// The agents.
    pub agents: AgentCatalog,
    /// Where runs are recorded and how they start; `None` when no Redis is configured.
    pub runs: Option<Runs>,
    /// The metrics served at `/metrics`.
    pub metrics: crate::metrics::FacadeMetrics,
}

/// Runs: their store and their launcher.
#[derive(Clone)]
pub struct Runs {
    /// Records, events, results.
    pub store: crate::store::Store,
    /// Starts runs.
    pub launcher: launch::Launcher,
}

impl FromRef<FacadeState> for crate::metrics::FacadeMetrics {
    fn from_ref(state: &FacadeState) -> crate::metrics::FacadeMetrics {
        state.metrics.clone()
    }
}

impl FromRef<FacadeState> for auth::Authenticator {
    fn from_ref(state: &FacadeState) -> auth::Authenticator {
        state.auth.clone()
    }
}

/// The facade's routes.
pub fn router(state: FacadeState) -> Router {
    Router::new()
        .route("/api/agent", get(agents::list).post(agents::create))
        .route("/api/agent/default", get(agents::get_default))
        .route("/api/agent/backends", get(agents::backends))
        .route("/api/agent/{slug}", get(agents::get).put(agents::update).delete(agents::delete))
        .route("/api/agent/runs/{run_id}", get(runs::get))
        .route("/api/agent/runs/{run_id}/result", get(runs::result))
        .route("/api/agent/runs/{run_id}/cancel", axum::routing::post(runs::cancel))
        .route("/api/agent/runs/{run_id}/events", get(runs::events))
        .route("/api/threads/{thread_id}/messages", get(runs::thread_messages))
        .route("/api/tools", get(tools::list_tools))
        .route("/api/tools/subagent_start", axum::routing::post(tools::subagent_start))
        .route("/api/tools/subagent_status", axum::routing::post(tools::subagent_status))
        .route("/api/tools/subagent_await", axum::routing::post(tools::subagent_await))
        .route("/api/tools/subagent_events", axum::routing::post(tools::subagent_events))
        .route("/api/tools/subagent_cancel", axum::routing::post(tools::subagent_cancel))
        .route("/api/tools/task", axum::routing::post(tools::task))
        .route_layer(axum::middleware::from_fn_with_state(state.metrics.clone(), crate::metrics::track))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(crate::metrics::serve))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// `GET /readyz`: 200 when the agents can be read and the run store answers, else 503 naming what failed,
/// so a load balancer only sends requests to a facade that can serve them.
async fn readyz(axum::extract::State(state): axum::extract::State<FacadeState>) -> Result<&'static str, ApiError> {
    state.agents.all().await.map_err(|e| ApiError::Unavailable(format!("the agents cannot be read: {e}")))?;
    if let Some(runs) = &state.runs {
        runs.store.ping().await.map_err(|e| ApiError::Unavailable(format!("the run store does not answer: {e}")))?;
    }
    Ok("ok")
}
