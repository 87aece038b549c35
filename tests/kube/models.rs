//! Models against the real API server, with the controller the chart deploys: its prober writes
//! `Available` from a probe of the endpoint (`kubectl get models` shows it), sending the key of the
//! Model's own Secret; an endpoint that goes down flips it within one probe interval; and a run on the
//! Model gets that Secret's key in its runner container, and not the installation's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::controller::{controller, create_run, eventually, run_creator};
use crate::install::{SERVED, installed, kubectl_ok};

const NS: &str = SERVED[0];
/// The shortest probe interval a Model may have, in seconds.
const INTERVAL: u64 = 30;

/// A stand-in for an OpenAI-compatible server's model list, recording the `Authorization` it is sent.
async fn model_list(seen: Arc<Mutex<Vec<String>>>) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let app = axum::Router::new().route(
        "/v1/models",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let seen = seen.clone();
            async move {
                let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
                seen.lock().expect("lock").push(auth.to_string());
                axum::Json(json!({"object": "list", "data": [{"id": "qwen3-8b", "object": "model"}]}))
            }
        }),
    );
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{address}/v1"), server)
}

fn models(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "Model")),
    )
}

async fn create_model(admin: &kube::Client, name: &str, secret: &str, base_url: &str) {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let key = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret},
        "stringData": {"api-key": format!("sk-{secret}")}});
    secrets.create(&PostParams::default(), &serde_json::from_value(key).expect("secret")).await.expect("the key");
    let model = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Model", "metadata": {"name": name},
        "spec": {"provider": "OpenAICompatible", "preset": "vllm", "model": "qwen3-8b", "baseURL": base_url,
                 "apiKeySecretRef": {"name": secret, "key": "api-key"}, "probeIntervalSeconds": INTERVAL,
                 "share": {"readScope": {"accessLevel": "Global"}}}});
    models(admin)
        .create(&PostParams::default(), &serde_json::from_value(model).expect("model"))
        .await
        .expect("the Model");
}

/// The `Available` condition's status and reason, once the prober has written one.
async fn available(admin: &kube::Client, name: &str) -> Option<(String, String)> {
    let model = models(admin).get(name).await.ok()?;
    let conditions = model.data["status"]["conditions"].as_array()?.clone();
    let found = conditions.iter().find(|c| c["type"] == "Available")?;
    Some((found["status"].as_str()?.to_string(), found["reason"].as_str()?.to_string()))
}

/// The AVAILABLE column of `kubectl get models` for `name`.
fn available_column(name: &str) -> String {
    let table = kubectl_ok(installed().plane, &["get", "models", "-n", NS]);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    let column = header.iter().position(|h| *h == "AVAILABLE").unwrap_or_else(|| panic!("{table}"));
    let row = table.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("{table}"));
    row.split_whitespace().nth(column).unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_a_models_probe_and_a_dead_endpoint_flips_it_within_one_interval() {
    controller();
    let admin = installed().plane.admin().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (base_url, server) = model_list(seen.clone()).await;
    let (name, secret) = (crate::unique("probed"), crate::unique("probed-keys"));
    create_model(&admin, &name, &secret, &base_url).await;
    let state = eventually("Available True", Duration::from_secs(60), || async {
        available(&admin, &name).await.filter(|(status, _)| status == "True")
    })
    .await;
    assert_eq!(state.1, "Answered");
    assert_eq!(available_column(&name), "True");
    assert_eq!(seen.lock().expect("lock").first().cloned(), Some(format!("Bearer sk-{secret}")), "its own key");
    let model = models(&admin).get(&name).await.expect("the Model");
    let status = model.data["status"].to_string();
    assert!(!status.contains(&format!("sk-{secret}")), "the key is not in the status: {status}");
    assert!(model.data["status"]["lastProbeLatencyMilliseconds"].is_i64(), "{status}");

    server.abort();
    let _ = server.await;
    let down = Instant::now();
    let (_, reason) = eventually("Available False", Duration::from_secs(INTERVAL + 30), || async {
        available(&admin, &name).await.filter(|(status, _)| status == "False")
    })
    .await;
    let took = down.elapsed();
    assert_eq!(reason, "Unreachable");
    assert_eq!(available_column(&name), "False");
    // One interval, and the probe's own time-out (15 s) for a probe under way.
    assert!(took <= Duration::from_secs(INTERVAL + 15), "flipped after {took:?}");
    eprintln!("a dead endpoint flipped Available after {:.1} s (interval {INTERVAL} s)", took.as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_model_gets_its_teams_key_in_the_runner_only() {
    controller();
    let admin = installed().plane.admin().await;
    let (name, secret) = (crate::unique("team-a-model"), crate::unique("team-a-keys"));
    create_model(&admin, &name, &secret, "http://127.0.0.1:9/v1").await;
    let creator = run_creator().await;
    let run = crate::unique("on-a-model");
    create_run(&creator, &run, json!({}), json!({"model": name})).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let pod =
        eventually("the run's pod", Duration::from_secs(60), || async { pods.get_opt(&run).await.ok().flatten() })
            .await;
    let spec = pod.spec.expect("spec");
    let runner = spec.containers.iter().find(|c| c.name == "runner").expect("runner");
    let from_secrets: Vec<(String, String, String)> = runner
        .env
        .iter()
        .flatten()
        .filter_map(|var| {
            let secret = var.value_from.as_ref()?.secret_key_ref.as_ref()?;
            Some((var.name.clone(), secret.name.clone(), secret.key.clone()))
        })
        .filter(|(name, ..)| name != "YUXI_REDIS_URL")
        .collect();
    assert_eq!(from_secrets, [("YUXI_MODEL_API_KEY".to_string(), secret.clone(), "api-key".to_string())]);
    for sidecar in spec.init_containers.iter().flatten() {
        assert!(sidecar.env.as_ref().is_none_or(Vec::is_empty), "{}: {:?}", sidecar.name, sidecar.env);
    }
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let inputs = secrets.get(&format!("{run}-inputs")).await.expect("inputs");
    let manifest =
        inputs.data.unwrap_or_default().get("model.yaml").map(|b| String::from_utf8_lossy(&b.0).into_owned());
    assert!(manifest.is_some_and(|m| m.contains(&name)), "the Model is one of the run's inputs");
    // A run naming a Model that does not exist fails before any pod is made.
    let missing = crate::unique("on-no-model");
    create_run(&creator, &missing, json!({}), json!({"model": "no-such-model"})).await;
    let runs = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "AgentRun")),
    );
    let reason: Value = eventually("ModelNotFound", Duration::from_secs(60), || async {
        let object = runs.get(&missing).await.ok()?;
        let reason = object.data["status"]["reason"].clone();
        (reason == "ModelNotFound").then_some(reason)
    })
    .await;
    assert_eq!(reason, "ModelNotFound");
    assert!(pods.get_opt(&missing).await.expect("read").is_none());
}
