//! A stand-in for the Kubernetes API server: kube's mock service answering a fixed script of exchanges,
//! each request checked against what the real API server would receive, each answer the one it gives.

use http::{Method, Request, Response};
use kube::client::Body;
use serde_json::{Value, json};

/// One request the code under test must make, and the API server's answer.
pub struct Exchange {
    /// The method.
    pub method: Method,
    /// The path and query, such as `/apis/yuxi.dev/v1alpha1/namespaces/team-a/agents?limit=500`.
    pub path_and_query: String,
    /// The answer's status code.
    pub status: u16,
    /// The answer's JSON body.
    pub answer: Value,
}

impl Exchange {
    /// An exchange answered with `status` and `answer`.
    pub fn new(method: Method, path_and_query: &str, status: u16, answer: Value) -> Self {
        Self { method, path_and_query: path_and_query.to_string(), status, answer }
    }
}

/// A request as the stand-in received it.
#[derive(Clone, Debug)]
pub struct Received {
    /// The method.
    pub method: Method,
    /// The path and query.
    pub path_and_query: String,
    /// The `content-type` header, if any.
    pub content_type: Option<String>,
    /// The JSON body, `Null` for none.
    pub body: Value,
}

/// A `Status` failure as the API server writes it.
pub fn failure(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason, "code": code})
}

/// A client of an API server that answers `script` in order, and a task that ends with the request
/// bodies it received (JSON, `Null` for none) once the script is done; it panics on a request out of
/// script. Requests after the script fail as if the API server were unreachable.
pub fn api_server(script: Vec<Exchange>) -> (kube::Client, tokio::task::JoinHandle<Vec<Value>>) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let task = tokio::spawn(async move { serve(handle, script).await.into_iter().map(|r| r.body).collect() });
    (kube::Client::new(service, "default"), task)
}

/// Like [`api_server`], but the task ends with the whole requests: method, path and query, content type
/// and body.
pub fn api_server_receiving(script: Vec<Exchange>) -> (kube::Client, tokio::task::JoinHandle<Vec<Received>>) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, "default"), tokio::spawn(serve(handle, script)))
}

async fn serve(
    mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    script: Vec<Exchange>,
) -> Vec<Received> {
    let mut received = Vec::new();
    for (i, exchange) in script.into_iter().enumerate() {
        let (request, send) = handle
            .next_request()
            .await
            .unwrap_or_else(|| panic!("request {i} ({} {}) never came", exchange.method, exchange.path_and_query));
        let seen = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
        assert_eq!(
            (request.method(), seen.as_str()),
            (&exchange.method, exchange.path_and_query.as_str()),
            "request {i}"
        );
        let method = request.method().clone();
        let content_type =
            request.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let bytes = request.into_body().collect_bytes().await.expect("request body");
        let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("JSON body") };
        received.push(Received { method, path_and_query: seen, content_type, body });
        let response = Response::builder()
            .status(exchange.status)
            .header("content-type", "application/json")
            .body(Body::from(serde_json::to_vec(&exchange.answer).expect("JSON")))
            .expect("response");
        send.send_response(response);
    }
    received
}
