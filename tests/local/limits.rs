//! The facade's abuse limits in the local mode, started for real with small limits: unfinished runs per
//! user and in total (with each store), event streams per run, agents per user, a body trickled a byte at
//! a time, an idle connection, and JSON bodies on every error.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::local_mode::{Local, LocalStore, free_port, launch, parent};
use crate::support::redis::unique;
use crate::support::repository::root;

/// The local mode with `flags`, every run of it taking about `delay_ms` (a scripted answer that waits).
/// Its users `alice-token` and `bob-token` have uids of their own (`alice-<n>`, `bob-<n>`), so that runs
/// of other tests sharing the test Redis do not count against them.
async fn start_with(store: LocalStore, flags: &[&str], delay_ms: u64) -> Local {
    let (data, scripts) = (tempfile::TempDir::new().expect("dir"), tempfile::TempDir::new().expect("dir"));
    std::fs::write(scripts.path().join("script.yaml"), format!("[{{delay_ms: {delay_ms}, content: done}}]"))
        .expect("script");
    let users = scripts.path().join("users.yaml");
    std::fs::write(
        &users,
        format!(
            "- {{token: alice-token, uid: {}, role: user, department_id: 1}}\n- {{token: bob-token, uid: {}, role: user}}\n",
            unique("alice"),
            unique("bob")
        ),
    )
    .expect("users");
    let port = free_port();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_yuxi-operator"));
    command
        .arg("local")
        .arg("--manifests")
        .arg(root().join("examples"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--users")
        .arg(&users)
        .arg("--data-dir")
        .arg(data.path())
        .args(["--default-model", "scripted/file:script.yaml"])
        .arg("--scripts-dir")
        .arg(scripts.path())
        .args(flags)
        .stdout(std::process::Stdio::null());
    match store {
        LocalStore::Redis => command.env("REDIS_URL", crate::support::redis::redis_url()),
        LocalStore::InProcess => command.env_remove("REDIS_URL"),
    };
    launch(command, port, data, scripts).await
}

fn start_body(thread: &str) -> Value {
    json!({"parent": parent(&unique("run"), thread), "description": "Check.", "subagent_slug": "fact-verifier"})
}

crate::with_each_store!(unfinished_runs_are_limited_per_user_and_in_total);

async fn unfinished_runs_are_limited_per_user_and_in_total(store: LocalStore) {
    // The total is shared with other tests on the same Redis: a unique user keeps the per-user count ours,
    // and the total is only exceeded when this test's own runs fill it.
    let local = start_with(store, &["--max-runs-per-user", "2", "--max-runs", "1000"], 4000).await;
    for _ in 0..2 {
        let (status, answer) = local.tool("subagent_start", "alice-token", start_body(&unique("t"))).await;
        assert_eq!(status, 200, "{answer}");
    }
    let response = local
        .client
        .post(format!("{}/api/tools/subagent_start", local.base))
        .bearer_auth("alice-token")
        .json(&start_body(&unique("t")))
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers()["retry-after"], "5");
    let answer: Value = response.json().await.expect("JSON");
    assert_eq!(
        (answer["code"].as_str(), answer["field"].as_str()),
        (Some("rate_limited"), Some("max_runs_per_user")),
        "{answer}"
    );
    // Bob has his own count.
    assert_eq!(local.tool("subagent_start", "bob-token", start_body(&unique("t"))).await.0, 200);
    // A main agent's run counts too, and is refused the same way.
    let response = local
        .client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth("alice-token")
        .json(&json!({"query": "q", "agent_slug": "deep-research"}))
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status().as_u16(), 429);
}

#[tokio::test]
async fn unfinished_runs_of_everyone_are_limited() {
    // In its own process: the test Redis is shared with other tests, whose runs would count.
    let local = start_with(LocalStore::InProcess, &["--max-runs", "1"], 4000).await;
    assert_eq!(local.tool("subagent_start", "alice-token", start_body(&unique("t"))).await.0, 200);
    let (status, answer) = local.tool("subagent_start", "bob-token", start_body(&unique("t"))).await;
    assert_eq!((status, answer["field"].as_str()), (429, Some("max_runs")), "{answer}");
}

