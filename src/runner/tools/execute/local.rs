//! Running commands on this machine: a subprocess in the workspace with an emptied environment, inside
//! bubblewrap (the run's volumes at the paths the model sees, a minimal read-only system, no network, its
//! own process tree, resource limits) when it works, and refused otherwise unless the operator allowed
//! commands to run unconfined.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

use super::request::{ExecError, ExecOutcome, ExecRequest};
use crate::runner::tools::files::{Scope, VolumePaths};

/// The `PATH` commands get; nothing else of the runner's environment is passed on.
const SAFE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Whether commands may run when bubblewrap cannot confine them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Confinement {
    /// They may not: `execute` answers a tool error saying why (the default).
    #[default]
    Required,
    /// They run as plain subprocesses with an emptied environment and no capabilities
    /// (`--unconfined-sandbox`): they can read and write whatever the runner's user owns or may read
    /// (as root: every file root owns, the data folder with every user's files included), and reach the
    /// network; not the memory or environment of the undumpable local mode or runner.
    Unconfined,
}

/// Where bubblewrap is looked for.
pub const BWRAP_PATHS: [&str; 2] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap"];

/// Runs commands as subprocesses in the workspace, with an emptied environment; inside bubblewrap (the
/// volumes mounted at the paths the model sees, no network, its own process tree) when `bwrap` works.
#[derive(Clone, Debug)]
pub struct LocalExecutor {
    workdir: PathBuf,
    bwrap: Option<(PathBuf, VolumePaths)>,
    hidden: Vec<PathBuf>,
    /// Why every command is refused, when it is.
    refused: Option<String>,
}

impl LocalExecutor {
    /// Commands run in `workdir` with no isolation beyond the emptied environment (the sandbox
    /// container's own side, where the pod is the isolation).
    pub fn plain(workdir: impl Into<PathBuf>) -> Self {
        Self { workdir: workdir.into(), bwrap: None, hidden: Vec::new(), refused: None }
    }

    /// Commands run in the workspace of `volumes`, inside bubblewrap ([`BWRAP_PATHS`]) when it is
    /// installed and works here. Otherwise, by `confinement`: every command is refused with the reason
    /// (logged as an error), or they run plainly (logged as a warning).
    pub async fn isolated(volumes: &VolumePaths, confinement: Confinement) -> Self {
        Self::isolated_with(BWRAP_PATHS.iter().map(PathBuf::from).find(|p| p.is_file()), volumes, confinement).await
    }

    /// [`LocalExecutor::isolated`] with the bubblewrap binary `bwrap` (`None`: not installed).
    pub async fn isolated_with(bwrap: Option<PathBuf>, volumes: &VolumePaths, confinement: Confinement) -> Self {
        let problem = match bwrap {
            Some(program) if bwrap_works(&program).await => {
                return Self {
                    workdir: volumes.workspace.clone(),
                    bwrap: Some((program, volumes.clone())),
                    hidden: Vec::new(),
                    refused: None,
                };
            }
            Some(program) => format!("bubblewrap ({}) cannot create a sandbox here", program.display()),
            None => format!("bubblewrap is not installed (looked for {})", BWRAP_PATHS.join(", ")),
        };
        let refused = match confinement {
            Confinement::Required => {
                let reason = format!(
                    "{problem}, so commands cannot be confined; install bubblewrap, or start the local mode with --unconfined-sandbox to run them unconfined"
                );
                tracing::error!(reason = %reason, "execute is refused for this run");
                Some(reason)
            }
            Confinement::Unconfined => {
                tracing::warn!(problem = %problem, "commands run UNCONFINED (--unconfined-sandbox): they can read what this user can and reach the network");
                None
            }
        };
        Self { workdir: volumes.workspace.clone(), bwrap: None, hidden: Vec::new(), refused }
    }

    /// Inside bubblewrap, `paths` are hidden from the read-only view of the system: a folder (such as
    /// the local mode's data folder, with every user's files) shows empty, a file (such as the store
    /// socket) is covered with an empty device. The run's own volumes stay at the model's paths. Paths
    /// that do not exist when a command starts are left alone.
    pub fn hiding(mut self, paths: Vec<PathBuf>) -> Self {
        self.hidden = paths;
        self
    }

    /// Whether commands run inside bubblewrap.
    pub fn is_isolated(&self) -> bool {
        self.bwrap.is_some()
    }

    /// Runs one command. Errors: [`ExecError::Start`], it cannot be started. A command that fails or
    /// times out is an outcome, not an error.
    pub async fn execute(&self, request: &ExecRequest) -> Result<ExecOutcome, ExecError> {
        if let Some(reason) = &self.refused {
            return Err(ExecError::Unconfined { reason: reason.clone() });
        }
        // Interleave stderr with stdout, in the order the command writes them.
        let script = format!("exec 2>&1\n{}", request.command);
        let mut command = match &self.bwrap {
            Some((program, volumes)) => {
                let mut command = Command::new(program);
                command.args(bwrap_args(volumes, &self.hidden)).args(["--", "/bin/sh", "-c", &script]);
                command
            }
            None => {
                let mut command = Command::new("/bin/sh");
                command.args(["-c", &script]).current_dir(&self.workdir);
                command
            }
        };
        command
            .env_clear()
            .env("PATH", SAFE_PATH)
            .env("LANG", "C.UTF-8")
            .env("HOME", if self.bwrap.is_some() { Path::new(Scope::Workspace.virtual_root()) } else { &self.workdir })
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        let cpu_seconds = request.timeout_seconds.saturating_add(5);
        let unconfined = self.bwrap.is_none();
        // SAFETY: the closure runs in the child between fork and exec and only calls setrlimit, prctl
        // and capset, which are async-signal-safe system calls.
        unsafe {
            command.pre_exec(move || {
                if unconfined {
                    drop_capabilities();
                }
                limit_resources(cpu_seconds)
            });
        }
        let mut child = command.spawn().map_err(|source| ExecError::Start { source })?;
        // Whatever ends this call (a time-out, a cancelled run dropping it), the command's whole process
        // group goes with it.
        let guard = KillGroupOnDrop(child.id());
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let limit = request.max_output_bytes;
        let mut kept = Vec::new();
        let mut dropped = 0u64;
        let run = async {
            let mut buffer = [0u8; 8192];
            loop {
                let n = stdout.read(&mut buffer).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
                dropped += n.saturating_sub(room) as u64;
            }
            child.wait().await
        };
        let finished = tokio::time::timeout(Duration::from_secs(request.timeout_seconds), run).await;
        drop(guard);
        Ok(ExecOutcome {
            exit_code: finished.as_ref().ok().and_then(|status| status.as_ref().ok()).and_then(|s| s.code()),
            output: String::from_utf8_lossy(&kept).into_owned(),
            truncated_bytes: dropped,
            timed_out: finished.is_err(),
        })
    }
}

