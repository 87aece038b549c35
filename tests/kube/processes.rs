//! The processes a real-cluster test starts (etcd, the API server, the controller manager, the project's
//! roles), each logging into a file of its own, and stopped when the test binary exits, however it exits.
//!
//! `make kube-test` runs the test binary in a PID namespace of its own (`scripts/kube-netns`), so the
//! kernel kills whatever is left when it ends; the exit handler here stops them sooner, and a
//! [`Process`] dropped by a test stops its own.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Process ids still to be killed when the test binary exits.
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

extern "C" fn kill_live() {
    if let Ok(live) = LIVE.lock() {
        for pid in live.iter() {
            // SAFETY: kill(2) on a process id this binary started; no memory is shared.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
    }
}

fn register(pid: u32) {
    static HANDLER: std::sync::Once = std::sync::Once::new();
    HANDLER.call_once(|| {
        // SAFETY: registers a plain function with no captured state.
        unsafe { libc::atexit(kill_live) };
    });
    LIVE.lock().expect("process registry").push(pid);
}

fn unregister(pid: u32) {
    LIVE.lock().expect("process registry").retain(|p| *p != pid);
}

/// A process started by a test, its output in `<dir>/<name>.log`.
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `command` as `name`, its stdout and stderr appended to `<dir>/<name>.log`.
    pub fn start(name: &str, mut command: Command, dir: &Path) -> Process {
        let log = dir.join(format!("{name}.log"));
        let file = File::options().create(true).append(true).open(&log).expect("log file");
        command.stdin(Stdio::null()).stdout(file.try_clone().expect("log file")).stderr(file);
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        register(child.id());
        Process { name: name.to_string(), child, log }
    }

    /// The last `lines` lines of its log, for a failure message.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        format!("--- last lines of {} ---\n{}", self.log.display(), all[all.len().saturating_sub(lines)..].join("\n"))
    }

    /// Its whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether it has exited, and with which status.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("wait")
    }

    /// Sends SIGTERM and waits up to `grace` for it to exit, then kills it. Returns its exit status.
    pub fn stop(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                unregister(self.child.id());
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop within {grace:?} of SIGTERM; killing it", self.name);
        self.kill();
        None
    }

    /// Kills it (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        unregister(self.child.id());
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.kill();
        }
    }
}

/// A free TCP port on `ip`: bound, read and released (the process started next binds it).
pub fn free_port(ip: &str) -> u16 {
    let listener = std::net::TcpListener::bind((ip, 0)).expect("bind a free port");
    listener.local_addr().expect("address").port()
}

/// Polls `ready` every 100 ms until it is true or `timeout` passes; panics naming `what`, with `context`.
pub fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what}: not within {timeout:?}\n{}", context());
}
