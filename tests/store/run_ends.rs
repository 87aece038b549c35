//! Who ends a run, on both stores (Redis and in-process): one terminal write whoever writes first, the
//! sweeper for runs nobody keeps, thread locks that go with their run's lease, and a cancel of a run
//! nobody executes.

use std::time::Duration;

use serde_json::json;
use yuxi_operator::run::message::Message;
use yuxi_operator::run::{Created, RunRecord, RunResult, RunStatus};
use yuxi_operator::store::{ABANDONED, Store, StoreAuth};

use crate::support::redis::{redis_url, unique};

async fn both_stores() -> [Store; 2] {
    let redis = Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis answers");
    [redis, Store::memory()]
}

/// A new run's record, as the facade writes it: `pending`, of alice, with no parent.
pub(crate) fn pending(run_id: &str, thread_id: &str) -> RunRecord {
    RunRecord {
        run_id: run_id.into(),
        thread_id: thread_id.into(),
        agent_slug: "helper".into(),
        uid: "alice".into(),
        parent: None,
        status: RunStatus::Pending,
        error: None,
        created_at: "2026-12-01T10:00:00Z".into(),
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    }
}

/// A new run on a new thread, recorded as the facade records it.
async fn created(store: &Store) -> RunRecord {
    let record = pending(&unique("run"), &unique("thread"));
    assert_eq!(store.create_run(&record, None, Default::default()).await.expect("create"), Created::Started);
    record
}

/// Makes the run's keeper lapse (as it does when the process minding it is gone).
async fn forget_keeper(store: &Store, run_id: &str) {
    store.keep_run(run_id, "gone", Duration::from_millis(1)).await.expect("keep");
    tokio::time::sleep(Duration::from_millis(20)).await;
}

/// The run's event names, in order.
async fn event_names(store: &Store, run_id: &str) -> Vec<String> {
    let events = store.read_events(run_id, "0-0", 1000).await.expect("events");
    events.into_iter().map(|e| e.envelope.event.as_str().to_string()).collect()
}

/// The result of `record` ending `status`, with `error`.
pub(crate) fn result_of(record: &RunRecord, status: RunStatus, error: Option<&str>) -> RunResult {
    RunResult {
        status,
        output: if status == RunStatus::Completed { "done".into() } else { String::new() },
        error: error.map(String::from),
        agent_slug: record.agent_slug.clone(),
        run_id: record.run_id.clone(),
        thread_id: record.thread_id.clone(),
        token_usage: Default::default(),
        reason: None,
        tree_token_usage: None,
        tree_cost: Vec::new(),
    }
}

#[tokio::test]
async fn a_runner_s_end_writes_record_result_history_and_one_end_in_one_step() {
    for store in both_stores().await {
        let record = created(&store).await;
        assert!(store.set_run_status(&record.run_id, RunStatus::Running, None).await.expect("running"));
        let messages = vec![Message::User { content: "q".into() }];
        let failed = result_of(&record, RunStatus::Failed, Some("the model refused"));
        assert!(store.finish_run(&record.run_id, &record.thread_id, &messages, &failed).await.expect("finish"));

        let now = store.run_record(&record.run_id).await.expect("read").expect("kept");
        assert_eq!((now.status, now.error.as_deref()), (RunStatus::Failed, Some("the model refused")));
        let end_event = store.read_events(&record.run_id, "0-0", 10).await.expect("events").pop().expect("end");
        assert_eq!(
            now.ended_at.as_deref(),
            Some(end_event.envelope.created_at.as_str()),
            "the record keeps when it ended"
        );
        assert_eq!(store.run_result(&record.run_id).await.expect("result"), Some(failed.clone()));
        assert_eq!(store.thread_messages(&record.thread_id).await.expect("history"), messages);
        assert_eq!(event_names(&store, &record.run_id).await, ["error", "end"]);
        let end = store.read_events(&record.run_id, "0-0", 10).await.expect("events").pop().expect("end");
        assert_eq!(end.envelope.payload, json!({"status": "failed", "error": "the model refused"}));

        // Nobody ends it again: not a second runner, not the launcher, not the sweeper.
        assert!(!store.finish_run(&record.run_id, &record.thread_id, &messages, &failed).await.expect("again"));
        assert!(!store.end_run(&record.run_id, RunStatus::Interrupted, Some("late")).await.expect("end"));
        assert!(!store.end_abandoned(&record.run_id).await.expect("sweep"));
        assert_eq!(event_names(&store, &record.run_id).await, ["error", "end"]);
        assert_eq!(store.thread_messages(&record.thread_id).await.expect("history"), messages, "written once");
        let next = pending(&unique("run"), &record.thread_id);
        assert_eq!(
            store.create_run(&next, None, Default::default()).await.expect("create"),
            Created::Started,
            "the thread is free"
        );
    }
}

