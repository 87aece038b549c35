//! Bearer tokens of an OIDC provider, verified locally: the issuer's keys are read from its discovery
//! document's `jwks_uri` and cached; a token signed by a key the cache does not hold makes the cache be
//! read again (at most once per [`MIN_REFRESH`]), so a key rotation at the issuer is followed without a
//! restart. A token is accepted when its signature verifies with one of those keys (never `alg: none`,
//! never a symmetric algorithm), its `iss` is the issuer, its `aud` one of the audiences, and it is
//! within its `exp` and `nbf`, with [`OidcConfig::leeway_seconds`] of leeway. Its claims give the
//! caller's Kubernetes username and groups (named as the API server's `claimMappings` name them, so a
//! facade writing as its callers impersonates the user the cluster would see), uid, role and
//! department, by the configured claim names and mappings.

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;
use serde_json::Value;

use crate::access::{Identity, Principal, Role, uid_of};

/// The least time between two reads of the issuer's keys for an unknown key id.
pub const MIN_REFRESH: Duration = Duration::from_secs(10);
/// How long the keys are kept before they are read again anyway.
pub const KEYS_TTL: Duration = Duration::from_secs(3600);

/// How tokens of an issuer are checked and read.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcConfig {
    /// The issuer URL, as tokens' `iss` says it (`https://login.example.com/realms/team`).
    pub issuer: String,
    /// The audiences a token may be for (its `aud`); at least one.
    pub audiences: Vec<String>,
    /// The claim naming the user. Default `sub`. The Kubernetes username is
    /// [`OidcConfig::username_prefix`] and its value (the API server's `claimMappings.username`), and
    /// the uid that username's [`uid_of`] (the rule TokenReview users and the admission webhook share).
    #[serde(default = "default_uid_claim")]
    pub uid_claim: String,
    /// What the Kubernetes username starts with (`oidc:`), required (`""` for none) as the API
    /// server's `claimMappings.username.prefix` is: without one, the issuer's `alice` is the same person
    /// as any other `alice` this facade knows (a users file's, a TokenReview user's).
    pub username_prefix: String,
    /// The claim giving the Kubernetes groups (a string or a list of strings); unset: none.
    #[serde(default)]
    pub groups_claim: Option<String>,
    /// What each Kubernetes group starts with (`oidc:`); default none.
    #[serde(default)]
    pub groups_prefix: String,
    /// The claim giving the display name. Default `name`; the username when absent.
    #[serde(default = "default_name_claim")]
    pub name_claim: String,
    /// A PEM file of the certificate authorities the issuer's TLS certificate is checked against,
    /// beside the system's.
    #[serde(default)]
    pub certificate_authority: Option<std::path::PathBuf>,
    /// The browser login through this issuer (authorization code with PKCE); unset: tokens are
    /// accepted, nobody is sent to log in.
    #[serde(default)]
    pub login: Option<OidcLogin>,
    /// The audiences a run may ask for a token of its user for (an MCP server's `caller` header):
    /// the user's own token when it is for that audience, else one exchanged at the issuer (RFC 8693)
    /// with the login's client. Default none.
    #[serde(default)]
    pub exchange_audiences: Vec<String>,
    /// The claim giving the role's values (a string or a list of strings, such as `groups` or
    /// `roles`); unset: every user is `user`.
    #[serde(default)]
    pub role_claim: Option<String>,
    /// The values of [`OidcConfig::role_claim`] that make an `admin`.
    #[serde(default)]
    pub admin_values: Vec<String>,
    /// The values of [`OidcConfig::role_claim`] that make a `superadmin`.
    #[serde(default)]
    pub superadmin_values: Vec<String>,
    /// The claim giving the department id (a number, or a string of one); unset: none.
    #[serde(default)]
    pub department_claim: Option<String>,
    /// Seconds of leeway on `exp` and `nbf`. Default 30.
    #[serde(default = "default_leeway")]
    pub leeway_seconds: u64,
}

fn default_uid_claim() -> String {
    "sub".into()
}

fn default_name_claim() -> String {
    "name".into()
}

