//! Bearer-token authentication: a token maps to an identity `{uid, role, department_id}`. In the local
//! mode user tokens come from a users file ([`users`]); in a cluster, from Kubernetes TokenReview
//! ([`token_review`]). Run tokens (`yxr_…`) are the runs' own credentials: signed by the facade's key
//! ([`crate::run::grant`]), believed only when the signature checks, the token has not expired and its
//! run is still going. Nothing written into the run store makes a token (docs/concepts/trust-model.md).

pub mod oidc;
pub mod token_review;
pub mod users;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;
use crate::access::{Identity, Role};
use crate::run::grant::{RUN_TOKEN_PREFIX, TokenKey};
use crate::run::{RunGrant, RunStatus};
use crate::store::Store;

pub use token_review::{GroupMapping, TokenReviewer};
pub use users::{LoggedIn, LoginError, Person, UserEntry, Users, UsersError, hash_password};

/// How user tokens are checked.
#[derive(Clone)]
pub enum Authenticator {
    /// A fixed set of tokens (the local mode's users file).
    Tokens(Users),
    /// Kubernetes TokenReview (boxed: its client and caches are large beside a users file).
    TokenReview(Box<TokenReviewer>),
    /// An OIDC issuer's tokens, verified locally; every other token goes to `otherwise`.
    Oidc {
        /// The issuer's verifier.
        verifier: std::sync::Arc<oidc::OidcVerifier>,
        /// How the other tokens are checked.
        otherwise: Box<Authenticator>,
    },
}

impl From<TokenReviewer> for Authenticator {
    fn from(reviewer: TokenReviewer) -> Self {
        Authenticator::TokenReview(Box::new(reviewer))
    }
}

impl From<Users> for Authenticator {
    fn from(users: Users) -> Self {
        Authenticator::Tokens(users)
    }
}

impl Authenticator {
    /// The users this facade can name: the users file's; none with TokenReview, which names a user only
    /// when their token comes.
    pub fn people(&self) -> &[Person] {
        match self {
            Authenticator::Tokens(users) => users.people(),
            Authenticator::TokenReview(_) => &[],
            Authenticator::Oidc { otherwise, .. } => otherwise.people(),
        }
    }

    /// The OIDC issuer this facade accepts tokens of, if any.
    pub fn oidc(&self) -> Option<&oidc::OidcVerifier> {
        match self {
            Authenticator::Oidc { verifier, .. } => Some(verifier),
            _ => None,
        }
    }

    /// The identity of a bearer token. Errors: 401 for a token that names nobody, 503 when the
    /// Kubernetes API cannot answer.
    pub fn identify<'a>(
        &'a self,
        token: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Identity, ApiError>> + Send + 'a>> {
        Box::pin(async move {
            let unknown = || ApiError::Unauthorized("the token is not valid".into());
            match self {
                Authenticator::Tokens(users) => users.identify(token).cloned().ok_or_else(unknown),
                Authenticator::TokenReview(reviewer) => reviewer.identify(token).await?.ok_or_else(unknown),
                Authenticator::Oidc { verifier, .. } if verifier.is_for(token) => {
                    verifier.identify(token).await.map_err(|err| match err {
                        oidc::OidcError::Refused(why) => {
                            tracing::info!(reason = %why, "an OIDC token is refused");
                            unknown()
                        }
                        oidc::OidcError::Issuer(why) => {
                            ApiError::Unavailable(format!("tokens cannot be checked: {why}"))
                        }
                    })
                }
                Authenticator::Oidc { otherwise, .. } => otherwise.identify(token).await,
            }
        })
    }
}

/// How run tokens are checked: the facade's signing key, and the run store where a token's run is looked
/// up (revocation: a token stops working when its run ends).
#[derive(Clone)]
pub struct RunTokens {
    /// The key run tokens are signed with.
    pub key: TokenKey,
    /// The run store; without one no run token is believed.
    pub store: Option<Store>,
}