#[tokio::test]
async fn a_run_ended_before_its_runner_finishes_keeps_that_end() {
    for store in both_stores().await {
        let record = created(&store).await;
        assert!(store.end_run(&record.run_id, RunStatus::Interrupted, Some("stopped")).await.expect("end"));
        let late = result_of(&record, RunStatus::Completed, None);
        let messages = vec![Message::User { content: "q".into() }];
        assert!(!store.finish_run(&record.run_id, &record.thread_id, &messages, &late).await.expect("finish"));
        let result = store.run_result(&record.run_id).await.expect("result").expect("the end's result");
        assert_eq!((result.status, result.error.as_deref()), (RunStatus::Interrupted, Some("stopped")));
        assert_eq!(event_names(&store, &record.run_id).await, ["end"]);
        assert!(store.thread_messages(&record.thread_id).await.expect("history").is_empty());
    }
}

#[tokio::test]
async fn nothing_is_added_to_a_stream_after_its_end() {
    use yuxi_operator::run::EventKind;
    use yuxi_operator::store::StoreError;
    for store in both_stores().await {
        let record = created(&store).await;
        store.append_event(&record.run_id, &record.thread_id, EventKind::Metadata, json!({})).await.expect("before");
        // Ended elsewhere (a stopping local mode) while its runner still prepares.
        assert!(store.end_run(&record.run_id, RunStatus::Interrupted, Some("stopped")).await.expect("end"));
        let late = store.append_event(&record.run_id, &record.thread_id, EventKind::Metadata, json!({})).await;
        assert!(matches!(&late, Err(StoreError::RunEnded { run_id }) if *run_id == record.run_id), "{late:?}");
        assert_eq!(event_names(&store, &record.run_id).await, ["metadata", "end"]);
    }
}

#[tokio::test]
async fn the_sweeper_ends_runs_nobody_keeps_and_leaves_kept_and_leased_ones() {
    for store in both_stores().await {
        let (kept, leased, abandoned) = (created(&store).await, created(&store).await, created(&store).await);
        for run in [&kept, &leased, &abandoned] {
            store.set_run_status(&run.run_id, RunStatus::Running, None).await.expect("running");
        }
        store.keep_run(&kept.run_id, "launcher", Duration::from_secs(30)).await.expect("keep");
        assert!(store.hold_run_lease(&leased.run_id, "runner", Duration::from_secs(30)).await.expect("lease"));
        forget_keeper(&store, &leased.run_id).await;
        forget_keeper(&store, &abandoned.run_id).await;

        assert!(store.sweep().await.expect("sweep") >= 1);
        let status = async |run: &RunRecord| store.run_record(&run.run_id).await.expect("read").expect("kept").status;
        assert_eq!(status(&kept).await, RunStatus::Running);
        assert_eq!(status(&leased).await, RunStatus::Running);
        let swept = store.run_record(&abandoned.run_id).await.expect("read").expect("kept");
        assert_eq!((swept.status, swept.error.as_deref()), (RunStatus::Interrupted, Some(ABANDONED)));
        let result = store.run_result(&abandoned.run_id).await.expect("result").expect("written");
        assert_eq!(result.status, RunStatus::Interrupted);
        assert_eq!(event_names(&store, &abandoned.run_id).await, ["end"]);
        assert!(!store.unfinished_runs().await.expect("unfinished").contains(&abandoned.run_id));

        // Its runner gone, the leased run is the sweeper's too.
        store.release_run_lease(&leased.run_id, "runner").await.expect("release");
        assert!(store.end_abandoned(&leased.run_id).await.expect("sweep"));
        assert!(!store.end_abandoned(&leased.run_id).await.expect("sweep"), "once");
        assert_eq!(event_names(&store, &leased.run_id).await, ["end"]);
    }
}

#[tokio::test]
async fn a_thread_lock_goes_with_its_runs_lease() {
    for store in both_stores().await {
        let first = created(&store).await;
        store.set_run_status(&first.run_id, RunStatus::Running, None).await.expect("running");
        let second = pending(&unique("run"), &first.thread_id);
        assert_eq!(
            store.create_run(&second, None, Default::default()).await.expect("create"),
            Created::Busy(first.run_id.clone()),
            "kept by its creator for the start grace"
        );
        forget_keeper(&store, &first.run_id).await;
        assert_eq!(store.create_run(&second, None, Default::default()).await.expect("create"), Created::Started);
        let ended = store.run_record(&first.run_id).await.expect("read").expect("kept");
        assert_eq!(ended.status, RunStatus::Interrupted);
        assert_eq!(event_names(&store, &first.run_id).await, ["end"]);
    }
}

