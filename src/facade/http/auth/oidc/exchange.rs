//! Tokens of a user for another audience ([`CallerTokens`]): what an MCP server that wants to know the
//! person behind a run is sent (its `caller` header). The latest OIDC token each user called the facade
//! with is kept in this process's memory only (never in the run store, never given to a sandbox), keyed
//! by the user's uid; a run asks with its run token, whose grant names its user, so a run only ever
//! gets its own user's token. A token already for the audience is forwarded; otherwise it is exchanged
//! at the issuer (RFC 8693, the facade's client credentials) and the answer kept until shortly before
//! it expires.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

/// How much memory the kept tokens may take, in bytes (a token is weighed by its length).
pub const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// A token is not handed out when it expires within this many seconds.
pub const MIN_LIFE_SECONDS: i64 = 30;
/// RFC 8693's grant type.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// Why no token can be given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExchangeError {
    /// The audience is not one the configuration lets runs ask for (`exchangeAudiences`).
    #[error("tokens for {0:?} are not given out here: it is not one of the OIDC configuration's exchangeAudiences")]
    NotAllowed(String),
    /// No unexpired token of the user is at hand (they have not called this facade replica with one
    /// lately, or it has expired).
    #[error(
        "no current token of the run's user is at hand on this facade: the user has not called it with an OIDC token lately, or it has expired"
    )]
    NoSubject,
    /// The facade has no client at the issuer to exchange with (`login.clientId`).
    #[error("the facade has no client at the issuer (login.clientId) to exchange tokens with")]
    NoClient,
    /// The issuer refused or failed.
    #[error("the issuer's token exchange: {0}")]
    Issuer(String),
}

#[derive(Clone)]
struct Kept {
    token: String,
    exp: i64,
    audiences: Vec<String>,
    id_token: bool,
}

/// The users' latest tokens and the tokens exchanged for them.
pub struct CallerTokens {
    /// The latest verified bearer token of each user.
    subjects: moka::sync::Cache<String, Kept>,
    /// The access token of each user's latest login through the facade (what an exchange prefers:
    /// some issuers exchange access tokens only).
    access: moka::sync::Cache<String, Kept>,
    exchanged: moka::sync::Cache<(String, String), Kept>,
}

impl Default for CallerTokens {
    fn default() -> Self {
        let weigh = |key_len: usize, kept: &Kept| u32::try_from(key_len + kept.token.len()).unwrap_or(u32::MAX);
        CallerTokens {
            subjects: moka::sync::Cache::builder()
                .max_capacity(MAX_BYTES / 4)
                .weigher(move |uid: &String, kept: &Kept| weigh(uid.len(), kept))
                .time_to_live(Duration::from_secs(24 * 3600))
                .build(),
            access: moka::sync::Cache::builder()
                .max_capacity(MAX_BYTES / 4)
                .weigher(move |uid: &String, kept: &Kept| weigh(uid.len(), kept))
                .time_to_live(Duration::from_secs(24 * 3600))
                .build(),
            exchanged: moka::sync::Cache::builder()
                .max_capacity(MAX_BYTES / 2)
                .weigher(move |key: &(String, String), kept: &Kept| weigh(key.0.len() + key.1.len(), kept))
                .time_to_live(Duration::from_secs(24 * 3600))
                .build(),
        }
    }
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

impl CallerTokens {
    /// Keeps `token` (verified, with `claims`) as `uid`'s latest, unless a kept one lives longer.
    pub fn remember(&self, uid: &str, token: &str, claims: &BTreeMap<String, Value>) {
        let exp = claims.get("exp").and_then(Value::as_i64).unwrap_or_default();
        if self.subjects.get(uid).is_some_and(|kept| kept.exp > exp) {
            return;
        }
        // An ID token carries what only an ID token has: its nonce, at_hash or auth_time.
        let id_token = ["nonce", "at_hash", "auth_time"].iter().any(|c| claims.contains_key(*c));
        self.subjects.insert(
            uid.to_string(),
            Kept {
                token: token.to_string(),
                exp,
                audiences: super::claim_strings(claims.get("aud")).into_iter().map(str::to_string).collect(),
                id_token,
            },
        );
    }

