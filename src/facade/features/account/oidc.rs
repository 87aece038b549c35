//! Yuxi's OIDC login through the issuer the facade trusts (`--oidc-config` with `login`): the
//! authorization code flow with PKCE, the facade as the client.
//!
//! 1. `GET /api/auth/oidc/config`: whether the login is offered, and the button's name.
//! 2. `GET /api/auth/oidc/login-url`: the issuer's authorization address (a fresh `state`, `nonce` and
//!    S256 code challenge); the verifier, state and nonce go into an HttpOnly cookie signed with the
//!    facade's key (`SameSite=Lax`, ten minutes, only sent to `/api/auth/oidc`), never into the URL.
//! 3. The issuer sends the browser to `GET /api/auth/oidc/callback`: the state must be the cookie's.
//!    The browser then goes to the front end's callback with a one-time code; the issuer's code, the
//!    verifier and the nonce wait in a second signed HttpOnly cookie (`SameSite=Strict`, two minutes),
//!    small whatever the size of the tokens.
//! 4. `POST /api/auth/oidc/exchange-code` with that code exchanges the issuer's code with the verifier
//!    (and the client secret, when there is one), verifies the ID token as every bearer token is and
//!    checks its nonce, answers Yuxi's login shape with the ID token as the bearer token (kept in
//!    memory by the client), and forgets the cookie.
//!
//! The signed cookies hold everything, so any replica of the facade serves any step.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::login::TokenAnswer;
use crate::facade::http::auth::oidc::{OidcLogin, OidcVerifier};
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::state::FacadeState;

/// The cookie of a login under way (state, verifier, nonce).
const PENDING: &str = "yuxi_oidc";
/// The cookie of a finished login waiting for its one-time code.
const DONE: &str = "yuxi_oidc_login";
/// How long a login may take at the issuer, in seconds.
pub const LOGIN_SECONDS: i64 = 600;
/// How long the one-time code is good for, in seconds.
pub const CODE_SECONDS: i64 = 120;

/// The answer of `GET /api/auth/oidc/config`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct OidcConfigAnswer {
    /// Whether a login through the issuer is offered.
    pub enabled: bool,
    /// Always `null`: the address comes from `/api/auth/oidc/login-url`.
    pub login_url: Option<String>,
    /// The name of the login button: the configured one, else the issuer's host; `null` when disabled.
    pub provider_name: Option<String>,
}

/// `GET /api/auth/oidc/config`: whether people may log in through the OIDC issuer.
#[utoipa::path(
    get,
    path = "/api/auth/oidc/config",
    operation_id = "oidc_config",
    tag = "system",
    responses((status = 200, description = "whether the OIDC login is offered", body = OidcConfigAnswer)),
)]
pub async fn config(State(state): State<FacadeState>) -> Json<OidcConfigAnswer> {
    match login_of(&state) {
        Ok((verifier, login)) => Json(OidcConfigAnswer {
            enabled: true,
            login_url: None,
            provider_name: Some(login.provider_name.clone().unwrap_or_else(|| {
                reqwest::Url::parse(&verifier.config().issuer)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_string))
                    .unwrap_or_else(|| verifier.config().issuer.clone())
            })),
        }),
        Err(_) => Json(OidcConfigAnswer { enabled: false, login_url: None, provider_name: None }),
    }
}

fn login_of(state: &FacadeState) -> Result<(&OidcVerifier, &OidcLogin), ApiError> {
    state
        .auth
        .oidc()
        .and_then(|verifier| verifier.config().login.as_ref().map(|login| (verifier, login)))
        // As an unknown route answers: the login does not exist here.
        .ok_or_else(|| ApiError::NotFound("no such route: this facade offers no OIDC login".into()))
}

/// The query of `GET /api/auth/oidc/login-url` (Yuxi's client sends where to go after the login; the
/// client keeps that itself, so it is not used here).
#[derive(Deserialize, utoipa::IntoParams)]
pub struct LoginUrlQuery {
    /// Where the client goes after the login (kept by the client).
    #[allow(dead_code)]
    pub redirect_path: Option<String>,
}

