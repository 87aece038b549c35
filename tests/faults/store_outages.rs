//! Redis killed under running runs and started again, with and without persistence: store calls fail
//! fast while it is down, a caller already waiting rides through, and every run still ends once.

use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;

use crate::support::faults::{
    OwnRedis, assert_ended_once, get, report, runners_left_after, start_local, start_subagent, terminal_status,
    terminate,
};
use crate::support::local_mode::LocalStore;

#[tokio::test]
async fn redis_killed_and_restarted_with_persistence_loses_no_run() {
    redis_killed_and_restarted(true).await;
}

#[tokio::test]
async fn redis_killed_and_restarted_empty_leaves_no_run_running() {
    redis_killed_and_restarted(false).await;
}

async fn redis_killed_and_restarted(persistent: bool) {
    const RUNS: usize = 8;
    const OUTAGE: Duration = Duration::from_millis(2500);
    let mut redis = OwnRedis::start(persistent);
    let script = "[{delay_ms: 1500, content: checked}]";
    let local = start_local(LocalStore::Redis, script, TempDir::new().expect("dir"), Some(&redis.url()), 10).await;
    let mut runs = Vec::new();
    let mut parents = Vec::new();
    for _ in 0..RUNS {
        let (status, started, parent) = start_subagent(&local).await;
        assert_eq!(status, 200, "{started}");
        runs.push(started["run_id"].as_str().expect("id").to_string());
        parents.push(parent);
    }
    // A parent already waiting for its child when the store goes away.
    let waiter = {
        let (client, base) = (local.client.clone(), local.base.clone());
        let body = json!({"parent": parents[0], "run_id": runs[0], "timeout_seconds": 60});
        tokio::spawn(async move {
            let response = client
                .post(format!("{base}/api/tools/subagent_await"))
                .bearer_auth("alice-token")
                .json(&body)
                .send()
                .await
                .expect("reaches");
            (response.status().as_u16(), response.json::<serde_json::Value>().await.unwrap_or_default())
        })
    };
    // And a stream already open on another.
    let watcher = {
        let (client, url) = (local.client.clone(), format!("{}/api/agent/runs/{}/events", local.base, runs[1]));
        tokio::spawn(async move {
            let response = client.get(url).bearer_auth("alice-token").send().await.expect("reaches");
            crate::support::faults::sse_events(&response.text().await.unwrap_or_default())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    redis.kill();
    let down = Instant::now();
    let asked = Instant::now();
    let (code, answer) = get(&local, &format!("/api/agent/runs/{}", runs[1])).await;
    let failed_in = asked.elapsed();
    assert_eq!(code, 503, "a store that is down answers 503: {answer}");
    assert!(failed_in < Duration::from_secs(10), "a store call hung for {failed_in:?} while the store was down");
    tokio::time::sleep(OUTAGE.saturating_sub(down.elapsed())).await;
    redis.up();
    let back = Instant::now();

    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for run_id in &runs {
        match terminal_status(&local, run_id, Duration::from_secs(45)).await {
            Some(status) => {
                assert_ended_once(&local, run_id, &status).await;
                *counts.entry(status).or_default() += 1;
            }
            None => {
                assert!(!persistent, "run {run_id} was lost although Redis kept every write");
                *counts.entry("forgotten".into()).or_default() += 1;
            }
        }
    }
    let drained = back.elapsed();
    if persistent {
        // Shorter than the runners' lease, the outage only paused them.
        assert_eq!(counts.get("completed"), Some(&RUNS), "{counts:?}");
        let (status, waited) = waiter.await.expect("the waiter");
        assert_eq!(status, 200, "the waiting parent rode through the outage: {waited}");
        assert!(
            ["completed", "failed", "interrupted"].contains(&waited["status"].as_str().unwrap_or_default()),
            "{waited}"
        );
        let events =
            tokio::time::timeout(Duration::from_secs(30), watcher).await.expect("the stream ended").expect("read");
        assert_eq!(events.iter().filter(|(_, e)| e == "end").count(), 1, "the open stream rode through: {events:?}");
        assert_eq!(events.last().map(|(_, e)| e.as_str()), Some("end"), "{events:?}");
    } else {
        waiter.abort();
        watcher.abort();
    }
    // The store is usable again, and a new run completes.
    let (status, started, _) = start_subagent(&local).await;
    assert_eq!(status, 200, "{started}");
    let fresh = started["run_id"].as_str().expect("id").to_string();
    assert_eq!(terminal_status(&local, &fresh, Duration::from_secs(30)).await.as_deref(), Some("completed"));
    report(
        &format!("redis-outage-{}", if persistent { "persistent" } else { "empty" }),
        format_args!(
            "{RUNS} runs under way, Redis down {:.1} s: a store call failed in {} ms; after it came back the runs ended {counts:?}, all within {:.1} s",
            OUTAGE.as_secs_f64(),
            failed_in.as_millis(),
            drained.as_secs_f64()
        ),
    );
    let data = terminate(local);
    assert_eq!(runners_left_after(data.path(), Duration::from_secs(5)).await, 0, "a runner was left");
}
