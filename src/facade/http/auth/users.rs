//! The local mode's users file: bearer tokens and who they belong to, and optionally an argon2 hash of a
//! password to log in with (`POST /api/auth/token`, the account feature's login), which answers the user's
//! token. The file never holds a plain password: an entry with a `password` field is refused.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use serde::Deserialize;

use crate::access::{Identity, Role};

/// The most failed logins one username may have from one client (or in all, when the client is not
/// known) within [`LOGIN_WINDOW`] before further tries of that client answer 429: a stranger's tries
/// never lock the user out of their own client.
pub const MAX_FAILED_LOGINS: u32 = 5;
/// The most failed logins one client (an IPv4 address, an IPv6 /64) may have within [`LOGIN_WINDOW`],
/// whatever the usernames, before its further tries answer 429.
pub const MAX_FAILED_LOGINS_PER_CLIENT: u32 = 20;
/// How long failed logins are counted: until this long after the last one.
pub const LOGIN_WINDOW: Duration = Duration::from_secs(300);
/// How many usernames' failure counts are kept at most (the oldest go first).
const FAILURE_CACHE: u64 = 10_000;

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
    /// The name to log in with; the uid when absent.
    #[serde(default)]
    pub username: Option<String>,
    /// An argon2 hash (PHC string, `$argon2id$...`) of the password to log in with, as
    /// `yuxi-operator hash-password` prints it; without one the user cannot log in with a password.
    #[serde(default)]
    pub password_hash: Option<String>,
}

/// A user who may log in with a password.
#[derive(Clone, Debug)]
struct Login {
    identity: Identity,
    token: String,
    password_hash: String,
}

/// What a successful login gives: who, by which name, and the bearer token to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedIn {
    /// Who.
    pub identity: Identity,
    /// The name logged in with.
    pub username: String,
    /// The user's bearer token.
    pub token: String,
}

/// A login did not succeed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// Unknown username, no password for it, or the wrong password: one answer for all, so a caller
    /// cannot tell which.
    #[error("the username or the password is wrong")]
    Refused,
    /// The username has failed [`MAX_FAILED_LOGINS`] times from this client within [`LOGIN_WINDOW`].
    #[error("{MAX_FAILED_LOGINS} failed logins for this username within {} s; wait before trying again", LOGIN_WINDOW.as_secs())]
    TooMany,
    /// This client has failed [`MAX_FAILED_LOGINS_PER_CLIENT`] times within [`LOGIN_WINDOW`].
    #[error("{MAX_FAILED_LOGINS_PER_CLIENT} failed logins from this address within {} s; wait before trying again", LOGIN_WINDOW.as_secs())]
    TooManyFromClient,
}

