//! `GET /api/departments` and `GET /api/auth/users/access-options`, for administrators (others: 403):
//! the departments and the users this facade knows, in Yuxi's shapes. The local mode knows its users
//! file's users and, from them, the departments (numbers: the file names no department, so each is
//! named `Department <id>`). In a cluster users are whoever TokenReview names when their token comes,
//! so both lists are empty there: a share scope is then filled with department numbers and uids by hand.
//! Administrators may save any scope here (docs/concepts/agents.md), so they see every department and
//! every user.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::access::Role;
use crate::facade::http::auth::{Caller, administrator};
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::state::FacadeState;

/// A department (Yuxi's `DepartmentResponse`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct Department {
    /// Its number, as `department_ids` and a user's `department_id` name it.
    pub id: i64,
    /// `Department <id>`.
    pub name: String,
    /// Always `null`.
    pub description: Option<String>,
    /// Always empty: not known.
    pub created_at: String,
    /// How many known users are in it.
    pub user_count: usize,
}

/// A user (Yuxi's `UserAccessOption`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct AccessOption {
    /// The user id, as `user_uids` names it.
    pub uid: String,
    /// The name they log in with.
    pub username: String,
    /// `user`, `admin` or `superadmin`.
    #[schema(value_type = String)]
    pub role: Role,
    /// Their department.
    pub department_id: Option<i64>,
    /// Their department's name, when they have one.
    pub department_name: Option<String>,
}

fn department_name(id: i64) -> String {
    format!("Department {id}")
}

/// `GET /api/departments`.
#[utoipa::path(
    get,
    path = "/api/departments",
    operation_id = "list_departments",
    tag = "auth",
    responses(
        (status = 200, description = "the departments, by number", body = Vec<Department>),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not an administrator, or run credentials", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn departments(
    State(state): State<FacadeState>,
    Caller(who): Caller,
) -> Result<Json<Vec<Department>>, ApiError> {
    administrator(&who, "list departments and users")?;
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for person in state.auth.people() {
        if let Some(id) = person.identity.department_id {
            *counts.entry(id).or_default() += 1;
        }
    }
    Ok(Json(
        counts
            .into_iter()
            .map(|(id, user_count)| Department {
                id,
                name: department_name(id),
                description: None,
                created_at: String::new(),
                user_count,
            })
            .collect(),
    ))
}

/// `GET /api/auth/users/access-options`.
#[utoipa::path(
    get,
    path = "/api/auth/users/access-options",
    operation_id = "list_access_options",
    tag = "auth",
    responses(
        (status = 200, description = "the users, by uid", body = Vec<AccessOption>),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 403, description = "not an administrator, or run credentials", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn access_options(
    State(state): State<FacadeState>,
    Caller(who): Caller,
) -> Result<Json<Vec<AccessOption>>, ApiError> {
    administrator(&who, "list departments and users")?;
    Ok(Json(
        state
            .auth
            .people()
            .iter()
            .map(|person| AccessOption {
                uid: person.identity.uid.clone(),
                username: person.username.clone(),
                role: person.identity.role,
                department_id: person.identity.department_id,
                department_name: person.identity.department_id.map(department_name),
            })
            .collect(),
    ))
}
