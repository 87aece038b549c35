//! A stand-in for an OpenAI-compatible chat-completions endpoint (the hosted model API cannot be reached
//! from the test machine): real HTTP on loopback, answering each request with the next scripted reply,
//! streamed as server-sent events the way OpenAI, vLLM and Ollama stream them, and recording every request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One reply of the endpoint.
#[derive(Clone, Debug)]
pub enum Reply {
    /// An error status with an OpenAI-style error body.
    Error(u16, &'static str),
    /// A 429 whose `retry-after` header asks to wait this many seconds.
    RateLimited(&'static str),
    /// A streamed turn: the text in pieces, then the tool calls (name, arguments), then usage.
    Turn { pieces: Vec<String>, tool_calls: Vec<(String, String)> },
}

impl Reply {
    /// A streamed text answer, sent in `pieces`.
    pub fn text(pieces: &[&str]) -> Reply {
        Reply::Turn { pieces: pieces.iter().map(|p| p.to_string()).collect(), tool_calls: Vec::new() }
    }

    /// A streamed turn that calls one tool.
    pub fn tool_call(name: &str, arguments: &str) -> Reply {
        Reply::Turn { pieces: Vec::new(), tool_calls: vec![(name.to_string(), arguments.to_string())] }
    }
}

#[derive(Default)]
struct Inner {
    replies: VecDeque<Reply>,
    requests: Vec<(HeaderMap, Value)>,
}

/// The endpoint; its base URL ends in `/v1`.
#[derive(Clone)]
pub struct FakeOpenAi {
    inner: Arc<Mutex<Inner>>,
    pub base_url: String,
}

impl FakeOpenAi {
    /// Serves `replies` in order on a free loopback port; when they run out it answers 500.
    pub async fn start(replies: Vec<Reply>) -> FakeOpenAi {
        let inner = Arc::new(Mutex::new(Inner { replies: replies.into(), requests: Vec::new() }));
        let app = Router::new().route("/v1/chat/completions", post(complete)).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await.expect("fake endpoint serves") });
        FakeOpenAi { inner, base_url: format!("http://{addr}/v1") }
    }

    /// The JSON bodies of the requests received so far.
    pub fn requests(&self) -> Vec<Value> {
        self.inner.lock().expect("lock").requests.iter().map(|(_, body)| body.clone()).collect()
    }

    /// The `authorization` headers of the requests received so far.
    pub fn authorizations(&self) -> Vec<String> {
        self.inner
            .lock()
            .expect("lock")
            .requests
            .iter()
            .map(|(headers, _)| {
                headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
            })
            .collect()
    }
}

async fn complete(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).expect("the client sends JSON");
    let reply = {
        let mut inner = inner.lock().expect("lock");
        inner.requests.push((headers, body.clone()));
        inner.replies.pop_front()
    };
    let model = body["model"].as_str().unwrap_or_default().to_string();
    match reply {
        None => error(500, "no more scripted replies"),
        Some(Reply::Error(status, message)) => error(status, message),
        Some(Reply::RateLimited(seconds)) => {
            let mut response = error(429, "Rate limit reached for requests");
            response.headers_mut().insert("retry-after", seconds.parse().expect("a header value"));
            response
        }
        Some(Reply::Turn { pieces, tool_calls }) => {
            let mut events = Vec::new();
            let chunk = |delta: Value, finish: Value| {
                json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764460800, "model": model,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            };
            events.push(chunk(json!({"role": "assistant", "content": ""}), Value::Null));
            for piece in &pieces {
                events.push(chunk(json!({"content": piece}), Value::Null));
            }
            for (i, (name, arguments)) in tool_calls.iter().enumerate() {
                // Name first, then the arguments in two parts, as streaming servers send them.
                let (head, tail) = arguments.split_at(arguments.len() / 2);
                events.push(chunk(json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": ""}}]}), Value::Null));
                events.push(chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": head}}]}), Value::Null));
                events.push(chunk(json!({"tool_calls": [{"index": i, "function": {"arguments": tail}}]}), Value::Null));
            }
            let finish = if tool_calls.is_empty() { "stop" } else { "tool_calls" };
            events.push(chunk(json!({}), json!(finish)));
            events.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764460800, "model": model,
                               "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}));
            let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            text.push_str("data: [DONE]\n\n");
            ([(header::CONTENT_TYPE, "text/event-stream")], text).into_response()
        }
    }
}

fn error(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).expect("status");
    let body = json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}});
    (status, axum::Json(body)).into_response()
}
