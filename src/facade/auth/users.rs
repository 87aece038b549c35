//! The local mode's users file: bearer tokens and who they belong to.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

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
