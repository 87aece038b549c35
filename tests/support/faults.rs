//! What the fault scenarios share: a local mode started with short leases, a Redis of the test's own to
//! kill and start again, the runner processes and memory of a local mode, and the checks every scenario
//! ends with (a terminal status, a result, exactly one `end`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use super::local_mode::{Local, LocalStore, command, free_port, launch};

/// The lease of runners and of the local mode's keep of its runs in these scenarios, in seconds: short,
/// so that a run whose runner died is swept within seconds.
pub const LEASE_SECONDS: u64 = 2;

/// Whether the full fault suite runs (`make faults`: `YUXI_FAULTS=full`), or its short form (`make test`).
pub fn full() -> bool {
    std::env::var("YUXI_FAULTS").as_deref() == Ok("full")
}

/// The size of a burst: 300 in the full suite, 60 in the short form.
pub fn burst_size() -> usize {
    if full() { 300 } else { 60 }
}

/// Starts a local mode over `examples/` whose model replays `script`, with `--run-lease-seconds`
/// `lease_seconds` ([`LEASE_SECONDS`] unless a scenario needs longer), on the data folder `data`;
/// `redis_url` overrides the test Redis for [`LocalStore::Redis`].
pub async fn start_local(
    store: LocalStore,
    script: &str,
    data: TempDir,
    redis_url: Option<&str>,
    lease_seconds: u64,
) -> Local {
    start_local_with(store, script, data, redis_url, lease_seconds, &[]).await
}

/// [`start_local`] with `extra` arguments (`--runner-processes`: a `runner` subprocess per run).
pub async fn start_local_with(
    store: LocalStore,
    script: &str,
    data: TempDir,
    redis_url: Option<&str>,
    lease_seconds: u64,
    extra: &[&str],
) -> Local {
    let scripts = TempDir::new().expect("dir");
    std::fs::write(scripts.path().join("script.yaml"), script).expect("script");
    let port = free_port();
    let mut command = command(store, port, data.path(), "scripted/file:script.yaml", scripts.path());
    command.args(["--run-lease-seconds", &lease_seconds.to_string()]).args(extra);
    if let Some(url) = redis_url {
        command.env("REDIS_URL", url);
    }
    launch(command, port, data, scripts).await
}

/// Stops the local mode with SIGTERM, as a service manager does, and waits for it to exit; hands back its
/// data folder.
pub fn terminate(mut local: Local) -> TempDir {
    let pid = local.child.id() as i32;
    // SAFETY: kill only sends a signal, to the local mode this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    while local.child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the local mode did not stop on SIGTERM: {}", local.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    local.stop()
}

/// The pids of the runner processes whose run folder is under `data` (their command line names it).
pub fn runners_under(data: &Path) -> Vec<i32> {
    let marker = format!("{}/runs/", data.display());
    processes()
        .filter(|(_, cmdline)| cmdline.contains("\0runner\0") && cmdline.contains(&marker))
        .map(|(pid, _)| pid)
        .collect()
}

/// The pid of the runner process of `run_id`.
pub fn runner_of(run_id: &str) -> Option<i32> {
    let marker = format!("runs/{run_id}/");
    processes().find(|(_, cmdline)| cmdline.contains("\0runner\0") && cmdline.contains(&marker)).map(|(pid, _)| pid)
}

fn processes() -> impl Iterator<Item = (i32, String)> {
    std::fs::read_dir("/proc").into_iter().flatten().filter_map(Result::ok).filter_map(|entry| {
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        Some((pid, String::from_utf8_lossy(&cmdline).into_owned()))
    })
}

