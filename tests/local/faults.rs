//! Faults in the local mode, started for real with each store: a runner killed with SIGKILL mid-run still
//! leaves its run ended, with exactly one `end` event, a result, and its thread free.

use std::time::Duration;

use serde_json::Value;

use crate::support::local_mode::{LocalStore, parent, start};
use crate::support::redis::unique;

crate::with_each_store!(a_killed_runner_leaves_one_end_a_result_and_a_free_thread);

/// The pid of the runner process of `run_id` (its command line names the run's folder).
fn runner_of(run_id: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.filter_map(Result::ok).find_map(|entry| {
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        let text = String::from_utf8_lossy(&cmdline);
        (text.contains("\0runner\0") && text.contains(&format!("runs/{run_id}/"))).then_some(pid)
    })
}

async fn a_killed_runner_leaves_one_end_a_result_and_a_free_thread(store: LocalStore) {
    let local = start(store, "scripted/file:script.yaml", "[{delay_ms: 30000, content: too late}]").await;
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
        record = get(format!("{}/api/agent/runs/{run_id}", local.base)).await.1;
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