/// Kills a process group when dropped.
struct KillGroupOnDrop(Option<u32>);

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Kills the command and everything it started (its process group).
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: killpg only sends a signal; the group is the one the child leads (process_group(0)).
        unsafe {
            libc::killpg(pid, libc::SIGKILL);
        }
    }
}

/// A command's resource limits: its address space (4 GiB), the size of a file it writes (1 GiB), open
/// files (1024), CPU time (its time-out and 5 s), no core dumps. Set in the child before exec.
pub const MAX_ADDRESS_SPACE_BYTES: u64 = 4 << 30;
/// See [`MAX_ADDRESS_SPACE_BYTES`].
pub const MAX_FILE_BYTES: u64 = 1 << 30;
/// See [`MAX_ADDRESS_SPACE_BYTES`].
pub const MAX_OPEN_FILES: u64 = 1024;

fn limit_resources(cpu_seconds: u64) -> std::io::Result<()> {
    let set = |resource, value: u64| {
        let limit = libc::rlimit { rlim_cur: value as libc::rlim_t, rlim_max: value as libc::rlim_t };
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(resource, &limit) } == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    };
    set(libc::RLIMIT_AS, MAX_ADDRESS_SPACE_BYTES)?;
    set(libc::RLIMIT_FSIZE, MAX_FILE_BYTES)?;
    set(libc::RLIMIT_NOFILE, MAX_OPEN_FILES)?;
    set(libc::RLIMIT_CPU, cpu_seconds)?;
    set(libc::RLIMIT_CORE, 0)
}

/// Takes every capability from this process and what it runs: the bounding and ambient sets emptied,
/// the effective, permitted and inheritable sets cleared, no new privileges. A command run unconfined
/// as root is then root without capabilities: it reads the files root owns, but not the memory or
/// environment (`/proc/<pid>/environ`) of an undumpable process (the local mode's, a runner's), which
/// takes `CAP_SYS_PTRACE`. Best effort: a process without `CAP_SETPCAP` (not root, or in a pod) keeps
/// its bounding set, and has no capability to lose anyway.
fn drop_capabilities() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset change only this process's own credentials, and capset reads the two
    // structs it is given, laid out as the kernel's (version 3: two data words).
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        for capability in 0..64 {
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
        let header = Header { version: VERSION_3, pid: 0 };
        let data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr());
    }
}

async fn bwrap_works(program: &Path) -> bool {
    let probe = Command::new(program)
        .args(["--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "/bin/true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    matches!(tokio::time::timeout(Duration::from_secs(5), probe).await, Ok(Ok(status)) if status.success())
}

/// The parts of the host a confined command sees, read-only: the system's programs and libraries, and the
/// files of `/etc` that programs need to run (the dynamic linker's cache, users and groups, name service,
/// time zone, certificates). Paths missing on this host are skipped.
const SYSTEM_PATHS: [&str; 19] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
    "/etc/os-release",
];

/// An empty root with [`SYSTEM_PATHS`] read-only, fresh `/dev`, `/proc` and `/tmp`, the four volumes at
/// the paths the model sees (skills read-only), the `hidden` paths that exist inside those covered, no
/// network, its own pid namespace (every process it starts ends with it), a new session, no capabilities
/// (so nothing can be remounted, even when the runner is root), killed with its parent.
fn bwrap_args(volumes: &VolumePaths, hidden: &[PathBuf]) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    for path in SYSTEM_PATHS {
        args.extend(["--ro-bind-try".to_string(), path.to_string(), path.to_string()]);
    }
    args.extend(
        [
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--unshare-all",
            "--new-session",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
        ]
        .map(String::from),
    );
    // Hidden paths first, so the volumes, mounted after them, stay visible wherever they live. Only paths
    // inside what is shown need covering.
    let shown = |path: &Path| SYSTEM_PATHS.iter().any(|p| path.starts_with(p));
    for path in hidden.iter().filter(|p| p.exists() && shown(p)) {
        let text = path.display().to_string();
        if path.is_dir() {
            args.extend(["--tmpfs".to_string(), text]);
        } else {
            args.extend(["--ro-bind".to_string(), "/dev/null".to_string(), text]);
        }
    }
    for scope in [Scope::Workspace, Scope::Uploads, Scope::Outputs, Scope::Skills] {
        let flag = if scope == Scope::Skills { "--ro-bind" } else { "--bind" };
        args.extend([flag.to_string(), volumes.of(scope).display().to_string(), scope.virtual_root().to_string()]);
    }
    args.extend(["--chdir".to_string(), Scope::Workspace.virtual_root().to_string()]);
    args
}