/// Waits until no runner of `data` is left, for `bound` at most; returns how many are left.
pub async fn runners_left_after(data: &Path, bound: Duration) -> usize {
    let deadline = Instant::now() + bound;
    loop {
        let left = runners_under(data).len();
        if left == 0 || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The resident memory of `pid`, in KiB (0 when it is gone).
pub fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// GET `path` of the local mode as Alice: the status and the JSON answer (`null` when it is not JSON).
pub async fn get(local: &Local, path: &str) -> (u16, Value) {
    let response = local.client.get(format!("{}{path}", local.base)).bearer_auth("alice-token").send().await;
    match response {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(err) => panic!("the facade does not answer GET {path}: {err}"),
    }
}

/// Starts a run of the subagent `fact-verifier` as Alice, for a parent run of its own: the answer's
/// status, the answer, and the parent (to call the other tools on the run with).
pub async fn start_subagent(local: &Local) -> (u16, Value, Value) {
    let parent = super::local_mode::parent(&super::redis::unique("run"), &super::redis::unique("thread"));
    let body = json!({"parent": parent, "description": "Check it.", "subagent_slug": "fact-verifier"});
    let (status, answer) = local.tool("subagent_start", "alice-token", body).await;
    (status, answer, parent)
}

/// The run's status as the facade answers it, once it is terminal, waiting `bound` at most: `Some`
/// status, or `None` when the run is unknown (its store forgot it). Panics naming the last status when
/// the bound passes.
pub async fn terminal_status(local: &Local, run_id: &str, bound: Duration) -> Option<String> {
    let deadline = Instant::now() + bound;
    loop {
        let (status, record) = get(local, &format!("/api/agent/runs/{run_id}")).await;
        let last = match status {
            404 => return None,
            200 => {
                let now = record["run"]["status"].as_str().unwrap_or_default().to_string();
                if ["completed", "failed", "cancelled", "interrupted"].contains(&now.as_str()) {
                    return Some(now);
                }
                record
            }
            _ => json!({"http": status, "answer": record}),
        };
        assert!(Instant::now() < deadline, "run {run_id} is not terminal after {bound:?}: {last}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The run's whole event stream (it must end within 30 s), as `(id, event)` pairs, read over SSE from
/// `after` (`None`: the start).
pub async fn stream(local: &Local, run_id: &str, after: Option<&str>) -> Vec<(String, String)> {
    let mut request =
        local.client.get(format!("{}/api/agent/runs/{run_id}/events", local.base)).bearer_auth("alice-token");
    if let Some(after) = after {
        request = request.header("Last-Event-ID", after);
    }
    let text = tokio::time::timeout(Duration::from_secs(30), async {
        request.send().await.expect("reaches").text().await.expect("text")
    })
    .await
    .unwrap_or_else(|_| panic!("the event stream of {run_id} did not end"));
    sse_events(&text)
}

/// The `(id, event)` of each event of an SSE body.
pub fn sse_events(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter_map(|block| {
            let field = |name: &str| block.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string());
            Some((field("id:")?, field("event:")?))
        })
        .collect()
}

/// Checks what every ended run has: `/result` answers with its status, and its stream holds exactly one
/// `end`, last.
pub async fn assert_ended_once(local: &Local, run_id: &str, status: &str) {
    let (code, result) = get(local, &format!("/api/agent/runs/{run_id}/result")).await;
    assert_eq!((code, result["status"].as_str()), (200, Some(status)), "{run_id}: {result}");
    let events = stream(local, run_id, None).await;
    let ends = events.iter().filter(|(_, event)| event == "end").count();
    assert_eq!(ends, 1, "{run_id}: {events:?}");
    assert_eq!(events.last().map(|(_, e)| e.as_str()), Some("end"), "{run_id}: {events:?}");
}

/// A Redis server of the test's own, with a password, that the test kills and starts again.
pub struct OwnRedis {
    dir: TempDir,
    port: u16,
    persistent: bool,
    child: Option<Child>,
}

impl OwnRedis {
    /// Starts one; `persistent` keeps every write in an append-only file synced at once, so a kill
    /// loses nothing; otherwise it keeps nothing and starts empty again.
    pub fn start(persistent: bool) -> OwnRedis {
        let dir = TempDir::new().expect("dir");
        std::fs::write(dir.path().join("redis.conf"), "requirepass fault-suite-password\n").expect("conf");
        let mut redis = OwnRedis { dir, port: free_port(), persistent, child: None };
        redis.up();
        redis
    }

    /// Its URL, with the password.
    pub fn url(&self) -> String {
        format!("redis://:fault-suite-password@127.0.0.1:{}", self.port)
    }

    fn server() -> PathBuf {
        PathBuf::from("redis-server")
    }

    /// Starts the server (again), on the same port and folder, and waits until it answers.
    pub fn up(&mut self) {
        let mut command = Command::new(Self::server());
        command
            .arg(self.dir.path().join("redis.conf"))
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string(), "--save", ""])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if self.persistent {
            command.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            command.args(["--appendonly", "no"]);
        }
        self.child = Some(command.spawn().expect("redis-server starts (make test installs it)"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server with SIGKILL, as an out-of-memory kill or a lost node does.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One line of the scenario's numbers, printed for the suite's report (`make faults` shows them).
pub fn report(scenario: &str, numbers: std::fmt::Arguments<'_>) {
    eprintln!("fault-suite {scenario}: {numbers}");
}
