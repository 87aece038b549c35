//! The facade in cluster mode against the real API server, started from the chart's Deployment with its
//! service account: a user's service-account token minted for the audience `yuxi-operator` is
//! authenticated through TokenReview and sees the namespace's agents; a token minted for another
//! audience, or the API server's own, is refused; an agent created through the facade is an Agent its
//! account was allowed to write.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::chart_pods::{Overrides, chart_pod, service_account_token};
use crate::controller::redis_url;
use crate::install::{RELEASE, RELEASE_NAMESPACE, SERVED, installed, kubectl_ok};
use crate::processes::{Process, free_port, wait_until};

/// The facade, started once from the chart's Deployment: its base URL and process.
fn facade() -> &'static (String, std::sync::Mutex<Process>) {
    static FACADE: OnceLock<(String, std::sync::Mutex<Process>)> = OnceLock::new();
    FACADE.get_or_init(|| {
        std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let plane = installed().plane;
            let port = free_port("127.0.0.1");
            let pod = runtime.block_on(chart_pod(
                plane,
                RELEASE_NAMESPACE,
                &format!("{RELEASE}-api"),
                Overrides {
                    args: vec![("--listen=".into(), format!("--listen=127.0.0.1:{port}"))],
                    env: vec![("REDIS_URL".into(), redis_url())],
                    pod_name: "api-0".into(),
                    account: None,
                },
            ));
            let process = pod.start("api");
            let base = format!("http://127.0.0.1:{port}");
            let ready = format!("{base}/readyz");
            wait_until(
                "the facade is ready",
                Duration::from_secs(60),
                || std::process::Command::new("curl").args(["-sf", &ready]).output().is_ok_and(|o| o.status.success()),
                || process.log_tail(30),
            );
            (base, std::sync::Mutex::new(process))
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// A service account `name` in the served namespace, standing for a person, and a token of it for
/// `audiences`.
async fn person_token(name: &str, audiences: &[&str]) -> String {
    let admin = installed().plane.admin().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), SERVED[0]);
    let account: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}})).expect("account");
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => panic!("service account {name}: {err}"),
    }
    service_account_token(&admin, SERVED[0], name, audiences).await
}

async fn call(method: reqwest::Method, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    let (base, _) = facade();
    call_at(base, method, path, token, body).await
}

