//! `/api/agent`: Yuxi-compatible agent CRUD ([`crud`]), the default agent ([`default`]), the backends
//! ([`backends`]), how an agent is shown ([`view`]) with the context fields it accepts ([`config`]), and
//! the validation verdict every write gets ([`rules`]).

pub mod backends;
pub mod config;
pub mod crud;
pub mod default;
pub mod rules;
pub mod view;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(crud::list, crud::create))
        .routes(routes!(default::get_default))
        .routes(routes!(default::set_default))
        .routes(routes!(backends::backends))
        .routes(routes!(backends::backend))
        .routes(routes!(crud::get, crud::update, crud::delete))
}
