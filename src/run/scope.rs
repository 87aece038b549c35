//! The run's four volumes (docs/concepts/scopes.md) and the one rule that places them: the sub-path of each
//! scope under the data root, the same in a pod (PVC subPaths) and in the local mode (folders under the
//! data folder).
//!
//! | path the model sees | scope | sub-path |
//! | --- | --- | --- |
//! | `/home/gem/user-data/workspace` | the user's shared workspace | `users/<uid>/workspace` |
//! | `/home/gem/user-data/uploads` | the parent conversation's uploads | `users/<uid>/threads/<file_thread_id>/uploads` |
//! | `/home/gem/user-data/outputs` | the parent conversation's outputs | `users/<uid>/threads/<file_thread_id>/outputs` |
//! | `/home/gem/skills` | the agent's own skills scope | `users/<uid>/skills/<thread_id>` |
//!
//! `file_thread_id` is the parent's `fileThreadId`, else the parent's thread, else the run's own thread:
//! a child works in its parent conversation's files, never in another's. Every scope is under its user's
//! folder, so a thread id claimed by someone else (after the store forgot its owner) reaches only that
//! someone's own files. Every segment must be an id of
//! [`is_valid_id`] (no `/`, no leading `.`), so no sub-path can climb out of its scope.

use std::io;
use std::path::{Path, PathBuf};

use super::thread_id::is_valid_id;
use crate::resources::ParentRef;

/// The root of the user data volumes, as the model sees it.
pub const USER_DATA: &str = "/home/gem/user-data";
/// The skills scope, as the model sees it.
pub const SKILLS: &str = "/home/gem/skills";

/// One of the run's volumes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `/home/gem/user-data/workspace`.
    Workspace,
    /// `/home/gem/user-data/uploads`.
    Uploads,
    /// `/home/gem/user-data/outputs`.
    Outputs,
    /// `/home/gem/skills` (read-only).
    Skills,
}

impl Scope {
    /// The four volumes.
    pub const ALL: [Scope; 4] = [Scope::Workspace, Scope::Uploads, Scope::Outputs, Scope::Skills];

    /// The path the model sees for this volume.
    pub fn virtual_root(self) -> &'static str {
        match self {
            Scope::Workspace => "/home/gem/user-data/workspace",
            Scope::Uploads => "/home/gem/user-data/uploads",
            Scope::Outputs => "/home/gem/user-data/outputs",
            Scope::Skills => SKILLS,
        }
    }

    /// Whether the model may write into this volume (every one but the skills).
    pub fn writable(self) -> bool {
        self != Scope::Skills
    }
}

/// Where each volume is on this machine (in a pod: the mount points; in the local mode: folders under
/// the data folder).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumePaths {
    /// The user's workspace.
    pub workspace: PathBuf,
    /// The parent conversation's uploads.
    pub uploads: PathBuf,
    /// The parent conversation's outputs.
    pub outputs: PathBuf,
    /// The agent's skills scope.
    pub skills: PathBuf,
}

impl VolumePaths {
    /// The volumes' real paths as a pod mounts them: the same paths the model sees.
    pub fn in_pod() -> Self {
        Self {
            workspace: Scope::Workspace.virtual_root().into(),
            uploads: Scope::Uploads.virtual_root().into(),
            outputs: Scope::Outputs.virtual_root().into(),
            skills: SKILLS.into(),
        }
    }

    /// The four volumes as the folders `workspace`, `uploads`, `outputs` and `skills` under `root`.
    pub fn under(root: &Path) -> Self {
        Self {
            workspace: root.join("workspace"),
            uploads: root.join("uploads"),
            outputs: root.join("outputs"),
            skills: root.join("skills"),
        }
    }

    /// Creates the four folders, with their parents, where they are missing.
    pub fn create_all(&self) -> io::Result<()> {
        Scope::ALL.into_iter().try_for_each(|scope| std::fs::create_dir_all(self.of(scope)))
    }

    /// The real path of a volume.
    pub fn of(&self, scope: Scope) -> &Path {
        match scope {
            Scope::Workspace => &self.workspace,
            Scope::Uploads => &self.uploads,
            Scope::Outputs => &self.outputs,
            Scope::Skills => &self.skills,
        }
    }
}

/// The ids a run's volumes are placed by, each checked to be a safe path segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeIds {
    /// The user: the workspace.
    pub uid: String,
    /// The run's thread: the skills scope.
    pub thread_id: String,
    /// The conversation whose uploads and outputs the run works in.
    pub file_thread_id: String,
}

/// An id that would become a sub-path segment is not an id of [`is_valid_id`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {value:?} cannot be a path segment: {ID_RULE}")]
pub struct NotAPathSegment {
    /// Where the id came from, such as `spec.uid`.
    pub field: String,
    /// The id.
    pub value: String,
}

/// What an id that becomes a path segment must be ([`is_valid_id`]).
pub const ID_RULE: &str = "an id is 1 to 253 letters, digits, '.', '_' and '-', starting with a letter or digit";

