//! The AgentRun reconciler's Kubernetes I/O, against kube's mock service with the exact requests an API
//! server receives and the answers it gives (201, 200, 404, 409), and the run store for real (in-process).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::apiserver::{Exchange, api_server, failure};
use http::Method;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};
use yuxi_operator::controller::decide::{Action, Settings};
use yuxi_operator::controller::metrics::ControllerMetrics;
use yuxi_operator::controller::runs::{RunContext, apply, reconcile};
use yuxi_operator::resources::{AgentRun, AgentRunPhase, AgentRunStatus};
use yuxi_operator::runs::RunStatus;
use yuxi_operator::store::Store;

const RUNS: &str = "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agentruns";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/team-a/events?";

fn context(client: kube::Client, store: Store) -> RunContext {
    let reporter = Reporter { controller: "yuxi-operator".into(), instance: Some("test".into()) };
    RunContext {
        recorder: Recorder::new(client.clone(), reporter),
        client,
        store,
        settings: Settings::default(),
        metrics: ControllerMetrics::default(),
    }
}

fn agent_run(name: &str, extra: Value) -> Value {
    let mut run = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}"), "resourceVersion": "5"},
        "spec": {"agent": "research-explorer", "input": "look", "uid": "alice"}});
    if let Some(map) = extra.as_object() {
        for (key, value) in map {
            run[key] = value.clone();
        }
    }
    run
}

fn typed(value: Value) -> AgentRun {
    serde_json::from_value(value).expect("an AgentRun")
}

#[tokio::test]
async fn a_status_is_server_side_applied_and_an_event_published() {
    let run = agent_run("r1", json!({}));
    let mut applied = run.clone();
    applied["status"] = json!({"phase": "Running"});
    let (client, server) = api_server(vec![
        Exchange::new(Method::PATCH, &format!("{RUNS}/r1/status?&force=true&fieldManager=yuxi-operator"), 200, applied),
        Exchange::new(
            Method::POST,
            EVENTS,
            201,
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "r1.1"}}),
        ),
    ]);
    let ctx = context(client, Store::memory());
    let status = AgentRunStatus { phase: Some(AgentRunPhase::Running), ..AgentRunStatus::default() };
    let actions = vec![
        Action::SetStatus(Box::new(status)),
        Action::Event { warning: false, reason: "Started".into(), note: "the runner started".into() },
        Action::RequeueAfter(Duration::from_secs(30)),
        Action::RequeueAfter(Duration::from_secs(5)),
    ];
    let requeue = apply(&ctx, &typed(run), actions).await.expect("applied");
    let bodies = server.await.expect("the whole script");
    assert_eq!(requeue, Some(Duration::from_secs(5)), "the soonest look again wins");
    assert_eq!(
        bodies[0],
        json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": "r1"}, "status": {"phase": "Running"}})
    );
    assert_eq!((bodies[1]["reason"].as_str(), bodies[1]["type"].as_str()), (Some("Started"), Some("Normal")));
    assert_eq!(bodies[1]["regarding"]["name"], "r1");
    assert_eq!(bodies[1]["reportingController"], "yuxi-operator");
}

#[tokio::test]
async fn an_unchanged_status_is_not_written_again() {
    let run = agent_run("r1", json!({"status": {"phase": "Running"}}));
    let (client, server) = api_server(vec![]);
    let ctx = context(client, Store::memory());
    let status = AgentRunStatus { phase: Some(AgentRunPhase::Running), ..AgentRunStatus::default() };
    apply(&ctx, &typed(run), vec![Action::SetStatus(Box::new(status))]).await.expect("nothing to do");
    assert!(server.await.expect("no request").is_empty());
}

#[tokio::test]
async fn a_pod_or_run_already_gone_counts_as_deleted() {
    let run = agent_run("r1", json!({}));
    let (client, server) = api_server(vec![
        Exchange::new(
            Method::DELETE,
            "/api/v1/namespaces/team-a/pods/yuxi-run-r1?",
            404,
            failure(404, "NotFound", "pods \"yuxi-run-r1\" not found"),
        ),
        Exchange::new(
            Method::DELETE,
            &format!("{RUNS}/r1?"),
            404,
            failure(404, "NotFound", "agentruns.yuxi.dev \"r1\" not found"),
        ),
    ]);
    let ctx = context(client, Store::memory());
    apply(&ctx, &typed(run), vec![Action::DeletePod, Action::DeleteRun]).await.expect("gone is done");
    server.await.expect("the whole script");
}

#[tokio::test]
async fn a_forbidden_delete_is_an_error_to_retry() {
    let run = agent_run("r1", json!({}));
    let message = "pods \"yuxi-run-r1\" is forbidden: User \"system:serviceaccount:yuxi:controller\" cannot delete resource \"pods\"";
    let (client, server) = api_server(vec![Exchange::new(
        Method::DELETE,
        "/api/v1/namespaces/team-a/pods/yuxi-run-r1?",
        403,
        failure(403, "Forbidden", message),
    )]);
    let ctx = context(client, Store::memory());
    let err = apply(&ctx, &typed(run), vec![Action::DeletePod]).await.expect_err("not allowed");
    server.await.expect("the whole script");
    assert!(err.to_string().contains("cannot delete resource"), "{err}");
}

