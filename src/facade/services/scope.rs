//! Reading a user's scope folders, read-only and confined: a scope (`users/<uid>/workspace`,
//! `users/<uid>/threads/<thread_id>/{uploads,outputs}`, the sub-paths of [`crate::run::scope`]) is opened
//! as a capability handle (`cap_std::fs::Dir`) from a handle on the users' data folder, and every path
//! below it is resolved through that handle, `openat`-style: `..`, absolute paths and symlinks that lead
//! out of the scope are refused by the handle whatever a run wrote there. Paths a client gives are also
//! checked up front ([`segments`]): a `..` answers 422 naming the field.
//!
//! A listing shows folders and regular files only (never a symlink or a special file), at most
//! [`MAX_TREE_ENTRIES`]; a file is opened only when its last component is a regular file, not a symlink
//! (`O_NOFOLLOW`), and without blocking on a FIFO (`O_NONBLOCK`). Everything here blocks: callers run it
//! on the blocking pool ([`blocking`]).

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};

use crate::facade::http::error::ApiError;

/// The most entries one listing answers (a folder's, or a recursive walk's); beyond it answers 413
/// naming `max_tree_entries`.
pub const MAX_TREE_ENTRIES: usize = 1000;
/// The deepest a recursive listing goes below the folder it starts at.
pub const MAX_TREE_DEPTH: usize = 16;
/// The longest path a client may give, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;

/// What a read of a scope found instead of what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// Nothing there that may be read: missing, a symlink, a special file, or a path that leaves the
    /// scope (which the handle refuses). All answer alike, as a missing file.
    #[error("no such file or folder")]
    Missing,
    /// A folder where a file was asked for.
    #[error("is a folder, not a file")]
    IsFolder,
    /// A file where a folder was asked for.
    #[error("is a file, not a folder")]
    NotFolder,
    /// More than [`MAX_TREE_ENTRIES`] entries.
    #[error("more than {MAX_TREE_ENTRIES} entries (max_tree_entries)")]
    TooMany,
    /// The folder could not be read.
    #[error("{0}")]
    Io(io::Error),
}

impl From<io::Error> for ScopeError {
    /// What a path cannot name is missing: nothing there, a path out of the scope (the handle refuses it
    /// as PermissionDenied), a symlink at the end (a loop, with `O_NOFOLLOW`), a name too long or
    /// otherwise not one. Anything else is the folder failing to be read.
    fn from(err: io::Error) -> Self {
        let unnamed =
            matches!(
                err.kind(),
                io::ErrorKind::NotFound
                    | io::ErrorKind::PermissionDenied
                    | io::ErrorKind::NotADirectory
                    | io::ErrorKind::InvalidFilename
                    | io::ErrorKind::InvalidInput
            ) || matches!(err.raw_os_error(), Some(libc::ELOOP | libc::ENAMETOOLONG | libc::EACCES | libc::EPERM));
        if unnamed { ScopeError::Missing } else { ScopeError::Io(err) }
    }
}

/// `error` as the answer of a request whose path was in the query field `field`: 404 for what is not
/// there, 422 naming `field` for a folder or a file where the other was asked, 413 naming
/// `max_tree_entries`, 503 when the folder cannot be read.
pub fn answer(error: ScopeError, field: &str, path: &str) -> ApiError {
    match error {
        ScopeError::Missing => ApiError::NotFound(format!("{path:?}: no such file or folder")),
        ScopeError::IsFolder => ApiError::invalid(field, format!("{path:?} is a folder, not a file")),
        ScopeError::NotFolder => ApiError::invalid(field, format!("{path:?} is a file, not a folder")),
        ScopeError::TooMany => ApiError::TooLarge(format!(
            "max_tree_entries: {path:?} holds more than {MAX_TREE_ENTRIES} entries; list a folder below it"
        )),
        ScopeError::Io(err) => {
            tracing::error!(error = %err, "a user's files cannot be read");
            ApiError::Unavailable("the users' files cannot be read".into())
        }
    }
}

/// The segments of the path `path` a client gave in the field `field` (`/` or empty for the root; `.`
/// and empty segments dropped). Errors: 422 naming `field` for a `..`, a NUL, a `\`, or a path longer than
/// [`MAX_PATH_BYTES`].
pub fn segments(field: &str, path: &str) -> Result<Vec<String>, ApiError> {
    if path.len() > MAX_PATH_BYTES {
        return Err(ApiError::invalid(field, format!("is longer than {MAX_PATH_BYTES} bytes")));
    }
    if path.contains(['\0', '\\']) {
        return Err(ApiError::invalid(field, "holds a NUL or a backslash"));
    }
    let mut out = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(ApiError::invalid(field, "'..' is not allowed: a path may not leave its folder")),
            part => out.push(part.to_string()),
        }
    }
    Ok(out)
}

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its path below the scope, `/`-separated, without a leading `/`.
    pub rel: String,
    /// Its name.
    pub name: String,
    /// A folder (else a regular file).
    pub is_dir: bool,
    /// Its size, in bytes (0 for a folder).
    pub size: u64,
    /// When it last changed, RFC 3339 (empty when unknown).
    pub modified_at: String,
}

