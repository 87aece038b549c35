//! The AgentRun reconciler's Kubernetes I/O, against kube's mock service with the exact requests an API
//! server receives and the answers it gives (201, 200, 404, 409), and the run store for real (in-process).

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};
use yuxi_operator::controller::decide::{Action, Settings};
use yuxi_operator::controller::metrics::ControllerMetrics;
use yuxi_operator::controller::run_reconciler::{RunContext, apply, reconcile};
use yuxi_operator::resources::{AgentRun, AgentRunPhase, AgentRunStatus};
use yuxi_operator::run::RunStatus;
use yuxi_operator::store::Store;

use crate::support::api_server::scripted::{Exchange, api_server, failure};

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
        backoff: Default::default(),
        pools: None,
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
    let requeue = apply(&ctx, &typed(run), None, None, actions).await.expect("applied");
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
    apply(&ctx, &typed(run), None, None, vec![Action::SetStatus(Box::new(status))]).await.expect("nothing to do");
    assert!(server.await.expect("no request").is_empty());
}

#[tokio::test]
async fn a_pod_or_run_already_gone_counts_as_deleted() {
    let run = agent_run("r1", json!({}));
    let (client, server) = api_server(vec![
        Exchange::new(
            Method::DELETE,
            "/api/v1/namespaces/team-a/pods/r1?",
            404,
            failure(404, "NotFound", "pods \"r1\" not found"),
        ),
        Exchange::new(
            Method::DELETE,
            &format!("{RUNS}/r1?"),
            404,
            failure(404, "NotFound", "agentruns.yuxi.dev \"r1\" not found"),
        ),
    ]);
    let ctx = context(client, Store::memory());
    apply(&ctx, &typed(run), None, None, vec![Action::DeletePod, Action::DeleteRun]).await.expect("gone is done");
    server.await.expect("the whole script");
}

#[tokio::test]
async fn a_forbidden_delete_is_an_error_to_retry() {
    let run = agent_run("r1", json!({}));
    let message =
        "pods \"r1\" is forbidden: User \"system:serviceaccount:yuxi:controller\" cannot delete resource \"pods\"";
    let (client, server) = api_server(vec![Exchange::new(
        Method::DELETE,
        "/api/v1/namespaces/team-a/pods/r1?",
        403,
        failure(403, "Forbidden", message),
    )]);
    let ctx = context(client, Store::memory());
    let err = apply(&ctx, &typed(run), None, None, vec![Action::DeletePod]).await.expect_err("not allowed");
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
    let child_record = yuxi_operator::run::RunRecord {
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
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    };
    store.create_run(&child_record, None, Default::default()).await.expect("created");
    let ctx = context(client, store.clone());
    apply(&ctx, &typed(parent), None, None, vec![Action::CancelChildren]).await.expect("applied");
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
    let record = yuxi_operator::run::RunRecord {
        run_id: "r1".into(),
        thread_id: "t1".into(),
        agent_slug: "research-explorer".into(),
        uid: "alice".into(),
        parent: None,
        status: RunStatus::Pending,
        error: None,
        created_at: "2026-11-30T10:00:00Z".into(),
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    };
    store.create_run(&record, None, Default::default()).await.expect("created");
    let ctx = context(client, store.clone());
    let actions = vec![Action::RecordStatus(RunStatus::Running, None), Action::SignalCancel];
    apply(&ctx, &typed(run), None, None, actions).await.expect("applied");
    assert!(server.await.expect("no request").is_empty());
    assert_eq!(store.run_record("r1").await.expect("store").expect("record").status, RunStatus::Running);
    assert!(store.is_cancel_requested("r1").await.expect("store"));
}

