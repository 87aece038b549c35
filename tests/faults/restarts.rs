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
