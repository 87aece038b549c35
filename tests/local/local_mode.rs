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
