//! The pickers an administrator fills share scopes from (Yuxi's admin pages): the departments
//! (`GET /api/departments`) and the users (`GET /api/auth/users/access-options`) ([`pickers`]).

pub mod pickers;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(pickers::departments)).routes(routes!(pickers::access_options))
}
