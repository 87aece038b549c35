//! The caller's account: who the bearer token names (`GET /api/auth/me`, [`me`]) and the local mode's
//! password login (`POST /api/auth/token`, [`login`]), and the login through an OIDC issuer ([`oidc`]).

pub mod login;
pub mod me;
pub mod oidc;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(me::me))
        .routes(routes!(login::login))
        .routes(routes!(oidc::config))
        .routes(routes!(oidc::login_url))
        .routes(routes!(oidc::callback))
        .routes(routes!(oidc::exchange_code))
}
