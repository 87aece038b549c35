//! The Agent reconciler against a stand-in for the Kubernetes API server (kube's mock service): the
//! built-in subagent created once, statuses written with server-side apply only when they change, and
//! the reconcile loop reacting to a subagent deleted under a main agent that names it.

use std::time::Duration;

use http::Method;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use yuxi_operator::controller::agent_reconciler as agents;
use yuxi_operator::controller::metrics::ControllerMetrics;
use yuxi_operator::resources::{Agent, AgentStatus};

use crate::support::api_server::routed::{Answer, routed};
use crate::support::api_server::scripted::{Exchange, api_server, api_server_receiving, failure};

const AGENTS: &str = "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agents";
const CREATE: &str = "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agents?&fieldManager=yuxi-operator";

fn status_path(name: &str) -> String {
    format!("{AGENTS}/{name}/status?&force=true&fieldManager=yuxi-operator")
}

/// An Agent of `team-a` as the API server stores it, with `status` when given.
fn stored(name: &str, resource_version: &str, spec: Value, status: Option<&AgentStatus>) -> Value {
    let mut object = json!({
        "apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": name, "namespace": "team-a", "uid": format!("uid-{name}"), "generation": 1,
                     "resourceVersion": resource_version, "creationTimestamp": "2025-10-09T08:00:00Z"},
        "spec": spec,
    });
    if let Some(status) = status {
        object["status"] = serde_json::to_value(status).expect("status as JSON");
    }
    object
}

fn decoded(object: &Value) -> Agent {
    serde_json::from_value(object.clone()).expect("an Agent")
}

fn at(rfc3339: &str) -> Time {
    Time(rfc3339.parse().expect("a timestamp"))
}

fn research_spec() -> Value {
    json!({"backend": "ChatbotAgent", "isSubagent": false, "context": {"subagents": ["research-explorer"]}})
}

fn explorer_spec() -> Value {
    json!({"backend": "SubAgentBackend", "isSubagent": true})
}

/// The created `general-purpose`, as the API server answers the create.
fn created_general_purpose() -> Value {
    stored(
        "general-purpose",
        "12",
        json!({"backend": "SubAgentBackend", "isSubagent": true, "displayName": "General purpose",
               "share": {"readScope": {"accessLevel": "Global"}}}),
        None,
    )
}

#[tokio::test]
async fn general_purpose_is_created_and_an_existing_one_is_fine() {
    let (client, server) = api_server(vec![
        Exchange::new(Method::POST, CREATE, 201, created_general_purpose()),
        Exchange::new(
            Method::POST,
            CREATE,
            409,
            failure(409, "AlreadyExists", "agents.yuxi.dev \"general-purpose\" already exists"),
        ),
    ]);
    assert!(agents::ensure_general_purpose(client.clone(), "team-a").await.expect("created"));
    assert!(!agents::ensure_general_purpose(client, "team-a").await.expect("already there is fine"));
    let bodies = server.await.expect("both creates came");
    for body in &bodies {
        assert_eq!(
            (&body["kind"], &body["metadata"]["name"], &body["metadata"]["namespace"]),
            (&json!("Agent"), &json!("general-purpose"), &json!("team-a")),
            "{body}"
        );
        assert_eq!((&body["spec"]["backend"], &body["spec"]["isSubagent"]), (&json!("SubAgentBackend"), &json!(true)));
        assert!(body.get("status").is_none(), "{body}");
    }
}

#[tokio::test]
async fn general_purpose_forbidden_is_an_error() {
    let (client, server) = api_server(vec![Exchange::new(
        Method::POST,
        CREATE,
        403,
        failure(
            403,
            "Forbidden",
            "agents.yuxi.dev is forbidden: User \"system:serviceaccount:yuxi:yuxi-operator\" cannot create resource \"agents\" in API group \"yuxi.dev\" in the namespace \"team-a\"",
        ),
    )]);
    let err = agents::ensure_general_purpose(client, "team-a").await.expect_err("403 is an error");
    server.await.expect("the create came");
    match err {
        kube::Error::Api(status) => assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden")),
        other => panic!("expected the API server's refusal, got {other}"),
    }
}

