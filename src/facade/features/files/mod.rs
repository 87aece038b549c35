//! The users' files, read-only, as Yuxi's viewer and workspace page read them: a conversation's files
//! (`/api/viewer/filesystem/{tree,file,download}`, [`viewer`]) and the caller's personal workspace
//! (`/api/workspace/{tree,file,download}`, [`workspace`]). The files are the runs' volumes: the local
//! mode's data folder, or in a cluster the users' volume the sandbox pods write, mounted read-only into
//! the facade (`--user-data-dir`). Every path goes through a capability handle on its scope
//! ([`crate::facade::services::scope`]); answers are previews or downloads ([`preview`]), each bounded.

pub mod preview;
pub mod viewer;
pub mod workspace;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(viewer::tree))
        .routes(routes!(viewer::file))
        .routes(routes!(viewer::download))
        .routes(routes!(workspace::tree))
        .routes(routes!(workspace::file))
        .routes(routes!(workspace::download))
}
