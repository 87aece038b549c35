//! The local mode without Redis: runs live in its process, served to its runners on a private socket in
//! the data folder. (The subagent tools themselves run against both stores in `local_tools.rs`.)

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;

use crate::support::local_mode::{LocalStore, command, free_port, launch, parent, start_in};

#[tokio::test]
async fn without_redis_runs_live_in_the_process_behind_a_private_socket_removed_at_stop() {
    let data = TempDir::new().expect("dir");
    let socket = data.path().join("store.sock");
    // What a killed local mode leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("binds"));
    let mut local = start_in(data, LocalStore::InProcess, "scripted/echo", "[{content: unused}]").await;
    assert!(local.log().contains("no REDIS_URL: runs keep their state in this process"), "{}", local.log());
    let metadata = std::fs::metadata(&socket).expect("the socket");
    assert!(metadata.file_type().is_socket());
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);

    let second = command(LocalStore::InProcess, free_port(), local.data.path(), "scripted/echo", local.data.path())
        .stderr(Stdio::piped())
        .output()
        .expect("runs");
    assert!(!second.status.success());
    let refused = String::from_utf8_lossy(&second.stderr);
    // The data folder's lock refuses it before it reaches the socket another process serves.
    assert!(refused.contains("another local mode (process") && refused.contains("serves the data folder"), "{refused}");

    let (status, answer) = local
        .tool(
            "task",
            "alice-token",
            json!({"parent": parent("p1", "thread-1"), "description": "Still mine.", "subagent_slug": "fact-verifier"}),
        )
        .await;
    assert_eq!((status, answer["result"].as_str()), (200, Some("Still mine.")), "{answer}");

    // SAFETY: kill(2) on the child's own pid sends it a signal and touches no memory.
    assert_eq!(unsafe { libc::kill(local.child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(15);
    let exit = loop {
        if let Some(exit) = local.child.try_wait().expect("wait") {
            break exit;
        }
        assert!(Instant::now() < deadline, "the local mode did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exit.success(), "{}", local.log());
    assert!(!socket.exists(), "the socket is removed when the local mode stops");
}

#[test]
fn a_redis_url_that_does_not_answer_is_an_error_not_a_fallback() {
    let data = TempDir::new().expect("dir");
    let closed = free_port();
    let output = command(LocalStore::InProcess, free_port(), data.path(), "scripted/echo", data.path())
        .env("REDIS_URL", format!("redis://127.0.0.1:{closed}"))
        .stderr(Stdio::piped())
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot reach Redis (REDIS_URL)") && stderr.contains("unset it"), "{stderr}");
    assert!(!data.path().join("store.sock").exists());
}

#[tokio::test]
async fn run_folders_go_when_the_runner_exits_and_skills_scopes_when_their_thread_is_forgotten() {
    let data = TempDir::new().expect("dir");
    let scripts = TempDir::new().expect("dir");
    let port = free_port();
    let mut command = command(LocalStore::InProcess, port, data.path(), "scripted/echo", scripts.path());
    command.args(["--runner-processes", "--keep-threads", "1", "--run-lease-seconds", "2"]);
    let local = launch(command, port, data, scripts).await;
    let mut threads = Vec::new();
    for n in 0..3 {
        let body = json!({"parent": parent(&format!("p{n}"), &format!("thread-{n}")), "description": "Tidy.", "subagent_slug": "research-explorer"});
        let (status, answer) = local.tool("task", "alice-token", body).await;
        assert_eq!((status, answer["status"].as_str()), (200, Some("completed")), "{answer}");
        threads.push(answer["thread_id"].as_str().expect("the child's thread").to_string());
    }
    let runs = local.data.path().join("runs");
    let left = || -> Vec<_> {
        std::fs::read_dir(&runs).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !left().is_empty() {
        assert!(Instant::now() < deadline, "the runner subprocesses' folders stay after they exit: {:?}", left());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let skills = |thread: &str| local.data.path().join(format!("users/alice/skills/{thread}"));
    while skills(&threads[0]).exists() || skills(&threads[1]).exists() {
        assert!(Instant::now() < deadline, "the skills scopes of forgotten threads stay");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(skills(&threads[2]).join("source-triage/SKILL.md").is_file(), "the kept thread keeps its skills scope");
}
