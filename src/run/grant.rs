//! Run credentials: the grant a run token stands for, and the tokens themselves.
//!
//! A run token carries its grant and is signed by a key only the facade holds (HMAC-SHA256), so nothing
//! written into the run store can make one: a grant is believed only when its signature checks. A token
//! expires with its run's deadline at the latest (`exp`); the facade also refuses it once its run has
//! ended (revocation), which it reads from the run's record.
//!
//! Shape: `yxr_<payload>.<signature>`, both base64url without padding; the payload is the JSON of
//! [`SignedGrant`], the signature the HMAC-SHA256 of `yxr1.<payload>` under the key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde::{Deserialize, Serialize};

/// What a run's credentials stand for: the run acting as a parent, for its user. The facade takes the
/// parent of a tool call from these, never from the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunGrant {
    /// The run.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The conversation whose uploads and outputs it works in.
    pub file_thread_id: String,
    /// Its agent.
    pub agent: String,
    /// The user it runs for.
    pub uid: String,
    /// That user's role when the run started.
    pub role: crate::access::Role,
    /// That user's department.
    pub department_id: Option<i64>,
}

/// A grant as a token carries it: the grant and when the token stops working.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedGrant {
    /// What the token stands for.
    #[serde(flatten)]
    pub grant: RunGrant,
    /// When it expires, in seconds since the Unix epoch (the run's deadline at the latest).
    pub exp: i64,
}

/// The prefix of run tokens, so a run token is never sent to TokenReview.
pub const RUN_TOKEN_PREFIX: &str = "yxr_";
/// What the signature covers before the payload: the token format's version.
const SIGNED_PREFIX: &str = "yxr1.";
/// The longest token the facade reads, in bytes: a grant's ids are bounded (253 characters each).
pub const MAX_TOKEN_BYTES: usize = 4096;
/// The shortest signing key, in bytes (256 bits).
pub const MIN_KEY_BYTES: usize = 32;

/// The facade's key for run tokens.
#[derive(Clone)]
pub struct TokenKey(hmac::Key);

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(<hidden>)")
    }
}

/// Why a token is not believed. The facade answers each the same way (401), so a caller learns nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The key is shorter than [`MIN_KEY_BYTES`].
    #[error("a run token key must be at least {MIN_KEY_BYTES} bytes (is {0})")]
    ShortKey(usize),
    /// Not of the token's shape (prefix, two base64url parts, at most [`MAX_TOKEN_BYTES`]).
    #[error("not a run token")]
    Malformed,
    /// The signature does not check: made or changed by someone without the key.
    #[error("the run token's signature does not check")]
    BadSignature,
    /// Its `exp` has passed.
    #[error("the run token has expired")]
    Expired,
}

impl TokenKey {
    /// A key from its bytes. Errors: [`TokenError::ShortKey`] when shorter than [`MIN_KEY_BYTES`].
    pub fn new(bytes: &[u8]) -> Result<Self, TokenError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(TokenError::ShortKey(bytes.len()));
        }
        Ok(Self(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// A new random key (for a facade that is the only one to check its tokens: the local mode).
    pub fn random() -> Self {
        let bytes: Vec<u8> = (0..2).flat_map(|_| uuid::Uuid::new_v4().into_bytes()).collect();
        Self::new(&bytes).expect("32 random bytes")
    }

    /// The token for `grant`, good until `exp` (seconds since the Unix epoch).
    pub fn sign(&self, grant: &RunGrant, exp: i64) -> String {
        let signed = SignedGrant { grant: grant.clone(), exp };
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&signed).expect("a grant serializes"));
        let tag = hmac::sign(&self.0, format!("{SIGNED_PREFIX}{payload}").as_bytes());
        format!("{RUN_TOKEN_PREFIX}{payload}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// `payload` signed with this key for `purpose` (which is signed with it, so a value for one
    /// purpose is never taken for another's, nor for a run token): `<payload>.<tag>`, base64url.
    pub fn sign_value(&self, purpose: &str, payload: &[u8]) -> String {
        let payload = URL_SAFE_NO_PAD.encode(payload);
        let tag = hmac::sign(&self.0, format!("value:{purpose}:{payload}").as_bytes());
        format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// The payload of a value [`TokenKey::sign_value`] signed for `purpose`, when its tag checks.
    pub fn verify_value(&self, purpose: &str, signed: &str) -> Option<Vec<u8>> {
        if signed.len() > MAX_TOKEN_BYTES * 4 {
            return None;
        }
        let (payload, tag) = signed.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        hmac::verify(&self.0, format!("value:{purpose}:{payload}").as_bytes(), &tag).ok()?;
        URL_SAFE_NO_PAD.decode(payload).ok()
    }

    /// The grant `token` stands for, when its signature checks and it has not expired at `now` (seconds
    /// since the Unix epoch). Errors: [`TokenError`]. Whether its run is still going is the caller's to
    /// check.
    pub fn verify(&self, token: &str, now: i64) -> Result<SignedGrant, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Malformed);
        }
        let rest = token.strip_prefix(RUN_TOKEN_PREFIX).ok_or(TokenError::Malformed)?;
        let (payload, signature) = rest.split_once('.').ok_or(TokenError::Malformed)?;
        let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| TokenError::Malformed)?;
        hmac::verify(&self.0, format!("{SIGNED_PREFIX}{payload}").as_bytes(), &signature)
            .map_err(|_| TokenError::BadSignature)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| TokenError::Malformed)?;
        let signed: SignedGrant = serde_json::from_slice(&payload).map_err(|_| TokenError::Malformed)?;
        if signed.exp <= now {
            return Err(TokenError::Expired);
        }
        Ok(signed)
    }
}

