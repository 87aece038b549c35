//! Bearer-token authentication: a token maps to an identity `{uid, role, department_id}`. In the local
//! mode the tokens come from a users file; in a cluster, from Kubernetes TokenReview, with the role and
//! department taken from the user's groups.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Users from entries.
    ///
    /// Errors: [`UsersError::EmptyToken`], [`UsersError::InvalidUid`] (not an id of
    /// [`crate::run::thread_id::is_valid_id`]) or [`UsersError::DuplicateToken`], naming the entry by its
    /// index.
    pub fn new(entries: Vec<UserEntry>) -> Result<Self, UsersError> {
        let mut by_token = HashMap::new();
        for (index, entry) in entries.into_iter().enumerate() {
            if entry.token.is_empty() {
                return Err(UsersError::EmptyToken { index });
            }
            if !crate::run::thread_id::is_valid_id(&entry.uid) {
                return Err(UsersError::InvalidUid { index, uid: entry.uid });
            }
            let identity = Identity { uid: entry.uid, role: entry.role, department_id: entry.department_id };
            if by_token.insert(entry.token, identity).is_some() {
                return Err(UsersError::DuplicateToken { index });
            }
        }
        Ok(Self { by_token: Arc::new(by_token) })
    }

    /// Reads a users file: a YAML list of `{token, uid, role, department_id}`.
    ///
    /// Errors: [`UsersError::Unreadable`] or [`UsersError::NotUsers`] naming the file, or an entry's
    /// error as [`Users::new`] gives it.
    pub fn load(path: &Path) -> Result<Self, UsersError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| UsersError::Unreadable { path: path.to_path_buf(), source })?;
        let entries: Vec<UserEntry> = serde_norway::from_str(&text)
            .map_err(|source| UsersError::NotUsers { path: path.to_path_buf(), source })?;
        Self::new(entries)
    }

    /// The identity of a token.
    pub fn identify(&self, token: &str) -> Option<&Identity> {
        self.by_token.get(token)
    }
}

/// The users file, or its entries, cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable {
        /// The users file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a YAML list of `{token, uid, role, department_id}`.
    #[error("{} is not a list of users: {source}", path.display())]
    NotUsers {
        /// The users file.
        path: PathBuf,
        /// Where and how it is wrong.
        source: serde_norway::Error,
    },
    /// An entry's token is empty.
    #[error("users[{index}].token is empty")]
    EmptyToken {
        /// The entry's index in the list, from 0.
        index: usize,
    },
    /// An entry's uid is not an id.
    #[error("users[{index}].uid {uid:?} is not a valid id (letters, digits, '.', '_', '-')")]
    InvalidUid {
        /// The entry's index in the list, from 0.
        index: usize,
        /// The uid.
        uid: String,
    },
    /// An entry's token is an earlier entry's too.
    #[error("users[{index}].token is used twice")]
    DuplicateToken {
        /// The index of the second entry with the token, from 0.
        index: usize,
    },
}

/// How tokens are checked.
#[derive(Clone)]
pub enum Authenticator {
    /// A fixed set of tokens (the local mode's users file).
    Tokens(Users),
    /// Kubernetes TokenReview.
    TokenReview(TokenReviewer),
}

impl From<Users> for Authenticator {
    fn from(users: Users) -> Self {
        Authenticator::Tokens(users)
    }
}

impl Authenticator {
    /// The identity of a bearer token. Errors: 401 for a token that names nobody, 503 when the
    /// Kubernetes API cannot answer.
    pub async fn identify(&self, token: &str) -> Result<Identity, ApiError> {
        let unknown = || ApiError::Unauthorized("the token is not valid".into());
        match self {
            Authenticator::Tokens(users) => users.identify(token).cloned().ok_or_else(unknown),
            Authenticator::TokenReview(reviewer) => reviewer.identify(token).await?.ok_or_else(unknown),
        }
    }
}

/// How a Kubernetes user's groups map to roles and departments.
#[derive(Clone, Debug)]
pub struct GroupMapping {
    /// Members of this group are administrators (`yuxi:admins` by default).
    pub admin_group: String,
    /// Members of this group are super administrators (`yuxi:superadmins` by default).
    pub superadmin_group: String,
    /// A group `<prefix><n>`, `n` an integer, puts the user in department `n` (`yuxi:department:` by
    /// default); the first such group counts.
    pub department_prefix: String,
}

