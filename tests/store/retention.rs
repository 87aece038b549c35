//! What the in-process store keeps: runs that have ended, up to a count and for a time; threads, up to
//! a count per user, that user's least recently written forgotten first (another user's never); never a
//! run that has not ended, nor a thread a run holds. Forgotten answers as never there.

use std::time::Duration;

use yuxi_operator::run::message::Message;
use yuxi_operator::run::{Created, RunRecord, RunStatus};

use crate::run_ends::{pending, result_of};
use yuxi_operator::store::{Retention, Store};

fn retention(finished_runs: usize, threads: usize) -> Retention {
    Retention { finished_runs, threads, ..Default::default() }
}

async fn start(store: &Store, run_id: &str, thread_id: &str) -> RunRecord {
    let record = pending(run_id, thread_id);
    let start_key = format!("start-{run_id}");
    assert_eq!(
        store.create_run(&record, Some(&start_key), Default::default()).await.expect("create"),
        Created::Started
    );
    record
}

async fn finish(store: &Store, record: &RunRecord) {
    let said = [Message::User { content: format!("asked by {}", record.run_id) }];
    let done = result_of(record, RunStatus::Completed, None);
    assert!(store.finish_run(&record.run_id, &record.thread_id, &said, &done).await.expect("finish"));
}

/// Starts and ends `count` runs, `run-<n>` on `thread-<n>`, one after the other.
async fn run_and_end(store: &Store, count: usize) {
    for n in 0..count {
        finish(store, &start(store, &format!("run-{n}"), &format!("thread-{n}")).await).await;
    }
}

async fn is_kept(store: &Store, run_id: &str) -> bool {
    let record = store.run_record(run_id).await.expect("record").is_some();
    let result = store.run_result(run_id).await.expect("result").is_some();
    let events = !store.read_events(run_id, "0-0", 10).await.expect("events").is_empty();
    assert!(
        record == result && result == events,
        "{run_id}: record {record}, result {result}, events {events}: kept or forgotten as a whole"
    );
    record
}

#[tokio::test]
async fn runs_that_ended_past_the_count_are_forgotten_earliest_first_and_unfinished_ones_never() {
    let store = Store::memory_with(retention(3, 100));
    let unfinished = start(&store, "unfinished", "thread-u").await;
    run_and_end(&store, 5).await;
    for n in 0..2 {
        assert!(!is_kept(&store, &format!("run-{n}")).await, "run-{n} is among the earliest ended");
    }
    for n in 2..5 {
        assert!(is_kept(&store, &format!("run-{n}")).await, "run-{n} is among the last 3 ended");
    }
    assert_eq!(store.run_record(&unfinished.run_id).await.expect("record").map(|r| r.status), Some(RunStatus::Pending));
    // A forgotten run's idempotent start is forgotten with it: the same key starts a new run.
    let again =
        RunRecord { run_id: "run-0-again".into(), ..store.run_record("run-4").await.expect("record").expect("kept") };
    let again = RunRecord { thread_id: "thread-again".into(), status: RunStatus::Pending, ..again };
    assert_eq!(
        store.create_run(&again, Some("start-run-0"), Default::default()).await.expect("create"),
        Created::Started
    );
}

#[tokio::test]
async fn threads_past_the_count_are_forgotten_least_recently_written_first_but_not_one_a_run_holds() {
    let store = Store::memory_with(retention(100, 2));
    let held = start(&store, "held", "thread-held").await;
    run_and_end(&store, 3).await;
    assert!(store.thread_owner("thread-held").await.expect("owner").is_some(), "a thread its run holds stays");
    assert!(store.thread_messages("thread-0").await.expect("history").is_empty(), "the least recently written goes");
    assert_eq!(store.thread_owner("thread-0").await.expect("owner"), None);
    assert_eq!(store.thread_messages("thread-2").await.expect("history").len(), 1, "the most recent stays");
    finish(&store, &held).await;
    assert_eq!(store.thread_messages("thread-held").await.expect("history").len(), 1, "written last, kept");
}

#[tokio::test]
async fn one_users_threads_never_push_out_another_users() {
    let store = Store::memory_with(retention(100, 2));
    let bobs = RunRecord { uid: "bob".into(), ..pending("bob-run", "bob-thread") };
    assert_eq!(store.create_run(&bobs, None, Default::default()).await.expect("create"), Created::Started);
    finish(&store, &bobs).await;
    // Alice writes five threads, more than twice the count, after Bob's one.
    for n in 0..5 {
        let record = RunRecord { uid: "alice".into(), ..pending(&format!("run-{n}"), &format!("thread-{n}")) };
        assert_eq!(store.create_run(&record, None, Default::default()).await.expect("create"), Created::Started);
        finish(&store, &record).await;
    }
    assert_eq!(store.thread_owner("bob-thread").await.expect("owner").as_deref(), Some("bob"));
    assert_eq!(store.thread_messages("bob-thread").await.expect("history").len(), 1, "Bob's thread stays");
    for n in 0..3 {
        assert_eq!(store.thread_owner(&format!("thread-{n}")).await.expect("owner"), None, "Alice's own oldest go");
    }
    for n in 3..5 {
        assert_eq!(store.thread_owner(&format!("thread-{n}")).await.expect("owner").as_deref(), Some("alice"));
    }
}

#[tokio::test]
async fn runs_that_ended_are_forgotten_after_their_time_to_live_at_the_next_sweep() {
    let store = Store::memory_with(Retention { finished_run_ttl: Duration::from_millis(50), ..Default::default() });
    let record = start(&store, "run-1", "thread-1").await;
    finish(&store, &record).await;
    assert!(is_kept(&store, "run-1").await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    store.sweep().await.expect("sweep");
    assert!(!is_kept(&store, "run-1").await, "forgotten once its time to live has passed");
}

#[tokio::test]
async fn ten_thousand_runs_leave_no_more_than_the_retention_behind() {
    let store = Store::memory();
    run_and_end(&store, 10_000).await;
    let Store::Memory(memory) = &store else { unreachable!("an in-process store") };
    let (runs, threads) = memory.held();
    let default = Retention::default();
    assert!(runs <= default.finished_runs, "{runs} runs kept");
    assert!(threads <= default.threads, "{threads} threads kept");
    assert!(is_kept(&store, "run-9999").await && !is_kept(&store, "run-0").await);
}
