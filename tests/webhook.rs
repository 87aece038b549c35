//! The admission webhook on its own: the one server the API server calls, over TLS, with its own checks.
//!
//! The admission webhook over real TLS, answering AdmissionReview v1 JSON as the API server sends it.
//! The cross-object checks read Agents from kube's mock service, answered with the exact list response an
//! API server gives.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use http::{Method, Request, Response};
use kube::client::Body;
use serde_json::{Value, json};
use tempfile::TempDir;
use yuxi_operator::webhook::{self, Admission, ServeOptions};

/// A self-signed certificate for `localhost`, as PEM (certificate, key).
fn certificate() -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    (certified.cert.pem(), certified.signing_key.serialize_pem())
}

fn write_pair(dir: &Path, (cert, key): &(String, String)) {
    std::fs::write(dir.join("tls.crt"), cert).expect("write cert");
    std::fs::write(dir.join("tls.key"), key).expect("write key");
}

struct Webhook {
    addr: SocketAddr,
    dir: TempDir,
    handle: axum_server::Handle<SocketAddr>,
    trusted: String,
}

impl Webhook {
    /// Serves the webhook on a free loopback port with a fresh certificate, re-read every 100 ms.
    async fn start(admission: Admission) -> Self {
        let dir = TempDir::new().expect("temp dir");
        let pair = certificate();
        write_pair(dir.path(), &pair);
        let options = ServeOptions {
            listen: "127.0.0.1:0".parse().expect("address"),
            tls_cert: dir.path().join("tls.crt"),
            tls_key: dir.path().join("tls.key"),
            reload_interval: Duration::from_millis(100),
            header_read_timeout: Duration::from_secs(1),
        };
        let handle = axum_server::Handle::new();
        let server = handle.clone();
        tokio::spawn(async move { webhook::serve(options, admission, server).await.expect("webhook serves") });
        let addr = handle.listening().await.expect("webhook listens");
        Webhook { addr, dir, handle, trusted: pair.0 }
    }

    /// A client that trusts only `ca_pem` and reaches `localhost` at the webhook's address, opening a
    /// new connection for every request (so every request sees the certificate served now).
    fn client_trusting(&self, ca_pem: &str) -> reqwest12::Client {
        reqwest12::Client::builder()
            .add_root_certificate(reqwest12::Certificate::from_pem(ca_pem.as_bytes()).expect("CA"))
            .tls_built_in_root_certs(false)
            .resolve("localhost", self.addr)
            .pool_max_idle_per_host(0)
            .build()
            .expect("client")
    }

    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }

    async fn post(&self, path: &str, body: impl Into<reqwest12::Body>) -> (u16, String) {
        let response = self
            .client_trusting(&self.trusted)
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request reaches the webhook");
        (response.status().as_u16(), response.text().await.expect("body"))
    }

    /// Posts a review and returns its `response`, checking the envelope the API server requires.
    async fn review(&self, path: &str, review: &Value) -> Value {
        let (status, body) = self.post(path, review.to_string()).await;
        assert_eq!(status, 200, "{body}");
        let answer: Value = serde_json::from_str(&body).expect("JSON answer");
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["uid"], review["request"]["uid"], "the response answers the request's uid");
        answer["response"].clone()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

/// An AdmissionReview v1 as kube-apiserver sends it for `operation` on `object` in namespace `team-a`.
fn review(kind: &str, resource: &str, operation: &str, object: Value, old_object: Value) -> Value {
    let name = if object.is_null() { &old_object } else { &object }["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (group, version) = if kind == "ConfigMap" { ("", "v1") } else { ("yuxi.dev", "v1alpha1") };
    let options_kind = match operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        _ => "DeleteOptions",
    };
    json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": name,
            "namespace": "team-a",
            "operation": operation,
            "userInfo": {"username": "admin", "uid": "014fbff9a07c", "groups": ["system:authenticated", "my-admin-group"]},
            "object": object,
            "oldObject": old_object,
            "dryRun": false,
            "options": {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"}
        }
    })
}

fn agent(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "yuxi.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name, "namespace": "team-a", "uid": "3c6e0b8a-9c15-4a3c-8ab9-9a4b1e2f7d10", "generation": 1,
                     "creationTimestamp": "2026-11-30T01:00:00Z"},
        "spec": spec
    })
}

fn agent_run(spec: Value) -> Value {
    json!({
        "apiVersion": "yuxi.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": "run-1", "namespace": "team-a"},
        "spec": spec
    })
}

fn offline() -> Admission {
    Admission::new(None)
}

