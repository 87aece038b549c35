//! Run credentials: the grant a run token stands for, and the tokens themselves. The facade keeps only a
//! token's SHA-256 with its grant; the token reaches the runner in its environment.

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

/// The prefix of run tokens, so a run token is never sent to TokenReview.
pub const RUN_TOKEN_PREFIX: &str = "yxr_";

/// A new run token: the prefix and 256 random bits in hex.
pub fn new_run_token() -> String {
    let bits = uuid::Uuid::new_v4().simple().to_string() + &uuid::Uuid::new_v4().simple().to_string();
    format!("{RUN_TOKEN_PREFIX}{bits}")
}

/// The hex SHA-256 of a token: the key its grant is stored under.
pub fn token_digest(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}
