//! (Over 500 lines: six tools over one confinement rule, which is the point of keeping them together; tests in `files/tests.rs`.)
//! The file tools (`ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`), confined to the run's
//! volumes (DESIGN.md section 5):
//!
//! | path the model sees | volume | access |
//! | --- | --- | --- |
//! | `/home/gem/user-data/workspace` | the user's shared workspace | read-write |
//! | `/home/gem/user-data/uploads` | the parent conversation's uploads | read-write |
//! | `/home/gem/user-data/outputs` | the parent conversation's outputs | read-write |
//! | `/home/gem/skills` | the agent's own skills scope | read-only |
//!
//! A relative path is taken from the workspace. Every file operation goes through a `cap_std::fs::Dir`
//! opened on the volume, which refuses `..`, absolute paths and symlinks that lead out of it; a `..` is
//! also refused up front with a clear message. An escaping call returns a tool error and touches nothing.

use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use futures::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use regex::Regex;
use serde_json::{Value, json};

use super::{Tool, ToolError, ToolSpec, names, opt_bool, opt_str, opt_u64, req_str};
pub use crate::run::scope::{SKILLS, Scope, USER_DATA, VolumePaths};

/// The largest file `read_file`, `edit_file` and `grep` read, and `write_file` writes, in bytes.
const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;
/// The most lines `read_file` returns by default.
const DEFAULT_READ_LINES: u64 = 2000;
/// The longest line `read_file` and `grep` show, in characters.
const MAX_LINE_CHARS: usize = 2000;
/// The most entries `ls` lists, paths `glob` returns and matches `grep` returns.
const MAX_RESULTS: usize = 500;
/// The most directory entries `glob` and `grep` visit in one call.
const MAX_VISITS: usize = 20_000;

/// The opened volumes of a run. Every file operation goes through these handles.
pub struct Volumes {
    dirs: Vec<(Scope, Dir)>,
}

impl Volumes {
    /// Opens the four volumes. Errors: a volume folder that does not exist or cannot be opened.
    pub fn open(paths: &VolumePaths) -> io::Result<Self> {
        let mut dirs = Vec::new();
        for scope in Scope::ALL {
            let path = paths.of(scope);
            let dir = Dir::open_ambient_dir(path, ambient_authority())
                .map_err(|e| io::Error::new(e.kind(), format!("cannot open volume {}: {e}", path.display())))?;
            dirs.push((scope, dir));
        }
        Ok(Self { dirs })
    }

    fn dir(&self, scope: Scope) -> &Dir {
        &self.dirs.iter().find(|(s, _)| *s == scope).expect("every scope is opened").1
    }
}

/// Where a model's path points.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// A folder above the volumes (`/`, `/home`, `/home/gem`, `/home/gem/user-data`), listing only.
    Above(&'static str),
    /// A path inside a volume, relative to its root (empty for the root itself).
    In(Scope, PathBuf),
}

/// Resolves a path the model wrote. Errors: an empty path, a `..` component, or a path outside the
/// volumes.
fn resolve(path: &str) -> Result<Target, ToolError> {
    if path.trim().is_empty() {
        return Err(ToolError::new("the path is empty"));
    }
    if path.contains('\0') {
        return Err(ToolError::new("the path contains a NUL character"));
    }
    let absolute =
        if path.starts_with('/') { path.to_string() } else { format!("{}/{path}", Scope::Workspace.virtual_root()) };
    let mut parts = Vec::new();
    for component in Path::new(&absolute).components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                return Err(ToolError::new(format!("{path}: '..' is not allowed; paths may not leave their volume")));
            }
            Component::Normal(part) => {
                parts.push(part.to_str().ok_or_else(|| ToolError::new(format!("{path}: not valid UTF-8")))?)
            }
            Component::Prefix(_) => return Err(ToolError::new(format!("{path}: not a path of this system"))),
        }
    }
    let outside = || {
        ToolError::new(format!(
            "{path} is outside the run's volumes ({}/workspace, {USER_DATA}/uploads, {USER_DATA}/outputs, {SKILLS})",
            USER_DATA
        ))
    };
    let rest = |n: usize| parts[n..].iter().collect::<PathBuf>();
    match parts.as_slice() {
        [] => Ok(Target::Above("/")),
        ["home"] => Ok(Target::Above("/home")),
        ["home", "gem"] => Ok(Target::Above("/home/gem")),
        ["home", "gem", "user-data"] => Ok(Target::Above(USER_DATA)),
        ["home", "gem", "user-data", "workspace", ..] => Ok(Target::In(Scope::Workspace, rest(4))),
        ["home", "gem", "user-data", "uploads", ..] => Ok(Target::In(Scope::Uploads, rest(4))),
        ["home", "gem", "user-data", "outputs", ..] => Ok(Target::In(Scope::Outputs, rest(4))),
        ["home", "gem", "skills", ..] => Ok(Target::In(Scope::Skills, rest(3))),
        _ => Err(outside()),
    }
}