impl RunTokens {
    /// The grant of a run token, and the Kubernetes user its run's tree was started by (when known).
    /// Errors: 401 (one message for every reason, so a caller learns nothing)
    /// when the signature does not check, the token has expired, its run is unknown, has ended, or is not
    /// the grant's user's; 503 when the run store cannot answer.
    pub async fn verify(&self, token: &str) -> Result<(RunGrant, Option<crate::access::Principal>), ApiError> {
        let refused = || ApiError::Unauthorized("the run token is not valid (or its run has ended)".into());
        let signed = self.key.verify(token, jiff::Timestamp::now().as_second()).map_err(|_| refused())?;
        let store = self.store.as_ref().ok_or_else(refused)?;
        let record = store
            .run_record(&signed.grant.run_id)
            .await
            .map_err(|e| ApiError::Unavailable(format!("run tokens cannot be checked: {e}")))?
            .ok_or_else(refused)?;
        if record.uid != signed.grant.uid || record.status.is_terminal() || record.status == RunStatus::CancelRequested
        {
            return Err(refused());
        }
        // The record is the store's, which every runner can write: a principal is believed only when it
        // is the signed grant's own user (the uid is its username's mapped form).
        let principal = record.principal.filter(|p| crate::access::uid_of(&p.username) == signed.grant.uid);
        Ok((signed.grant, principal))
    }
}

/// Refuses a caller who is not an administrator (`admin` or `superadmin`, the roles that may save the
/// wider share scopes): 403 saying `only administrators <what>`, `what` being what the route does (as
/// "list the background tasks").
pub fn administrator(who: &Identity, what: &str) -> Result<(), ApiError> {
    match who.role {
        Role::Admin | Role::Superadmin => Ok(()),
        Role::User => Err(ApiError::Forbidden(format!("only administrators {what}"))),
    }
}

/// Why a request's credentials were refused, kept with the request once it was asked (`super::intake`),
/// so that a route's extractor answers the same without asking again.
#[derive(Clone, Debug)]
pub struct Refused(pub ApiError);

/// The authenticated caller of a request.
pub struct Caller(pub Identity);

/// The caller of a tool endpoint: a user (or an agent runtime acting for one), or a run this system
/// started acting with its own credentials, whose grant then names the parent.
#[derive(Clone)]
pub struct ParentCaller {
    /// Who the call is for.
    pub who: Identity,
    /// The calling run, when the call carries run credentials.
    pub run: Option<RunGrant>,
}

impl<S> FromRequestParts<S> for Caller
where
    S: Send + Sync,
    Authenticator: axum::extract::FromRef<S>,
    RunTokens: axum::extract::FromRef<S>,
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
    RunTokens: axum::extract::FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // Authenticated once per request, before its body is read (`super::intake`).
        if let Some(caller) = parts.extensions.get::<ParentCaller>() {
            return Ok(caller.clone());
        }
        if let Some(Refused(why)) = parts.extensions.get::<Refused>() {
            return Err(why.clone());
        }
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| ApiError::Unauthorized("an Authorization: Bearer <token> header is required".into()))?;
        // Two credentials are one too many: which one a proxy on the way believed is unknown.
        if parts.headers.get_all(axum::http::header::AUTHORIZATION).iter().nth(1).is_some() {
            return Err(ApiError::Unauthorized("one Authorization header is expected; the request has more".into()));
        }
        let token = header
            .to_str()
            .ok()
            // The scheme is case-insensitive (RFC 9110 section 11.1).
            .and_then(|h| h.get(..7).filter(|scheme| scheme.eq_ignore_ascii_case("bearer ")).map(|_| &h[7..]))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::Unauthorized("the Authorization header must be Bearer <token>".into()))?;
        if token.starts_with(RUN_TOKEN_PREFIX) {
            let (grant, principal) = <RunTokens as axum::extract::FromRef<S>>::from_ref(state).verify(token).await?;
            let who =
                Identity { uid: grant.uid.clone(), role: grant.role, department_id: grant.department_id, principal };
            return Ok(ParentCaller { who, run: Some(grant) });
        }
        let who = <Authenticator as axum::extract::FromRef<S>>::from_ref(state).identify(token).await?;
        Ok(ParentCaller { who, run: None })
    }
}
