//! Bearer tokens of an OIDC provider, verified locally: the issuer's keys are read from its discovery
//! document's `jwks_uri` and cached; a token signed by a key the cache does not hold makes the cache be
//! read again (at most once per [`MIN_REFRESH`]), so a key rotation at the issuer is followed without a
//! restart. A token is accepted when its signature verifies with one of those keys (never `alg: none`,
//! never a symmetric algorithm), its `iss` is the issuer, its `aud` one of the audiences, and it is
//! within its `exp` and `nbf`, with [`OidcConfig::leeway_seconds`] of leeway. Its claims give the
//! caller's uid, role and department, by the configured claim names and mappings.

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;
use serde_json::Value;

use crate::access::{Identity, Role};

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
    /// The claim giving the uid. Default `sub`.
    #[serde(default = "default_uid_claim")]
    pub uid_claim: String,
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

fn default_leeway() -> u64 {
    30
}

/// Why a token is refused, or the issuer cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
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
}

impl OidcVerifier {
    /// A verifier of `config`'s issuer; its keys are read at the first token.
    pub fn new(config: OidcConfig) -> OidcVerifier {
        crate::tls::install_crypto_provider();
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
        OidcVerifier { config, http, keys: RwLock::new(None) }
    }

    /// The issuer's configuration.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// Whether `token` says it is this issuer's (a JWT whose unverified `iss` is the issuer): only
    /// which checker to ask is decided by it; [`OidcVerifier::identify`] verifies.
    pub fn is_for(&self, token: &str) -> bool {
        use base64::Engine;
        let Some(payload) = token.split('.').nth(1) else { return false };
        let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) else { return false };
        serde_json::from_slice::<Value>(&bytes).is_ok_and(|claims| claims["iss"] == self.config.issuer.as_str())
    }

    /// The caller `token` names. Errors: [`OidcError::Refused`] for a token that is not accepted,
    /// [`OidcError::Issuer`] when the issuer's keys cannot be read.
    pub async fn identify(&self, token: &str) -> Result<Identity, OidcError> {
        let header = decode_header(token).map_err(|e| OidcError::Refused(format!("not a JWT: {e}")))?;
        if matches!(header.alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
            return Err(OidcError::Refused(format!("{:?} is not an algorithm of an issuer's keys", header.alg)));
        }
        let kid = header.kid.clone().unwrap_or_default();
        let key = match self.key(&kid) {
            Some(key) => key,
            None => {
                self.refresh(false).await?;
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
        identity_of(&self.config, &claims)
    }

    fn key(&self, kid: &str) -> Option<DecodingKey> {
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let keys = keys.as_ref().filter(|k| k.read_at.elapsed() < KEYS_TTL)?;
        let jwk = if kid.is_empty() && keys.set.keys.len() == 1 { keys.set.keys.first() } else { keys.set.find(kid) }?;
        DecodingKey::from_jwk(jwk).ok()
    }

    /// Reads the issuer's keys again, unless they were read less than [`MIN_REFRESH`] ago (`force`
    /// reads them anyway).
    async fn refresh(&self, force: bool) -> Result<(), OidcError> {
        let recent = self
            .keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|k| k.read_at.elapsed() < MIN_REFRESH);
        if recent && !force {
            return Ok(());
        }
        let issuer = self.config.issuer.trim_end_matches('/');
        let discovery: Value = self.get_json(&format!("{issuer}/.well-known/openid-configuration")).await?;
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

/// The identity `claims` give by `config`'s names and mappings. Errors: no uid claim.
pub fn identity_of(config: &OidcConfig, claims: &BTreeMap<String, Value>) -> Result<Identity, OidcError> {
    let uid = claims
        .get(&config.uid_claim)
        .and_then(Value::as_str)
        .filter(|uid| !uid.is_empty())
        .ok_or_else(|| OidcError::Refused(format!("the token has no {:?} claim", config.uid_claim)))?;
    let values: Vec<&str> = match config.role_claim.as_ref().and_then(|c| claims.get(c)) {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
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
    Ok(Identity { uid: uid.to_string(), role, department_id })
}

#[cfg(test)]
mod tests;