#[tokio::test]
async fn a_cancel_of_a_run_nobody_executes_ends_it_at_once() {
    for store in both_stores().await {
        // Not started: cancelled with its result and end.
        let waiting = created(&store).await;
        let after = store.cancel_run(&waiting.run_id).await.expect("cancel").expect("known");
        assert_eq!(after.status, RunStatus::Cancelled);
        assert_eq!(
            store.run_result(&waiting.run_id).await.expect("result").map(|r| r.status),
            Some(RunStatus::Cancelled)
        );
        assert_eq!(event_names(&store, &waiting.run_id).await, ["end"]);

        // Running, its runner gone: the same.
        let orphan = created(&store).await;
        store.set_run_status(&orphan.run_id, RunStatus::Running, None).await.expect("running");
        forget_keeper(&store, &orphan.run_id).await;
        let after = store.cancel_run(&orphan.run_id).await.expect("cancel").expect("known");
        assert_eq!(after.status, RunStatus::Cancelled);
        assert_eq!(event_names(&store, &orphan.run_id).await, ["end"]);
        let ended = store.run_record(&orphan.run_id).await.expect("read").and_then(|r| r.ended_at);
        assert!(ended.is_some_and(|at| at.parse::<jiff::Timestamp>().is_ok()), "an end by a cancel is timed too");

        // Running with its runner: asked to stop, and it ends when the runner stops.
        let live = created(&store).await;
        store.set_run_status(&live.run_id, RunStatus::Running, None).await.expect("running");
        assert!(store.hold_run_lease(&live.run_id, "runner", Duration::from_secs(30)).await.expect("lease"));
        let after = store.cancel_run(&live.run_id).await.expect("cancel").expect("known");
        assert_eq!(after.status, RunStatus::CancelRequested);
        assert!(store.is_cancel_requested(&live.run_id).await.expect("asked"));
        assert!(event_names(&store, &live.run_id).await.is_empty());
        // Should its runner die now, the sweeper ends it as the cancel asked.
        store.release_run_lease(&live.run_id, "runner").await.expect("release");
        forget_keeper(&store, &live.run_id).await;
        assert!(store.end_abandoned(&live.run_id).await.expect("sweep"));
        assert_eq!(store.run_record(&live.run_id).await.expect("read").map(|r| r.status), Some(RunStatus::Cancelled));
    }
}

#[tokio::test]
async fn a_status_view_follows_a_run_until_it_ends_then_is_read_from_redis_once_for_a_while() {
    let store = Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis answers");
    let record = created(&store).await;
    let pending = store.run_view(&record.run_id, 10).await.expect("view").expect("the run");
    assert_eq!(pending.record.status, RunStatus::Pending);
    assert!(store.set_run_status(&record.run_id, RunStatus::Running, None).await.expect("running"));
    store
        .append_event(&record.run_id, &record.thread_id, yuxi_operator::run::EventKind::Messages, json!({}))
        .await
        .expect("append");
    let running = store.run_view(&record.run_id, 10).await.expect("view").expect("the run");
    assert_eq!((running.record.status, running.recent.len()), (RunStatus::Running, 1), "a running run is read afresh");
    let done = result_of(&record, RunStatus::Completed, None);
    assert!(store.finish_run(&record.run_id, &record.thread_id, &[], &done).await.expect("finish"));
    let ended = store.run_view(&record.run_id, 10).await.expect("view").expect("the run");
    assert_eq!(ended.record.status, RunStatus::Completed);
    assert!(
        ended.result.is_some()
            && ended.recent.last().is_some_and(|e| e.envelope.event == yuxi_operator::run::EventKind::End)
    );
    // Its keys gone behind the store's back, the ended run's view still answers from this process.
    let mut redis = redis::Client::open(redis_url().as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connects");
    let _: () =
        redis::cmd("DEL").arg(format!("yuxi:run:{}:record", record.run_id)).query_async(&mut redis).await.expect("del");
    let kept = store.run_view(&record.run_id, 10).await.expect("view").expect("kept for a while");
    assert_eq!(kept.record.status, RunStatus::Completed);
    // Another store (another replica) reads Redis itself.
    let other = Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis answers");
    assert!(other.run_view(&record.run_id, 10).await.expect("view").is_none());
}