/// The children of a folder above the volumes.
fn children_above(above: &str) -> Vec<&'static str> {
    match above {
        "/" => vec!["/home/"],
        "/home" => vec!["/home/gem/"],
        "/home/gem" => vec!["/home/gem/skills/", "/home/gem/user-data/"],
        _ => vec!["/home/gem/user-data/outputs/", "/home/gem/user-data/uploads/", "/home/gem/user-data/workspace/"],
    }
}

/// The model's path of `rel` in `scope`.
fn virtual_path(scope: Scope, rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        scope.virtual_root().to_string()
    } else {
        format!("{}/{}", scope.virtual_root(), rel.display())
    }
}

/// `.` for a volume's root, `rel` otherwise: what cap-std takes.
fn rel_or_dot(rel: &Path) -> &Path {
    if rel.as_os_str().is_empty() { Path::new(".") } else { rel }
}

fn io_error(path: &str, err: io::Error) -> ToolError {
    match err.kind() {
        io::ErrorKind::NotFound => ToolError::new(format!("{path}: no such file or directory")),
        io::ErrorKind::PermissionDenied => ToolError::new(format!(
            "{path}: not accessible (a path may not leave its volume, through '..' or a symlink)"
        )),
        _ => ToolError::new(format!("{path}: {err}")),
    }
}

/// Which file tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileOp {
    /// `ls`.
    Ls,
    /// `read_file`.
    ReadFile,
    /// `write_file`.
    WriteFile,
    /// `edit_file`.
    EditFile,
    /// `glob`.
    Glob,
    /// `grep`.
    Grep,
}

impl FileOp {
    /// Every file tool.
    pub const ALL: [FileOp; 6] =
        [FileOp::Ls, FileOp::ReadFile, FileOp::WriteFile, FileOp::EditFile, FileOp::Glob, FileOp::Grep];

    /// The tool's name.
    pub fn name(self) -> &'static str {
        match self {
            FileOp::Ls => names::LS,
            FileOp::ReadFile => names::READ_FILE,
            FileOp::WriteFile => names::WRITE_FILE,
            FileOp::EditFile => names::EDIT_FILE,
            FileOp::Glob => names::GLOB,
            FileOp::Grep => names::GREP,
        }
    }
}

/// A file tool bound to a run's volumes.
pub struct FileTool {
    op: FileOp,
    volumes: Arc<Volumes>,
}

impl FileTool {
    /// The tool `op` working on `volumes`.
    pub fn new(op: FileOp, volumes: Arc<Volumes>) -> Self {
        Self { op, volumes }
    }
}

