//! `/api/knowledge`: knowledge bases for users, under the Agents' share rules ([`access`]): their CRUD
//! ([`bases`]), shown as [`views`] says; their documents ([`documents`]); and their search ([`search`]).

pub mod access;
pub mod bases;
pub mod documents;
pub mod search;
pub mod views;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(bases::list, bases::create))
        .routes(routes!(bases::get, bases::update, bases::delete))
        .routes(routes!(documents::documents, documents::upload))
        .routes(routes!(documents::delete_document))
        .routes(routes!(search::search))
}