impl Default for GroupMapping {
    fn default() -> Self {
        Self {
            admin_group: "yuxi:admins".into(),
            superadmin_group: "yuxi:superadmins".into(),
            department_prefix: "yuxi:department:".into(),
        }
    }
}

impl GroupMapping {
    /// The identity of an authenticated Kubernetes user. The uid is the username when it is a valid id;
    /// otherwise (`system:serviceaccount:ns:name`, `alice@example.com`) its characters outside the id
    /// alphabet become `-` and the first 8 hex digits of the name's SHA-256 are appended, so two names
    /// never share a uid. `None` for a user without a username.
    pub fn identity(&self, username: &str, groups: &[String]) -> Option<Identity> {
        if username.is_empty() {
            return None;
        }
        let role = if groups.contains(&self.superadmin_group) {
            Role::Superadmin
        } else if groups.contains(&self.admin_group) {
            Role::Admin
        } else {
            Role::User
        };
        let department_id = groups.iter().find_map(|g| g.strip_prefix(&self.department_prefix)?.parse::<i64>().ok());
        Some(Identity { uid: uid_of(username), role, department_id })
    }
}

/// A uid for a Kubernetes username (see [`GroupMapping::identity`]).
pub fn uid_of(username: &str) -> String {
    if crate::run::thread_id::is_valid_id(username) && username.len() <= 63 {
        return username.to_string();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(username.as_bytes());
    let mut safe: String = username
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .take(54)
        .collect();
    safe = safe.trim_start_matches(|c: char| !c.is_ascii_alphanumeric()).to_string();
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    if safe.is_empty() { format!("u-{hex}") } else { format!("{safe}-{hex}") }
}

/// How long a token's review is reused.
const REVIEW_TTL: Duration = Duration::from_secs(60);
/// How many reviews are kept; the cache is emptied when it is full.
const REVIEW_CACHE: usize = 10_000;

/// Reviews by the token's SHA-256: when each was made, and its identity (`None`: not authenticated).
type ReviewCache = HashMap<[u8; 32], (Instant, Option<Identity>)>;

/// Asks the Kubernetes API who a token belongs to (`POST
/// /apis/authentication.k8s.io/v1/tokenreviews`), remembering answers for a minute by the token's
/// SHA-256 (never the token itself).
#[derive(Clone)]
pub struct TokenReviewer {
    client: kube::Client,
    audiences: Vec<String>,
    mapping: GroupMapping,
    cache: Arc<Mutex<ReviewCache>>,
}

impl TokenReviewer {
    /// A reviewer through `client`, accepting tokens for `audiences` (empty: the API server's own).
    pub fn new(client: kube::Client, audiences: Vec<String>, mapping: GroupMapping) -> Self {
        Self { client, audiences, mapping, cache: Arc::default() }
    }

    /// The identity of `token`, or `None` when the API server does not authenticate it.
    pub async fn identify(&self, token: &str) -> Result<Option<Identity>, ApiError> {
        use sha2::Digest;
        let key: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if let Some((at, identity)) = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key)
            && at.elapsed() < REVIEW_TTL
        {
            return Ok(identity.clone());
        }
        use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: (!self.audiences.is_empty()).then(|| self.audiences.clone()),
            },
            ..TokenReview::default()
        };
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let answer = api.create(&kube::api::PostParams::default(), &review).await.map_err(|err| {
            ApiError::Unavailable(format!("tokens cannot be checked: the Kubernetes TokenReview failed: {err}"))
        })?;
        let status = answer.status.unwrap_or_default();
        let identity = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => {
                self.mapping.identity(user.username.as_deref().unwrap_or_default(), &user.groups.unwrap_or_default())
            }
            _ => None,
        };
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= REVIEW_CACHE {
            cache.clear();
        }
        cache.insert(key, (Instant::now(), identity.clone()));
        Ok(identity)
    }
}

