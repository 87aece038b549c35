//! Runners that fail, in the local mode started for real with each store: a runner killed with SIGKILL
//! mid-run still leaves its run ended, with exactly one `end` event, a result, and its thread free; a
//! runner whose model never answers ends its run at its deadline.

use std::time::Duration;

use serde_json::Value;

use crate::support::faults::{LEASE_SECONDS, runner_of, start_local_with};
use crate::support::local_mode::{LocalStore, parent};
use crate::support::redis::unique;

crate::with_each_store!(a_killed_runner_leaves_one_end_a_result_and_a_free_thread);

async fn a_killed_runner_leaves_one_end_a_result_and_a_free_thread(store: LocalStore) {
    // A runner process of its own, to kill.
    let data = tempfile::TempDir::new().expect("dir");
    let script = "[{delay_ms: 30000, content: too late}]";
    let local = start_local_with(store, script, data, None, LEASE_SECONDS, &["--runner-processes"]).await;
    let thread = unique("thread");
    let body = serde_json::json!({"parent": parent(&unique("run"), &thread), "description": "Wait.", "subagent_slug": "fact-verifier"});
    let (status, started) = local.tool("subagent_start", "alice-token", body.clone()).await;
    assert_eq!(status, 200, "{started}");
    let run_id = started["run_id"].as_str().expect("id").to_string();
    let mut pid = None;
    for _ in 0..100 {
        pid = runner_of(&run_id);
        if pid.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pid = pid.expect("the runner process");
    // SAFETY: kill only sends a signal, to the runner this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);

    let get = |path: String| {
        let client = local.client.clone();
        async move {
            let response = client.get(path).bearer_auth("alice-token").send().await.expect("reaches");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let mut record = Value::Null;
    for _ in 0..100 {
        record = get(format!("{}/api/agent/runs/{run_id}", local.base)).await.1["run"].clone();
        if record["status"] == "interrupted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(record["status"], "interrupted", "{record}");
    let (status, result) = get(format!("{}/api/agent/runs/{run_id}/result", local.base)).await;
    assert_eq!((status, result["status"].as_str()), (200, Some("interrupted")), "{result}");
    // The stream ends, with exactly one `end`.
    let text = tokio::time::timeout(
        Duration::from_secs(20),
        local
            .client
            .get(format!("{}/api/agent/runs/{run_id}/events", local.base))
            .bearer_auth("alice-token")
            .send()
            .await
            .expect("reaches")
            .text(),
    )
    .await
    .expect("the stream ended")
    .expect("text");
    assert_eq!(text.matches("event: end").count(), 1, "{text}");
    assert!(text.contains(r#""status":"interrupted""#), "{text}");
    // The thread is free for the next run.
    let mut again = body;
    again["thread_id"] = started["thread_id"].clone();
    let (status, answer) = local.tool("subagent_start", "alice-token", again).await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("started")), "{answer}");
}

#[tokio::test]
async fn a_model_that_never_answers_ends_the_run_at_its_deadline() {
    use yuxi_operator::run::{Created, RunRecord, RunStatus};
    use yuxi_operator::store::{Store, StoreAuth};

    let files = crate::support::runner::RunFiles::new(
        &crate::support::runner::subagent("{}"),
        "[{delay_ms: 600000, content: never}]",
    );
    let run = std::fs::read_to_string(files.path("run.yaml"))
        .expect("run")
        .replace("timeoutSeconds: 60", "timeoutSeconds: 2");
    std::fs::write(files.path("run.yaml"), run).expect("run");
    // Recorded as the facade records a run, so the record's end is checked too.
    let store = Store::connect_redis(&crate::support::redis::redis_url(), StoreAuth::Required).await.expect("redis");
    let record = RunRecord {
        run_id: files.run_id.clone(),
        thread_id: format!("{}-thread", files.run_id),
        agent_slug: "helper".into(),
        uid: "alice".into(),
        parent: None,
        status: RunStatus::Running,
        error: None,
        created_at: "2026-12-01T10:00:00Z".into(),
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    };
    assert_eq!(store.create_run(&record, None, Default::default()).await.expect("create"), Created::Started);

    let started = std::time::Instant::now();
    let mut child = files.command().spawn().expect("starts");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the runner outlived its deadline by far");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(1), "a failed run exits 1");
    let ended = store.run_record(&files.run_id).await.expect("read").expect("kept");
    assert_eq!(ended.status, RunStatus::Failed);
    assert!(ended.error.as_deref().is_some_and(|e| e.contains("deadline")), "{ended:?}");
    let result = store.run_result(&files.run_id).await.expect("result").expect("written");
    assert_eq!(result.status, RunStatus::Failed);
    let events = store.read_events(&files.run_id, "0-0", 100).await.expect("events");
    let names: Vec<&str> = events.iter().map(|e| e.envelope.event.as_str()).collect();
    assert_eq!(names.iter().filter(|n| **n == "end").count(), 1, "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    crate::support::faults::report(
        "deadline",
        format_args!(
            "a 2 s deadline with a model that never answers: the runner exited after {:.1} s",
            started.elapsed().as_secs_f64()
        ),
    );
}
