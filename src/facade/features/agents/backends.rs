//! The backends an agent may have (`GET /api/agent/backends`, and one of them,
//! `GET /api/agent/backends/{backend_id}`), as Yuxi's agent form reads them: `backend_id`, a name, a
//! description, and `type: "agent_backend"`.

use axum::Json;
use axum::extract::Path;
use serde::Serialize;

use crate::facade::http::auth::Caller;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::resources::{BACKEND_CHATBOT, BACKEND_SUBAGENT, BACKENDS};

/// The answer of `GET /api/agent/backends`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Backends {
    /// The known backends.
    pub backends: Vec<Backend>,
}

/// One backend.
#[derive(Clone, Serialize, utoipa::ToSchema)]
pub struct Backend {
    /// `ChatbotAgent` or `SubAgentBackend`.
    pub id: &'static str,
    /// The same, by the name Yuxi's web client reads (and sends back as `backend_id`).
    pub backend_id: &'static str,
    /// Its name.
    pub name: &'static str,
    /// What it is for.
    pub description: &'static str,
    /// Always `agent_backend`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// The known backends, in [`BACKENDS`]' order.
fn known() -> Vec<Backend> {
    let backend = |id, name, description| Backend { id, backend_id: id, name, description, kind: "agent_backend" };
    let all = vec![
        backend(BACKEND_CHATBOT, "Chatbot agent", "A main agent users chat with; it may delegate to subagents."),
        backend(BACKEND_SUBAGENT, "Subagent", "An agent main agents delegate tasks to; it cannot delegate further."),
    ];
    debug_assert!(all.iter().map(|b| b.id).eq(BACKENDS.iter().copied()));
    all
}

/// `GET /api/agent/backends`: the known backends.
#[utoipa::path(
    get,
    path = "/api/agent/backends",
    operation_id = "list_backends",
    tag = "agents",
    responses(
        (status = 200, description = "the known backends", body = Backends),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn backends(Caller(_): Caller) -> Json<Backends> {
    Json(Backends { backends: known() })
}

/// `GET /api/agent/backends/{backend_id}`: one backend.
#[utoipa::path(
    get,
    path = "/api/agent/backends/{backend_id}",
    operation_id = "get_backend",
    tag = "agents",
    params(("backend_id" = String, Path, description = "`ChatbotAgent` or `SubAgentBackend`")),
    responses(
        (status = 200, description = "the backend", body = Backend),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "no such backend", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn backend(Caller(_): Caller, Path(backend_id): Path<String>) -> Result<Json<Backend>, ApiError> {
    known().into_iter().find(|b| b.id == backend_id).map(Json).ok_or_else(|| {
        ApiError::NotFound(format!("backend {backend_id:?} does not exist (known: {})", BACKENDS.join(", ")))
    })
}