/// The answer of `GET /api/auth/oidc/login-url`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct LoginUrl {
    /// The issuer's authorization address to send the browser to.
    pub login_url: String,
}

#[derive(Serialize, Deserialize)]
struct Pending {
    state: String,
    verifier: String,
    nonce: String,
    exp: i64,
}

#[derive(Serialize, Deserialize)]
struct Done {
    /// The one-time code the front end is given.
    code: String,
    /// The issuer's authorization code.
    issuer_code: String,
    verifier: String,
    nonce: String,
    exp: i64,
}

fn random() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A `Set-Cookie` value: HttpOnly, for `/api/auth/oidc` only, `Secure` when the facade is reached over
/// HTTPS (its redirect address says).
fn cookie(name: &str, value: &str, max_age: i64, same_site: &str, login: &OidcLogin) -> HeaderValue {
    let secure = if login.redirect_url.starts_with("https://") { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/api/auth/oidc; HttpOnly; SameSite={same_site}; Max-Age={max_age}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn read_cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

fn signed<T: for<'de> Deserialize<'de>>(
    state: &FacadeState,
    purpose: &str,
    headers: &HeaderMap,
    name: &str,
) -> Option<T> {
    let bytes = state.run_tokens.verify_value(purpose, read_cookie(headers, name)?)?;
    serde_json::from_slice(&bytes).ok()
}

/// `GET /api/auth/oidc/login-url`: the issuer's authorization address for a new login. Errors: 404
/// when no login is configured (as for an unknown route), 503 when the issuer cannot be read.
#[utoipa::path(
    get,
    path = "/api/auth/oidc/login-url",
    operation_id = "oidc_login_url",
    tag = "system",
    params(LoginUrlQuery),
    responses(
        (status = 200, description = "the address; the login's cookie is set", body = LoginUrl),
        (status = 404, description = "this facade offers no OIDC login", body = ErrorBody),
        (status = 503, description = "the issuer cannot be read", body = ErrorBody),
    ),
)]
pub async fn login_url(State(state): State<FacadeState>, Query(_): Query<LoginUrlQuery>) -> Result<Response, ApiError> {
    let (verifier, login) = login_of(&state)?;
    let discovery = verifier.discovery().await.map_err(|e| ApiError::Unavailable(e.to_string()))?;
    let endpoint = discovery["authorization_endpoint"].as_str().ok_or_else(|| {
        ApiError::Unavailable("the issuer's discovery document names no authorization_endpoint".into())
    })?;
    let pending = Pending { state: random(), verifier: random(), nonce: random(), exp: now() + LOGIN_SECONDS };
    let challenge = URL_SAFE_NO_PAD.encode(<sha2::Sha256 as sha2::Digest>::digest(pending.verifier.as_bytes()));
    let scopes = login.scopes.join(" ");
    let url = reqwest::Url::parse_with_params(
        endpoint,
        &[
            ("response_type", "code"),
            ("client_id", login.client_id.as_str()),
            ("redirect_uri", login.redirect_url.as_str()),
            ("scope", scopes.as_str()),
            ("state", pending.state.as_str()),
            ("nonce", pending.nonce.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ],
    )
    .map_err(|e| ApiError::Unavailable(format!("the issuer's authorization_endpoint {endpoint:?}: {e}")))?;
    let value = state.run_tokens.sign_value(PENDING, &serde_json::to_vec(&pending).unwrap_or_default());
    let mut response = Json(LoginUrl { login_url: url.to_string() }).into_response();
    response.headers_mut().append(header::SET_COOKIE, cookie(PENDING, &value, LOGIN_SECONDS, "Lax", login));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The query the issuer sends the browser back with.
#[derive(Deserialize, utoipa::IntoParams)]
pub struct CallbackQuery {
    /// The authorization code.
    pub code: Option<String>,
    /// The login's state.
    pub state: Option<String>,
    /// The issuer's error, when the login failed there.
    pub error: Option<String>,
    /// Its description.
    pub error_description: Option<String>,
}

/// `GET /api/auth/oidc/callback`: the end of the login at the issuer. Always a redirect to the front
/// end's callback: with `code` (one-time, for `/api/auth/oidc/exchange-code`) or `error`.
#[utoipa::path(
    get,
    path = "/api/auth/oidc/callback",
    operation_id = "oidc_callback",
    tag = "system",
    params(CallbackQuery),
    responses(
        (status = 303, description = "to the front end's callback, with `code` or `error`"),
        (status = 404, description = "this facade offers no OIDC login", body = ErrorBody),
    ),
)]
pub async fn callback(
    State(state): State<FacadeState>,
    headers: HeaderMap,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let Ok((_, login)) = login_of(&state) else {
        return ApiError::NotFound("no such route".into()).into_response();
    };
    let back = |pairs: &[(&str, &str)]| {
        let separator = if login.frontend_callback.contains('?') { '&' } else { '?' };
        let query = serde_urlencoded::to_string(pairs).unwrap_or_default();
        Redirect::to(&format!("{}{separator}{query}", login.frontend_callback))
    };
    let clear = cookie(PENDING, "", 0, "Lax", login);
    let outcome = finish(&state, &headers, &query);
    let mut response = match outcome {
        Ok(done) => {
            let value = state.run_tokens.sign_value(DONE, &serde_json::to_vec(&done).unwrap_or_default());
            let mut response = back(&[("code", done.code.as_str())]).into_response();
            response.headers_mut().append(header::SET_COOKIE, cookie(DONE, &value, CODE_SECONDS, "Strict", login));
            response
        }
        Err(why) => {
            tracing::info!(reason = %why, "an OIDC login failed");
            back(&[("error", why.as_str())]).into_response()
        }
    };
    response.headers_mut().append(header::SET_COOKIE, clear);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn finish(state: &FacadeState, headers: &HeaderMap, query: &CallbackQuery) -> Result<Done, String> {
    if let Some(error) = &query.error {
        // The issuer's error code only (OAuth's are short words): never its free text, which a link
        // made by anyone could fill.
        let code: String = error.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(64).collect();
        return Err(format!("the provider did not complete the login ({code})"));
    }
    let restart = "the login was not started here or took too long; start it again";
    let pending: Pending = signed(state, PENDING, headers, PENDING).ok_or(restart)?;
    if pending.exp < now() || query.state.as_deref() != Some(pending.state.as_str()) {
        return Err(restart.into());
    }
    let code = query.code.as_deref().filter(|c| !c.is_empty() && c.len() <= 2048).ok_or("the provider sent no code")?;
    Ok(Done {
        code: random(),
        issuer_code: code.to_string(),
        verifier: pending.verifier,
        nonce: pending.nonce,
        exp: now() + CODE_SECONDS,
    })
}

/// The issuer's tokens for the login `done`, its ID token verified and its nonce checked: the ID token,
/// its claims, and the access token with its lifetime when there is one.
async fn redeem(
    verifier: &OidcVerifier,
    login: &OidcLogin,
    done: &Done,
) -> Result<(String, std::collections::BTreeMap<String, serde_json::Value>, Option<(String, i64)>), String> {
    let discovery = verifier.discovery().await.map_err(|e| e.to_string())?;
    let endpoint =
        discovery["token_endpoint"].as_str().ok_or("the issuer's discovery document names no token_endpoint")?;
    let mut request = verifier.http().post(endpoint).form(&[
        ("grant_type", "authorization_code"),
        ("code", done.issuer_code.as_str()),
        ("redirect_uri", login.redirect_url.as_str()),
        ("code_verifier", done.verifier.as_str()),
        ("client_id", login.client_id.as_str()),
    ]);
    if let Some(secret) = verifier.client_secret() {
        request = request.basic_auth(&login.client_id, Some(secret));
    }
    let answer = request.send().await.map_err(|e| format!("the issuer's token endpoint: {e}"))?;
    let status = answer.status();
    let tokens: serde_json::Value = answer.json().await.map_err(|e| format!("the issuer's token endpoint: {e}"))?;
    if !status.is_success() {
        return Err(format!(
            "the issuer's token endpoint answered {status}: {}",
            tokens["error"].as_str().unwrap_or("")
        ));
    }
    let id_token = tokens["id_token"].as_str().ok_or("the issuer answered no ID token")?;
    let claims = verifier.claims(id_token).await.map_err(|e| e.to_string())?;
    if claims.get("nonce").and_then(|n| n.as_str()) != Some(done.nonce.as_str()) {
        return Err("the ID token is not this login's (its nonce differs)".into());
    }
    let access =
        tokens["access_token"].as_str().map(|token| (token.to_string(), tokens["expires_in"].as_i64().unwrap_or(300)));
    Ok((id_token.to_string(), claims, access))
}

/// The body of `POST /api/auth/oidc/exchange-code`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExchangeCode {
    /// The one-time code the callback gave the front end.
    pub code: String,
}

