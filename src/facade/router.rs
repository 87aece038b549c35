//! Where the facade's routes are assembled, and only here: the features' API routes in one builder chain
//! with the OpenAPI document they make ([`api`]), then the document at [`OPENAPI_PATH`], the docs UI,
//! the A2A endpoints (`/a2a/...`), `/mcp`, the console, `/healthz`, `/readyz`, `/metrics`, the fallbacks, and the body reader in front of
//! every route ([`router`], [`body_rule`]).

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use utoipa_axum::router::OpenApiRouter;

use super::{features, http, openapi};
use crate::facade::http::error::ApiError;
use crate::facade::http::intake::{BodyRule, Intake, MAX_ANONYMOUS_BODY_BYTES};
use crate::facade::http::limits::MAX_BODY_BYTES;
use crate::facade::services::state::FacadeState;

/// The largest body of a knowledge base document's upload (`POST /api/knowledge/{slug}/documents`), in
/// bytes: the largest document and room for the multipart framing.
pub const MAX_DOCUMENT_BODY_BYTES: usize = crate::knowledge::extract::MAX_DOCUMENT_BYTES + 64 * 1024;

/// The API routes and the OpenAPI document describing them, from one list so the two cannot differ: each
/// feature appends its routes, in this order (which the document's paths and schemas keep).
pub fn api() -> (Router<FacadeState>, utoipa::openapi::OpenApi) {
    use utoipa::OpenApi;
    let api = OpenApiRouter::with_openapi(openapi::ApiDoc::openapi());
    let api = features::account::routes(api);
    let api = features::agents::routes(api);
    let api = features::runs::routes(api);
    let api = features::chat::routes(api);
    let api = features::attachments::routes(api);
    let api = features::files::routes(api);
    let api = features::tools::routes(api);
    let api = features::knowledge::routes(api);
    let api = features::system_lists::routes(api);
    let api = features::models::routes(api);
    let api = features::system::routes(api);
    let api = features::directory::routes(api);
    let api = features::placeholders::routes(api);
    let (routes, mut document) = api.split_for_parts();
    http::openapi::complete(&mut document);
    openapi::links(&mut document);
    (routes, document)
}

/// Where the OpenAPI document is served.
pub const OPENAPI_PATH: &str = "/api/openapi.json";

/// The facade's routes: the API, its OpenAPI document at [`OPENAPI_PATH`], the docs UI (Swagger UI, its
/// assets built in) at `/api/docs`, the web console at [`features::console::CONSOLE_PATH`] (its files
/// built in), `/healthz`, `/readyz` and `/metrics`.
pub fn router(state: FacadeState) -> Router {
    let intake = Intake::new(
        state.limits.body_timeout,
        state.limits.body_bytes_in_flight,
        <crate::facade::http::auth::Authenticator as axum::extract::FromRef<FacadeState>>::from_ref(&state),
        <crate::facade::http::auth::RunTokens as axum::extract::FromRef<FacadeState>>::from_ref(&state),
        body_rule,
    );
    let (routes, document) = api();
    let mut document = serde_json::to_value(document).expect("the document serializes");
    openapi::agent_rules(&mut document);
    let document = std::sync::Arc::new(document);
    // The docs UI reads the document from where it is served.
    let docs = utoipa_swagger_ui::SwaggerUi::new("/api/docs").config(utoipa_swagger_ui::Config::new([OPENAPI_PATH]));
    routes
        .route(OPENAPI_PATH, get(move || async move { axum::Json(document.as_ref().clone()) }))
        .merge(Router::from(docs).layer(axum::middleware::map_response(docs_headers)))
        .merge(features::a2a::routes())
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), data_folder_writes))
        .route_layer(axum::middleware::from_fn_with_state(state.metrics.clone(), http::metrics::track))
        .route_layer(axum::middleware::from_fn(http::trace::trace))
        .merge(features::mcp::routes(state.clone()))
        .merge(features::console::routes())
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(features::models::metrics::serve))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|method: axum::http::Method| async move {
            ApiError::MethodNotAllowed(format!("{method} is not served on this route"))
        })
        .layer(DefaultBodyLimit::max(MAX_DOCUMENT_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(intake, http::intake::read_body))
        .with_state(state)
}

/// In the local mode, a request that writes (any method but GET, HEAD and OPTIONS, a login aside)
/// answers 503 naming the data folder while it is gone, replaced or not writable: what it would write
/// there would be lost, or would begin a new, empty folder without a word.
async fn data_folder_writes(
    axum::extract::State(state): axum::extract::State<FacadeState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::Method;
    use axum::response::IntoResponse;
    let reads = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let login = request.uri().path().starts_with("/api/auth/");
    if !reads
        && !login
        && let Some(problem) = state.local.as_ref().and_then(|local| local.data_problem())
    {
        return ApiError::Unavailable(problem).into_response();
    }
    next.run(request).await
}

/// The docs UI's answers may not be framed, sniffed or sent on as a referrer (as the console's).
async fn docs_headers(mut response: axum::response::Response) -> axum::response::Response {
    use axum::http::{HeaderValue, header};
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// How the body of a request is taken ([`http::intake::read_body`]): a document upload by an
/// authenticated caller is left to its route as a stream of at most [`MAX_DOCUMENT_BODY_BYTES`]
/// (`max_document_bytes`), taken once the route has checked the caller may write there; any other body of
/// an authenticated caller is read whole, at most [`MAX_BODY_BYTES`] (`max_body_bytes`); a body without
/// valid credentials at most [`MAX_ANONYMOUS_BODY_BYTES`] (`max_anonymous_body_bytes`).
fn body_rule(method: &axum::http::Method, path: &str, authenticated: bool) -> BodyRule {
    let upload = method == axum::http::Method::POST
        && path
            .strip_prefix("/api/knowledge/")
            .and_then(|rest| rest.strip_suffix("/documents"))
            .is_some_and(|slug| !slug.contains('/'));
    match (authenticated, upload) {
        (false, _) => BodyRule::Read { max: MAX_ANONYMOUS_BODY_BYTES, limit: "max_anonymous_body_bytes" },
        (true, true) => BodyRule::Streamed { max: MAX_DOCUMENT_BODY_BYTES, limit: "max_document_bytes" },
        (true, false) => BodyRule::Read { max: MAX_BODY_BYTES, limit: "max_body_bytes" },
    }
}

/// `GET /readyz`: 200 when the agents can be read, the run store answers and (locally) the data folder is
/// there and writable, else 503 naming what failed,
/// so a load balancer only sends requests to a facade that can serve them.
async fn readyz(axum::extract::State(state): axum::extract::State<FacadeState>) -> Result<&'static str, ApiError> {
    if let Some(problem) = state.local.as_ref().and_then(|local| local.data_problem()) {
        return Err(ApiError::Unavailable(problem));
    }
    state.agents.all().await.map_err(|e| ApiError::Unavailable(format!("the agents cannot be read: {e}")))?;
    if let Some(runs) = &state.runs {
        runs.store.ping().await.map_err(|e| ApiError::Unavailable(format!("the run store does not answer: {e}")))?;
    }
    Ok("ok")
}