/// The client a login's failures are counted for: an IPv4 address, or an IPv6 address's /64.
fn client_key(client: std::net::IpAddr) -> String {
    match client {
        std::net::IpAddr::V4(v4) => format!("client {v4}"),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => format!("client {v4}"),
            None => {
                let s = v6.segments();
                format!("client {:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// Tokens and who they belong to, and the logins by name.
#[derive(Clone, Debug)]
pub struct Users {
    by_token: Arc<HashMap<String, Identity>>,
    by_name: Arc<HashMap<String, Login>>,
    people: Arc<Vec<Person>>,
    failures: moka::sync::Cache<String, u32>,
}

/// One user of the file, without their secrets: what an administrator's user picker lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    /// Who.
    pub identity: Identity,
    /// The name they log in with (the uid when the entry names none).
    pub username: String,
}

impl Default for Users {
    fn default() -> Self {
        Self {
            by_token: Default::default(),
            by_name: Default::default(),
            people: Default::default(),
            failures: failure_cache(),
        }
    }
}

fn failure_cache() -> moka::sync::Cache<String, u32> {
    moka::sync::Cache::builder().max_capacity(FAILURE_CACHE).time_to_live(LOGIN_WINDOW).build()
}

/// A hash checked when the username is unknown, so an unknown name takes as long to refuse as a wrong
/// password.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("decoy password, never matched").unwrap_or_default())
}

/// The argon2id hash (PHC string) of `password`, with a fresh random salt: what a users file's
/// `password_hash` holds. Errors: the system's random source or the hasher failed (the message says).
pub fn hash_password(password: &str) -> Result<String, String> {
    use ring::rand::SecureRandom;
    let mut salt = [0u8; 16];
    ring::rand::SystemRandom::new().fill(&mut salt).map_err(|_| "the system's random source failed".to_string())?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether `password` matches the PHC string `hash` (false for a hash that does not parse).
fn verify(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash)
        .is_ok_and(|parsed| argon2::Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
}

impl Users {
    /// Users from entries.
    ///
    /// Errors: [`UsersError::EmptyToken`], [`UsersError::InvalidUid`] (not an id of
    /// [`crate::run::thread_id::is_valid_id`]), [`UsersError::DuplicateToken`],
    /// [`UsersError::DuplicateUsername`] or [`UsersError::BadPasswordHash`] (not an argon2 PHC string),
    /// naming the entry by its index.
    pub fn new(entries: Vec<UserEntry>) -> Result<Self, UsersError> {
        let mut by_token = HashMap::new();
        let mut by_name = HashMap::new();
        let mut people: Vec<Person> = Vec::new();
        for (index, entry) in entries.into_iter().enumerate() {
            if entry.token.is_empty() {
                return Err(UsersError::EmptyToken { index });
            }
            if !crate::run::thread_id::is_valid_id(&entry.uid) {
                return Err(UsersError::InvalidUid { index, uid: entry.uid });
            }
            let identity = Identity::new(entry.uid.clone(), entry.role, entry.department_id);
            if by_token.insert(entry.token.clone(), identity.clone()).is_some() {
                return Err(UsersError::DuplicateToken { index });
            }
            let name = entry.username.clone().unwrap_or_else(|| entry.uid.clone());
            // A user may have several tokens: listed once.
            if !people.iter().any(|p| p.identity.uid == identity.uid) {
                people.push(Person { identity: identity.clone(), username: name.clone() });
            }
            if let Some(hash) = entry.password_hash {
                let argon2 = PasswordHash::new(&hash).is_ok_and(|h| h.algorithm.as_str().starts_with("argon2"));
                if !argon2 {
                    return Err(UsersError::BadPasswordHash { index });
                }
                let login = Login { identity, token: entry.token, password_hash: hash };
                if by_name.insert(name, login).is_some() {
                    return Err(UsersError::DuplicateUsername { index });
                }
            }
        }
        people.sort_by(|a, b| a.identity.uid.cmp(&b.identity.uid));
        Ok(Self {
            by_token: Arc::new(by_token),
            by_name: Arc::new(by_name),
            people: Arc::new(people),
            failures: failure_cache(),
        })
    }

    /// Every user of the file, once each, by uid.
    pub fn people(&self) -> &[Person] {
        &self.people
    }

    /// Reads a users file: a YAML list of `{token, uid, role, department_id, username, password_hash}`.
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

    /// Logs `username` in with `password`: the user and their token. An unknown name is checked against
    /// a decoy hash, so it takes as long as a wrong password. Each refusal counts against the username;
    /// past [`MAX_FAILED_LOGINS`] within [`LOGIN_WINDOW`] every try is [`LoginError::TooMany`] without
    /// checking the password, until the window has passed; a success clears the count. Blocking (argon2
    /// takes tens of milliseconds): call it off the async runtime.
    pub fn login(&self, username: &str, password: &str) -> Result<LoggedIn, LoginError> {
        self.login_from(username, password, None)
    }

    /// [`login`](Self::login) from `client`: failures count per username and client
    /// ([`MAX_FAILED_LOGINS`], [`LoginError::TooMany`]) and per client whatever the username
    /// ([`MAX_FAILED_LOGINS_PER_CLIENT`], [`LoginError::TooManyFromClient`]), so another client's tries
    /// never lock a user out. Without a client, failures count per username alone.
    pub fn login_from(
        &self,
        username: &str,
        password: &str,
        client: Option<std::net::IpAddr>,
    ) -> Result<LoggedIn, LoginError> {
        let client = client.map(client_key);
        let name_key = match &client {
            Some(client) => format!("{username}\u{0}{client}"),
            None => username.to_string(),
        };
        if let Some(client) = &client
            && self.failures.get(client).unwrap_or(0) >= MAX_FAILED_LOGINS_PER_CLIENT
        {
            return Err(LoginError::TooManyFromClient);
        }
        if self.failures.get(&name_key).unwrap_or(0) >= MAX_FAILED_LOGINS {
            return Err(LoginError::TooMany);
        }
        // Counted as a failure before the password is checked, in one step per key, so tries made at once
        // cannot all pass the limit while each is being checked.
        let count = |key: &str, by: i64| {
            self.failures
                .entry(key.to_string())
                .and_upsert_with(|count| (i64::from(count.map_or(0, |c| *c.value())) + by).max(0) as u32)
                .into_value()
        };
        let tries = count(&name_key, 1);
        let client_tries = client.as_deref().map(|client| count(client, 1));
        if client_tries.is_some_and(|n| n > MAX_FAILED_LOGINS_PER_CLIENT) {
            return Err(LoginError::TooManyFromClient);
        }
        if tries > MAX_FAILED_LOGINS {
            return Err(LoginError::TooMany);
        }
        let found = self.by_name.get(username);
        let matches = verify(found.map_or(decoy_hash(), |l| l.password_hash.as_str()), password);
        match found {
            Some(login) if matches => {
                self.failures.invalidate(&name_key);
                if let Some(client) = &client {
                    count(client, -1);
                }
                Ok(LoggedIn {
                    identity: login.identity.clone(),
                    username: username.to_string(),
                    token: login.token.clone(),
                })
            }
            _ => Err(LoginError::Refused),
        }
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
    /// The file is not a YAML list of users (an unknown field such as a plain `password` included).
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
    /// An entry with a password has the login name (`username`, else `uid`) of an earlier one.
    #[error("users[{index}].username is used twice")]
    DuplicateUsername {
        /// The index of the second entry with the name, from 0.
        index: usize,
    },
    /// An entry's `password_hash` is not an argon2 PHC string.
    #[error("users[{index}].password_hash is not an argon2 hash; make one with `yuxi-operator hash-password`")]
    BadPasswordHash {
        /// The entry's index in the list, from 0.
        index: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hash: Option<String>) -> UserEntry {
        UserEntry {
            token: "t".into(),
            uid: "alice".into(),
            role: Role::User,
            department_id: None,
            username: None,
            password_hash: hash,
        }
    }

    #[test]
    fn a_hash_verifies_its_password_only() {
        let users = Users::new(vec![entry(Some(hash_password("s3cret-pass").expect("hash")))]).expect("users");
        assert_eq!(users.login("alice", "s3cret-pass").map(|l| l.token), Ok("t".into()));
        assert_eq!(users.login("alice", "wrong"), Err(LoginError::Refused));
        assert_eq!(users.login("nobody", "s3cret-pass"), Err(LoginError::Refused));
    }

    #[test]
    fn a_hash_that_is_not_argon2_is_refused_at_load() {
        assert!(matches!(Users::new(vec![entry(Some("plain".into()))]), Err(UsersError::BadPasswordHash { index: 0 })));
        let plain = "- {token: t, uid: a, role: user, password: hunter2}";
        assert!(serde_norway::from_str::<Vec<UserEntry>>(plain).is_err(), "a plain password is an unknown field");
    }

    #[test]
    fn the_example_users_file_loads_and_alice_logs_in() {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/local-users.yaml");
        let users = Users::load(&file).expect("the example users file");
        assert_eq!(users.login("alice", "alice-password").map(|l| l.token), Ok("alice-token".into()));
        assert_eq!(users.identify("bob-token").map(|i| i.uid.as_str()), Some("bob"));
    }

    #[test]
    fn failed_logins_are_limited_per_username() {
        let users = Users::new(vec![entry(Some(hash_password("s3cret-pass").expect("hash")))]).expect("users");
        for _ in 0..MAX_FAILED_LOGINS {
            assert_eq!(users.login("alice", "wrong"), Err(LoginError::Refused));
        }
        assert_eq!(users.login("alice", "s3cret-pass"), Err(LoginError::TooMany), "even the right password waits");
        assert_eq!(users.login("bob", "x"), Err(LoginError::Refused), "another username is not limited");
    }

    #[test]
    fn failed_logins_made_at_once_are_limited_too() {
        let users = Users::new(vec![entry(Some(hash_password("s3cret-pass").expect("hash")))]).expect("users");
        let checked = std::thread::scope(|s| {
            let tries: Vec<_> = (0..4 * MAX_FAILED_LOGINS).map(|_| s.spawn(|| users.login("alice", "wrong"))).collect();
            tries.into_iter().map(|t| t.join().expect("a try")).filter(|r| *r == Err(LoginError::Refused)).count()
        });
        assert!(
            checked <= MAX_FAILED_LOGINS as usize,
            "{checked} passwords were checked for one username at once; at most {MAX_FAILED_LOGINS}"
        );
        assert_eq!(users.login("alice", "s3cret-pass"), Err(LoginError::TooMany));
    }

    #[test]
    fn a_strangers_failures_do_not_lock_a_user_out_of_their_own_client() {
        let users = Users::new(vec![entry(Some(hash_password("s3cret-pass").expect("hash")))]).expect("users");
        let (stranger, own) = (Some("203.0.113.9".parse().expect("ip")), Some("198.51.100.7".parse().expect("ip")));
        for _ in 0..MAX_FAILED_LOGINS {
            assert_eq!(users.login_from("alice", "wrong", stranger), Err(LoginError::Refused));
        }
        assert_eq!(users.login_from("alice", "s3cret-pass", stranger), Err(LoginError::TooMany));
        assert_eq!(users.login_from("alice", "s3cret-pass", own).map(|l| l.token), Ok("t".into()));
    }

    #[test]
    fn one_client_trying_many_usernames_is_limited() {
        let users = Users::new(vec![entry(Some(hash_password("s3cret-pass").expect("hash")))]).expect("users");
        let client = Some("2001:db8:1:2:3:4:5:6".parse().expect("ip"));
        for n in 0..MAX_FAILED_LOGINS_PER_CLIENT {
            assert_eq!(users.login_from(&format!("user-{n}"), "wrong", client), Err(LoginError::Refused));
        }
        // Another address of the same /64 is the same client.
        let same = Some("2001:db8:1:2:ffff::1".parse().expect("ip"));
        assert_eq!(users.login_from("alice", "s3cret-pass", same), Err(LoginError::TooManyFromClient));
        assert!(LoginError::TooManyFromClient.to_string().contains("from this address"));
    }
}