impl Tool for FileTool {
    fn spec(&self) -> ToolSpec {
        let (description, parameters) = match self.op {
            FileOp::Ls => (
                "List a directory. Folders end with '/'. The run's files live under /home/gem/user-data/{workspace,uploads,outputs}; skills under /home/gem/skills.",
                json!({"type": "object", "properties": {"path": {"type": "string", "description": "Directory to list; default /home/gem/user-data/workspace"}}}),
            ),
            FileOp::ReadFile => (
                "Read a text file. Lines are numbered from 1; use offset and limit to page through long files.",
                json!({"type": "object", "required": ["path"], "properties": {
                    "path": {"type": "string", "description": "File to read"},
                    "offset": {"type": "integer", "minimum": 0, "description": "Lines to skip; default 0"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most lines to return; default 2000"}}}),
            ),
            FileOp::WriteFile => (
                "Create or overwrite a text file (parent folders are created). Put deliverables under /home/gem/user-data/outputs.",
                json!({"type": "object", "required": ["path", "content"], "properties": {
                    "path": {"type": "string"}, "content": {"type": "string"}}}),
            ),
            FileOp::EditFile => (
                "Replace old_string with new_string in a file. old_string must occur exactly once unless replace_all is true.",
                json!({"type": "object", "required": ["path", "old_string", "new_string"], "properties": {
                    "path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence; default false"}}}),
            ),
            FileOp::Glob => (
                "Find files whose path (relative to path) matches a glob pattern such as **/*.md.",
                json!({"type": "object", "required": ["pattern"], "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string", "description": "Folder to search; default /home/gem/user-data/workspace"}}}),
            ),
            FileOp::Grep => (
                "Search text files for a regular expression; answers path:line:text for each matching line.",
                json!({"type": "object", "required": ["pattern"], "properties": {
                    "pattern": {"type": "string", "description": "A regular expression"},
                    "path": {"type": "string", "description": "File or folder to search; default /home/gem/user-data/workspace"},
                    "glob": {"type": "string", "description": "Only files whose relative path matches this glob"}}}),
            ),
        };
        ToolSpec { name: self.op.name().to_string(), description: description.to_string(), parameters }
    }

    fn call(&self, arguments: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        let op = self.op;
        let volumes = self.volumes.clone();
        Box::pin(async move {
            // cap-std does blocking I/O: keep it off the async workers.
            match tokio::task::spawn_blocking(move || run_op(op, &volumes, &arguments)).await {
                Ok(result) => result,
                Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
                Err(err) => Err(ToolError::new(format!("the file operation was stopped: {err}"))),
            }
        })
    }
}

fn run_op(op: FileOp, volumes: &Volumes, arguments: &Value) -> Result<String, ToolError> {
    match op {
        FileOp::Ls => ls(volumes, opt_str(arguments, "path")?.unwrap_or(Scope::Workspace.virtual_root())),
        FileOp::ReadFile => read_file(
            volumes,
            req_str(arguments, "path")?,
            opt_u64(arguments, "offset")?.unwrap_or(0),
            opt_u64(arguments, "limit")?.unwrap_or(DEFAULT_READ_LINES),
        ),
        FileOp::WriteFile => write_file(volumes, req_str(arguments, "path")?, req_str(arguments, "content")?),
        FileOp::EditFile => edit_file(
            volumes,
            req_str(arguments, "path")?,
            req_str(arguments, "old_string")?,
            req_str(arguments, "new_string")?,
            opt_bool(arguments, "replace_all")?.unwrap_or(false),
        ),
        FileOp::Glob => glob(
            volumes,
            req_str(arguments, "pattern")?,
            opt_str(arguments, "path")?.unwrap_or(Scope::Workspace.virtual_root()),
        ),
        FileOp::Grep => grep(
            volumes,
            req_str(arguments, "pattern")?,
            opt_str(arguments, "path")?.unwrap_or(Scope::Workspace.virtual_root()),
            opt_str(arguments, "glob")?,
        ),
    }
}

fn in_volume(path: &str) -> Result<(Scope, PathBuf), ToolError> {
    match resolve(path)? {
        Target::In(scope, rel) => Ok((scope, rel)),
        Target::Above(_) => Err(ToolError::new(format!("{path} is a folder above the volumes, not a file"))),
    }
}

fn writable(path: &str) -> Result<(Scope, PathBuf), ToolError> {
    let (scope, rel) = in_volume(path)?;
    if !scope.writable() {
        return Err(ToolError::new(format!("{path}: {SKILLS} is read-only")));
    }
    if rel.as_os_str().is_empty() {
        return Err(ToolError::new(format!("{path} is a volume's root folder, not a file")));
    }
    Ok((scope, rel))
}

fn ls(volumes: &Volumes, path: &str) -> Result<String, ToolError> {
    let (scope, rel) = match resolve(path)? {
        Target::Above(above) => return Ok(children_above(above).join("\n")),
        Target::In(scope, rel) => (scope, rel),
    };
    let entries = volumes.dir(scope).read_dir(rel_or_dot(&rel)).map_err(|e| io_error(path, e))?;
    let mut lines = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_error(path, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let shown = virtual_path(scope, &rel.join(&name));
        lines.push(if is_dir { format!("{shown}/") } else { shown });
    }
    lines.sort();
    let total = lines.len();
    lines.truncate(MAX_RESULTS);
    if total > MAX_RESULTS {
        lines.push(format!("... {} more entries", total - MAX_RESULTS));
    }
    if lines.is_empty() {
        return Ok(format!("{path} is empty"));
    }
    Ok(lines.join("\n"))
}

/// Opens a regular file for reading, or for writing (created, truncated), without blocking: a FIFO or a
/// device in a volume must not hang the tool (a FIFO opened for writing with no reader fails at once, one
/// opened for reading is refused as not a regular file).
fn open_regular(dir: &Dir, rel: &Path, path: &str, write: bool) -> Result<cap_std::fs::File, ToolError> {
    use cap_std::fs::{OpenOptions, OpenOptionsExt};
    let mut options = OpenOptions::new();
    if write {
        options.write(true).create(true);
    } else {
        options.read(true);
    }
    options.custom_flags(libc::O_NONBLOCK);
    let file = dir.open_with(rel, &options).map_err(|e| match e.raw_os_error() {
        Some(libc::ENXIO) => ToolError::new(format!("{path} is not a regular file")),
        _ => io_error(path, e),
    })?;
    let metadata = file.metadata().map_err(|e| io_error(path, e))?;
    if metadata.is_dir() {
        return Err(ToolError::new(format!("{path} is a folder; use ls")));
    }
    if !metadata.is_file() {
        return Err(ToolError::new(format!("{path} is not a regular file")));
    }
    if write {
        file.set_len(0).map_err(|e| io_error(path, e))?;
    }
    Ok(file)
}

/// Reads a whole text file of at most [`MAX_FILE_BYTES`].
fn read_text(dir: &Dir, rel: &Path, path: &str) -> Result<String, ToolError> {
    let file = open_regular(dir, rel, path, false)?;
    let length = file.metadata().map_err(|e| io_error(path, e))?.len();
    if length > MAX_FILE_BYTES {
        return Err(ToolError::new(format!("{path} has {length} bytes, more than the {MAX_FILE_BYTES} a tool reads")));
    }
    let mut bytes = Vec::with_capacity(length as usize);
    // A file that grows while it is read still stops at the limit.
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| io_error(path, e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ToolError::new(format!("{path} has more than the {MAX_FILE_BYTES} bytes a tool reads")));
    }
    String::from_utf8(bytes).map_err(|_| ToolError::new(format!("{path} is not a UTF-8 text file")))
}