/// The facade's client at the issuer: how people log in through it (`/api/auth/oidc/login-url`), and
/// whose credentials exchange a user's token for one of another audience (RFC 8693).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcLogin {
    /// The client id; its ID tokens' `aud`, so it must be one of [`OidcConfig::audiences`].
    pub client_id: String,
    /// A file holding the client secret (the chart mounts it from a Secret); unset: a public client
    /// (PKCE only).
    #[serde(default)]
    pub client_secret_file: Option<std::path::PathBuf>,
    /// The address the issuer sends the browser back to: this facade's `/api/auth/oidc/callback` as
    /// the browser reaches it, registered at the issuer.
    pub redirect_url: String,
    /// Where the browser goes after the callback, with `?code=<one-time code>` appended (Yuxi's web
    /// client: `/auth/oidc/callback`). Default: the console's.
    #[serde(default = "default_frontend_callback")]
    pub frontend_callback: String,
    /// The scopes asked for. Default `openid`, `profile`.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// The name of the login button ("Sign in with …"). Default: the issuer's host.
    #[serde(default)]
    pub provider_name: Option<String>,
}

fn default_frontend_callback() -> String {
    "/console/#/oidc".into()
}

fn default_scopes() -> Vec<String> {
    vec!["openid".into(), "profile".into()]
}

fn default_leeway() -> u64 {
    30
}

/// Why a token is refused, or the issuer cannot be read.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum OidcError {
    /// The token is not one this facade accepts: the reason, for the log (the caller is told 401 only).
    #[error("the token is refused: {0}")]
    Refused(String),
    /// The issuer's discovery document or keys cannot be read.
    #[error("the OIDC issuer cannot be read: {0}")]
    Issuer(String),
}

struct Keys {
    set: JwkSet,
    read_at: Instant,
}

/// Verifies tokens of one issuer, holding its keys.
pub struct OidcVerifier {
    config: OidcConfig,
    http: reqwest::Client,
    keys: RwLock<Option<Keys>>,
    client_secret: Option<String>,
    callers: exchange::CallerTokens,
    /// When the keys were last asked for, and how that went (held while they are).
    refreshing: tokio::sync::Mutex<Option<(Instant, Result<(), OidcError>)>>,
}

impl OidcVerifier {
    /// A verifier of `config`'s issuer; its keys are read at the first token. Errors: the certificate
    /// authorities' file cannot be read, or the login's client secret file.
    pub fn new(config: OidcConfig) -> Result<OidcVerifier, String> {
        crate::tls::install_crypto_provider();
        let http = http_client(&config).map_err(|e| format!("certificateAuthority: {e}"))?;
        let client_secret = match config.login.as_ref().and_then(|l| l.client_secret_file.as_ref()) {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| format!("login.clientSecretFile: {}: {e}", path.display()))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        Ok(OidcVerifier {
            config,
            http,
            keys: RwLock::new(None),
            client_secret,
            callers: Default::default(),
            refreshing: Default::default(),
        })
    }

    /// The login client's secret, when it has one.
    pub fn client_secret(&self) -> Option<&str> {
        self.client_secret.as_deref()
    }

    /// The HTTP client the issuer is reached with (its certificate authorities trusted).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The issuer's discovery document (`/.well-known/openid-configuration`). Errors:
    /// [`OidcError::Issuer`].
    pub async fn discovery(&self) -> Result<Value, OidcError> {
        let issuer = self.config.issuer.trim_end_matches('/');
        self.get_json(&format!("{issuer}/.well-known/openid-configuration")).await
    }

    /// The issuer's configuration.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// Whether `token` says it is this issuer's (a JWT whose unverified `iss` is the issuer): only
    /// which checker to ask is decided by it; [`OidcVerifier::identify`] verifies.
    pub fn is_for(&self, token: &str) -> bool {
        decode_unverified(token)
            .is_ok_and(|claims| claims.get("iss").and_then(Value::as_str) == Some(&self.config.issuer))
    }

    /// The caller `token` names. Errors: [`OidcError::Refused`] for a token that is not accepted,
    /// [`OidcError::Issuer`] when the issuer's keys cannot be read.
    pub async fn identify(&self, token: &str) -> Result<Identity, OidcError> {
        Ok(self.verified(token).await?.0)
    }