#[tokio::test]
async fn event_streams_are_limited_per_run_and_agents_per_user() {
    let local =
        start_with(LocalStore::InProcess, &["--max-streams-per-run", "1", "--max-agents-per-user", "1"], 3000).await;
    let (status, started) = local.tool("subagent_start", "alice-token", start_body(&unique("t"))).await;
    assert_eq!(status, 200, "{started}");
    let run_id = started["run_id"].as_str().expect("id");
    let events =
        || local.client.get(format!("{}/api/agent/runs/{run_id}/events", local.base)).bearer_auth("alice-token").send();
    let first = events().await.expect("reaches");
    assert_eq!(first.status().as_u16(), 200);
    let second = events().await.expect("reaches");
    assert_eq!(second.status().as_u16(), 429);
    let answer: Value = second.json().await.expect("JSON");
    assert_eq!(answer["field"], "max_streams_per_run", "{answer}");
    drop(first);
    let mut third = None;
    for _ in 0..50 {
        let response = events().await.expect("reaches");
        if response.status().as_u16() == 200 {
            third = Some(response);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(third.is_some(), "the closed stream's place was not given back");

    let create = |name: &str| {
        local
            .client
            .post(format!("{}/api/agent", local.base))
            .bearer_auth("alice-token")
            .json(&json!({"name": name, "backend_id": "SubAgentBackend"}))
            .send()
    };
    assert_eq!(create("Notes one").await.expect("reaches").status().as_u16(), 201);
    let refused = create("Notes two").await.expect("reaches");
    assert_eq!(refused.status().as_u16(), 429);
    let answer: Value = refused.json().await.expect("JSON");
    assert_eq!(answer["field"], "max_agents_per_user", "{answer}");
}

#[tokio::test]
async fn a_trickled_body_and_an_idle_connection_are_cut_off_and_errors_are_json() {
    let local = start_with(LocalStore::InProcess, &["--body-timeout-seconds", "2"], 0).await;
    // A body of 60 bytes, one byte every 200 ms: each byte would reset a per-read timeout, not this one.
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", local.port)).await.expect("connects");
    stream
        .write_all(b"POST /api/tools/subagent_status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer alice-token\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n")
        .await
        .expect("headers");
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    for _ in 0..60 {
        if stream.write_all(b" ").await.is_err() {
            break;
        }
        let mut buffer = [0u8; 4096];
        match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buffer[..n]);
                break;
            }
            Err(_) => {}
        }
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "after {:?}: {text}", started.elapsed());
    assert!(text.contains("\"code\":\"request_timeout\""), "{text}");

    // A connection that sends nothing is closed by the server.
    let mut idle = tokio::net::TcpStream::connect(("127.0.0.1", local.port)).await.expect("connects");
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(30), idle.read(&mut byte)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "an idle connection was still open after 30 s");

    // Errors come with the JSON body, naming the field where there is one.
    let wrong_method = local
        .client
        .delete(format!("{}/api/agent/runs", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    assert_eq!(wrong_method.status().as_u16(), 405);
    let answer: Value = wrong_method.json().await.expect("a JSON body");
    assert_eq!(answer["code"], "method_not_allowed");
    let (status, answer) = local
        .tool("subagent_start", "alice-token", json!({"parent": parent("r", "t"), "subagent_slug": "fact-verifier"}))
        .await;
    assert_eq!((status, answer["field"].as_str()), (422, Some("description")), "{answer}");
}

#[tokio::test]
async fn connections_beyond_the_cap_are_closed_at_once() {
    let local = start_with(LocalStore::InProcess, &["--max-connections", "2"], 0).await;
    // Two idle connections fill the cap (they would be closed after 10 s without a request).
    let _first = tokio::net::TcpStream::connect(("127.0.0.1", local.port)).await.expect("connects");
    let _second = tokio::net::TcpStream::connect(("127.0.0.1", local.port)).await.expect("connects");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut third = tokio::net::TcpStream::connect(("127.0.0.1", local.port)).await.expect("the kernel accepts");
    let _ = third.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), third.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection over the cap was neither served nor closed");
    assert!(!String::from_utf8_lossy(&answer).contains("200 OK"), "served over the cap");
    drop((_first, _second));
    // With the places given back, requests are served again.
    let mut served = false;
    for _ in 0..50 {
        if local.client.get(format!("{}/healthz", local.base)).send().await.is_ok_and(|r| r.status().is_success()) {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served);
}