/// `method path` at the facade `base` with `token` and the JSON `body`: the status and the answer (its
/// JSON, else its text).
pub async fn call_at(
    base: &str,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    yuxi_operator::tls::install_crypto_provider();
    let mut request = reqwest::Client::new().request(method, format!("{base}{path}")).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the facade answers");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_minted_for_the_facades_audience_is_authenticated_by_token_review() {
    let token = person_token("dana", &["yuxi-operator"]).await;
    let (status, body) = call(reqwest::Method::GET, "/api/agent?include_subagents=true", &token, None).await;
    assert_eq!(status, 200, "{body}");
    let slugs: Vec<&str> =
        body["agents"].as_array().expect("agents").iter().filter_map(|a| a["slug"].as_str()).collect();
    assert!(slugs.contains(&"general-purpose"), "{slugs:?}");
    let (status, body) = call(reqwest::Method::GET, "/api/auth/me", &token, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.to_string().contains("dana"), "the reviewed identity is the service account: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_another_audience_or_the_api_servers_own_is_refused() {
    for audiences in [vec!["another-service"], vec![]] {
        let token = person_token("erin", &audiences).await;
        let (status, body) = call(reqwest::Method::GET, "/api/agent", &token, None).await;
        assert_eq!(status, 401, "audiences {audiences:?}: {body}");
    }
    let (status, _) = call(reqwest::Method::GET, "/api/agent", "not-a-token", None).await;
    assert_eq!(status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_created_through_the_facade_is_written_with_its_account() {
    let token = person_token("frank", &["yuxi-operator"]).await;
    let (status, body) = call(
        reqwest::Method::POST,
        "/api/agent",
        &token,
        Some(json!({"name": "Frank's helper", "backend_id": "SubAgentBackend", "description": "Helps Frank."})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let slug = body["agent"]["slug"].as_str().expect("slug").to_string();
    let plane = installed().plane;
    let managers = kubectl_ok(
        plane,
        &["get", "agent", &slug, "-n", SERVED[0], "-o", "jsonpath={.metadata.managedFields[*].manager}"],
    );
    assert!(managers.contains("yuxi-operator"), "{managers}");
    let subagent = kubectl_ok(plane, &["get", "agent", &slug, "-n", SERVED[0], "-o", "jsonpath={.spec.isSubagent}"]);
    assert_eq!(subagent, "true");
    let (status, _) = call(reqwest::Method::DELETE, &format!("/api/agent/{slug}"), &token, None).await;
    assert!(status == 200 || status == 204, "{status}");
}

/// The `managedFields` entries of Agent `slug`: (manager, operation, subresource, the top-level fields it
/// owns).
fn owners(slug: &str) -> Vec<(String, String, String, Vec<String>)> {
    let plane = installed().plane;
    let text = kubectl_ok(plane, &["get", "agent", slug, "-n", SERVED[0], "-o", "json", "--show-managed-fields"]);
    let agent: Value = serde_json::from_str(&text).expect("json");
    agent["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|entry| {
            let fields = entry["fieldsV1"].as_object().map(|f| f.keys().cloned().collect()).unwrap_or_default();
            (
                entry["manager"].as_str().unwrap_or_default().to_string(),
                entry["operation"].as_str().unwrap_or_default().to_string(),
                entry["subresource"].as_str().unwrap_or_default().to_string(),
                fields,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facade_owns_an_agents_spec_the_controller_its_status_and_git_conflicts_with_the_facade() {
    crate::controller::controller();
    let token = person_token("grace", &["yuxi-operator"]).await;
    let (status, body) = call(
        reqwest::Method::POST,
        "/api/agent",
        &token,
        Some(json!({"name": "Grace notes", "backend_id": "ChatbotAgent", "description": "First words."})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let slug = body["agent"]["slug"].as_str().expect("slug").to_string();
    let plane = installed().plane;
    let conditions =
        || kubectl_ok(plane, &["get", "agent", &slug, "-n", SERVED[0], "-o", "jsonpath={.status.conditions[*].type}"]);
    wait_until(
        "the controller writes the Agent's status",
        Duration::from_secs(30),
        || conditions().contains("Accepted"),
        String::new,
    );

    let (status, body) = call(
        reqwest::Method::PUT,
        &format!("/api/agent/{slug}"),
        &token,
        Some(json!({"description": "Second words."})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(conditions().contains("Accepted"), "the facade's update keeps the controller's status");
    let entries = owners(&slug);
    let facade: Vec<_> = entries.iter().filter(|(m, _, _, _)| m == "yuxi-operator-api").collect();
    assert!(!facade.is_empty() && facade.iter().all(|(_, op, sub, _)| op == "Update" && sub.is_empty()), "{entries:?}");
    assert!(
        facade.iter().any(|(_, _, _, fields)| fields.contains(&"f:spec".to_string())),
        "the facade owns the spec: {entries:?}"
    );
    let controller: Vec<_> = entries.iter().filter(|(m, _, _, _)| m == "yuxi-operator").collect();
    assert!(!controller.is_empty(), "{entries:?}");
    for (_, op, sub, fields) in &controller {
        assert_eq!(
            (op.as_str(), sub.as_str()),
            ("Apply", "status"),
            "the controller applies the status only: {entries:?}"
        );
        assert_eq!(fields, &vec!["f:status".to_string()], "{entries:?}");
    }

    // Git, applying the same Agent server-side with another description, meets the facade's ownership.
    let manifest = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": slug, "namespace": SERVED[0]},
        "spec": {"backend": "ChatbotAgent", "description": "Words from Git."}});
    let file = plane.dir.join(format!("gitops-{slug}.json"));
    std::fs::write(&file, manifest.to_string()).expect("write");
    let output =
        plane.kubectl(&["apply", "--server-side", "--field-manager=gitops", "-f", &file.display().to_string()]);
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success()
            && said.contains("conflict")
            && said.contains("yuxi-operator-api")
            && said.contains(".spec.description"),
        "{said}"
    );
}