#[tokio::test]
async fn healthz_answers_over_tls() {
    let webhook = Webhook::start(offline()).await;
    let response =
        webhook.client_trusting(&webhook.trusted).get(webhook.url("/healthz")).send().await.expect("reaches");
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("body"), "ok");
}

#[tokio::test]
async fn a_valid_agent_is_allowed() {
    let webhook = Webhook::start(offline()).await;
    let object = agent(
        "research-explorer",
        json!({"backend": "SubAgentBackend", "isSubagent": true, "context": {"tools": ["ls"]}}),
    );
    let response = webhook.review("/validate", &review("Agent", "agents", "CREATE", object, Value::Null)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("warnings").is_none(), "{response}");
}

#[tokio::test]
async fn an_invalid_agent_is_denied_with_the_field_in_the_message() {
    let webhook = Webhook::start(offline()).await;
    let object = agent("chat", json!({"backend": "ChatbotAgent", "isSubagent": true}));
    let response = webhook.review("/validate", &review("Agent", "agents", "CREATE", object, Value::Null)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().expect("a denial carries a message");
    assert!(message.starts_with("spec.isSubagent: "), "{message}");
}

#[tokio::test]
async fn an_agent_of_the_wrong_shape_is_denied_naming_the_field() {
    let webhook = Webhook::start(offline()).await;
    let object = agent("chat", json!({"backend": "ChatbotAgent", "context": {"maxExecutionSteps": "many"}}));
    let response = webhook.review("/validate", &review("Agent", "agents", "CREATE", object, Value::Null)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().expect("message");
    assert!(message.starts_with("spec.context.maxExecutionSteps: "), "{message}");
}

#[tokio::test]
async fn a_knowledge_base_is_judged_by_its_rules() {
    let webhook = Webhook::start(offline()).await;
    let kb = |spec: Value| json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "KnowledgeBase", "metadata": {"name": "notes", "namespace": "team-a"}, "spec": spec});
    let good = kb(json!({"source": {"documents": {"folder": "notes"}}}));
    let response =
        webhook.review("/validate", &review("KnowledgeBase", "knowledgebases", "CREATE", good, Value::Null)).await;
    assert_eq!(response["allowed"], true, "{response}");
    let escaping = kb(json!({"source": {"documents": {"folder": "../other-team"}}}));
    let response =
        webhook.review("/validate", &review("KnowledgeBase", "knowledgebases", "UPDATE", escaping, Value::Null)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().expect("message");
    assert!(message.starts_with("spec.source.documents.folder: "), "{message}");
}

#[tokio::test]
async fn a_model_is_judged_by_its_rules() {
    let webhook = Webhook::start(offline()).await;
    let model = |spec: Value| json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Model", "metadata": {"name": "deepseek", "namespace": "team-a"}, "spec": spec});
    let good = model(json!({"provider": "OpenAICompatible", "model": "deepseek-chat", "preset": "deepseek"}));
    let response = webhook.review("/validate", &review("Model", "models", "CREATE", good, Value::Null)).await;
    assert_eq!(response["allowed"], true, "{response}");
    let plain = model(json!({"provider": "OpenAICompatible", "model": "m", "baseURL": "http://llm.example.com/v1"}));
    let response = webhook.review("/validate", &review("Model", "models", "UPDATE", plain, Value::Null)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().expect("message");
    assert!(message.starts_with("spec.baseURL: must be an https:// URL"), "{message}");
}

#[tokio::test]
async fn mutate_derives_is_subagent_as_a_json_patch() {
    let webhook = Webhook::start(offline()).await;
    let object = agent("helper", json!({"backend": "SubAgentBackend"}));
    let response = webhook.review("/mutate", &review("Agent", "agents", "CREATE", object, Value::Null)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["patchType"], "JSONPatch");
    // A Go []byte decodes from a base64 string or from an array of byte values; kube writes the array.
    let patch: Vec<u8> = match &response["patch"] {
        Value::String(encoded) => base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64"),
        bytes => serde_json::from_value(bytes.clone()).expect("the patch is bytes"),
    };
    let patch: Value = serde_json::from_slice(&patch).expect("JSON patch");
    assert_eq!(patch, json!([{"op": "add", "path": "/spec/isSubagent", "value": true}]));
}

#[tokio::test]
async fn mutate_stamps_nothing_when_the_flag_is_set() {
    let webhook = Webhook::start(offline()).await;
    for spec in [
        json!({"backend": "SubAgentBackend", "isSubagent": true}),
        json!({"backend": "ChatbotAgent", "isSubagent": true}),
    ] {
        let response =
            webhook.review("/mutate", &review("Agent", "agents", "CREATE", agent("a", spec), Value::Null)).await;
        assert_eq!(response["allowed"], true, "{response}");
        assert!(response.get("patch").is_none(), "a set field is never overwritten: {response}");
    }
}

#[tokio::test]
async fn a_malformed_review_answers_400_with_a_reason() {
    let webhook = Webhook::start(offline()).await;
    let (status, body) = webhook.post("/validate", "{not json").await;
    assert_eq!(status, 400);
    assert!(body.contains("not an AdmissionReview"), "{body}");

    let (status, body) = webhook
        .post("/mutate", json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string())
        .await;
    assert_eq!(status, 400);
    assert!(body.contains("no request"), "{body}");

    let mut missing_uid =
        review("Agent", "agents", "CREATE", agent("a", json!({"backend": "ChatbotAgent"})), Value::Null);
    missing_uid["request"].as_object_mut().expect("object").remove("uid");
    let (status, _) = webhook.post("/validate", missing_uid.to_string()).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_body_of_another_type_or_version_answers_400() {
    let webhook = Webhook::start(offline()).await;
    let mut review = review("Agent", "agents", "CREATE", agent("a", json!({"backend": "ChatbotAgent"})), Value::Null);
    for (api_version, kind) in [("admission.k8s.io/v1beta1", "AdmissionReview"), ("v1", "Pod")] {
        review["apiVersion"] = json!(api_version);
        review["kind"] = json!(kind);
        let (status, body) = webhook.post("/validate", review.to_string()).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.contains("admission.k8s.io/v1 AdmissionReview"), "{body}");
    }
}

#[tokio::test]
async fn an_object_that_is_not_the_reviewed_kind_is_denied() {
    let webhook = Webhook::start(offline()).await;
    let pod =
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"backend": "ChatbotAgent"}});
    let response = webhook.review("/validate", &review("Agent", "agents", "CREATE", pod, Value::Null)).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"].as_str().expect("message").starts_with("object: apiVersion \"v1\" kind \"Pod\""),
        "{response}"
    );

    let response =
        webhook.review("/validate", &review("AgentRun", "agentruns", "CREATE", Value::Null, Value::Null)).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["message"], "object: the review carries no object");
}

