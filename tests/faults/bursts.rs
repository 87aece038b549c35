//! A burst of starts at once, with event streams left and resumed in the middle of it: every start is
//! answered (no 5xx), every run completes with `/result` and one `end`, no runner is left, and the
//! local mode's memory comes back near where it started.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::support::faults::{
    LEASE_SECONDS, assert_ended_once, burst_size, report, rss_kib, runners_left_after, runners_under, sse_events,
    start_local, start_subagent, stream, terminal_status, terminate,
};
use crate::support::local_mode::{Local, LocalStore};

crate::with_each_store!(a_burst_of_starts_ends_every_run_once);

/// Reads the run's stream until its first event, then leaves; returns that event's id.
async fn first_event_then_leave(local: &Local, run_id: &str) -> String {
    let mut response = local
        .client
        .get(format!("{}/api/agent/runs/{run_id}/events", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    let mut text = String::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
            .await
            .expect("an event within 30 s")
            .expect("reads")
            .expect("the stream has an event");
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some((id, _)) = sse_events(&text).into_iter().next() {
            return id;
        }
    }
}

/// Waits until every knowledge base Alice may read has been indexed once.
async fn wait_indexed(local: &Local) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list: serde_json::Value = local
            .client
            .get(format!("{}/api/knowledge", local.base))
            .bearer_auth("alice-token")
            .send()
            .await
            .expect("reaches")
            .json()
            .await
            .expect("JSON");
        let bases = list["knowledge_bases"].as_array().expect("knowledge bases");
        if bases.iter().all(|kb| !kb["status"]["indexed_at"].is_null()) {
            return;
        }
        assert!(Instant::now() < deadline, "the knowledge bases were not indexed within 60 s: {list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_burst_of_starts_ends_every_run_once(store: LocalStore) {
    let size = burst_size();
    let local = start_local(store, "[{content: checked}]", TempDir::new().expect("dir"), None, LEASE_SECONDS).await;
    let pid = local.child.id() as i32;
    // The examples' knowledge base indexed, as the local mode does once when it starts, and one run,
    // so the baseline holds what any run allocates once; then a pause, for what indexing freed to go.
    wait_indexed(&local).await;
    let (_, warm, _) = start_subagent(&local).await;
    terminal_status(&local, warm["run_id"].as_str().expect("id"), Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_kib(pid);

    let peak = Arc::new(AtomicU64::new(before));
    let sampler = {
        let (peak, data) = (peak.clone(), local.data.path().to_path_buf());
        tokio::spawn(async move {
            loop {
                let total = rss_kib(pid) + runners_under(&data).into_iter().map(rss_kib).sum::<u64>();
                peak.fetch_max(total, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let started = Instant::now();
    let answers = futures::future::join_all((0..size).map(|_| start_subagent(&local))).await;
    let answered_in = started.elapsed();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for (status, _, _) in &answers {
        *statuses.entry(*status).or_default() += 1;
    }
    assert_eq!(statuses.get(&200), Some(&size), "every start answered 200: {statuses:?}\n{}", local.log());
    let runs: Vec<String> =
        answers.iter().map(|(_, answer, _)| answer["run_id"].as_str().expect("id").to_string()).collect();

    // Streams left after their first event and resumed from it, while the burst runs.
    let resumed = futures::future::join_all(runs.iter().take(10).map(async |run_id| {
        let first = first_event_then_leave(&local, run_id).await;
        let rest = stream(&local, run_id, Some(&first)).await;
        (first, rest)
    }))
    .await;
    for (first, rest) in &resumed {
        assert!(rest.iter().all(|(id, _)| id != first), "the resumed stream repeats {first}: {rest:?}");
        assert_eq!(rest.iter().filter(|(_, e)| e == "end").count(), 1, "{rest:?}");
    }

    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for run_id in &runs {
        let status = terminal_status(&local, run_id, Duration::from_secs(180)).await.expect("known");
        *counts.entry(status).or_default() += 1;
    }
    let drained = started.elapsed();
    sampler.abort();
    assert_eq!(counts.get("completed"), Some(&size), "{counts:?}");
    for run_id in &runs {
        assert_ended_once(&local, run_id, "completed").await;
    }
    assert_eq!(runners_left_after(local.data.path(), Duration::from_secs(10)).await, 0, "a runner was left");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(pid);
    let peak = peak.load(Ordering::Relaxed);
    report(
        &format!("burst-{store:?}"),
        format_args!(
            "{size} starts at once: answered in {:.1} s, {counts:?}, drained in {:.1} s; facade RSS {} MiB before, {} MiB after; peak of the facade and its runners {} MiB",
            answered_in.as_secs_f64(),
            drained.as_secs_f64(),
            before / 1024,
            after / 1024,
            peak / 1024
        ),
    );
    // Back near where it started: what is left is the runs' records, a few KiB each, not their runners.
    let allowance = 32 * 1024 + 64 * size as u64;
    assert!(
        after <= before + allowance,
        "the facade kept {} KiB after the burst (allowed {allowance})",
        after - before
    );
    let data = terminate(local);
    assert_eq!(runners_left_after(data.path(), Duration::from_secs(5)).await, 0);
}
