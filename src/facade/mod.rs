//! The facade: the Yuxi-compatible HTTP API (`/api/agent`, and the subagent tool endpoints to come),
//! served by axum.

pub mod agents;
pub mod auth;
pub mod body;
pub mod error;
pub mod launch;
pub mod runs;
pub mod tools;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef};
use axum::routing::get;

pub use agents::AgentCatalog;
pub use auth::Users;
pub use error::ApiError;

/// The largest request body, in bytes.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler can reach.
#[derive(Clone)]
pub struct FacadeState {
    /// Bearer tokens and their identities.
    pub users: Users,
    /// The agents.
    pub agents: AgentCatalog,
    /// Where runs are recorded and how they start; `None` for a facade that serves agents only (the run
    /// and tool endpoints answer 503).
    pub runs: Option<Runs>,
}

/// Runs: their store and their launcher.
#[derive(Clone)]
pub struct Runs {
    /// Records, events, results.
    pub store: crate::store::Store,
    /// Starts runs.
    pub launcher: launch::LocalLauncher,
}

impl FromRef<FacadeState> for Users {
    fn from_ref(state: &FacadeState) -> Users {
        state.users.clone()
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
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