#[tokio::test]
async fn an_ended_parent_cancels_its_unfinished_children_and_their_records() {
    let parent = agent_run("parent", json!({}));
    let running = agent_run(
        "child-a",
        json!({"metadata": {"name": "child-a", "namespace": "team-a", "labels": {"yuxi.dev/parent-run": "parent"}}, "status": {"phase": "Running"}}),
    );
    let done = agent_run(
        "child-b",
        json!({"metadata": {"name": "child-b", "namespace": "team-a", "labels": {"yuxi.dev/parent-run": "parent"}}, "status": {"phase": "Completed"}}),
    );
    let list = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRunList", "metadata": {"resourceVersion": "9"}, "items": [running.clone(), done]});
    let (client, server) = api_server(vec![
        Exchange::new(Method::GET, &format!("{RUNS}?&labelSelector=yuxi.dev%2Fparent-run%3Dparent"), 200, list),
        Exchange::new(Method::PATCH, &format!("{RUNS}/child-a?&fieldManager=yuxi-operator"), 200, running),
    ]);
    let store = Store::memory();
    let child_record = yuxi_operator::runs::RunRecord {
        run_id: "child-a".into(),
        thread_id: "t1_sub_research-explorer_0000abcd".into(),
        agent_slug: "research-explorer".into(),
        uid: "alice".into(),
        parent: Some(yuxi_operator::resources::ParentRef {
            run_id: "parent".into(),
            thread_id: "t1".into(),
            agent: "deep-research".into(),
            ..Default::default()
        }),
        status: RunStatus::Pending,
        error: None,
        created_at: "2026-11-30T10:00:00Z".into(),
    };
    store.create_run(&child_record, None).await.expect("created");
    let ctx = context(client, store.clone());
    apply(&ctx, &typed(parent), vec![Action::CancelChildren]).await.expect("applied");
    let bodies = server.await.expect("the whole script");
    assert_eq!(bodies[1], json!({"spec": {"cancel": true}}), "only the unfinished child is cancelled");
    let record = store.run_record("child-a").await.expect("store").expect("record");
    assert_eq!(record.status, RunStatus::Cancelled, "a pending child's record ends at once");
}

#[tokio::test]
async fn the_runs_record_and_cancel_signal_go_to_the_store() {
    let run = agent_run("r1", json!({}));
    let (client, server) = api_server(vec![]);
    let store = Store::memory();
    let record = yuxi_operator::runs::RunRecord {
        run_id: "r1".into(),
        thread_id: "t1".into(),
        agent_slug: "research-explorer".into(),
        uid: "alice".into(),
        parent: None,
        status: RunStatus::Pending,
        error: None,
        created_at: "2026-11-30T10:00:00Z".into(),
    };
    store.create_run(&record, None).await.expect("created");
    let ctx = context(client, store.clone());
    let actions = vec![Action::RecordStatus(RunStatus::Running, None), Action::SignalCancel];
    apply(&ctx, &typed(run), actions).await.expect("applied");
    assert!(server.await.expect("no request").is_empty());
    assert_eq!(store.run_record("r1").await.expect("store").expect("record").status, RunStatus::Running);
    assert!(store.is_cancel_requested("r1").await.expect("store"));
}

#[tokio::test]
async fn a_run_that_cannot_be_read_gets_a_warning_and_is_skipped() {
    let mut broken = agent_run("r9", json!({}));
    broken["spec"]["timeoutSeconds"] = json!("an hour");
    let object: kube::api::DynamicObject = serde_json::from_value(broken).expect("a dynamic object");
    let (client, server) = api_server(vec![Exchange::new(
        Method::POST,
        EVENTS,
        201,
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "r9.1"}}),
    )]);
    let ctx = Arc::new(context(client, Store::memory()));
    let requeue = reconcile(Arc::new(object), ctx.clone()).await.expect("skipped, not failed");
    let bodies = server.await.expect("the whole script");
    assert_eq!(requeue, kube::runtime::controller::Action::await_change());
    assert_eq!((bodies[0]["type"].as_str(), bodies[0]["reason"].as_str()), (Some("Warning"), Some("InvalidObject")));
    assert!(
        bodies[0]["note"].as_str().expect("note").contains("timeoutSeconds")
            || bodies[0]["note"].as_str().expect("note").contains("invalid type"),
        "{}",
        bodies[0]
    );
    assert!(
        ctx.metrics.render().contains(r#"yuxi_reconcile_failures_total{kind="AgentRun",reason="InvalidObject"} 1"#)
    );
}
