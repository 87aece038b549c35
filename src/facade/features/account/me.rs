//! `GET /api/auth/me`: who the bearer token names, as Yuxi's web client asks at every page load (it
//! drops its stored token when this answers anything but 200).

use axum::Json;
use serde::Serialize;

use crate::facade::http::auth::Caller;
use crate::facade::http::error::ErrorBody;

/// The caller, in the fields Yuxi's client reads.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Me {
    /// The user id, under the name Yuxi's client keeps as the user's id (a number in Yuxi).
    pub id: String,
    /// The user id.
    pub uid: String,
    /// The same, under Yuxi's name for it.
    pub user_id: String,
    /// The name shown for the user: the user id (the users file and TokenReview give no other).
    pub username: String,
    /// `user`, `admin` or `superadmin`.
    #[schema(value_type = String)]
    pub role: crate::access::Role,
    /// The user's department, if any.
    pub department_id: Option<i64>,
}

/// `GET /api/auth/me`.
#[utoipa::path(
    get,
    path = "/api/auth/me",
    operation_id = "auth_me",
    tag = "auth",
    responses(
        (status = 200, description = "the caller", body = Me),
        (status = 401, description = "no or bad token", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn me(Caller(identity): Caller) -> Json<Me> {
    Json(Me {
        id: identity.uid.clone(),
        user_id: identity.uid.clone(),
        username: identity.uid.clone(),
        uid: identity.uid,
        role: identity.role,
        department_id: identity.department_id,
    })
}
