//! The local mode stopped mid-run and started again on the same data folder (and Redis): its runs end
//! `interrupted` with their result and one `end`, their threads are free, no runner outlives it.

use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;

use crate::support::faults::{
    LEASE_SECONDS, assert_ended_once, get, report, runners_left_after, runners_under, start_local_with, start_subagent,
    terminal_status, terminate,
};
use crate::support::local_mode::{Local, LocalStore};

crate::with_each_store!(a_restart_mid_run_ends_its_runs_and_frees_their_threads);

/// A script that answers only after the test is over.
const SLOW: &str = "[{delay_ms: 60000, content: too late}]";

/// Starts a main agent's run and a subagent's run, and waits until both runners are up.
/// Starts a run of the main agent as Alice with `body` (`thread_id` among its fields, or none): the
/// answer's status and the answer.
async fn start_main(local: &Local, body: serde_json::Value) -> (u16, serde_json::Value) {
    let response = local
        .client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth("alice-token")
        .json(&body)
        .send()
        .await
        .expect("reaches");
    (response.status().as_u16(), response.json().await.unwrap_or_default())
}

async fn two_running_runs(local: &Local, processes: bool) -> [(String, String); 2] {
    let (status, main) = start_main(local, json!({"query": "Research it.", "agent_slug": "deep-research"})).await;
    assert_eq!(status, 200, "{main}");
    let (status, child, _) = start_subagent(local).await;
    assert_eq!(status, 200, "{child}");
    let runs = [main, child]
        .map(|r| (r["run_id"].as_str().expect("id").to_string(), r["thread_id"].as_str().expect("thread").to_string()));
    // Both running, as the facade says (in runner processes, also as the processes say).
    let deadline = Instant::now() + Duration::from_secs(20);
    for (run_id, _) in &runs {
        while get(local, &format!("/api/agent/runs/{run_id}")).await.1["run"]["status"] != "running" {
            assert!(Instant::now() < deadline, "the runs did not start: {}", local.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    while processes && runners_under(local.data.path()).len() < 2 {
        assert!(Instant::now() < deadline, "the runners did not start: {}", local.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    runs
}

async fn a_restart_mid_run_ends_its_runs_and_frees_their_threads(store: LocalStore) {
    let cases =
        [("SIGTERM", true, false), ("SIGKILL", false, false), ("SIGTERM", true, true), ("SIGKILL", false, true)];
    for (signal, graceful, processes) in cases {
        let how = format!("{signal}{}", if processes { " (runner processes)" } else { "" });
        let extra: &[&str] = if processes { &["--runner-processes"] } else { &[] };
        let local = start_local_with(store, SLOW, TempDir::new().expect("dir"), None, LEASE_SECONDS, extra).await;
        let runs = two_running_runs(&local, processes).await;
        let stopped = Instant::now();
        let data = if graceful { terminate(local) } else { local.stop() };
        // Its runners go with it, however it stopped.
        assert_eq!(runners_left_after(data.path(), Duration::from_secs(5)).await, 0, "{how}: a runner outlived it");

        let local = start_local_with(store, SLOW, data, None, LEASE_SECONDS, extra).await;
        let bound = Duration::from_secs(LEASE_SECONDS * 3 + 10);
        for (run_id, thread_id) in &runs {
            match (store, terminal_status(&local, run_id, bound).await) {
                (LocalStore::Redis, Some(status)) => {
                    assert_eq!(status, "interrupted", "{how}");
                    assert_ended_once(&local, run_id, "interrupted").await;
                }
                // The in-process store went with the process: the run is unknown, as any missing one.
                (LocalStore::InProcess, None) => {}
                (store, seen) => panic!("{how}, {store:?}: run {run_id} ended as {seen:?}"),
            }
            let (_, answer) = get(&local, &format!("/api/agent/runs/{run_id}")).await;
            let record = &answer["run"];
            if store == LocalStore::Redis {
                assert!(record["error"].as_str().is_some_and(|e| !e.is_empty()), "{how}: a reason: {record}");
            }
            // The thread takes a new run.
            if !thread_id.contains("_sub_") {
                let body = json!({"query": "Again.", "agent_slug": "deep-research", "thread_id": thread_id});
                let (status, answer) = start_main(&local, body).await;
                assert_eq!(status, 200, "{how}: the thread is free: {answer}");
            }
        }
        report(
            &format!("restart-{how}-{store:?}"),
            format_args!(
                "2 runs under way: {} {:.1} s after the stop, their threads free",
                if store == LocalStore::Redis {
                    "both ended interrupted"
                } else {
                    "both forgotten with the in-process store"
                },
                stopped.elapsed().as_secs_f64()
            ),
        );
        let data = terminate(local);
        assert_eq!(runners_left_after(data.path(), Duration::from_secs(5)).await, 0);
    }
}

/// The parent's script: start the explorer, await it, then answer. The explorer answers too late.
const AWAITING_PARENT: &str = "- tool_calls: [{name: subagent_start, arguments: {subagent_slug: research-explorer, description: explore}}]\n- tool_calls: [{name: subagent_await, arguments: {run_id: '{{call_0_0.run_id}}'}}]\n- content: \"done: {{call_1_0}}\"\n";

/// A parent waiting on its child when the local mode stops is broken by the stop: it ends
/// `interrupted`, never `completed` with whatever its model made of the failed await.
#[tokio::test]
async fn a_parent_awaiting_its_child_when_the_local_mode_stops_ends_interrupted() {
    let scripts = TempDir::new().expect("dir");
    std::fs::write(scripts.path().join("deep-research.yaml"), AWAITING_PARENT).expect("script");
    std::fs::write(scripts.path().join("research-explorer.yaml"), SLOW).expect("script");
    let data = TempDir::new().expect("dir");
    let port = crate::support::local_mode::free_port();
    let command = |port: u16, data: &std::path::Path| {
        let mut command =
            crate::support::local_mode::command(LocalStore::Redis, port, data, "scripted/auto", scripts.path());
        command.args(["--run-lease-seconds", &LEASE_SECONDS.to_string()]);
        command
    };
    let logs = TempDir::new().expect("dir");
    let local = crate::support::local_mode::launch(command(port, data.path()), port, data, logs).await;
    let (status, main) = start_main(&local, json!({"query": "Research it.", "agent_slug": "deep-research"})).await;
    assert_eq!(status, 200, "{main}");
    let run_id = main["run_id"].as_str().expect("run_id").to_string();
    // The parent is in its await: its events show the call.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !events_so_far(&local, &run_id, Duration::from_millis(500)).await.contains("subagent_await") {
        assert!(Instant::now() < deadline, "the parent did not reach its await: {}", local.log());
    }
    // And its await is under way at the facade.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let data = terminate(local);
    let port = crate::support::local_mode::free_port();
    let logs = TempDir::new().expect("dir");
    let local = crate::support::local_mode::launch(command(port, data.path()), port, data, logs).await;
    let status = terminal_status(&local, &run_id, Duration::from_secs(LEASE_SECONDS * 3 + 10)).await;
    assert_eq!(status.as_deref(), Some("interrupted"), "{}", local.log());
    assert_ended_once(&local, &run_id, "interrupted").await;
    terminate(local);
}

/// What the run's event stream says within `wait` (the stream stays open while the run goes on).
async fn events_so_far(local: &Local, run_id: &str, wait: Duration) -> String {
    let request = local.client.get(format!("{}/api/agent/runs/{run_id}/events", local.base)).bearer_auth("alice-token");
    let mut response = request.send().await.expect("reaches");
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout_at(deadline, response.chunk()).await {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}
