//! `yuxi-operator local`: the system on one machine, started as a user starts it.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

struct Local(Child);

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn local(manifests: &std::path::Path, port: u16, data: &TempDir) -> Command {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"));
    command
        .arg("local")
        .arg("--manifests")
        .arg(manifests)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--users")
        .arg(root.join("examples/local-users.yaml"))
        .arg("--data-dir")
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Waits until the local mode on `port` answers, and returns the agents Bob sees.
async fn agents_when_up(client: &reqwest12::Client, port: u16) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{port}/api/agent?include_subagents=true");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(response) = client.get(&url).bearer_auth("bob-token").send().await {
            break response.json().await.expect("JSON");
        }
        assert!(Instant::now() < deadline, "the local mode did not answer");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn slugs(body: &serde_json::Value) -> Vec<&str> {
    body["agents"].as_array().expect("agents").iter().map(|a| a["slug"].as_str().expect("slug")).collect()
}

#[tokio::test]
async fn the_local_mode_serves_the_example_agents() {
    let data = TempDir::new().expect("dir");
    let port = free_port();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let _local = Local(local(&root.join("examples"), port, &data).spawn().expect("starts"));
    let body = agents_when_up(&reqwest12::Client::new(), port).await;
    assert_eq!(slugs(&body), ["deep-research", "fact-verifier", "general-purpose", "research-explorer"]);
}

#[tokio::test]
async fn agents_created_through_the_api_outlive_a_restart_and_manifest_agents_stay_read_only() {
    let data = TempDir::new().expect("dir");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let client = reqwest12::Client::new();
    let port = free_port();
    let first = Local(local(&root.join("examples"), port, &data).spawn().expect("starts"));
    agents_when_up(&client, port).await;
    let base = format!("http://127.0.0.1:{port}/api/agent");
    let created = client
        .post(&base)
        .bearer_auth("bob-token")
        .json(&serde_json::json!({"name": "Bob notes", "backend_id": "SubAgentBackend", "description": "notes"}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    let refused = client
        .put(format!("{base}/research-explorer"))
        .bearer_auth("admin-token")
        .json(&serde_json::json!({"description": "changed"}))
        .send()
        .await
        .expect("put");
    assert_eq!(refused.status(), 409);
    let body: serde_json::Value = refused.json().await.expect("JSON");
    assert!(body["message"].as_str().expect("message").contains("manifests folder"), "{body}");
    drop(first);

    let port = free_port();
    let _second = Local(local(&root.join("examples"), port, &data).spawn().expect("starts again"));
    let body = agents_when_up(&client, port).await;
    assert!(slugs(&body).contains(&"bob-notes"), "{body}");
    let deleted = client
        .delete(format!("http://127.0.0.1:{port}/api/agent/bob-notes"))
        .bearer_auth("bob-token")
        .send()
        .await
        .expect("delete");
    assert_eq!(deleted.status(), 204);
    assert!(!data.path().join("agents/bob-notes.yaml").exists());
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
    let output = local(manifests.path(), free_port(), &data).output().expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("helper.yaml: spec.default: a subagent cannot be the default agent"), "{stderr}");
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_dropped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let data = TempDir::new().expect("dir");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let port = free_port();
    let _local = Local(local(&root.join("examples"), port, &data).spawn().expect("starts"));
    agents_when_up(&reqwest12::Client::new(), port).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connects");
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.expect("writes");
    let mut buffer = [0u8; 256];
    // The facade closes the connection (read returns 0) instead of waiting forever; the bound here only
    // keeps a broken build from hanging the test.
    let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buffer)).await.expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)) || String::from_utf8_lossy(&buffer).contains("408"), "{read:?}");
}