#[tokio::test]
async fn a_huge_list_gets_one_finding_not_one_per_entry() {
    let webhook = Webhook::start(offline()).await;
    let tools = vec![""; 100_000];
    let object = agent("chat", json!({"backend": "ChatbotAgent", "context": {"tools": tools}}));
    let response = webhook.review("/validate", &review("Agent", "agents", "CREATE", object, Value::Null)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], "spec.context.tools: must have at most 256 entries (has 100000)");
}

#[tokio::test]
async fn a_client_that_stalls_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let webhook = Webhook::start(offline()).await;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::pem::PemObject::pem_slice_iter(webhook.trusted.as_bytes()) {
        roots.add(cert.expect("PEM")).expect("root");
    }
    yuxi_operator::tls::install_crypto_provider();
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(webhook.addr).await.expect("connects");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = connector.connect(name, tcp).await.expect("handshake");
    // Half a request, then silence.
    tls.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n").await.expect("writes");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the stalled connection was still open after 5 s");
}

#[tokio::test]
async fn a_review_of_another_kind_is_allowed_unchanged() {
    let webhook = Webhook::start(offline()).await;
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team-a"}, "data": {"a": "b"}});
    for path in ["/validate", "/mutate"] {
        let response =
            webhook.review(path, &review("ConfigMap", "configmaps", "CREATE", config_map.clone(), Value::Null)).await;
        assert_eq!(response["allowed"], true, "{response}");
        assert!(response.get("patch").is_none(), "{response}");
    }
}

#[tokio::test]
async fn an_agent_run_update_that_changes_the_spec_is_denied() {
    let webhook = Webhook::start(offline()).await;
    let old = agent_run(json!({"agent": "research-explorer", "input": "Survey the field."}));
    let changed = agent_run(json!({"agent": "research-explorer", "input": "Survey another field."}));
    let response = webhook.review("/validate", &review("AgentRun", "agentruns", "UPDATE", changed, old.clone())).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"].as_str().expect("message").starts_with("spec.input: is immutable"),
        "{response}"
    );

    let cancelled = agent_run(json!({"agent": "research-explorer", "input": "Survey the field.", "cancel": true}));
    let response = webhook.review("/validate", &review("AgentRun", "agentruns", "UPDATE", cancelled, old)).await;
    assert_eq!(response["allowed"], true, "setting cancel is the one allowed change: {response}");
}