    /// Keeps the access token of `uid`'s login, good for `lifetime` seconds, for exchanges.
    pub fn remember_access(&self, uid: &str, token: &str, lifetime: i64) {
        let kept = Kept {
            token: token.to_string(),
            exp: now() + lifetime.clamp(0, 24 * 3600),
            audiences: Vec::new(),
            id_token: false,
        };
        self.access.insert(uid.to_string(), kept);
    }

    /// A token of `uid` for `audience`: the user's own when it is for that audience, else one the
    /// issuer's `token_endpoint` exchanged it for, with the client `client_id`/`secret`, through `http`.
    /// Errors: [`ExchangeError`].
    pub async fn token_for(
        &self,
        uid: &str,
        audience: &str,
        allowed: &[String],
        client: Option<(&str, Option<&str>)>,
        http: &reqwest::Client,
        token_endpoint: impl std::future::Future<Output = Result<String, String>>,
    ) -> Result<String, ExchangeError> {
        if !allowed.iter().any(|a| a == audience) {
            return Err(ExchangeError::NotAllowed(audience.to_string()));
        }
        let subject =
            self.subjects.get(uid).filter(|s| s.exp > now() + MIN_LIFE_SECONDS).ok_or(ExchangeError::NoSubject)?;
        // Forwarded only when it is for that audience alone: a token for more would let its receiver
        // use it where the other audiences accept it.
        if subject.audiences.len() == 1 && subject.audiences[0] == audience {
            return Ok(subject.token);
        }
        let key = (uid.to_string(), audience.to_string());
        if let Some(kept) = self.exchanged.get(&key).filter(|k| k.exp > now() + MIN_LIFE_SECONDS) {
            return Ok(kept.token);
        }
        let (client_id, secret) = client.ok_or(ExchangeError::NoClient)?;
        // The login's access token when there is a current one (some issuers exchange nothing else).
        let subject = self.access.get(uid).filter(|a| a.exp > now() + MIN_LIFE_SECONDS).unwrap_or(subject);
        let endpoint = token_endpoint.await.map_err(ExchangeError::Issuer)?;
        let subject_type = if subject.id_token {
            "urn:ietf:params:oauth:token-type:id_token"
        } else {
            "urn:ietf:params:oauth:token-type:access_token"
        };
        let mut request = http.post(&endpoint).form(&[
            ("grant_type", GRANT_TYPE),
            ("subject_token", subject.token.as_str()),
            ("subject_token_type", subject_type),
            ("requested_token_type", "urn:ietf:params:oauth:token-type:access_token"),
            ("audience", audience),
            ("client_id", client_id),
        ]);
        if let Some(secret) = secret {
            request = request.basic_auth(client_id, Some(secret));
        }
        let answer = request.send().await.map_err(|e| ExchangeError::Issuer(e.to_string()))?;
        let status = answer.status();
        let body: Value = answer.json().await.map_err(|e| ExchangeError::Issuer(e.to_string()))?;
        if !status.is_success() {
            let why = body["error_description"].as_str().or(body["error"].as_str()).unwrap_or("no reason given");
            return Err(ExchangeError::Issuer(format!("{status}: {why}")));
        }
        let token = body["access_token"].as_str().ok_or_else(|| ExchangeError::Issuer("no access_token".into()))?;
        let lifetime = body["expires_in"].as_i64().unwrap_or(300).clamp(0, 24 * 3600);
        let kept =
            Kept { token: token.to_string(), exp: now() + lifetime, audiences: vec![audience.into()], id_token: false };
        self.exchanged.insert(key, kept);
        Ok(token.to_string())
    }
}
