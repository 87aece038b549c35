//! Kubernetes TokenReview: who a bearer token belongs to in a cluster, with the role and department taken
//! from the user's groups.
//!
//! Answers are remembered for [`REVIEW_TTL`] by the token's SHA-256 (never the token) in two bounded
//! caches (moka): one of the identities of authenticated tokens, one of the tokens refused. A flood of
//! random tokens fills only the second, so it cannot push a real user's review out. Each review's
//! outcome is counted in `yuxi_token_reviews_total{result}`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::access::{Identity, Principal, Role, uid_of};
use crate::facade::http::error::ApiError;

/// The audience tokens must be issued for unless `--token-audience` says otherwise: this facade's own, so
/// a token minted for another service (the API server, a vault) is not accepted here.
pub const DEFAULT_AUDIENCE: &str = "yuxi-operator";

/// How long a token's review is reused.
pub const REVIEW_TTL: Duration = Duration::from_secs(60);
/// How many identities, and how many refused tokens, are kept at most.
pub const REVIEW_CACHE: u64 = 10_000;

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
    /// The identity of an authenticated Kubernetes user: its uid by [`uid_of`], the role from the admin
    /// groups, the department from the first department group, and the user itself as its
    /// [`Principal`]. `None` for a user without a username.
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
        let principal = Principal { username: username.to_string(), uid: None, groups: groups.to_vec() };
        Some(Identity { uid: uid_of(username), role, department_id, principal: Some(principal) })
    }
}

/// The label of a counted review: `authenticated`, `unauthenticated` (the API server said no), `error`
/// (the API server could not answer) or `cached` (answered from the cache).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReviewLabels {
    /// The outcome.
    pub result: String,
}

/// Asks the Kubernetes API who a token belongs to (`POST /apis/authentication.k8s.io/v1/tokenreviews`).
#[derive(Clone)]
pub struct TokenReviewer {
    client: kube::Client,
    audiences: Vec<String>,
    mapping: GroupMapping,
    /// The identities of authenticated tokens.
    known: moka::sync::Cache<[u8; 32], Identity>,
    /// The tokens refused.
    refused: moka::sync::Cache<[u8; 32], ()>,
    counted: Family<ReviewLabels, Counter>,
}

impl TokenReviewer {
    /// A reviewer through `client`, accepting tokens issued for one of `audiences` (empty: the facade's
    /// own, [`DEFAULT_AUDIENCE`]). Outcomes are counted in `counted` (see
    /// [`FacadeMetrics::token_reviews`](crate::facade::http::metrics::FacadeMetrics::token_reviews)).
    pub fn new(
        client: kube::Client,
        audiences: Vec<String>,
        mapping: GroupMapping,
        counted: Family<ReviewLabels, Counter>,
    ) -> Self {
        Self::with_capacity(client, audiences, mapping, counted, REVIEW_CACHE)
    }

    /// [`TokenReviewer::new`] remembering at most `capacity` identities and as many refused tokens.
    pub fn with_capacity(
        client: kube::Client,
        audiences: Vec<String>,
        mapping: GroupMapping,
        counted: Family<ReviewLabels, Counter>,
        capacity: u64,
    ) -> Self {
        let audiences = if audiences.is_empty() { vec![DEFAULT_AUDIENCE.to_string()] } else { audiences };
        let known = moka::sync::Cache::builder().max_capacity(capacity).time_to_live(REVIEW_TTL).build();
        let refused = moka::sync::Cache::builder().max_capacity(capacity).time_to_live(REVIEW_TTL).build();
        Self { client, audiences, mapping, known, refused, counted }
    }

    /// The audiences a token must be issued for.
    pub fn audiences(&self) -> &[String] {
        &self.audiences
    }

    fn count(&self, result: &str) {
        self.counted.get_or_create(&ReviewLabels { result: result.into() }).inc();
    }

    /// The identity of `token`, or `None` when the API server does not authenticate it for one of the
    /// audiences. Errors: 503 when the TokenReview cannot be made (not cached, so the next call asks
    /// again).
    pub async fn identify(&self, token: &str) -> Result<Option<Identity>, ApiError> {
        use sha2::Digest;
        let key: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if let Some(identity) = self.known.get(&key) {
            self.count("cached");
            return Ok(Some(identity));
        }
        if self.refused.contains_key(&key) {
            self.count("cached");
            return Ok(None);
        }
        use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_string()), audiences: Some(self.audiences.clone()) },
            ..TokenReview::default()
        };
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let answer = api.create(&kube::api::PostParams::default(), &review).await.map_err(|err| {
            self.count("error");
            ApiError::Unavailable(format!("tokens cannot be checked: the Kubernetes TokenReview failed: {err}"))
        })?;
        let status = answer.status.unwrap_or_default();
        // The API server checks the audiences; a status that names none of ours is not believed either.
        let audience_ok = status.audiences.as_ref().is_none_or(|got| got.iter().any(|a| self.audiences.contains(a)));
        let identity = match (status.authenticated, status.user, audience_ok) {
            (Some(true), Some(user), true) => self
                .mapping
                .identity(user.username.as_deref().unwrap_or_default(), &user.groups.unwrap_or_default())
                .map(|mut who| {
                    if let Some(principal) = who.principal.as_mut() {
                        principal.uid = user.uid.filter(|uid| !uid.is_empty());
                    }
                    who
                }),
            _ => None,
        };
        match &identity {
            Some(who) => {
                self.count("authenticated");
                self.known.insert(key, who.clone());
            }
            None => {
                self.count("unauthenticated");
                self.refused.insert(key, ());
            }
        }
        Ok(identity)
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
        // A name that looks like a mapped uid is mapped too, so nobody can pick a name that another
        // user's mapping gives.
        let mapped = uid_of("alice@example.com");
        assert!(
            mapped.starts_with("alice-example.com-") && mapped.len() == "alice-example.com-".len() + 16,
            "{mapped}"
        );
        assert_ne!(uid_of(&mapped), mapped);
        assert!(uid_of(&mapped).len() <= 63);
        assert_eq!(uid_of("build-2024"), "build-2024", "an ordinary name with a dash stays");
    }
}