/// `id` as a path segment, or the error naming `field`.
pub fn segment(field: &str, id: &str) -> Result<String, NotAPathSegment> {
    if is_valid_id(id) {
        Ok(id.to_string())
    } else {
        Err(NotAPathSegment { field: field.to_string(), value: id.to_string() })
    }
}

/// The conversation whose files a run works in: the parent's `fileThreadId`, else the parent's thread,
/// else the run's own thread.
pub fn file_thread_id<'a>(thread_id: &'a str, parent: Option<&'a ParentRef>) -> &'a str {
    match parent {
        Some(parent) => parent.file_thread_id.as_deref().unwrap_or(&parent.thread_id),
        None => thread_id,
    }
}

impl ScopeIds {
    /// The ids of a run of `uid` on `thread_id` (from the field `thread_field`) under `parent`.
    ///
    /// Errors: an id that is not a safe path segment, naming its field (`spec.uid`, the thread's field,
    /// `spec.parent.fileThreadId` or `spec.parent.threadId`).
    pub fn new(
        uid: &str,
        thread_field: &str,
        thread_id: &str,
        parent: Option<&ParentRef>,
    ) -> Result<Self, NotAPathSegment> {
        let uid = segment("spec.uid", uid)?;
        let thread_id = segment(thread_field, thread_id)?;
        let file_thread_id = match parent {
            Some(parent) => match &parent.file_thread_id {
                Some(file_thread_id) => segment("spec.parent.fileThreadId", file_thread_id)?,
                None => segment("spec.parent.threadId", &parent.thread_id)?,
            },
            None => thread_id.clone(),
        };
        Ok(Self { uid, thread_id, file_thread_id })
    }

    /// The sub-path of `scope` under the data root (see the module's table).
    pub fn sub_path(&self, scope: Scope) -> String {
        match scope {
            Scope::Workspace => format!("users/{}/workspace", self.uid),
            Scope::Uploads => format!("users/{}/threads/{}/uploads", self.uid, self.file_thread_id),
            Scope::Outputs => format!("users/{}/threads/{}/outputs", self.uid, self.file_thread_id),
            Scope::Skills => format!("users/{}/skills/{}", self.uid, self.thread_id),
        }
    }

    /// The four volumes as folders under `data_dir`, at their sub-paths (the local mode's layout).
    pub fn volumes_under(&self, data_dir: &Path) -> VolumePaths {
        VolumePaths {
            workspace: data_dir.join(self.sub_path(Scope::Workspace)),
            uploads: data_dir.join(self.sub_path(Scope::Uploads)),
            outputs: data_dir.join(self.sub_path(Scope::Outputs)),
            skills: data_dir.join(self.sub_path(Scope::Skills)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent(thread_id: &str, file_thread_id: Option<&str>) -> ParentRef {
        ParentRef {
            run_id: "run-1".into(),
            thread_id: thread_id.into(),
            agent: "deep-research".into(),
            file_thread_id: file_thread_id.map(String::from),
            tool_call_id: None,
            root_run_id: None,
        }
    }

    #[test]
    fn a_child_works_in_its_parent_conversations_files_and_its_own_skills() {
        let ids = ScopeIds::new("alice", "spec.threadId", "t_sub_x_1", Some(&parent("t", None))).unwrap();
        assert_eq!(ids.sub_path(Scope::Workspace), "users/alice/workspace");
        assert_eq!(ids.sub_path(Scope::Uploads), "users/alice/threads/t/uploads");
        assert_eq!(ids.sub_path(Scope::Outputs), "users/alice/threads/t/outputs");
        assert_eq!(ids.sub_path(Scope::Skills), "users/alice/skills/t_sub_x_1");
        let ids = ScopeIds::new("alice", "spec.threadId", "t_sub_x_1", Some(&parent("t", Some("f")))).unwrap();
        assert_eq!(ids.sub_path(Scope::Outputs), "users/alice/threads/f/outputs");
        let own = ScopeIds::new("alice", "spec.threadId", "t", None).unwrap();
        assert_eq!(own.sub_path(Scope::Uploads), "users/alice/threads/t/uploads");
        // Keyed by the owner: the same thread id of another user is another folder.
        let bobs = ScopeIds::new("bob", "spec.threadId", "t", None).unwrap();
        assert_ne!(bobs.sub_path(Scope::Uploads), own.sub_path(Scope::Uploads));
        assert_eq!(file_thread_id("t", None), "t");
    }

    #[test]
    fn an_id_that_could_climb_out_of_its_scope_is_refused_naming_its_field() {
        let err = ScopeIds::new("../root", "spec.threadId", "t", None).unwrap_err();
        assert_eq!(err.field, "spec.uid");
        let err = ScopeIds::new("alice", "metadata.name", "a/b", None).unwrap_err();
        assert_eq!(err.field, "metadata.name");
        let err = ScopeIds::new("alice", "spec.threadId", "t", Some(&parent("t", Some(".hidden")))).unwrap_err();
        assert_eq!(err.field, "spec.parent.fileThreadId");
        let err = ScopeIds::new("alice", "spec.threadId", "t", Some(&parent("..", None))).unwrap_err();
        assert_eq!(err.field, "spec.parent.threadId");
    }
}
