//! What Yuxi's web client reads before anyone logs in, and its settings page reads after: the login page
//! checks that the server answers (`GET /api/system/health`), whether the system still needs its first
//! administrator (`GET /api/auth/check-first-run`) and whether it offers an OIDC login
//! (`GET /api/auth/oidc/config`), and the shell reads its branding (`GET /api/system/info`) and the
//! system's settings (`GET /api/system/config`) ([`shell`]). These routes take no token: a 404 or a 401
//! there puts a "server unreachable" banner on the login page.

pub mod shell;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(shell::health))
        .routes(routes!(shell::info))
        .routes(routes!(shell::config))
        .routes(routes!(shell::check_first_run))
}