/// Writes `content` to a regular file (created when missing), refusing more than [`MAX_FILE_BYTES`].
fn write_text(dir: &Dir, rel: &Path, path: &str, content: &str) -> Result<(), ToolError> {
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(ToolError::new(format!(
            "the new content of {path} has {} bytes, more than the {MAX_FILE_BYTES} a tool writes",
            content.len()
        )));
    }
    let mut file = open_regular(dir, rel, path, true)?;
    std::io::Write::write_all(&mut file, content.as_bytes()).map_err(|e| io_error(path, e))
}

fn cut_line(line: &str) -> String {
    if line.chars().count() > MAX_LINE_CHARS {
        let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
        format!("{cut}... [line cut]")
    } else {
        line.to_string()
    }
}

fn read_file(volumes: &Volumes, path: &str, offset: u64, limit: u64) -> Result<String, ToolError> {
    let (scope, rel) = in_volume(path)?;
    let text = read_text(volumes.dir(scope), rel_or_dot(&rel), path)?;
    if text.is_empty() {
        return Ok(format!("{path} is empty"));
    }
    let total = text.lines().count() as u64;
    if offset >= total {
        return Err(ToolError::new(format!("{path} has {total} lines; offset {offset} is past the end")));
    }
    let limit = limit.max(1);
    let mut out: Vec<String> = text
        .lines()
        .enumerate()
        .skip(offset as usize)
        .take(limit as usize)
        .map(|(i, line)| format!("{:>6}\t{}", i + 1, cut_line(line)))
        .collect();
    let end = offset.saturating_add(limit);
    if end < total {
        out.push(format!("... {} more lines (read on with offset {end})", total - end));
    }
    Ok(out.join("\n"))
}

fn write_file(volumes: &Volumes, path: &str, content: &str) -> Result<String, ToolError> {
    let (scope, rel) = writable(path)?;
    let dir = volumes.dir(scope);
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        dir.create_dir_all(parent).map_err(|e| io_error(path, e))?;
    }
    write_text(dir, &rel, path, content)?;
    Ok(format!("wrote {} bytes to {path}", content.len()))
}

fn edit_file(volumes: &Volumes, path: &str, old: &str, new: &str, replace_all: bool) -> Result<String, ToolError> {
    let (scope, rel) = writable(path)?;
    if old.is_empty() {
        return Err(ToolError::new("old_string is empty"));
    }
    let dir = volumes.dir(scope);
    let text = read_text(dir, &rel, path)?;
    let count = text.matches(old).count();
    let replaced = match count {
        0 => return Err(ToolError::new(format!("old_string does not occur in {path}"))),
        1 => text.replacen(old, new, 1),
        _ if replace_all => text.replace(old, new),
        n => {
            return Err(ToolError::new(format!(
                "old_string occurs {n} times in {path}; give more context to make it unique, or set replace_all"
            )));
        }
    };
    write_text(dir, &rel, path, &replaced)?;
    Ok(format!("replaced {count} occurrence{} in {path}", if count == 1 { "" } else { "s" }))
}