    /// The verified claims of `token` (as [`OidcVerifier::identify`] checks them).
    pub async fn claims(&self, token: &str) -> Result<BTreeMap<String, Value>, OidcError> {
        Ok(self.verified(token).await?.1)
    }

    /// The caller `token` names and its claims, once its signature and claims are checked; the token is
    /// kept as its user's latest when runs may ask for their user's tokens.
    async fn verified(&self, token: &str) -> Result<(Identity, BTreeMap<String, Value>), OidcError> {
        let header = decode_header(token).map_err(|e| OidcError::Refused(format!("not a JWT: {e}")))?;
        if matches!(header.alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
            return Err(OidcError::Refused(format!("{:?} is not an algorithm of an issuer's keys", header.alg)));
        }
        let kid = header.kid.clone().unwrap_or_default();
        let key = match self.key(&kid) {
            Some(key) => key,
            None => {
                self.refresh().await?;
                self.key(&kid).ok_or_else(|| OidcError::Refused(format!("no key {kid:?} at the issuer")))?
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&self.config.audiences);
        validation.leeway = self.config.leeway_seconds;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = decode::<BTreeMap<String, Value>>(token, &key, &validation)
            .map_err(|e| OidcError::Refused(e.to_string()))?
            .claims;
        let who = identity_of(&self.config, &claims)?;
        if !self.config.exchange_audiences.is_empty() {
            self.callers.remember(&who.uid, token, &claims);
        }
        Ok((who, claims))
    }

    /// Keeps the access token of `uid`'s login through the facade (good for `lifetime` seconds) for the
    /// exchanges of their runs' tokens, when runs may ask for any.
    pub fn remember_access_token(&self, uid: &str, token: &str, lifetime: i64) {
        if !self.config.exchange_audiences.is_empty() {
            self.callers.remember_access(uid, token, lifetime);
        }
    }

    /// A token of the user `uid` for `audience` (an MCP server's `caller` header), from the latest token
    /// they called with. Errors: [`exchange::ExchangeError`].
    pub async fn caller_token(&self, uid: &str, audience: &str) -> Result<String, exchange::ExchangeError> {
        let client = self.config.login.as_ref().map(|l| (l.client_id.as_str(), self.client_secret.as_deref()));
        let endpoint = async {
            let discovery = self.discovery().await.map_err(|e| e.to_string())?;
            discovery["token_endpoint"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| "the discovery document names no token_endpoint".to_string())
        };
        self.callers.token_for(uid, audience, &self.config.exchange_audiences, client, &self.http, endpoint).await
    }

    fn key(&self, kid: &str) -> Option<DecodingKey> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let keys = keys.as_ref().filter(|k| k.read_at.elapsed() < KEYS_TTL)?;
        let jwk = if kid.is_empty() && keys.set.keys.len() == 1 { keys.set.keys.first() } else { keys.set.find(kid) }?;
        DecodingKey::from_jwk(jwk).ok()
    }

    /// Reads the issuer's keys again: one read at a time, and at most one attempt (a failed one too)
    /// per [`MIN_REFRESH`], whose outcome the callers meanwhile get, so tokens with made-up key ids, sent
    /// by anyone, never make more calls to the issuer than that.
    async fn refresh(&self) -> Result<(), OidcError> {
        let mut last = self.refreshing.lock().await;
        if let Some((at, outcome)) = last.as_ref()
            && at.elapsed() < MIN_REFRESH
        {
            return outcome.clone();
        }
        let outcome = self.read_keys().await;
        *last = Some((Instant::now(), outcome.clone()));
        outcome
    }

    async fn read_keys(&self) -> Result<(), OidcError> {
        let discovery = self.discovery().await?;
        let uri = discovery["jwks_uri"]
            .as_str()
            .ok_or_else(|| OidcError::Issuer("the discovery document names no jwks_uri".into()))?;
        let set: JwkSet = serde_json::from_value(self.get_json(uri).await?)
            .map_err(|e| OidcError::Issuer(format!("{uri}: not a JWK set: {e}")))?;
        *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Some(Keys { set, read_at: Instant::now() });
        Ok(())
    }

