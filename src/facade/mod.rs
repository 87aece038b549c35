//! The facade: the Yuxi-compatible HTTP API (`/api/agent`, and the subagent tool endpoints to come),
//! served by axum.

pub mod agents;
pub mod auth;
pub mod body;
pub mod error;

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
        .route("/healthz", get(|| async { "ok" }))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