#[tokio::test]
async fn a_changed_status_is_applied_server_side_to_the_status_subresource() {
    let explorer = decoded(&stored("research-explorer", "40", explorer_spec(), None));
    let research = decoded(&stored("deep-research", "41", research_spec(), None));
    let status = agents::agent_status(&research, &[explorer], at("2025-10-09T08:01:00Z"));
    let answer = stored("deep-research", "42", research_spec(), Some(&status));
    let (client, server) =
        api_server_receiving(vec![Exchange::new(Method::PATCH, &status_path("deep-research"), 200, answer)]);

    assert!(agents::apply_status(client, &research, status.clone()).await.expect("applied"));
    let seen = server.await.expect("the patch came");
    assert_eq!(seen.len(), 1);
    let patch = &seen[0];
    assert_eq!(patch.method, Method::PATCH);
    assert_eq!(patch.path_and_query, status_path("deep-research"));
    assert_eq!(patch.content_type.as_deref(), Some("application/apply-patch+yaml"));
    assert_eq!(
        patch.body,
        json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "deep-research"},
               "status": {"observedGeneration": 1, "conditions": [
                   {"type": "Accepted", "status": "True", "reason": "Valid",
                    "message": "the spec is valid and every subagent it names resolves",
                    "observedGeneration": 1, "lastTransitionTime": "2025-10-09T08:01:00Z"},
                   {"type": "Ready", "status": "True", "reason": "Valid", "message": "the agent can run",
                    "observedGeneration": 1, "lastTransitionTime": "2025-10-09T08:01:00Z"}]}})
    );
}

#[tokio::test]
async fn an_unchanged_status_is_not_sent() {
    let explorer = decoded(&stored("research-explorer", "40", explorer_spec(), None));
    let mut research = decoded(&stored("deep-research", "41", research_spec(), None));
    research.status =
        Some(agents::agent_status(&research, std::slice::from_ref(&explorer), at("2025-10-09T08:01:00Z")));
    let again = agents::agent_status(&research, &[explorer], at("2025-10-09T09:30:00Z"));

    // No exchange: any request would fail as if the API server were unreachable.
    let (client, server) = api_server(vec![]);
    server.await.expect("no exchange");
    assert!(!agents::apply_status(client, &research, again).await.expect("nothing to send"));
}

#[tokio::test]
async fn a_refused_status_is_an_error() {
    let research = decoded(&stored("deep-research", "41", research_spec(), None));
    let status = agents::agent_status(&research, &[], at("2025-10-09T08:01:00Z"));
    let (client, server) = api_server(vec![Exchange::new(
        Method::PATCH,
        &status_path("deep-research"),
        404,
        failure(404, "NotFound", "agents.yuxi.dev \"deep-research\" not found"),
    )]);
    let err = agents::apply_status(client, &research, status).await.expect_err("404 is an error");
    server.await.expect("the patch came");
    assert!(matches!(err, kube::Error::Api(status) if status.code == 404));
}