/// How long a run token outlives its run's deadline, in seconds: the sandbox pod's grace after
/// `activeDeadlineSeconds` (its end-of-run reporting still reaches the facade).
pub const TOKEN_GRACE_SECONDS: i64 = 300;

/// When the token of a run started at `now` (seconds since the Unix epoch) with a timeout of
/// `timeout_seconds` expires: its deadline plus [`TOKEN_GRACE_SECONDS`].
pub fn token_expiry(now: i64, timeout_seconds: u64) -> i64 {
    now.saturating_add(i64::try_from(timeout_seconds).unwrap_or(i64::MAX)).saturating_add(TOKEN_GRACE_SECONDS)
}

/// The hex SHA-256 of a token: how logs and the store may name a token without holding it.
pub fn token_digest(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;

    fn grant(run_id: &str, uid: &str) -> RunGrant {
        RunGrant {
            run_id: run_id.into(),
            thread_id: "t".into(),
            file_thread_id: "t".into(),
            agent: "deep-research".into(),
            uid: uid.into(),
            role: Role::User,
            department_id: None,
        }
    }

    #[test]
    fn a_signed_token_gives_back_its_grant_until_it_expires() {
        let key = TokenKey::random();
        let token = key.sign(&grant("run-1", "alice"), 1_000);
        assert!(token.starts_with(RUN_TOKEN_PREFIX));
        let signed = key.verify(&token, 999).expect("valid");
        assert_eq!((signed.grant, signed.exp), (grant("run-1", "alice"), 1_000));
        assert_eq!(key.verify(&token, 1_000), Err(TokenError::Expired));
    }

    #[test]
    fn a_token_made_or_changed_without_the_key_is_refused() {
        let key = TokenKey::random();
        let token = key.sign(&grant("run-1", "alice"), 1_000);
        // Another key's token, as a forger with the store but not the facade's key would make it.
        let forged = TokenKey::random().sign(&grant("run-1", "root"), 1_000);
        assert_eq!(key.verify(&forged, 0), Err(TokenError::BadSignature));
        // The payload swapped for another grant under the original signature.
        let (_, signature) = token.rsplit_once('.').unwrap();
        let other = key.sign(&grant("run-2", "bob"), 1_000);
        let (payload, _) = other.rsplit_once('.').unwrap();
        assert_eq!(key.verify(&format!("{payload}.{signature}"), 0), Err(TokenError::BadSignature));
        // The old form (random hex) and garbage.
        for bad in ["yxr_0123456789abcdef", "yxr_a.b.c", "bearer", "", &"yxr_x".repeat(2000)] {
            assert!(matches!(key.verify(bad, 0), Err(TokenError::Malformed | TokenError::BadSignature)), "{bad}");
        }
    }

    #[test]
    fn a_key_must_have_256_bits() {
        assert_eq!(TokenKey::new(&[7; 31]).unwrap_err(), TokenError::ShortKey(31));
        assert!(TokenKey::new(&[7; 32]).is_ok());
    }
}