/// Where run credentials are looked up: the run store, when the facade has one.
#[derive(Clone)]
pub struct RunGrants(pub Option<crate::store::Store>);

/// The authenticated caller of a request.
pub struct Caller(pub Identity);

/// The caller of a tool endpoint: a user (or an agent runtime acting for one), or a run this system
/// started acting with its own credentials, whose grant then names the parent.
pub struct ParentCaller {
    /// Who the call is for.
    pub who: Identity,
    /// The calling run, when the call carries run credentials.
    pub run: Option<crate::run::RunGrant>,
}

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Authenticator: axum::extract::FromRef<S>,
    RunGrants: axum::extract::FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // A run's credentials serve its tool calls only: a run acts as itself, never as its user.
        match ParentCaller::from_request_parts(parts, state).await? {
            ParentCaller { run: Some(_), .. } => {
                Err(ApiError::Forbidden("run credentials are accepted by the /api/tools endpoints only".into()))
            }
            ParentCaller { who, run: None } => Ok(Caller(who)),
        }
    }
}

impl<S> FromRequestParts<S> for ParentCaller
where
    S: Send + Sync,
    Authenticator: axum::extract::FromRef<S>,
    RunGrants: axum::extract::FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let authenticator = <Authenticator as axum::extract::FromRef<S>>::from_ref(state);
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| ApiError::Unauthorized("an Authorization: Bearer <token> header is required".into()))?;
        let token = header
            .to_str()
            .ok()
            // The scheme is case-insensitive (RFC 9110 section 11.1).
            .and_then(|h| h.get(..7).filter(|scheme| scheme.eq_ignore_ascii_case("bearer ")).map(|_| &h[7..]))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::Unauthorized("the Authorization header must be Bearer <token>".into()))?;
        if token.starts_with(crate::run::grant::RUN_TOKEN_PREFIX) {
            let RunGrants(store) = <RunGrants as axum::extract::FromRef<S>>::from_ref(state);
            let unknown = || ApiError::Unauthorized("the run token is not valid (or its run has ended)".into());
            let store = store.ok_or_else(unknown)?;
            let grant = store
                .grant(&crate::run::grant::token_digest(token))
                .await
                .map_err(|e| ApiError::Unavailable(format!("run tokens cannot be checked: {e}")))?
                .ok_or_else(unknown)?;
            let who = Identity { uid: grant.uid.clone(), role: grant.role, department_id: grant.department_id };
            return Ok(ParentCaller { who, run: Some(grant) });
        }
        let who = authenticator.identify(token).await?;
        Ok(ParentCaller { who, run: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_give_the_role_and_department() {
        let mapping = GroupMapping::default();
        let groups = |gs: &[&str]| gs.iter().map(|g| g.to_string()).collect::<Vec<_>>();
        let alice = mapping.identity("alice", &groups(&["system:authenticated", "yuxi:department:7"])).expect("id");
        assert_eq!((alice.uid.as_str(), alice.role, alice.department_id), ("alice", Role::User, Some(7)));
        let admin = mapping.identity("root", &groups(&["yuxi:admins", "yuxi:department:x"])).expect("id");
        assert_eq!((admin.role, admin.department_id), (Role::Admin, None));
        let both = mapping.identity("boss", &groups(&["yuxi:admins", "yuxi:superadmins"])).expect("id");
        assert_eq!(both.role, Role::Superadmin);
        assert!(mapping.identity("", &[]).is_none());
    }

    #[test]
    fn usernames_outside_the_id_alphabet_get_distinct_safe_uids() {
        let a = uid_of("system:serviceaccount:team-a:parent");
        let b = uid_of("system-serviceaccount-team-a-parent");
        assert!(a.starts_with("system-serviceaccount-team-a-parent-"), "{a}");
        assert_ne!(a, b);
        assert!(crate::run::thread_id::is_valid_id(&a), "{a}");
        assert!(crate::run::thread_id::is_valid_id(&uid_of("_.@..")), "{}", uid_of("_.@.."));
        assert!(crate::run::thread_id::is_valid_id(&uid_of(&"é".repeat(300))));
        assert_eq!(uid_of("alice"), "alice");
    }
}