#[tokio::test]
async fn an_end_the_controller_records_has_its_result_and_one_end_event_unless_the_runner_ended_first() {
    let (client, server) = api_server(vec![]);
    let store = Store::memory();
    let record = |run_id: &str| yuxi_operator::run::RunRecord {
        run_id: run_id.into(),
        thread_id: format!("{run_id}-thread"),
        agent_slug: "research-explorer".into(),
        uid: "alice".into(),
        parent: None,
        status: RunStatus::Running,
        error: None,
        created_at: "2026-11-30T10:00:00Z".into(),
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    };
    for run_id in ["gone", "finished"] {
        store.create_run(&record(run_id), None, Default::default()).await.expect("created");
    }
    // The runner of `finished` wrote its own end before the controller saw its pod end.
    let result: yuxi_operator::run::RunResult =
        serde_json::from_value(json!({"status": "completed", "output": "done", "run_id": "finished"})).expect("result");
    assert!(store.finish_run("finished", "finished-thread", &[], &result).await.expect("finish"));
    let ctx = context(client, store.clone());
    let pod_gone = || vec![Action::RecordStatus(RunStatus::Interrupted, Some("the sandbox pod went away".into()))];
    apply(&ctx, &typed(agent_run("gone", json!({}))), None, None, pod_gone()).await.expect("applied");
    apply(&ctx, &typed(agent_run("finished", json!({}))), None, None, pod_gone()).await.expect("applied");
    assert!(server.await.expect("no request").is_empty());

    let gone = store.run_record("gone").await.expect("store").expect("record");
    assert_eq!((gone.status, gone.error.as_deref()), (RunStatus::Interrupted, Some("the sandbox pod went away")));
    assert_eq!(store.run_result("gone").await.expect("store").map(|r| r.status), Some(RunStatus::Interrupted));
    for (run_id, status) in [("gone", "interrupted"), ("finished", "completed")] {
        let events = store.read_events(run_id, "0-0", 10).await.expect("events");
        let ends: Vec<_> = events.iter().filter(|e| e.envelope.event.as_str() == "end").collect();
        assert_eq!(ends.len(), 1, "{run_id}: {events:?}");
        assert_eq!(ends[0].envelope.payload["status"], status, "{run_id}");
    }
    assert_eq!(store.run_record("finished").await.expect("store").expect("record").status, RunStatus::Completed);
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

#[tokio::test]
async fn creating_a_pod_that_exists_already_counts_as_created() {
    use k8s_openapi::api::core::v1::{Pod, Secret};
    use yuxi_operator::controller::pod::SandboxObjects;
    let run = agent_run("r1", json!({}));
    let (client, server) = api_server(vec![
        Exchange::new(
            Method::POST,
            "/api/v1/namespaces/team-a/secrets?&fieldManager=yuxi-operator",
            201,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "r1-inputs"}}),
        ),
        Exchange::new(
            Method::POST,
            "/api/v1/namespaces/team-a/pods?&fieldManager=yuxi-operator",
            409,
            failure(409, "AlreadyExists", "pods \"r1\" already exists"),
        ),
    ]);
    let mut pod = Pod::default();
    pod.metadata.name = Some("r1".into());
    let mut inputs = Secret::default();
    inputs.metadata.name = Some("r1-inputs".into());
    let ctx = context(client, Store::memory());
    apply(&ctx, &typed(run), None, None, vec![Action::CreatePod(Box::new(SandboxObjects { pod, inputs }))])
        .await
        .expect("exists is done");
    let bodies = server.await.expect("the whole script");
    assert_eq!(bodies[1]["metadata"]["name"], "r1");
}

