//! The routes of [the module](super), each answering Yuxi's shape from what this system is: it keeps no
//! first-run setup (users come from the users file, the cluster or an OIDC issuer, whose login is
//! [`crate::facade::features::account::oidc`]'s), and its settings are its command line's, read-only
//! here.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::{Value, json};

use crate::facade::services::state::FacadeState;

/// This build's version.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The answer of `GET /api/system/health`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    /// Always `ok`: the process answers.
    pub status: &'static str,
    /// The same, for a person.
    pub message: &'static str,
    /// This build's version.
    pub version: &'static str,
}

/// `GET /api/system/health`: the process answers (liveness; `/readyz` says whether it can serve).
#[utoipa::path(
    get,
    path = "/api/system/health",
    operation_id = "system_health",
    tag = "system",
    responses((status = 200, description = "the process answers", body = Health)),
)]
pub async fn health() -> Json<Health> {
    Json(Health { status: "ok", message: "the facade is serving", version: VERSION })
}

/// The answer of `GET /api/system/info`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Info {
    /// Always true.
    pub success: bool,
    /// `{organization: {name, logo, avatar, login_bg}, branding: {name, title, subtitle, subtitles},
    /// footer: {copyright, user_agreement_url, privacy_policy_url}}`.
    #[schema(value_type = Object)]
    pub data: Value,
}

/// `GET /api/system/info`: the names and texts the client shows.
#[utoipa::path(
    get,
    path = "/api/system/info",
    operation_id = "system_info",
    tag = "system",
    responses((status = 200, description = "the branding", body = Info)),
)]
pub async fn info() -> Json<Info> {
    Json(Info {
        success: true,
        data: json!({
            "organization": {"name": "yuxi-operator", "logo": "", "avatar": "", "login_bg": ""},
            "branding": {
                "name": "yuxi-operator",
                "title": "Agents and subagents, on Kubernetes",
                "subtitle": "Yuxi's agents, run as resources of a cluster or on one machine",
                "subtitles": [],
            },
            "footer": {"copyright": format!("yuxi-operator {VERSION}"), "user_agreement_url": "", "privacy_policy_url": ""},
        }),
    })
}

/// `GET /api/system/config`: the system's settings, read-only: the default model (the model of agents
/// that name none, also the "fast" model Yuxi titles conversations with), every optional service off,
/// and no settings a person may change (`_config_items` empty).
#[utoipa::path(
    get,
    path = "/api/system/config",
    operation_id = "system_config",
    tag = "system",
    responses((status = 200, description = "`{default_model, fast_model, enable_content_guard, enable_content_guard_llm, content_guard_llm_model, embed_model, reranker, default_ocr_engine, _config_items}`", body = Object)),
)]
pub async fn config(State(state): State<FacadeState>) -> Json<Value> {
    let default_model = state.models.default_model();
    Json(json!({
        "default_model": default_model,
        "fast_model": default_model,
        "enable_content_guard": false,
        "enable_content_guard_llm": false,
        "content_guard_llm_model": "",
        "embed_model": "",
        "reranker": "",
        "default_ocr_engine": "",
        "_config_items": {},
    }))
}

/// The answer of `GET /api/auth/check-first-run`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct FirstRun {
    /// Always false: users come from the users file or the cluster, never from a first-run form.
    pub first_run: bool,
}

/// `GET /api/auth/check-first-run`.
#[utoipa::path(
    get,
    path = "/api/auth/check-first-run",
    operation_id = "check_first_run",
    tag = "system",
    responses((status = 200, description = "always `{first_run: false}`", body = FirstRun)),
)]
pub async fn check_first_run() -> Json<FirstRun> {
    Json(FirstRun { first_run: false })
}