/// The files under `path` (a file, a folder in a volume, or a folder above the volumes), as (scope,
/// relative path within the scope, path relative to `path`), depth first, sorted by name, without following
/// symlinked folders.
fn walk_files(volumes: &Volumes, path: &str) -> Result<Vec<(Scope, PathBuf, PathBuf)>, ToolError> {
    let roots: Vec<(Scope, PathBuf, PathBuf)> = match resolve(path)? {
        Target::In(scope, rel) => vec![(scope, rel, PathBuf::new())],
        Target::Above(above) => Scope::ALL
            .into_iter()
            .filter(|s| s.virtual_root().starts_with(above))
            .map(|s| {
                let shown = s.virtual_root().strip_prefix(above).unwrap_or_default().trim_start_matches('/');
                (s, PathBuf::new(), PathBuf::from(shown))
            })
            .collect(),
    };
    let mut files = Vec::new();
    let mut visits = 0;
    for (scope, rel, shown) in roots {
        let dir = volumes.dir(scope);
        let metadata = dir.metadata(rel_or_dot(&rel)).map_err(|e| io_error(path, e))?;
        if metadata.is_file() {
            files.push((scope, rel, shown));
            continue;
        }
        let mut stack = vec![(rel, shown)];
        while let Some((folder, shown)) = stack.pop() {
            let mut entries: Vec<_> = dir
                .read_dir(rel_or_dot(&folder))
                .map_err(|e| io_error(&virtual_path(scope, &folder), e))?
                .filter_map(Result::ok)
                .collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries.into_iter().rev() {
                visits += 1;
                if visits > MAX_VISITS {
                    return Err(ToolError::new(format!(
                        "{path} holds more than {MAX_VISITS} entries; search a smaller folder"
                    )));
                }
                let name = entry.file_name();
                let Ok(kind) = entry.file_type() else { continue };
                if kind.is_dir() {
                    stack.push((folder.join(&name), shown.join(&name)));
                } else if kind.is_file() {
                    files.push((scope, folder.join(&name), shown.join(&name)));
                }
            }
        }
    }
    files.sort_by_key(|a| virtual_path(a.0, &a.1));
    Ok(files)
}

fn matcher(pattern: &str) -> Result<GlobMatcher, ToolError> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::new(format!("the glob pattern {pattern:?} is invalid: {e}")))
}

fn glob(volumes: &Volumes, pattern: &str, path: &str) -> Result<String, ToolError> {
    let matcher = matcher(pattern)?;
    let mut found: Vec<String> = walk_files(volumes, path)?
        .into_iter()
        .filter(|(_, _, shown)| matcher.is_match(shown))
        .map(|(scope, rel, _)| virtual_path(scope, &rel))
        .collect();
    if found.is_empty() {
        return Ok(format!("no files under {path} match {pattern}"));
    }
    let total = found.len();
    found.truncate(MAX_RESULTS);
    if total > MAX_RESULTS {
        found.push(format!("... {} more files", total - MAX_RESULTS));
    }
    Ok(found.join("\n"))
}

fn grep(volumes: &Volumes, pattern: &str, path: &str, glob: Option<&str>) -> Result<String, ToolError> {
    let regex = Regex::new(pattern)
        .map_err(|e| ToolError::new(format!("the pattern {pattern:?} is not a valid regular expression: {e}")))?;
    let filter = glob.map(matcher).transpose()?;
    let mut matches = Vec::new();
    let mut total = 0;
    for (scope, rel, shown) in walk_files(volumes, path)? {
        if filter.as_ref().is_some_and(|m| !m.is_match(&shown)) {
            continue;
        }
        let shown_path = virtual_path(scope, &rel);
        // Files that are too large or not text are skipped, not errors: grep searches text.
        let Ok(text) = read_text(volumes.dir(scope), &rel, &shown_path) else { continue };
        for (i, line) in text.lines().enumerate() {
            if regex.is_match(line) {
                total += 1;
                if matches.len() < MAX_RESULTS {
                    matches.push(format!("{shown_path}:{}:{}", i + 1, cut_line(line)));
                }
            }
        }
    }
    if matches.is_empty() {
        return Ok(format!("no lines under {path} match {pattern}"));
    }
    if total > MAX_RESULTS {
        matches.push(format!("... {} more matching lines", total - MAX_RESULTS));
    }
    Ok(matches.join("\n"))
}

#[cfg(test)]
mod tests;