#[tokio::test]
async fn a_delete_is_allowed() {
    let webhook = Webhook::start(offline()).await;
    let old = agent("chat", json!({"backend": "ChatbotAgent", "isSubagent": true}));
    let response = webhook.review("/validate", &review("Agent", "agents", "DELETE", Value::Null, old)).await;
    assert_eq!(response["allowed"], true, "{response}");
}

/// Answers the webhook's one LIST of Agents in `team-a` with `items`, as an API server would, after
/// checking the request is exactly that list.
fn api_server_listing(items: Vec<Value>) -> (kube::Client, tokio::task::JoinHandle<()>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let task = tokio::spawn(async move {
        let (request, send) = handle.next_request().await.expect("the webhook lists Agents");
        assert_eq!(request.method(), Method::GET);
        assert_eq!(request.uri().path(), "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agents");
        let list = json!({
            "apiVersion": "yuxi.dev/v1alpha1",
            "kind": "AgentList",
            "metadata": {"continue": "", "resourceVersion": "48213"},
            "items": items
        });
        let response = Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(&list).expect("JSON")))
            .expect("response");
        send.send_response(response);
    });
    (kube::Client::new(service, "default"), task)
}

#[tokio::test]
async fn a_subagent_reference_that_does_not_resolve_is_admitted_with_a_warning() {
    let explorer = agent("research-explorer", json!({"backend": "SubAgentBackend", "isSubagent": true}));
    let (client, api_server) = api_server_listing(vec![explorer]);
    let webhook = Webhook::start(Admission::new(Some(client))).await;
    let parent = agent(
        "deep-research",
        json!({"backend": "ChatbotAgent", "context": {"subagents": ["research-explorer", "fact-verifier"]}}),
    );
    let response = webhook.review("/validate", &review("Agent", "agents", "CREATE", parent, Value::Null)).await;
    api_server.await.expect("the API server saw the list request");
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{response}");
    assert!(
        warnings[0].as_str().expect("text").starts_with("spec.context.subagents[1]: no Agent \"fact-verifier\""),
        "{response}"
    );
}

#[tokio::test]
async fn a_second_default_agent_is_denied() {
    let current = agent("deep-research", json!({"backend": "ChatbotAgent", "isSubagent": false, "default": true}));
    let (client, api_server) = api_server_listing(vec![current]);
    let webhook = Webhook::start(Admission::new(Some(client))).await;
    let second = agent("quick-chat", json!({"backend": "ChatbotAgent", "default": true}));
    let response = webhook.review("/validate", &review("Agent", "agents", "CREATE", second, Value::Null)).await;
    api_server.await.expect("the API server saw the list request");
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().expect("message");
    assert!(message.starts_with("spec.default: agent \"deep-research\" is already the default"), "{message}");
}

#[tokio::test]
async fn an_unreachable_api_server_denies_rather_than_guesses() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let api_server = tokio::spawn(async move {
        let (_, send) = handle.next_request().await.expect("the webhook lists Agents");
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "agents.yuxi.dev is forbidden: User \"system:serviceaccount:yuxi:webhook\" cannot list resource \"agents\" in API group \"yuxi.dev\" in the namespace \"team-a\"",
            "reason": "Forbidden", "details": {"group": "yuxi.dev", "kind": "agents"}, "code": 403});
        send.send_response(
            Response::builder()
                .status(403)
                .body(Body::from(serde_json::to_vec(&status).expect("JSON")))
                .expect("response"),
        );
    });
    let webhook = Webhook::start(Admission::new(Some(kube::Client::new(service, "default")))).await;
    let object = agent("chat", json!({"backend": "ChatbotAgent"}));
    let response = webhook.review("/validate", &review("Agent", "agents", "CREATE", object, Value::Null)).await;
    api_server.await.expect("the API server saw the list request");
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"]
            .as_str()
            .expect("message")
            .contains("cannot list the Agents of namespace \"team-a\""),
        "{response}"
    );
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart() {
    let webhook = Webhook::start(offline()).await;
    let old_client = webhook.client_trusting(&webhook.trusted);
    assert!(old_client.get(webhook.url("/healthz")).send().await.is_ok());

    let rotated = certificate();
    write_pair(webhook.dir.path(), &rotated);
    let new_client = webhook.client_trusting(&rotated.0);
    let mut served = false;
    for _ in 0..100 {
        if new_client.get(webhook.url("/healthz")).send().await.is_ok() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "the rotated certificate was not served within 5 s");
    assert!(old_client.get(webhook.url("/healthz")).send().await.is_err(), "the old certificate is no longer served");
}

