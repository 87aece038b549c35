//! Pages of Yuxi's web client whose features this system does not have, answered with their empty,
//! well-formed shapes so the pages load ([`pages`]): projects (a conversation's files are its own
//! here, `/api/projects`) and the background task list (runs are the tasks here, `/api/tasks`).
//! docs/reference/facade-api.md lists them.

pub mod pages;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(pages::projects))
        .routes(routes!(pages::history_candidates))
        .routes(routes!(pages::tasks))
        .routes(routes!(pages::task))
}
