//! The local mode started for real, as a user starts it, and driven over HTTP as a parent agent would.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use super::redis::redis_url;
use super::repository::root;

/// Where the local mode keeps its runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalStore {
    /// The test Redis (`REDIS_URL` set to [`redis_url`]).
    Redis,
    /// Its own process: no `REDIS_URL`, runners reach it over the store socket.
    InProcess,
}

/// The local mode's process; killed when dropped.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Deref for Process {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Process {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// A running local mode; killed when dropped.
pub struct Local {
    pub child: Process,
    /// The port it listens on.
    pub port: u16,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The data folder (`--data-dir`).
    pub data: TempDir,
    /// Its stderr.
    pub log: PathBuf,
    _scripts: TempDir,
    pub client: reqwest12::Client,
}

/// The local mode's command as a user types it: the manifests of `manifests`, the example users, listening
/// on `port`, its data in `data`, keeping runs in `store`.
pub fn command_over(manifests: &Path, store: LocalStore, port: u16, data: &Path) -> Command {
    command_with_users(manifests, store, port, data, &root().join("examples/local-users.yaml"))
}

/// [`command_over`] with the users file `users`.
pub fn command_with_users(manifests: &Path, store: LocalStore, port: u16, data: &Path, users: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"));
    command
        .arg("local")
        .arg("--manifests")
        .arg(manifests)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--users")
        .arg(users)
        .arg("--data-dir")
        .arg(data)
        // The tests share one Redis and the example users: their runs together must not reach the
        // per-user and total limits of one user's (tests/local/limits.rs sets its own).
        .args(["--max-runs-per-user", "1000", "--max-runs", "100000"])
        .stdout(Stdio::null());
    match store {
        LocalStore::Redis => command.env("REDIS_URL", redis_url()),
        LocalStore::InProcess => command.env_remove("REDIS_URL"),
    };
    command
}

/// The local mode's command over `examples/`, listening on `port`, with `default_model` and `scripts` as
/// its scripts folder, keeping runs in `store`.
pub fn command(store: LocalStore, port: u16, data: &Path, default_model: &str, scripts: &Path) -> Command {
    let mut command = command_over(&root().join("examples"), store, port, data);
    command.arg("--default-model").arg(default_model).arg("--scripts-dir").arg(scripts);
    command
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Starts the local mode over `examples/` with `default_model`, keeping runs in `store`; `script` is put
/// in its scripts folder as `script.yaml`. Returns once it answers.
pub async fn start(store: LocalStore, default_model: &str, script: &str) -> Local {
    start_in(TempDir::new().expect("dir"), store, default_model, script).await
}

/// [`start`] with `data` as the data folder.
pub async fn start_in(data: TempDir, store: LocalStore, default_model: &str, script: &str) -> Local {
    let scripts = TempDir::new().expect("dir");
    std::fs::write(scripts.path().join("script.yaml"), script).expect("script");
    let port = free_port();
    launch(command(store, port, data.path(), default_model, scripts.path()), port, data, scripts).await
}

/// Starts the local mode over `examples/` as a user starts it (no model or scripts options), with `data` as
/// its data folder, keeping runs in `store`. Returns once it answers.
pub async fn start_as_user(data: TempDir, store: LocalStore) -> Local {
    let port = free_port();
    let command = command_over(&root().join("examples"), store, port, data.path());
    launch(command, port, data, TempDir::new().expect("dir")).await
}

/// Starts the local mode over `examples/` keeping runs in `store`, with the variables `env` set, in a
/// data folder of its own. Returns once it answers.
pub async fn examples_with(store: LocalStore, env: &[(&str, &str)]) -> Local {
    let port = free_port();
    let data = TempDir::new().expect("dir");
    let mut command = command_over(&root().join("examples"), store, port, data.path());
    command.envs(env.iter().copied());
    launch(command, port, data, TempDir::new().expect("dir")).await
}

/// Starts `command`, a local mode listening on `port` with `data` as its data folder, its stderr logged to
/// a file in `scripts` (its scripts folder, if it has one). Returns once it answers.
pub async fn launch(mut command: Command, port: u16, data: TempDir, scripts: TempDir) -> Local {
    let log = scripts.path().join("local.log");
    let child = command.stderr(std::fs::File::create(&log).expect("log file")).spawn().expect("starts");
    let local = Local {
        child: Process(child),
        port,
        base: format!("http://127.0.0.1:{port}"),
        data,
        log,
        _scripts: scripts,
        client: reqwest12::Client::new(),
    };
    local.wait_until_up().await;
    local
}

impl Local {
    /// Waits until it answers.
    async fn wait_until_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.client.get(format!("{}/healthz", self.base)).send().await.is_err() {
            assert!(Instant::now() < deadline, "the local mode did not start: {}", self.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops it, and hands back its data folder (to start it again on the same data).
    pub fn stop(self) -> TempDir {
        let Local { child, data, .. } = self;
        drop(child);
        data
    }

    /// Calls the tool endpoint `name` as the user of `token`: the status and the JSON answer.
    pub async fn tool(&self, name: &str, token: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}/api/tools/{name}", self.base))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("reaches the facade");
        (response.status().as_u16(), response.json().await.expect("JSON"))
    }

    /// Starts a run (`POST /api/agent/runs` with `body`, plus `headers`) as the user of `token`; its
    /// id. The start must answer 200.
    pub async fn start_run(&self, token: &str, headers: &[(&str, &str)], body: Value) -> String {
        let mut request = self.client.post(format!("{}/api/agent/runs", self.base)).bearer_auth(token).json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("reaches the facade");
        assert_eq!(response.status(), 200, "the start of {body}\n{}", self.log());
        response.json::<Value>().await.expect("JSON")["run_id"].as_str().expect("a run id").to_string()
    }

    /// `GET path` as the user of `token`: its JSON answer, which must be a 200.
    pub async fn get_json(&self, path: &str, token: &str) -> Value {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("reaches the facade");
        assert_eq!(response.status(), 200, "GET {path}\n{}", self.log());
        response.json().await.expect("JSON")
    }

    /// The run's result once it has ended, read as the user of `token` (at most 60 s; panics naming the
    /// run, with the log, after that).
    pub async fn result_of(&self, run_id: &str, token: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let response = self
                .client
                .get(format!("{}/api/agent/runs/{run_id}/result", self.base))
                .bearer_auth(token)
                .send()
                .await
                .expect("reaches the facade");
            if response.status() == 200 {
                return response.json().await.expect("JSON");
            }
            assert!(std::time::Instant::now() < deadline, "run {run_id} did not end\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The `parent` of a tool call from the example main agent.
pub fn parent(run_id: &str, thread_id: &str) -> Value {
    json!({"agent": "deep-research", "run_id": run_id, "thread_id": thread_id})
}

/// Each scenario (an `async fn(LocalStore)` of the calling module) as a test of each store: with the test
/// Redis (`with_redis::<name>`) and with no Redis (`in_process::<name>`), with the same assertions.
#[macro_export]
macro_rules! with_each_store {
    ($($scenario:ident),* $(,)?) => {
        mod with_redis {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario($crate::support::local_mode::LocalStore::Redis).await
            })*
        }
        mod in_process {
            $(#[tokio::test]
            async fn $scenario() {
                super::$scenario($crate::support::local_mode::LocalStore::InProcess).await
            })*
        }
    };
}
