//! The local mode's data folder (`--data-dir`): taken with a lock so two local modes never share one,
//! and watched while the local mode runs, so a folder deleted, replaced or made read-only under it is
//! said plainly (the log names the folder, `/readyz` answers 503 naming it) instead of surfacing later
//! as a failed index lock or a save that silently starts an empty folder.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use yuxi_operator::facade::services::local_mode::LocalMode;

/// The lock file of a data folder, which the local mode serving it holds.
const DATA_LOCK: &str = "local.lock";

/// How often the data folder is looked at.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The data folder as the local mode took it: its path and identity (device and inode), so that a
/// folder deleted and made again under the same name is told apart.
#[derive(Clone, Debug)]
pub struct DataFolder {
    path: PathBuf,
    device: u64,
    inode: u64,
}

impl DataFolder {
    /// Makes `path` (0700) when it is missing, saying so, since whatever a former data folder held is
    /// not in it. Returns the folder, canonical. Errors: it cannot be made or read.
    pub fn take(path: &Path) -> anyhow::Result<Self> {
        if !path.exists() {
            tracing::info!(
                data_dir = %path.display(),
                "making a new data folder: the agents and knowledge bases created through the API, the users' files and the indexes start empty"
            );
        }
        std::fs::create_dir_all(path)
            .map_err(|e| anyhow::anyhow!("cannot make the data folder {}: {e}", path.display()))?;
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        let path = path.canonicalize()?;
        let meta = std::fs::metadata(&path)?;
        Ok(Self { path, device: meta.dev(), inode: meta.ino() })
    }

    /// The folder's path, canonical.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is wrong with the folder now, naming it; `None` while it is the folder taken and writable.
    pub fn problem(&self) -> Option<String> {
        let folder = self.path.display();
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                return Some(format!(
                    "the data folder {folder} is gone: it was deleted while the local mode ran, with the runs' files, the indexes and the agents and knowledge bases created through the API; restart the local mode to start a new one"
                ));
            }
            Err(err) => return Some(format!("the data folder {folder} cannot be read: {err}")),
        };
        if (meta.dev(), meta.ino()) != (self.device, self.inode) {
            return Some(format!(
                "the data folder {folder} was replaced by another folder while the local mode ran; what it held is not there; restart the local mode to use the new one"
            ));
        }
        let probe = self.path.join(format!(".writable-{}", std::process::id()));
        match std::fs::write(&probe, b"") {
            Ok(()) => {
                let _ = std::fs::remove_file(&probe);
                None
            }
            Err(err) => Some(format!("the data folder {folder} is not writable: {err}")),
        }
    }

    /// Looks at the folder every second until the task is dropped, and records what is wrong in `local`
    /// (which `/readyz` and the writes into the folder read); a change is logged once, naming the folder.
    pub fn spawn_guard(self, local: LocalMode) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut said: Option<String> = None;
            loop {
                let folder = self.clone();
                let problem = tokio::task::spawn_blocking(move || folder.problem()).await.unwrap_or(None);
                if problem != said {
                    match &problem {
                        Some(problem) => tracing::error!(data_dir = %self.path.display(), "{problem}"),
                        None => tracing::info!(data_dir = %self.path.display(), "the data folder is writable again"),
                    }
                    local.set_data_problem(problem.clone());
                    said = problem;
                }
                tokio::time::sleep(CHECK_EVERY).await;
            }
        })
    }

    /// Takes the folder's lock (`<data-dir>/local.lock`, an exclusive `flock` held until the returned
    /// file is closed, with this process's id written in it), so that two local modes never share one
    /// folder: their runs, agents and knowledge bases would overwrite each other's. Errors: the lock is
    /// held (the message names the folder and, when it can, the other process), or the file cannot be
    /// opened.
    pub fn lock(&self) -> anyhow::Result<std::fs::File> {
        use std::io::{Read, Seek, Write};
        use std::os::fd::AsRawFd;
        let path = self.path.join(DATA_LOCK);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        // SAFETY: flock(2) on a descriptor this function owns; no memory is shared.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let by = if holder.is_empty() { String::new() } else { format!(" (process {holder})") };
            anyhow::bail!(
                "another local mode{by} serves the data folder {}: stop it, or give this one another --data-dir",
                self.path.display()
            );
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        Ok(file)
    }
}
