//! A conversation's attachments, as Yuxi's client adds them: a file is uploaded first into the caller's
//! own holding folder ([`held`]), then confirmed into a thread, listed and removed there ([`thread`]).
//! An image for a message is read and answered base64 ([`image`]).

pub mod held;
pub mod image;
pub mod thread;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(held::upload_held))
        .routes(routes!(thread::confirm))
        .routes(routes!(thread::list))
        .routes(routes!(thread::delete))
        .routes(routes!(image::upload_image))
}
