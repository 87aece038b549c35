//! Bearer-token authentication: a token maps to an identity `{uid, role, department_id}`. In the local
//! mode the tokens come from a users file; in a cluster, Kubernetes TokenReview (to come).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::Deserialize;

use super::error::ApiError;
use crate::access::{Identity, Role};

/// One entry of the users file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    /// The bearer token.
    pub token: String,
    /// The user id.
    pub uid: String,
    /// `user`, `admin` or `superadmin`.
    pub role: Role,
    /// The user's department.
    #[serde(default)]
    pub department_id: Option<i64>,
}

/// Tokens and who they belong to.
#[derive(Clone, Debug, Default)]
pub struct Users {
    by_token: Arc<HashMap<String, Identity>>,
}

impl Users {
    /// Users from entries. Errors: an empty or duplicated token.
    pub fn new(entries: Vec<UserEntry>) -> Result<Self, String> {
        let mut by_token = HashMap::new();
        for (i, entry) in entries.into_iter().enumerate() {
            if entry.token.is_empty() {
                return Err(format!("users[{i}].token is empty"));
            }
            if !crate::run::thread_id::is_valid_id(&entry.uid) {
                return Err(format!(
                    "users[{i}].uid {:?} is not a valid id (letters, digits, '.', '_', '-')",
                    entry.uid
                ));
            }
            let identity = Identity { uid: entry.uid, role: entry.role, department_id: entry.department_id };
            if by_token.insert(entry.token, identity).is_some() {
                return Err(format!("users[{i}].token is used twice"));
            }
        }
        Ok(Self { by_token: Arc::new(by_token) })
    }

    /// Reads a users file: a YAML list of `{token, uid, role, department_id}`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let entries: Vec<UserEntry> =
            serde_norway::from_str(&text).map_err(|e| format!("{} is not a list of users: {e}", path.display()))?;
        Self::new(entries)
    }

    /// The identity of a token.
    pub fn identify(&self, token: &str) -> Option<&Identity> {
        self.by_token.get(token)
    }
}

/// The authenticated caller of a request.
pub struct Caller(pub Identity);

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Users: axum::extract::FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let users = <Users as axum::extract::FromRef<S>>::from_ref(state);
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| ApiError::Unauthorized("an Authorization: Bearer <token> header is required".into()))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::Unauthorized("the Authorization header must be Bearer <token>".into()))?;
        users
            .identify(token)
            .cloned()
            .map(Caller)
            .ok_or_else(|| ApiError::Unauthorized("the token is not valid".into()))
    }
}