/// `time` as RFC 3339, or empty.
fn rfc3339(time: io::Result<SystemTime>) -> String {
    time.ok().and_then(|t| jiff::Timestamp::try_from(t).ok()).map(|t| t.to_string()).unwrap_or_default()
}

/// A scope folder opened for reading.
pub struct ScopeDir(Dir);

/// A regular file opened for reading in a scope.
pub struct OpenedFile {
    /// The file.
    pub file: std::fs::File,
    /// Its size when opened, in bytes.
    pub len: u64,
}

impl ScopeDir {
    /// The scope `sub_path` (a sub-path of [`crate::run::scope`], made of checked ids) of the users' data
    /// folder `data`, resolved through a handle on `data`; `None` when it does not exist yet (no run has
    /// written there). Errors: the data folder cannot be opened, or the scope is not a folder.
    pub fn open(data: &Path, sub_path: &str) -> Result<Option<ScopeDir>, ScopeError> {
        let root = Dir::open_ambient_dir(data, ambient_authority()).map_err(ScopeError::Io)?;
        match root.open_dir(sub_path) {
            Ok(dir) => Ok(Some(ScopeDir(dir))),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// The entries of the folder `rel` of the scope `sub_path` of `data`: its own ([`ScopeDir::list`]), or
    /// every one below it when `recursive` ([`ScopeDir::walk`]). A scope no run has written to yet is an
    /// empty folder with nothing below it ([`ScopeError::Missing`]). Errors as [`ScopeDir::open`] and
    /// [`ScopeDir::list`].
    pub fn list_in(data: &Path, sub_path: &str, rel: &[String], recursive: bool) -> Result<Vec<Entry>, ScopeError> {
        match ScopeDir::open(data, sub_path)? {
            Some(dir) if recursive => dir.walk(rel),
            Some(dir) => dir.list(rel),
            None if rel.is_empty() => Ok(Vec::new()),
            None => Err(ScopeError::Missing),
        }
    }

    /// The regular file `rel` of the scope `sub_path` of `data` ([`ScopeDir::open_file`]);
    /// [`ScopeError::Missing`] in a scope no run has written to yet. Errors as [`ScopeDir::open`] and
    /// [`ScopeDir::open_file`].
    pub fn open_file_in(data: &Path, sub_path: &str, rel: &[String]) -> Result<OpenedFile, ScopeError> {
        ScopeDir::open(data, sub_path)?.ok_or(ScopeError::Missing)?.open_file(rel)
    }

    /// When the scope folder last changed, RFC 3339 (empty when unknown).
    pub fn modified_at(&self) -> String {
        rfc3339(self.0.dir_metadata().and_then(|m| m.modified().map(|t| t.into_std())))
    }

    /// The folders and regular files of the folder `rel` (the scope itself when empty), sorted folders
    /// first, then by name without case. Errors: [`ScopeError::Missing`] (also for a symlink),
    /// [`ScopeError::NotFolder`], [`ScopeError::TooMany`].
    pub fn list(&self, rel: &[String]) -> Result<Vec<Entry>, ScopeError> {
        let mut entries = Vec::new();
        self.list_into(rel, &mut entries)?;
        sort(&mut entries);
        Ok(entries)
    }

    /// Every folder and regular file below the folder `rel`, at most [`MAX_TREE_DEPTH`] levels down,
    /// breadth first, each level sorted as [`ScopeDir::list`]. Errors as [`ScopeDir::list`].
    pub fn walk(&self, rel: &[String]) -> Result<Vec<Entry>, ScopeError> {
        let mut all = Vec::new();
        let mut level = vec![rel.to_vec()];
        for depth in 0..=MAX_TREE_DEPTH {
            let mut next = Vec::new();
            for folder in level {
                let mut entries = Vec::new();
                match self.list_into(&folder, &mut entries) {
                    Ok(()) => {}
                    // A folder removed meanwhile is left out, not an error.
                    Err(ScopeError::Missing) if depth > 0 => continue,
                    Err(err) => return Err(err),
                }
                sort(&mut entries);
                for entry in &entries {
                    if entry.is_dir {
                        next.push(entry.rel.split('/').map(String::from).collect::<Vec<_>>());
                    }
                }
                all.extend(entries);
                if all.len() > MAX_TREE_ENTRIES {
                    return Err(ScopeError::TooMany);
                }
            }
            level = next;
        }
        Ok(all)
    }

    fn list_into(&self, rel: &[String], out: &mut Vec<Entry>) -> Result<(), ScopeError> {
        let path = joined(rel);
        if !rel.is_empty() {
            let meta = self.0.symlink_metadata(&path)?;
            if meta.is_file() {
                return Err(ScopeError::NotFolder);
            }
            if !meta.is_dir() {
                return Err(ScopeError::Missing);
            }
        }
        let prefix = if rel.is_empty() { String::new() } else { format!("{}/", rel.join("/")) };
        for entry in self.0.read_dir(if rel.is_empty() { Path::new(".") } else { &path })? {
            let entry = entry.map_err(ScopeError::Io)?;
            let Ok(kind) = entry.file_type() else { continue };
            if !kind.is_dir() && !kind.is_file() {
                continue;
            }
            let Ok(name) = entry.file_name().into_string() else { continue };
            if out.len() >= MAX_TREE_ENTRIES {
                return Err(ScopeError::TooMany);
            }
            let meta = entry.metadata().ok();
            out.push(Entry {
                rel: format!("{prefix}{name}"),
                is_dir: kind.is_dir(),
                size: if kind.is_dir() { 0 } else { meta.as_ref().map_or(0, |m| m.len()) },
                modified_at: rfc3339(
                    meta.map(|m| m.modified().map(|t| t.into_std()))
                        .unwrap_or_else(|| Err(io::ErrorKind::Other.into())),
                ),
                name,
            });
        }
        Ok(())
    }

    /// The regular file `rel`. Errors: [`ScopeError::Missing`] (also for a symlink, a special file, or a
    /// path through a symlink out of the scope), [`ScopeError::IsFolder`] (also for an empty `rel`).
    pub fn open_file(&self, rel: &[String]) -> Result<OpenedFile, ScopeError> {
        if rel.is_empty() {
            return Err(ScopeError::IsFolder);
        }
        let mut options = OpenOptions::new();
        options.read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        let file = self.0.open_with(joined(rel), &options)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(ScopeError::IsFolder);
        }
        if !meta.is_file() {
            return Err(ScopeError::Missing);
        }
        Ok(OpenedFile { len: meta.len(), file: file.into_std() })
    }
}

fn joined(rel: &[String]) -> PathBuf {
    rel.iter().collect()
}

/// Folders first, then by name without case, then by name.
fn sort(entries: &mut [Entry]) {
    entries
        .sort_by(|a, b| (!a.is_dir, a.name.to_lowercase(), &a.name).cmp(&(!b.is_dir, b.name.to_lowercase(), &b.name)));
}

/// Runs `work` (file reads) on the blocking pool. Errors: what `work` returns, or 503 when it could not
/// run to its end.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::Unavailable(format!("the users' files could not be read: {e}")))?
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A data folder with alice's outputs scope holding a report, a folder, and links in and out.
    fn data() -> tempfile::TempDir {
        let data = tempfile::tempdir().expect("dir");
        let outputs = data.path().join("users/alice/threads/t1/outputs");
        std::fs::create_dir_all(outputs.join("charts")).expect("dirs");
        std::fs::write(outputs.join("report.md"), "# Report").expect("write");
        std::fs::write(outputs.join("charts/a.png"), [0x89, b'P', b'N', b'G']).expect("write");
        let secret = data.path().join("users/bob/workspace");
        std::fs::create_dir_all(&secret).expect("dirs");
        std::fs::write(secret.join("secret.txt"), "bob's").expect("write");
        symlink(secret.join("secret.txt"), outputs.join("leak.txt")).expect("link");
        symlink("../../../../bob/workspace", outputs.join("bobs")).expect("link");
        symlink("report.md", outputs.join("alias.md")).expect("link");
        data
    }