#[test]
fn without_a_cluster_and_without_offline_it_refuses_to_start() {
    let dir = TempDir::new().expect("temp dir");
    write_pair(dir.path(), &certificate());
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_yuxi-operator"))
        .args(["webhook", "--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(dir.path().join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.path().join("tls.key"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
        .env("HOME", dir.path())
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--offline"), "the message says how to run without a cluster: {stderr}");
}

/// [`review`] of a new AgentRun sent by the Kubernetes user `username` in `groups`.
fn run_review_by(username: &str, groups: &[&str], spec: Value) -> Value {
    let mut review = review("AgentRun", "agentruns", "CREATE", agent_run(spec), Value::Null);
    review["request"]["userInfo"] = json!({"username": username, "uid": "1b2c", "groups": groups});
    review
}

fn facade_trusted() -> Admission {
    offline().with_run_creators(yuxi_operator::access::RunCreators {
        usernames: vec!["system:serviceaccount:yuxi-system:yuxi-operator-api".into()],
        groups: vec!["yuxi:run-creators".into()],
    })
}

#[tokio::test]
async fn an_agent_run_bob_creates_for_alice_is_refused_and_his_own_is_stamped() {
    let webhook = Webhook::start(facade_trusted()).await;
    let spec = |uid: Option<&str>| {
        let mut spec = json!({"agent": "research-explorer", "input": "Survey the field."});
        if let Some(uid) = uid {
            spec["uid"] = json!(uid);
        }
        spec
    };
    let bob = ["system:authenticated"];
    let response = webhook.review("/validate", &run_review_by("bob", &bob, spec(Some("alice")))).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().expect("message");
    assert!(message.starts_with("spec.uid: \"alice\" is not your user id"), "{message}");
    // Without a uid, the mutating webhook stamps his own; the validating one refuses a run that has none.
    let response = webhook.review("/mutate", &run_review_by("bob", &bob, spec(None))).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["patchType"], "JSONPatch");
    let patch: Vec<u8> = serde_json::from_value(response["patch"].clone()).expect("the patch is bytes");
    assert_eq!(
        serde_json::from_slice::<Value>(&patch).expect("JSON"),
        json!([{"op": "add", "path": "/spec/uid", "value": "bob"}])
    );
    let response = webhook.review("/validate", &run_review_by("bob", &bob, spec(None))).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        response["status"]["message"].as_str().expect("message").starts_with("spec.uid: is required"),
        "{response}"
    );
    assert_eq!(webhook.review("/validate", &run_review_by("bob", &bob, spec(Some("bob")))).await["allowed"], true);
    // The facade's service account, and the creators' group, run for their users; nothing is stamped.
    let facade = "system:serviceaccount:yuxi-system:yuxi-operator-api";
    assert_eq!(webhook.review("/validate", &run_review_by(facade, &bob, spec(Some("alice")))).await["allowed"], true);
    let response = webhook.review("/mutate", &run_review_by(facade, &bob, spec(None))).await;
    assert!(response.get("patch").is_none(), "{response}");
    let ops = ["system:authenticated", "yuxi:run-creators"];
    assert_eq!(webhook.review("/validate", &run_review_by("ops", &ops, spec(Some("alice")))).await["allowed"], true);
}

#[tokio::test]
async fn an_agent_run_whose_uid_is_not_a_path_segment_is_refused_at_admission() {
    let webhook = Webhook::start(facade_trusted()).await;
    let facade = "system:serviceaccount:yuxi-system:yuxi-operator-api";
    for uid in ["../../root", "alice/../bob", ".hidden", ""] {
        let spec = json!({"agent": "research-explorer", "input": "Survey the field.", "uid": uid});
        let response = webhook.review("/validate", &run_review_by(facade, &[], spec)).await;
        assert_eq!(response["allowed"], false, "{uid:?}: {response}");
        assert!(
            response["status"]["message"].as_str().expect("message").starts_with("spec.uid: "),
            "{uid:?}: {response}"
        );
    }
    let spec = json!({"agent": "research-explorer", "input": "x", "uid": "alice", "parent": {"runId": "p", "threadId": "t",
                      "agent": "deep-research", "fileThreadId": "../alice"}, "threadId": "t_sub_research-explorer_0000abcd"});
    let response = webhook.review("/validate", &run_review_by(facade, &[], spec)).await;
    assert!(
        response["status"]["message"].as_str().expect("message").contains("spec.parent.fileThreadId"),
        "{response}"
    );
}