    async fn get_json(&self, url: &str) -> Result<Value, OidcError> {
        let answer = self.http.get(url).send().await.map_err(|e| OidcError::Issuer(format!("{url}: {e}")))?;
        if !answer.status().is_success() {
            return Err(OidcError::Issuer(format!("{url} answered {}", answer.status())));
        }
        answer.json().await.map_err(|e| OidcError::Issuer(format!("{url}: {e}")))
    }
}

/// Checks what serde cannot: the issuer is `https://` (`http://` to loopback only, as a test issuer),
/// and no audience runs may get their user's token for is one this facade accepts (such a token would
/// let the server it is sent to call the facade, and any API server trusting it, as the user). Errors:
/// the field and why.
pub fn check_config(config: &OidcConfig) -> Result<(), String> {
    let loopback =
        ["http://127.0.0.1:", "http://127.0.0.1/", "http://localhost:", "http://localhost/", "http://[::1]:"];
    if !config.issuer.starts_with("https://") && !loopback.iter().any(|p| config.issuer.starts_with(p)) {
        return Err(format!("issuer: {:?} must be an https:// URL (http:// only to loopback)", config.issuer));
    }
    if let Some(shared) = config.exchange_audiences.iter().find(|a| config.audiences.contains(a)) {
        return Err(format!(
            "exchangeAudiences: {shared:?} is also one of audiences: a token for it would let the server it is sent to call this facade as the user"
        ));
    }
    Ok(())
}

/// The HTTP client of `config`'s issuer: ten seconds a request, its certificate authorities added.
fn http_client(config: &OidcConfig) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
    if let Some(path) = &config.certificate_authority {
        let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for certificate in
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| format!("{}: {e}", path.display()))?
        {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().map_err(|e| e.to_string())
}

/// The claims of a JWT whose signature was checked already.
fn decode_unverified(token: &str) -> Result<BTreeMap<String, Value>, OidcError> {
    use base64::Engine;
    let payload = token.split('.').nth(1).ok_or_else(|| OidcError::Refused("not a JWT".into()))?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|e| OidcError::Refused(format!("not a JWT: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| OidcError::Refused(format!("not a JWT: {e}")))
}

/// The strings of claim `name` (a string or a list of strings).
fn strings<'a>(claims: &'a BTreeMap<String, Value>, name: Option<&String>) -> Vec<&'a str> {
    claim_strings(name.and_then(|c| claims.get(c)))
}

/// The strings of a claim's value: a string, or a list of strings (others are left out).
pub(crate) fn claim_strings(value: Option<&Value>) -> Vec<&str> {
    match value {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// The identity `claims` give by `config`'s names and mappings: the Kubernetes username
/// ([`OidcConfig::username_prefix`] and the user claim), its uid by [`uid_of`], groups, role and
/// department. Errors: no user claim.
pub fn identity_of(config: &OidcConfig, claims: &BTreeMap<String, Value>) -> Result<Identity, OidcError> {
    let user = claims
        .get(&config.uid_claim)
        .and_then(Value::as_str)
        .filter(|uid| !uid.is_empty())
        .ok_or_else(|| OidcError::Refused(format!("the token has no {:?} claim", config.uid_claim)))?;
    let username = format!("{}{user}", config.username_prefix);
    let groups =
        strings(claims, config.groups_claim.as_ref()).iter().map(|g| format!("{}{g}", config.groups_prefix)).collect();
    let values = strings(claims, config.role_claim.as_ref());
    let has = |wanted: &[String]| values.iter().any(|v| wanted.iter().any(|w| w == v));
    let role = if has(&config.superadmin_values) {
        Role::Superadmin
    } else if has(&config.admin_values) {
        Role::Admin
    } else {
        Role::User
    };
    let department_id = config.department_claim.as_ref().and_then(|c| claims.get(c)).and_then(|v| match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    });
    Ok(Identity {
        uid: uid_of(&username),
        role,
        department_id,
        principal: Some(Principal { username, uid: None, groups }),
    })
}

pub mod exchange;

#[cfg(test)]
mod tests;