/// `POST /api/auth/oidc/exchange-code`: the login the one-time `code` stands for, in Yuxi's login
/// shape, its bearer token the issuer's ID token. Errors: 400 for a code that is not this browser's
/// latest, was used, or has expired (two minutes), or whose login the issuer does not complete.
#[utoipa::path(
    post,
    path = "/api/auth/oidc/exchange-code",
    operation_id = "oidc_exchange_code",
    tag = "system",
    request_body = ExchangeCode,
    responses(
        (status = 200, description = "the login", body = TokenAnswer),
        (status = 400, description = "the code is not valid, or the issuer does not complete its login", body = ErrorBody),
        (status = 404, description = "this facade offers no OIDC login", body = ErrorBody),
    ),
)]
pub async fn exchange_code(
    State(state): State<FacadeState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<ExchangeCode>,
) -> Result<Response, ApiError> {
    let (verifier, login) = login_of(&state)?;
    let invalid = || ApiError::BadRequest("the login code is not valid or has expired; log in again".into());
    let done: Done = signed(&state, DONE, &headers, DONE).ok_or_else(invalid)?;
    // Compared as digests: how long the comparison takes says nothing about the code.
    let digest = |code: &str| <sha2::Sha256 as sha2::Digest>::digest(code.as_bytes());
    let same = digest(&done.code) == digest(&body.code);
    if !same || done.exp < now() {
        return Err(invalid());
    }
    let (id_token, claims, access) = redeem(verifier, login, &done).await.map_err(|why| {
        tracing::info!(reason = %why, "an OIDC login failed");
        ApiError::BadRequest(format!("the login could not be completed: {why}"))
    })?;
    let who = crate::facade::http::auth::oidc::identity_of(verifier.config(), &claims).map_err(|_| invalid())?;
    if let Some((token, lifetime)) = access {
        verifier.remember_access_token(&who.uid, &token, lifetime);
    }
    let name = claims
        .get(&verifier.config().name_claim)
        .and_then(|n| n.as_str())
        .map(str::to_string)
        .or_else(|| who.principal.as_ref().map(|p| p.username.clone()))
        .unwrap_or_else(|| who.uid.clone());
    let answer = TokenAnswer {
        access_token: id_token,
        token_type: "bearer",
        user_id: who.uid.clone(),
        username: name,
        uid: who.uid.clone(),
        phone_number: None,
        avatar: None,
        role: who.role,
        department_id: who.department_id,
        department_name: None,
    };
    let mut response = (StatusCode::OK, Json(answer)).into_response();
    response.headers_mut().append(header::SET_COOKIE, cookie(DONE, "", 0, "Strict", login));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}