    fn seg(path: &str) -> Vec<String> {
        segments("query.path", path).expect("a path")
    }

    #[test]
    fn a_path_is_its_segments_and_never_climbs() {
        assert_eq!(seg("/outputs/./charts//a.png"), ["outputs", "charts", "a.png"]);
        assert!(seg("/").is_empty() && seg("").is_empty());
        for bad in ["/outputs/../../etc", "..", "a/..", "a\\b", "a\0b"] {
            let err = segments("query.path", bad).unwrap_err();
            assert!(matches!(&err, ApiError::Invalid { field, .. } if field == "query.path"), "{bad:?}: {err:?}");
        }
        assert!(segments("query.path", &"a/".repeat(3000)).is_err());
    }

    #[test]
    fn a_name_the_system_cannot_hold_is_missing_not_a_failure() {
        let data = data();
        let scope = ScopeDir::open(data.path(), "users/alice/threads/t1/outputs").expect("opens").expect("there");
        let long = vec!["x".repeat(300)];
        assert!(matches!(scope.open_file(&long), Err(ScopeError::Missing)));
        assert!(matches!(scope.list(&long), Err(ScopeError::Missing)));
    }

    #[test]
    fn a_scope_no_run_wrote_to_is_an_empty_folder_with_nothing_below() {
        let data = data();
        let unwritten = "users/carol/workspace";
        assert_eq!(ScopeDir::list_in(data.path(), unwritten, &[], true).expect("empty"), Vec::<Entry>::new());
        assert!(matches!(ScopeDir::list_in(data.path(), unwritten, &seg("notes"), false), Err(ScopeError::Missing)));
        assert!(matches!(ScopeDir::open_file_in(data.path(), unwritten, &seg("a.md")), Err(ScopeError::Missing)));
        let outputs = "users/alice/threads/t1/outputs";
        assert_eq!(ScopeDir::list_in(data.path(), outputs, &[], false).expect("lists").len(), 2);
        assert_eq!(ScopeDir::list_in(data.path(), outputs, &[], true).expect("walks").len(), 3);
        assert_eq!(ScopeDir::open_file_in(data.path(), outputs, &seg("report.md")).expect("the report").len, 8);
    }

