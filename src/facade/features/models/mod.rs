//! The model picker's list (`GET /api/system/model-providers/models/v2`, [`picker`]): the models this
//! installation runs, by provider, in Yuxi's shape. The spec a person picks is what a run's
//! `model_spec` and `/api/chat/call`'s `meta.model_spec` take.

pub mod metrics;
pub mod picker;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(picker::models_v2))
}