#[tokio::test]
async fn the_controller_relists_after_a_410_and_gives_a_new_run_its_pod() {
    use crate::support::api_server::routed::{Answer, routed};
    let mut run = agent_run("r1", json!({}));
    run["metadata"]["creationTimestamp"] = json!(jiff::Timestamp::now().to_string());
    let agent = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "research-explorer", "namespace": "team-a"},
                       "spec": {"backend": "SubAgentBackend", "isSubagent": true}});
    let list = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRunList", "metadata": {"resourceVersion": "9"}, "items": [run.clone()]});
    let expired = json!({"type": "ERROR", "object": failure(410, "Expired", "too old resource version: 5 (9)")});
    let (client, seen) = routed(move |request, earlier| {
        let path = request.path_and_query.as_str();
        let watching = path.contains("watch=true");
        match request.method.as_str() {
            "GET" if path.starts_with(&format!("{RUNS}?")) && watching => {
                let earlier_watches = earlier
                    .iter()
                    .filter(|s| {
                        s.path_and_query.starts_with(&format!("{RUNS}?")) && s.path_and_query.contains("watch=true")
                    })
                    .count();
                if earlier_watches == 0 { Answer::Watch(0, vec![expired.clone()]) } else { Answer::Watch(2000, vec![]) }
            }
            "GET" if path.starts_with(&format!("{RUNS}?")) => Answer::Json(200, list.clone()),
            "GET" if path.starts_with("/api/v1/namespaces/team-a/pods?") && watching => Answer::Watch(2000, vec![]),
            "GET" if path.starts_with("/api/v1/namespaces/team-a/pods?") => Answer::Json(
                200,
                json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "9"}, "items": []}),
            ),
            "GET" if path.starts_with("/apis/yuxi.dev/v1alpha1/namespaces/team-a/agents/research-explorer") => {
                Answer::Json(200, agent.clone())
            }
            "PATCH" => {
                let mut patched = run.clone();
                patched["status"] = request.body["status"].clone();
                Answer::Json(200, patched)
            }
            "POST" => Answer::Json(201, request.body.clone()),
            _ => Answer::Json(404, failure(404, "NotFound", "not found")),
        }
    });
    let ctx = Arc::new(context(client, Store::memory()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let shutdown = futures::FutureExt::shared(futures::FutureExt::boxed(async move {
        let _ = stopped.await;
    }));
    let controller =
        tokio::spawn(yuxi_operator::controller::run_reconciler::run(ctx, Some(vec!["team-a".into()]), 2, shutdown));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let created = loop {
        let requests = seen.lock().expect("log").clone();
        let lists = requests
            .iter()
            .filter(|s| {
                s.method == "GET"
                    && s.path_and_query.starts_with(&format!("{RUNS}?"))
                    && !s.path_and_query.contains("watch=true")
            })
            .count();
        if let Some(pod) = requests
            .iter()
            .find(|s| s.method == "POST" && s.path_and_query.starts_with("/api/v1/namespaces/team-a/pods?"))
            && lists >= 2
        {
            break pod.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no relist and pod: {requests:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), controller).await.expect("stops on shutdown").expect("joins");
    assert_eq!(created.body["metadata"]["name"], "r1");
    let owner = &created.body["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str(), owner["controller"].as_bool()),
        (Some("AgentRun"), Some("uid-r1"), Some(true))
    );
    assert_eq!(created.body["spec"]["automountServiceAccountToken"], false);
    let requests = seen.lock().expect("log").clone();
    let status = requests
        .iter()
        .find(|s| s.method == "PATCH" && s.path_and_query.starts_with(&format!("{RUNS}/r1/status?")))
        .expect("a status");
    assert_eq!(status.body["status"]["phase"], "Pending");
    assert_eq!(status.body["status"]["podName"], "r1");
}

/// A pod whose runner reads `YUXI_RUN_TOKEN` from the Secret `secret`, as the builder makes it for an
/// announced run.
fn pod_with_token(name: &str, secret: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "runner", "env": [
            {"name": "YUXI_REDIS_URL", "valueFrom": {"secretKeyRef": {"name": "yuxi-redis", "key": "url"}}},
            {"name": "YUXI_RUN_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}}]}]}}))
    .expect("a pod")
}

fn announced_run(name: &str) -> Value {
    let mut run = agent_run(name, json!({}));
    run["metadata"]["annotations"] = json!({"yuxi.dev/run-credentials": format!("{name}-credentials")});
    run
}

#[tokio::test]
async fn a_credentials_secret_that_is_not_the_runs_own_is_not_mounted() {
    use yuxi_operator::controller::pod::SandboxObjects;
    // A service-account token Secret under the credentials' name, owned by nobody.
    let (client, server) = api_server(vec![
        Exchange::new(
            Method::GET,
            "/api/v1/namespaces/team-a/secrets/r1-credentials",
            200,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                   "metadata": {"name": "r1-credentials", "namespace": "team-a"}}),
        ),
        Exchange::new(
            Method::POST,
            EVENTS,
            201,
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "r1.1"}}),
        ),
        Exchange::new(
            Method::POST,
            "/api/v1/namespaces/team-a/secrets?&fieldManager=yuxi-operator",
            201,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "r1-inputs"}}),
        ),
        Exchange::new(
            Method::POST,
            "/api/v1/namespaces/team-a/pods?&fieldManager=yuxi-operator",
            201,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "r1"}}),
        ),
    ]);
    let mut inputs = k8s_openapi::api::core::v1::Secret::default();
    inputs.metadata.name = Some("r1-inputs".into());
    let objects = SandboxObjects { pod: pod_with_token("r1", "r1-credentials"), inputs };
    let ctx = context(client, Store::memory());
    apply(&ctx, &typed(announced_run("r1")), None, None, vec![Action::CreatePod(Box::new(objects))])
        .await
        .expect("applied");
    let bodies = server.await.expect("the whole script");
    assert_eq!(
        (bodies[1]["type"].as_str(), bodies[1]["reason"].as_str()),
        (Some("Warning"), Some("UntrustedCredentials"))
    );
    assert!(bodies[1]["note"].as_str().expect("note").contains("kubernetes.io/service-account-token"), "{}", bodies[1]);
    let env = bodies[3]["spec"]["containers"][0]["env"].as_array().expect("env");
    let names: Vec<_> = env.iter().map(|v| v["name"].as_str().expect("name")).collect();
    assert_eq!(names, ["YUXI_REDIS_URL"], "the token is not mounted");
}

#[tokio::test]
async fn a_pod_waits_for_its_announced_credentials_and_they_go_when_the_run_ends() {
    use yuxi_operator::controller::pod::SandboxObjects;
    let (client, server) = api_server(vec![
        Exchange::new(
            Method::GET,
            "/api/v1/namespaces/team-a/secrets/r2-credentials",
            404,
            failure(404, "NotFound", "secrets \"r2-credentials\" not found"),
        ),
        Exchange::new(
            Method::DELETE,
            "/api/v1/namespaces/team-a/secrets/r2-credentials?",
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
    ]);
    let mut inputs = k8s_openapi::api::core::v1::Secret::default();
    inputs.metadata.name = Some("r2-inputs".into());
    let objects = SandboxObjects { pod: pod_with_token("r2", "r2-credentials"), inputs };
    let ctx = context(client, Store::memory());
    let run = typed(announced_run("r2"));
    let after = apply(&ctx, &run, None, None, vec![Action::CreatePod(Box::new(objects)), Action::DeletePod])
        .await
        .expect("waits");
    assert_eq!(after, Some(yuxi_operator::controller::run_reconciler::CREDENTIALS_WAIT), "nothing else was done");
    apply(&ctx, &run, None, None, vec![Action::DeleteCredentials]).await.expect("deleted");
    server.await.expect("the whole script: no pod, no inputs before the Secret exists");
}
