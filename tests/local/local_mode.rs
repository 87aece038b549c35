//! `yuxi-operator local`: the system on one machine, started as a user starts it.

use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;

use crate::support::local_mode::{Local, LocalStore, command_over, free_port, start_as_user};

/// The local mode over `examples/` as a user starts it; `REDIS_URL` unset, as `make test` leaves it.
async fn start(data: TempDir) -> Local {
    start_as_user(data, LocalStore::InProcess).await
}

/// The agents Bob sees.
async fn agents(local: &Local) -> serde_json::Value {
    let url = format!("{}/api/agent?include_subagents=true", local.base);
    let response = local.client.get(&url).bearer_auth("bob-token").send().await.expect("reaches the facade");
    response.json().await.expect("JSON")
}

fn slugs(body: &serde_json::Value) -> Vec<&str> {
    body["agents"].as_array().expect("agents").iter().map(|a| a["slug"].as_str().expect("slug")).collect()
}

#[tokio::test]
async fn the_local_mode_serves_the_example_agents() {
    let local = start(TempDir::new().expect("dir")).await;
    let body = agents(&local).await;
    assert_eq!(slugs(&body), ["deep-research", "fact-verifier", "general-purpose", "note-taker", "research-explorer"]);
}

#[tokio::test]
async fn agents_created_through_the_api_outlive_a_restart_and_manifest_agents_stay_read_only() {
    let first = start(TempDir::new().expect("dir")).await;
    let base = format!("{}/api/agent", first.base);
    let shown = first.client.get(format!("{base}?include_subagents=true")).bearer_auth("admin-token").send().await;
    let shown: serde_json::Value = shown.expect("list").json().await.expect("JSON");
    let item = |slug: &str| shown["agents"].as_array().expect("agents").iter().find(|a| a["slug"] == slug).cloned();
    let explorer = item("research-explorer").expect("research-explorer listed");
    assert_eq!((&explorer["can_manage"], &explorer["read_only_because"]), (&false.into(), &"manifest_file".into()));
    // The examples define general-purpose in a file; built-in only when no manifest does.
    let general = item("general-purpose").expect("general-purpose listed");
    assert_eq!((&general["can_manage"], &general["read_only_because"]), (&false.into(), &"manifest_file".into()));
    let created = first
        .client
        .post(&base)
        .bearer_auth("bob-token")
        .json(&serde_json::json!({"name": "Bob notes", "backend_id": "SubAgentBackend", "description": "notes"}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    let refused = first
        .client
        .put(format!("{base}/research-explorer"))
        .bearer_auth("admin-token")
        .json(&serde_json::json!({"description": "changed"}))
        .send()
        .await
        .expect("put");
    assert_eq!(refused.status(), 409);
    let body: serde_json::Value = refused.json().await.expect("JSON");
    assert!(body["message"].as_str().expect("message").contains("manifests folder"), "{body}");
    let data = first.stop();

    let second = start(data).await;
    let body = agents(&second).await;
    assert!(slugs(&body).contains(&"bob-notes"), "{body}");
    let notes = body["agents"].as_array().expect("agents").iter().find(|a| a["slug"] == "bob-notes").expect("listed");
    assert_eq!((&notes["can_manage"], notes.get("read_only_because")), (&true.into(), None), "{notes}");
    let deleted = second
        .client
        .delete(format!("{}/api/agent/bob-notes", second.base))
        .bearer_auth("bob-token")
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), 204);
    assert!(!second.data.path().join("agents/bob-notes.yaml").exists());
}

#[test]
fn an_invalid_manifest_stops_the_local_mode_naming_the_file_and_field() {
    let data = TempDir::new().expect("dir");
    let manifests = TempDir::new().expect("dir");
    std::fs::write(
        manifests.path().join("helper.yaml"),
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: helper}\nspec: {backend: SubAgentBackend, default: true}\n",
    )
    .expect("write");
    let output = command_over(manifests.path(), LocalStore::InProcess, free_port(), data.path())
        .stderr(Stdio::piped())
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("helper.yaml: spec.default: a subagent cannot be the default agent"), "{stderr}");
}

