//! A stand-in for a hosted model API (Anthropic, Gemini, Bedrock, Azure OpenAI and STS cannot be reached
//! from the test machine): real HTTP on loopback, or HTTPS with a given certificate, recording every
//! request as it arrived (method, path and query as sent, headers, body) and answering each with the next
//! prepared answer. What an answer holds is the provider's wire format, built by each provider's tests
//! from its API reference; the body is sent in small chunks, as a network would cut it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

/// One prepared answer.
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    /// A 200 with `content_type` and `body`.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Answer {
        Answer { status: 200, headers: vec![("content-type".into(), content_type.into())], body: body.into() }
    }

    /// An error status with a JSON body.
    pub fn error(status: u16, body: serde_json::Value) -> Answer {
        Answer {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    /// The answer with one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> Answer {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    /// The path and query exactly as sent (percent-encoding kept).
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Received {
    /// The body read as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// A header's value, or empty.
    pub fn header(&self, name: &str) -> String {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
    }
}

#[derive(Default)]
struct Inner {
    answers: VecDeque<Answer>,
    received: Vec<Received>,
}

/// The stand-in; `base_url` has no trailing `/`.
#[derive(Clone)]
pub struct Endpoint {
    inner: Arc<Mutex<Inner>>,
    pub base_url: String,
}

/// The size of the pieces a body is sent in, in bytes.
const PIECE: usize = 7;

impl Endpoint {
    /// Serves `answers` in order, to any method and path, on a free loopback port; when they run out it
    /// answers 500.
    pub async fn start(answers: Vec<Answer>) -> Endpoint {
        let (inner, app) = app(answers);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await.expect("the stand-in serves") });
        Endpoint { inner, base_url: format!("http://{addr}") }
    }

    /// [`Endpoint::start`] over TLS with the PEM `cert` and `key`, as `https://localhost:<port>`.
    pub async fn start_tls(answers: Vec<Answer>, cert: &str, key: &str) -> Endpoint {
        yuxi_operator::tls::install_crypto_provider();
        let (inner, app) = app(answers);
        let config = axum_server::tls_rustls::RustlsConfig::from_pem(cert.as_bytes().to_vec(), key.as_bytes().to_vec())
            .await
            .expect("TLS configuration");
        let handle = axum_server::Handle::<SocketAddr>::new();
        let server = handle.clone();
        let addr: SocketAddr = "127.0.0.1:0".parse().expect("address");
        tokio::spawn(async move {
            axum_server::bind_rustls(addr, config).handle(server).serve(app.into_make_service()).await.expect("serves")
        });
        let addr = handle.listening().await.expect("listens");
        Endpoint { inner, base_url: format!("https://localhost:{}", addr.port()) }
    }

    /// The requests received so far.
    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().expect("lock").received.clone()
    }
}

fn app(answers: Vec<Answer>) -> (Arc<Mutex<Inner>>, Router) {
    let inner = Arc::new(Mutex::new(Inner { answers: answers.into(), received: Vec::new() }));
    (inner.clone(), Router::new().fallback(answer).with_state(inner))
}

async fn answer(State(inner): State<Arc<Mutex<Inner>>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 16 * 1024 * 1024).await.expect("a body").to_vec();
    let path_and_query = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
    let answer = {
        let mut inner = inner.lock().expect("lock");
        inner.received.push(Received {
            method: parts.method.to_string(),
            path_and_query,
            headers: parts.headers,
            body,
        });
        inner.answers.pop_front()
    };
    let answer =
        answer.unwrap_or_else(|| Answer::error(500, serde_json::json!({"error": {"message": "no more answers"}})));
    let pieces: Vec<Result<Vec<u8>, Infallible>> = answer.body.chunks(PIECE).map(|c| Ok(c.to_vec())).collect();
    let mut response = Response::new(Body::from_stream(futures::stream::iter(pieces)));
    *response.status_mut() = StatusCode::from_u16(answer.status).expect("status");
    for (name, value) in answer.headers {
        response.headers_mut().append(
            axum::http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
            axum::http::HeaderValue::from_str(&value).expect("value"),
        );
    }
    response
}