    #[test]
    fn a_listing_shows_folders_and_files_never_links() {
        let data = data();
        let scope = ScopeDir::open(data.path(), "users/alice/threads/t1/outputs").expect("opens").expect("there");
        let names: Vec<_> = scope.list(&[]).expect("lists").into_iter().map(|e| (e.rel, e.is_dir, e.size)).collect();
        assert_eq!(names, [("charts".to_string(), true, 0), ("report.md".to_string(), false, 8)]);
        let walked: Vec<_> = scope.walk(&[]).expect("walks").into_iter().map(|e| e.rel).collect();
        assert_eq!(walked, ["charts", "report.md", "charts/a.png"]);
        assert!(matches!(scope.list(&seg("report.md")), Err(ScopeError::NotFolder)));
        // A link to a folder out of the scope is not a folder of it.
        assert!(matches!(scope.list(&seg("bobs")), Err(ScopeError::Missing)));
        assert!(matches!(scope.list(&seg("bobs/x")), Err(ScopeError::Missing)));
        assert!(ScopeDir::open(data.path(), "users/carol/workspace").expect("opens").is_none());
    }

    #[test]
    fn only_regular_files_in_the_scope_open_and_links_answer_as_missing() {
        let data = data();
        let scope = ScopeDir::open(data.path(), "users/alice/threads/t1/outputs").expect("opens").expect("there");
        let opened = scope.open_file(&seg("report.md")).expect("the report");
        assert_eq!(opened.len, 8);
        for missing in ["leak.txt", "alias.md", "bobs/secret.txt", "nothing.md", "charts/nothing"] {
            assert!(matches!(scope.open_file(&seg(missing)), Err(ScopeError::Missing)), "{missing}");
        }
        assert!(matches!(scope.open_file(&seg("charts")), Err(ScopeError::IsFolder)));
        assert!(matches!(scope.open_file(&[]), Err(ScopeError::IsFolder)));
        // A FIFO neither blocks nor opens.
        let fifo = data.path().join("users/alice/threads/t1/outputs/pipe");
        let c = std::ffi::CString::new(fifo.to_str().expect("UTF-8")).expect("path");
        // SAFETY: mkfifo(3) on a path this test owns.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(scope.open_file(&seg("pipe")), Err(ScopeError::Missing)));
        assert!(!scope.list(&[]).expect("lists").iter().any(|e| e.name == "pipe"));
    }

    #[test]
    fn a_folder_past_the_bound_is_refused_naming_it() {
        let data = tempfile::tempdir().expect("dir");
        let many = data.path().join("users/alice/workspace");
        std::fs::create_dir_all(&many).expect("dirs");
        for i in 0..=MAX_TREE_ENTRIES {
            std::fs::write(many.join(format!("f{i}")), "").expect("write");
        }
        let scope = ScopeDir::open(data.path(), "users/alice/workspace").expect("opens").expect("there");
        assert!(matches!(scope.list(&[]), Err(ScopeError::TooMany)));
        let answer = answer(ScopeError::TooMany, "query.path", "/");
        assert_eq!(answer.status().0.as_u16(), 413);
        assert!(answer.to_string().contains("max_tree_entries"), "{answer}");
    }
}