#[tokio::test]
async fn a_second_local_mode_on_the_same_data_folder_refuses_to_start_naming_it_and_the_first() {
    for store in [LocalStore::Redis, LocalStore::InProcess] {
        let first = start_as_user(TempDir::new().expect("dir"), store).await;
        let examples = crate::support::repository::root().join("examples");
        let log = first.data.path().join("second.log");
        let second = command_over(&examples, store, free_port(), first.data.path())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("runs");
        let mut second = crate::support::local_mode::Process(second);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = second.try_wait().expect("waits") {
                break status;
            }
            let stderr = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(std::time::Instant::now() < deadline, "{store:?}: the second started serving: {stderr}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(status.code(), Some(1), "{store:?}");
        let stderr = std::fs::read_to_string(&log).expect("log");
        let pid = first.child.0.id().to_string();
        assert!(stderr.contains("serves the data folder") && stderr.contains(&pid), "{store:?}: {stderr}");
        // The first goes on serving.
        assert_eq!(slugs(&agents(&first).await).len(), 5, "{store:?}");
    }
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_dropped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let local = start(TempDir::new().expect("dir")).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", local.port)).await.expect("connects");
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.expect("writes");
    let mut buffer = [0u8; 256];
    // The facade closes the connection (read returns 0) instead of waiting forever; the bound here only
    // keeps a broken build from hanging the test.
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buffer)).await.expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)) || String::from_utf8_lossy(&buffer).contains("408"), "{read:?}");
}

/// `make run`'s chain: `scripts/with-redis` keeping its server's data in `redis_dir`, and the local mode
/// over `examples/` with its data in `data`, given that Redis as `REDIS_URL`, in a process group of its
/// own (so a test can press Ctrl-C on it). Returns once it answers.
async fn make_run(redis_dir: &std::path::Path, data: TempDir) -> Local {
    use std::os::unix::process::CommandExt;
    let port = free_port();
    let local =
        command_over(&crate::support::repository::root().join("examples"), LocalStore::Redis, port, data.path());
    let mut command = std::process::Command::new(crate::support::repository::root().join("scripts/with-redis"));
    command
        .env_remove("YUXI_TEST_REDIS_URL")
        .env_remove("REDIS_URL")
        .env("YUXI_REDIS_DIR", redis_dir)
        .args(["sh", "-c", r#"REDIS_URL=$YUXI_TEST_REDIS_URL exec "$@""#, "sh"])
        .arg(local.get_program())
        .args(local.get_args())
        .stdout(Stdio::null())
        .process_group(0);
    crate::support::local_mode::launch(command, port, data, TempDir::new().expect("dir")).await
}

/// Presses Ctrl-C on [`make_run`]'s process group and waits for it to end; hands back the data folder.
fn press_ctrl_c(mut local: Local) -> TempDir {
    let group = local.child.0.id() as i32;
    // SAFETY: a signal sent to the process group this test started.
    assert_eq!(unsafe { libc::killpg(group, libc::SIGINT) }, 0);
    let status = local.child.0.wait().expect("waits");
    assert!(status.success(), "make run ended {status}: {}", local.log());
    local.stop()
}

#[tokio::test]
async fn make_run_keeps_conversations_in_its_redis_folder_across_restarts_with_a_private_password() {
    let redis_dir = TempDir::new().expect("dir");
    let folder = redis_dir.path().join("redis");
    let first = make_run(&folder, TempDir::new().expect("dir")).await;
    let started = first
        .client
        .post(format!("{}/api/agent/runs", first.base))
        .bearer_auth("alice-token")
        .json(&serde_json::json!({"query": "Remember the tide tables", "agent_slug": "deep-research"}))
        .send()
        .await
        .expect("reaches");
    let started: serde_json::Value = started.json().await.expect("JSON");
    let (run, thread) = (
        started["run_id"].as_str().unwrap_or_else(|| panic!("{started}")),
        started["thread_id"].as_str().expect("thread"),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let url = format!("{}/api/agent/runs/{run}/result", first.base);
        let answer = first.client.get(url).bearer_auth("alice-token").send().await.expect("reaches");
        let answer: serde_json::Value = answer.json().await.unwrap_or_default();
        if answer["status"] == "completed" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the run did not end: {answer}\n{}", first.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let data = press_ctrl_c(first);
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &std::path::Path| std::fs::metadata(path).expect("exists").permissions().mode() & 0o777;
    assert_eq!((mode(&folder), mode(&folder.join("redis.conf"))), (0o700, 0o600));

    let second = make_run(&folder, data).await;
    let url = format!("{}/api/chat/thread/{thread}/history", second.base);
    let history = second.client.get(url).bearer_auth("alice-token").send().await.expect("reaches");
    let history: serde_json::Value = history.json().await.expect("JSON");
    let said: Vec<&str> =
        history["history"].as_array().expect("history").iter().filter_map(|m| m["content"].as_str()).collect();
    assert!(said.contains(&"Remember the tide tables") && said.len() >= 2, "{history}");
    let url = format!("{}/api/agent/runs/{run}/result", second.base);
    let result = second.client.get(url).bearer_auth("alice-token").send().await.expect("reaches");
    assert_eq!(result.json::<serde_json::Value>().await.expect("JSON")["status"], "completed");
    press_ctrl_c(second);
}
