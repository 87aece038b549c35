//! `POST /api/auth/token`: Yuxi's OAuth2 password login (`username`, `password` as an HTML form,
//! `application/x-www-form-urlencoded` or `multipart/form-data`, which Yuxi's web client sends), in the
//! local mode only. It checks the password against the users file's argon2 hash and answers the user's
//! bearer token in Yuxi's login shape. A failed login answers 401 whatever was wrong; a username with
//! too many failures answers 429 naming the limit. In a cluster (TokenReview) there are no passwords
//! and the route answers 404, as an unknown route does (docs/reference/facade-api.md says how a client
//! gets a token there).

use axum::Json;
use axum::extract::{FromRequest, Request, State};
use serde::{Deserialize, Serialize};

use crate::access::Role;
use crate::facade::http::auth::{Authenticator, LoginError};
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::state::FacadeState;

/// The longest `username`, in bytes.
pub const MAX_USERNAME_CHARS: usize = 256;
/// The longest `password`, in bytes.
pub const MAX_PASSWORD_BYTES: usize = 1024;
/// How many passwords are checked at once at most (argon2 takes about 19 MiB and tens of milliseconds
/// each); further logins wait their turn.
pub const MAX_CONCURRENT_CHECKS: usize = 4;

/// The turns of [`MAX_CONCURRENT_CHECKS`].
static CHECKS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_CONCURRENT_CHECKS);

/// The login form.
#[derive(Deserialize, utoipa::ToSchema)]
pub struct LoginForm {
    /// The login name: the users file's `username`, else its `uid` (1 to 256 characters).
    #[schema(min_length = 1, max_length = 256)]
    pub username: String,
    /// The password.
    pub password: String,
}

/// A successful login, in Yuxi's fields.
#[derive(Serialize, utoipa::ToSchema)]
pub struct TokenAnswer {
    /// The bearer token to send as `Authorization: Bearer <token>`.
    pub access_token: String,
    /// Always `bearer`.
    pub token_type: &'static str,
    /// The user id (a string here; Yuxi's is a number).
    pub user_id: String,
    /// The name logged in with.
    pub username: String,
    /// The user id.
    pub uid: String,
    /// Always null: the users file has no phone numbers.
    pub phone_number: Option<String>,
    /// Always null.
    pub avatar: Option<String>,
    /// `user`, `admin` or `superadmin`.
    #[schema(value_type = String)]
    pub role: Role,
    /// The user's department.
    pub department_id: Option<i64>,
    /// Always null: departments have no names here.
    pub department_name: Option<String>,
}

/// The form of `request`, urlencoded or multipart. Errors: 400 for another content type or a form that
/// cannot be read, 422 naming `username` or `password` when missing or past its bound.
async fn read_form(request: Request, state: &FacadeState) -> Result<LoginForm, ApiError> {
    let content_type = request
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let (mut username, mut password) = (None, None);
    if content_type.starts_with("application/x-www-form-urlencoded") {
        let bytes = axum::body::to_bytes(request.into_body(), crate::facade::http::limits::MAX_BODY_BYTES)
            .await
            .map_err(|e| ApiError::BadRequest(format!("cannot read the body: {e}")))?;
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes)
            .map_err(|e| ApiError::BadRequest(format!("the body is not a form: {e}")))?;
        for (key, value) in pairs {
            match key.as_str() {
                "username" => username = Some(value),
                "password" => password = Some(value),
                _ => {}
            }
        }
    } else if content_type.starts_with("multipart/form-data") {
        let mut form = axum::extract::Multipart::from_request(request, state)
            .await
            .map_err(|e| ApiError::BadRequest(format!("the body is not a form: {e}")))?;
        while let Some(field) =
            form.next_field().await.map_err(|e| ApiError::BadRequest(format!("the body is not a form: {e}")))?
        {
            let name = field.name().unwrap_or_default().to_string();
            if name != "username" && name != "password" {
                continue;
            }
            let value = field.text().await.map_err(|e| ApiError::BadRequest(format!("field {name}: {e}")))?;
            if name == "username" { username = Some(value) } else { password = Some(value) }
        }
    } else {
        return Err(ApiError::BadRequest(
            "send the login as a form: application/x-www-form-urlencoded or multipart/form-data".into(),
        ));
    }
    let username = username.ok_or_else(|| ApiError::invalid("username", "is required"))?;
    let password = password.ok_or_else(|| ApiError::invalid("password", "is required"))?;
    if username.is_empty() || username.chars().count() > MAX_USERNAME_CHARS {
        return Err(ApiError::invalid("username", format!("must be 1 to {MAX_USERNAME_CHARS} characters")));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(ApiError::invalid("password", format!("must be at most {MAX_PASSWORD_BYTES} bytes")));
    }
    Ok(LoginForm { username, password })
}

/// `POST /api/auth/token`.
#[utoipa::path(
    post,
    path = "/api/auth/token",
    operation_id = "login",
    tag = "auth",
    request_body(content = LoginForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "logged in: the user's bearer token", body = TokenAnswer),
        (status = 400, description = "not a form", body = ErrorBody),
        (status = 401, description = "the username or the password is wrong", body = ErrorBody),
        (status = 404, description = "in a cluster: no password logins", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "a field missing or past its bound; `field` names it", body = ErrorBody),
        (status = 429, description = "too many failed logins for this username from this client (`login_attempts_per_user`), or from this client (`login_attempts_per_client`)", body = ErrorBody),
        (status = 503, description = "the password could not be checked", body = ErrorBody),
    ),
)]
pub async fn login(State(state): State<FacadeState>, request: Request) -> Result<Json<TokenAnswer>, ApiError> {
    let Authenticator::Tokens(users) = &state.auth else {
        return Err(ApiError::NotFound("no such route".into()));
    };
    let users = users.clone();
    let client = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|axum::extract::ConnectInfo(peer)| peer.ip());
    let form = read_form(request, &state).await?;
    let _turn = CHECKS.acquire().await.map_err(|_| ApiError::Unavailable("the login could not be checked".into()))?;
    let outcome = tokio::task::spawn_blocking(move || users.login_from(&form.username, &form.password, client))
        .await
        .map_err(|e| ApiError::Unavailable(format!("the login could not be checked: {e}")))?;
    match outcome {
        Ok(done) => Ok(Json(TokenAnswer {
            access_token: done.token,
            token_type: "bearer",
            user_id: done.identity.uid.clone(),
            username: done.username,
            uid: done.identity.uid,
            phone_number: None,
            avatar: None,
            role: done.identity.role,
            department_id: done.identity.department_id,
            department_name: None,
        })),
        Err(LoginError::Refused) => Err(ApiError::Unauthorized(LoginError::Refused.to_string())),
        Err(LoginError::TooMany) => Err(ApiError::Limited {
            limit: "login_attempts_per_user".into(),
            message: LoginError::TooMany.to_string(),
            retry_after: crate::facade::http::auth::users::LOGIN_WINDOW.as_secs(),
        }),
        Err(LoginError::TooManyFromClient) => Err(ApiError::Limited {
            limit: "login_attempts_per_client".into(),
            message: LoginError::TooManyFromClient.to_string(),
            retry_after: crate::facade::http::auth::users::LOGIN_WINDOW.as_secs(),
        }),
    }
}