/// `run` over namespace `team-a`: the built-in subagent is ensured at start (it exists), the Agents are
/// listed and judged, an Agent that does not fit the schema gets InvalidSpec without stopping the
/// watch, and the watch's delete of a subagent re-judges the main agent that names it. Then `run` stops
/// on shutdown, with a watch still open.
#[tokio::test]
async fn run_judges_the_listed_agents_and_follows_a_deleted_subagent() {
    let explorer = decoded(&stored("research-explorer", "40", explorer_spec(), None));
    let explorer_status = agents::agent_status(&explorer, &[], at("2025-10-09T08:01:00Z"));
    let explorer_object = stored("research-explorer", "40", explorer_spec(), Some(&explorer_status));
    let research = decoded(&stored("deep-research", "41", research_spec(), None));
    let research_status = agents::agent_status(&research, std::slice::from_ref(&explorer), at("2025-10-09T08:01:00Z"));
    let research_object = stored("deep-research", "41", research_spec(), Some(&research_status));
    // `tools` is a list in the schema: an object written before that rule, say.
    let broken_object =
        stored("broken", "43", json!({"backend": "ChatbotAgent", "context": {"tools": "web_search"}}), None);
    let list = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentList", "metadata": {"resourceVersion": "90"},
                      "items": [research_object.clone(), explorer_object.clone(), broken_object.clone()]});
    let mut deleted = explorer_object.clone();
    deleted["metadata"]["resourceVersion"] = json!("91");
    let watch = |resource_version: &str| {
        format!("{AGENTS}?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion={resource_version}")
    };
    let (watch_90, watch_91, list_path) = (watch("90"), watch("91"), format!("{AGENTS}?&limit=500"));
    let (research_path, broken_path) = (status_path("deep-research"), status_path("broken"));
    let (client, seen) = routed(move |request, _| match (request.method.as_str(), request.path_and_query.as_str()) {
        ("POST", CREATE) => {
            Answer::Json(409, failure(409, "AlreadyExists", "agents.yuxi.dev \"general-purpose\" already exists"))
        }
        ("GET", path) if path == list_path => Answer::Json(200, list.clone()),
        ("GET", path) if path == watch_90 => Answer::Watch(0, vec![json!({"type": "DELETED", "object": deleted})]),
        // The watch after the delete stays open, quiet, past the end of the test.
        ("GET", path) if path == watch_91 => Answer::Watch(600_000, vec![]),
        ("PATCH", path) if path == research_path => Answer::Json(200, research_object.clone()),
        ("PATCH", path) if path == broken_path => Answer::Json(200, broken_object.clone()),
        _ => Answer::Json(404, failure(404, "NotFound", "the server could not find the requested resource")),
    });
    let metrics = ControllerMetrics::default();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let reconciler = tokio::spawn(agents::run(client, Some(vec!["team-a".into()]), metrics.clone(), async {
        let _ = stopped.await;
    }));

    let patched = |name: &str| {
        let path = status_path(name);
        seen.lock().expect("log").iter().find(|s| s.method == "PATCH" && s.path_and_query == path).cloned()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while patched("broken").is_none() || patched("deep-research").is_none() {
        assert!(tokio::time::Instant::now() < deadline, "no status patches: {:?}", seen.lock().expect("log"));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = stop.send(());
    let result = tokio::time::timeout(Duration::from_secs(30), reconciler).await.expect("run stops on shutdown");
    result.expect("no panic").expect("run ends without error");

    let broken = patched("broken").expect("patched");
    let accepted = &broken.body["status"]["conditions"][0];
    assert_eq!(
        (&accepted["type"], &accepted["status"], &accepted["reason"]),
        (&json!("Accepted"), &json!("False"), &json!("InvalidSpec"))
    );
    assert!(accepted["message"].as_str().expect("message").contains("spec.context.tools"), "{accepted}");

    let research = patched("deep-research").expect("patched");
    let conditions = research.body["status"]["conditions"].as_array().expect("conditions").clone();
    assert_eq!(conditions.len(), 2);
    for condition in &conditions {
        assert_eq!(
            (&condition["status"], &condition["reason"]),
            (&json!("False"), &json!("SubagentNotFound")),
            "{condition}"
        );
        assert!(condition["message"].as_str().expect("message").contains("\"research-explorer\""), "{condition}");
        assert_ne!(condition["lastTransitionTime"], json!("2025-10-09T08:01:00Z"), "the conditions flipped now");
    }
    // Only these requests (the subagent's own status was right already), and one create, at start.
    let seen = seen.lock().expect("log").clone();
    let expected = [
        ("POST", CREATE.to_string()),
        ("GET", format!("{AGENTS}?&limit=500")),
        ("GET", watch("90")),
        ("GET", watch("91")),
        ("PATCH", status_path("deep-research")),
        ("PATCH", status_path("broken")),
    ];
    for request in &seen {
        assert!(
            expected.iter().any(|(method, path)| request.method == *method && request.path_and_query == *path),
            "unexpected {} {}",
            request.method,
            request.path_and_query
        );
    }
    assert_eq!(seen.iter().filter(|s| s.method == "POST").count(), 1, "{seen:?}");
    let text = metrics.render();
    assert!(text.contains(r#"yuxi_reconcile_failures_total{kind="Agent",reason="InvalidObject"}"#), "{text}");
    assert!(!text.contains(r#"yuxi_reconciles_total{kind="Agent",result="error"}"#), "{text}");
    assert!(text.contains(r#"yuxi_reconciles_total{kind="Agent",result="ok"}"#), "{text}");
}

#[tokio::test]
async fn run_refuses_an_empty_namespace_list() {
    let (client, server) = api_server(vec![]);
    server.await.expect("no exchange");
    let err = agents::run(client, Some(vec![]), ControllerMetrics::default(), std::future::pending())
        .await
        .expect_err("nothing to serve");
    assert!(err.to_string().contains("empty list of namespaces"), "{err}");
}
