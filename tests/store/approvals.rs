//! Runs paused for a person, on both stores: a pause only of a running run, kept (never swept as
//! abandoned) while it waits, resumed once, its decisions taken once, ended with reason
//! `ApprovalTimeout` and one `end` when no decision came in time.

use std::time::Duration;

use serde_json::json;
use yuxi_operator::run::RunStatus;
use yuxi_operator::run::approval::{ActionRequest, Checkpoint, Decision, DecisionKind, Waiting, records_of};
use yuxi_operator::run::message::ToolCall;
use yuxi_operator::store::{Store, StoreAuth};

use crate::run_ends::pending;
use crate::support::redis::{redis_url, unique};

async fn both_stores() -> [Store; 2] {
    let redis = Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis answers");
    [redis, Store::memory()]
}

fn paused_parts(expires_at: &str) -> (Checkpoint, Waiting) {
    let call = ToolCall::new("call_0_0", "execute", "{\"command\": \"ls\"}");
    let pending = vec![ActionRequest::of(&call)];
    let checkpoint = Checkpoint {
        added: vec![],
        steps: 2,
        usage: Default::default(),
        remaining: vec![call],
        pending: pending.clone(),
        remaining_seconds: 50,
        decisions: vec![],
        input: "x".into(),
    };
    (checkpoint, Waiting { reason: "ApprovalRequired".into(), action_requests: pending, expires_at: expires_at.into() })
}

/// A running run of a new thread: `(run_id, thread_id)`.
async fn running(store: &Store) -> (String, String) {
    let (run, thread) = (unique("run"), unique("thread"));
    store.create_run(&pending(&run, &thread), None, Default::default()).await.expect("created");
    store.set_run_status(&run, RunStatus::Running, None).await.expect("running");
    (run, thread)
}

#[tokio::test]
async fn a_paused_run_is_kept_resumed_once_and_its_decisions_taken_once() {
    for store in both_stores().await {
        let (run, thread) = running(&store).await;
        let (checkpoint, waiting) = paused_parts("2099-01-01T00:00:00Z");
        let keep = Duration::from_secs(600);
        assert!(
            store
                .pause_run(&run, &thread, &checkpoint, &waiting, json!({"type": "approval_required"}), keep)
                .await
                .expect("paused")
        );
        assert!(
            !store.pause_run(&run, &thread, &checkpoint, &waiting, json!({}), keep).await.expect("read"),
            "only once"
        );
        let record = store.run_record(&run).await.expect("read").expect("the run");
        assert_eq!((record.status, record.waiting.as_ref()), (RunStatus::Waiting, Some(&waiting)));
        let events = store.read_events(&run, "0-0", 10).await.expect("events");
        assert_eq!(events.last().map(|e| e.envelope.event.as_str()), Some("interrupt"));
        // Nobody holds a lease on it, and it is not swept.
        assert!(!store.end_abandoned(&run).await.expect("read"));
        assert_eq!(store.thread_active_run(&thread).await.expect("read").as_deref(), Some(run.as_str()));
        assert_eq!(store.run_checkpoint(&run).await.expect("read"), Some(checkpoint.clone()));
        assert_eq!(store.take_resumption(&run).await.expect("read"), None, "not resumed yet");
        let decisions = vec![Decision {
            tool_call_id: "call_0_0".into(),
            decision: DecisionKind::Approve,
            arguments: None,
            message: None,
        }];
        let approvals = records_of(&waiting.action_requests, &decisions, "alice");
        assert!(store.resume_run(&run, &decisions, &approvals).await.expect("resumed"));
        assert!(!store.resume_run(&run, &decisions, &[]).await.expect("read"), "only a waiting run is resumed");
        let record = store.run_record(&run).await.expect("read").expect("the run");
        assert_eq!((record.status, record.waiting), (RunStatus::Pending, None));
        assert_eq!(record.approvals, approvals, "the record keeps who decided what");
        assert_eq!(
            (record.approvals[0].name.as_str(), record.approvals[0].decision),
            ("execute", DecisionKind::Approve)
        );
        assert_eq!(store.take_resumption(&run).await.expect("read"), Some((checkpoint.clone(), decisions.clone())));
        assert_eq!(store.take_resumption(&run).await.expect("read"), None, "taken once");
        // Paused and resumed again: the second answer's records follow the first's.
        assert!(store.set_run_status(&run, RunStatus::Running, None).await.expect("running"));
        store
            .pause_run(&run, &thread, &checkpoint, &waiting, json!({}), Duration::from_secs(600))
            .await
            .expect("paused");
        let second = records_of(&waiting.action_requests, &decisions, "root");
        assert!(store.resume_run(&run, &decisions, &second).await.expect("resumed"));
        let record = store.run_record(&run).await.expect("read").expect("the run");
        assert_eq!(record.approvals, [approvals, second].concat(), "appended in the store, in order");
    }
}

#[tokio::test]
async fn a_resumed_run_is_kept_for_its_next_runner_and_not_swept_before_it_starts() {
    for store in both_stores().await {
        let (run, thread) = running(&store).await;
        let (checkpoint, waiting) = paused_parts("2099-01-01T00:00:00Z");
        store
            .pause_run(&run, &thread, &checkpoint, &waiting, json!({}), Duration::from_secs(600))
            .await
            .expect("paused");
        let decisions = vec![Decision {
            tool_call_id: "call_0_0".into(),
            decision: DecisionKind::Approve,
            arguments: None,
            message: None,
        }];
        assert!(store.resume_run(&run, &decisions, &[]).await.expect("resumed"));
        // A sweep between the resume and its runner's start: nobody holds a lease yet, and the run is
        // kept all the same (a sweep here once ended an approved run as abandoned).
        assert!(!store.end_abandoned(&run).await.expect("read"), "a resumed run waits for its runner");
        let record = store.run_record(&run).await.expect("read").expect("the run");
        assert_eq!(record.status, RunStatus::Pending);
    }
}

#[tokio::test]
async fn a_run_without_decisions_in_time_ends_failed_with_the_reason_and_one_end() {
    for store in both_stores().await {
        let (run, thread) = running(&store).await;
        let (checkpoint, waiting) = paused_parts("2026-12-03T12:00:00Z");
        store
            .pause_run(&run, &thread, &checkpoint, &waiting, json!({}), Duration::from_secs(600))
            .await
            .expect("paused");
        let before: jiff::Timestamp = "2026-12-03T11:59:00Z".parse().expect("time");
        let after: jiff::Timestamp = "2026-12-03T12:00:01Z".parse().expect("time");
        assert_eq!(store.expire_waiting(before).await.expect("swept"), 0);
        assert!(store.expire_waiting(after).await.expect("swept") >= 1);
        let result = store.run_result(&run).await.expect("read").expect("a result");
        assert_eq!((result.status, result.reason.as_deref()), (RunStatus::Failed, Some("ApprovalTimeout")));
        let ends = store
            .read_events(&run, "0-0", 100)
            .await
            .expect("events")
            .into_iter()
            .filter(|e| e.envelope.event.as_str() == "end")
            .count();
        assert_eq!(ends, 1);
        assert_eq!(store.thread_active_run(&thread).await.expect("read"), None, "its thread is free");
        assert!(!store.resume_run(&run, &[], &[]).await.expect("read"));
    }
}
