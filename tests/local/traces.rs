//! Traces of a whole run tree, exported over OTLP/HTTP to a receiver stand-in that decodes them with
//! the official protobuf definitions (`opentelemetry-proto`): a deep-research run started with a
//! caller's `traceparent` is one trace under the caller's span — the request, the run, its model and
//! tool calls, and its two children with their own — and no span carries the question's text.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};

use crate::support::local_mode::{Local, LocalStore, examples_with};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
/// A value the question carries and no span may.
const CANARY: &str = "canary-question-5d1f";

/// An OTLP/gRPC receiver: the `TraceService` of the official definitions, served by tonic.
struct GrpcReceiver(Arc<Mutex<Vec<Span>>>);

#[tonic::async_trait]
impl TraceService for GrpcReceiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut kept = self.0.lock().expect("lock");
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                kept.extend(scope.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

async fn grpc_receiver() -> (String, Arc<Mutex<Vec<Span>>>) {
    let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let service = TraceServiceServer::new(GrpcReceiver(spans.clone()));
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await
            .expect("the receiver serves")
    });
    (format!("http://{address}"), spans)
}

/// An OTLP/HTTP receiver: `POST /v1/traces` with a protobuf `ExportTraceServiceRequest`.
async fn receiver() -> (String, Arc<Mutex<Vec<Span>>>) {
    let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
    let kept = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("an OTLP export request");
                let mut kept = kept.lock().expect("lock");
                for resource in request.resource_spans {
                    for scope in resource.scope_spans {
                        kept.extend(scope.spans);
                    }
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the receiver serves") });
    (format!("http://{address}"), spans)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span.attributes.iter().find(|a| a.key == key)?.value.as_ref()?.value.as_ref()?;
    Some(match value {
        AnyValue::StringValue(s) => s.clone(),
        AnyValue::IntValue(i) => i.to_string(),
        AnyValue::BoolValue(b) => b.to_string(),
        AnyValue::DoubleValue(d) => d.to_string(),
        other => format!("{other:?}"),
    })
}

async fn ended(local: &Local, run_id: &str) -> Value {
    local.result_of(run_id, "alice-token").await
}

#[tokio::test]
async fn a_deep_research_run_is_one_trace_under_the_callers_span_without_its_contents() {
    let (endpoint, spans) = receiver().await;
    let local = examples_with(
        LocalStore::InProcess,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_SERVICE_NAME", "yuxi-traces-test"),
        ],
    )
    .await;
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let headers = [("traceparent", traceparent.as_str()), ("tracestate", "vendor=abc123")];
    let question = json!({"query": format!("Which electrolytes? {CANARY}"), "agent_slug": "deep-research"});
    let root_run = local.start_run("alice-token", &headers, question).await;
    assert_eq!(ended(&local, &root_run).await["status"], "completed");

    // The spans arrive in batches; the three runs' spans are all there once their runs ended.
    let deadline = Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let seen = spans.lock().expect("lock").clone();
        let runs =
            seen.iter().filter(|s| attribute(s, "gen_ai.operation.name").as_deref() == Some("invoke_agent")).count();
        if runs >= 3 || Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let by_id: HashMap<String, &Span> = spans.iter().map(|s| (hex(&s.span_id), s)).collect();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    // Every span but this test's own polls of the result is in the caller's trace.
    let polls = |s: &Span| s.name == "GET /api/agent/runs/{run_id}/result";
    let strays: Vec<&str> =
        spans.iter().filter(|s| !polls(s) && hex(&s.trace_id) != TRACE_ID).map(|s| s.name.as_str()).collect();
    assert!(strays.is_empty(), "spans outside the caller's trace: {strays:?} of {names:?}");

    // The request, under the caller's span; the root run under the request.
    let request = spans
        .iter()
        .find(|s| s.name == "POST /api/agent/runs")
        .unwrap_or_else(|| panic!("no request span: {names:?}\n{}", local.log()));
    assert_eq!(hex(&request.parent_span_id), CALLER_SPAN);
    assert_eq!(request.trace_state, "vendor=abc123", "the caller's tracestate is kept");
    let run_of = |slug: &str| {
        spans
            .iter()
            .find(|s| s.name == format!("invoke_agent {slug}"))
            .unwrap_or_else(|| panic!("no run of {slug}: {names:?}"))
    };
    let root = run_of("deep-research");
    assert_eq!(hex(&root.parent_span_id), hex(&request.span_id));
    assert_eq!(attribute(root, "yuxi.run.id").as_deref(), Some(root_run.as_str()));
    assert_eq!(attribute(root, "yuxi.run.status").as_deref(), Some("completed"));
    // Its wait before its runner started, beside it under the request.
    let queue = spans.iter().find(|s| s.name == "queue deep-research").unwrap_or_else(|| panic!("{names:?}"));
    assert_eq!(hex(&queue.parent_span_id), hex(&request.span_id));
    assert!(queue.end_time_unix_nano <= root.start_time_unix_nano + 1_000_000, "the queue ends as the run starts");

    // The runs' model calls and tool calls are theirs; each child run goes up to a tool call of the root.
    let ancestors = |span: &Span| {
        let mut chain = Vec::new();
        let mut parent = hex(&span.parent_span_id);
        while let Some(up) = by_id.get(&parent) {
            chain.push(up.name.clone());
            parent = hex(&up.parent_span_id);
        }
        chain
    };
    for slug in ["research-explorer", "fact-verifier"] {
        let child = run_of(slug);
        let chain = ancestors(child);
        assert!(
            chain.iter().any(|n| n == "execute_tool subagent_start")
                && chain.contains(&"invoke_agent deep-research".to_string()),
            "{slug}: {chain:?}"
        );
    }
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("chat ")).collect();
    assert!(chats.len() >= 3, "{names:?}");
    for chat in &chats {
        assert!(attribute(chat, "gen_ai.usage.input_tokens").is_some(), "{chat:?}");
        assert!(ancestors(chat).iter().any(|n| n.starts_with("invoke_agent ")), "{chat:?}");
    }
    assert!(spans.iter().any(|s| s.name == "execute_tool knowledge_search"), "{names:?}");
    // The search itself, under the tool call, through the facade's request.
    let search = spans.iter().find(|s| s.name.starts_with("knowledge_search ")).unwrap_or_else(|| panic!("{names:?}"));
    assert!(ancestors(search).contains(&"execute_tool knowledge_search".to_string()), "{:?}", ancestors(search));
    assert!(attribute(search, "yuxi.knowledge.hits").is_some_and(|hits| hits != "0"), "{search:?}");

    // Contents are not exported: the question's canary is in no span.
    for span in &spans {
        let text = format!("{span:?}");
        assert!(!text.contains(CANARY), "{} carries the question: {text}", span.name);
        assert!(!text.contains("alice-token"), "{} carries a token", span.name);
    }

    // The run's timeline, from its own records, tells what the exported spans tell.
    let timeline = local.get_json(&format!("/api/agent/runs/{root_run}/trace"), "alice-token").await;
    assert_eq!(timeline["trace_id"], TRACE_ID);
    assert_eq!(timeline["truncated"], false);
    let timeline_spans = timeline["spans"].as_array().expect("spans");
    let exported_runs: Vec<&Span> =
        spans.iter().filter(|s| attribute(s, "gen_ai.operation.name").as_deref() == Some("invoke_agent")).collect();
    let timeline_runs: Vec<&Value> = timeline_spans.iter().filter(|s| s["kind"] == "run").collect();
    assert_eq!(timeline_runs.len(), exported_runs.len(), "{timeline:#}");
    for exported in exported_runs {
        let run_id = attribute(exported, "yuxi.run.id").expect("a run's id");
        let run = timeline_runs.iter().find(|s| s["run_id"] == run_id.as_str()).expect("the run in the timeline");
        assert_eq!(run["name"], exported.name.as_str());
        assert_eq!(run["status"], attribute(exported, "yuxi.run.status").expect("status").as_str());
        // Its model calls and tool calls: the same names, the same tokens.
        let call = |s: &Span| matches!(attribute(s, "gen_ai.operation.name").as_deref(), Some("chat" | "execute_tool"));
        let under = |s: &&Span| call(s) && hex(&s.parent_span_id) == hex(&exported.span_id);
        let mut exported_calls: Vec<(String, String)> = spans
            .iter()
            .filter(under)
            .map(|s| (s.name.clone(), attribute(s, "gen_ai.usage.input_tokens").unwrap_or_default()))
            .collect();
        let mut timeline_calls: Vec<(String, String)> = timeline_spans
            .iter()
            .filter(|s| s["parent_span_id"] == run_id.as_str())
            .map(|s| {
                let tokens = &s["attributes"]["gen_ai.usage.input_tokens"];
                (
                    s["name"].as_str().unwrap_or_default().to_string(),
                    if tokens.is_null() { String::new() } else { tokens.to_string() },
                )
            })
            .collect();
        exported_calls.sort();
        timeline_calls.sort();
        assert_eq!(timeline_calls, exported_calls, "the calls of {run_id}");
        // A child run goes under the tool call that started it, in both.
        if let Some(parent) = run["parent_span_id"].as_str() {
            let call_id = parent.rsplit('/').next().expect("a tool call's id");
            let mut up = by_id.get(&hex(&exported.parent_span_id)).copied();
            while let Some(span) = up.filter(|s| !s.name.starts_with("execute_tool ")) {
                up = by_id.get(&hex(&span.parent_span_id)).copied();
            }
            let tool = up.unwrap_or_else(|| panic!("{run_id} is under no tool call"));
            assert_eq!(attribute(tool, "gen_ai.tool.call.id").as_deref(), Some(call_id), "{run_id}");
        }
    }
    // Another user's run answers as a missing one.
    let stranger = local
        .client
        .get(format!("{}/api/agent/runs/{root_run}/trace", local.base))
        .bearer_auth("bob-token")
        .send()
        .await
        .expect("reaches");
    assert_eq!(stranger.status(), 404);
    local.stop();
}

#[tokio::test]
async fn over_grpc_a_run_is_exported_to_a_grpc_receiver() {
    let (endpoint, spans) = grpc_receiver().await;
    let local = examples_with(
        LocalStore::InProcess,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .await;
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    let question = json!({"query": "hello", "agent_slug": "deep-research"});
    let run_id = local.start_run("alice-token", &[("traceparent", traceparent.as_str())], question).await;
    ended(&local, &run_id).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = spans.lock().expect("lock").clone();
        let run = seen.iter().find(|s| {
            attribute(s, "yuxi.run.id").as_deref() == Some(run_id.as_str()) && s.name == "invoke_agent deep-research"
        });
        if let Some(run) = run {
            assert_eq!(hex(&run.trace_id), TRACE_ID);
            break;
        }
        assert!(Instant::now() < deadline, "no run span over gRPC: {seen:?}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    local.stop();
}

#[tokio::test]
async fn with_content_capture_contents_are_exported_bounded_and_without_keys_or_tokens() {
    let (endpoint, spans) = receiver().await;
    let key = "sk-canary-key-0f3e9a7d21";
    let local = examples_with(
        LocalStore::InProcess,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("YUXI_TRACES_CAPTURE_CONTENT", "true"),
            ("YUXI_EXAMPLE_API_KEY", key),
        ],
    )
    .await;
    // The question carries a content canary, the key, a bearer token, and more than a span keeps.
    let padding = "x".repeat(6000);
    let query = format!("{CANARY} uses {key} with Authorization: Bearer tok-canary-77aa1 {padding}");
    let run_id = local.start_run("alice-token", &[], json!({"query": query, "agent_slug": "deep-research"})).await;
    ended(&local, &run_id).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let captured = loop {
        let seen = spans.lock().expect("lock").clone();
        let first = seen.iter().find_map(|s| attribute(s, "gen_ai.input.messages").filter(|m| m.contains(CANARY)));
        if let Some(first) = first {
            break (first, seen);
        }
        assert!(Instant::now() < deadline, "no captured question: {seen:?}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (question, seen) = captured;
    assert!(question.len() <= 4096 + 100, "{} bytes", question.len());
    assert!(question.contains("more bytes cut"), "{question}");
    assert_eq!(question.matches("<redacted>").count(), 2, "the key and the token stood in the question: {question}");
    assert!(seen.iter().any(|s| attribute(s, "gen_ai.tool.call.arguments").is_some()), "no tool arguments");
    for span in &seen {
        let text = format!("{span:?}");
        assert!(!text.contains(key), "{} carries the key: {text}", span.name);
        assert!(!text.contains("tok-canary-77aa1"), "{} carries the bearer token: {text}", span.name);
        assert!(!text.contains("alice-token"), "{} carries the caller's token", span.name);
    }
    local.stop();
}

#[tokio::test]
async fn an_approval_asked_and_given_are_events_of_the_runs_spans() {
    let (endpoint, spans) = receiver().await;
    let local = examples_with(
        LocalStore::InProcess,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    let start = json!({"query": "note this", "agent_slug": "note-taker"});
    let run_id = local.start_run("alice-token", &[], start).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let waiting = loop {
        let run = local.get_json(&format!("/api/agent/runs/{run_id}"), "alice-token").await["run"].clone();
        if run["status"] == "waiting" {
            break run;
        }
        assert!(Instant::now() < deadline, "the run does not wait: {run}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let decisions: Vec<Value> = waiting["waiting"]["action_requests"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|call| json!({"tool_call_id": call["tool_call_id"], "decision": "approve"}))
        .collect();
    let resume = json!({"resume": {"run_id": run_id, "decisions": decisions}});
    local.start_run("alice-token", &[], resume).await;
    assert_eq!(ended(&local, &run_id).await["status"], "completed");
    let event_of = |seen: &[Span], name: &str| {
        seen.iter()
            .filter(|s| attribute(s, "yuxi.run.id").as_deref() == Some(run_id.as_str()))
            .find_map(|s| s.events.iter().find(|e| e.name == name).cloned())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = spans.lock().expect("lock").clone();
        if let (Some(asked), Some(given)) = (event_of(&seen, "approval_requested"), event_of(&seen, "approval_given")) {
            let count = |event: &opentelemetry_proto::tonic::trace::v1::span::Event, key: &str| {
                event.attributes.iter().find(|a| a.key == key).and_then(|a| a.value.clone()).and_then(|v| v.value)
            };
            assert_eq!(count(&asked, "yuxi.approval.calls"), Some(AnyValue::IntValue(decisions.len() as i64)));
            assert_eq!(count(&given, "yuxi.approval.approved"), Some(AnyValue::IntValue(decisions.len() as i64)));
            break;
        }
        assert!(Instant::now() < deadline, "no approval events: {seen:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    local.stop();
}

/// One JSON-RPC request to `/mcp?agent=deep-research` as Alice (in `session`, when given): the session
/// id it answers with, and its body.
async fn mcp(local: &Local, session: Option<&str>, body: Value) -> (Option<String>, String) {
    let mut request = local
        .client
        .post(format!("{}/mcp?agent=deep-research", local.base))
        .bearer_auth("alice-token")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.expect("mcp answers");
    assert!(response.status().is_success(), "{}", response.status());
    let id = response.headers().get("mcp-session-id").map(|v| v.to_str().expect("ascii").to_string());
    (id, response.text().await.expect("body"))
}

#[tokio::test]
async fn an_mcp_callers_meta_traceparent_is_the_parent_of_the_run_it_starts() {
    let (endpoint, spans) = receiver().await;
    let local = examples_with(
        LocalStore::InProcess,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let (session, _) = mcp(&local, None, initialize).await;
    let session = session.expect("a session");
    mcp(&local, Some(&session), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let caller_span = "b7ad6b7169203331";
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "subagent_start",
        "arguments": {"subagent_slug": "research-explorer", "description": "Read about electrolytes."},
        "_meta": {"traceparent": format!("00-{TRACE_ID}-{caller_span}-01")}}});
    let (_, answer) = mcp(&local, Some(&session), call).await;
    assert!(answer.contains("run_id"), "{answer}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = spans.lock().expect("lock").clone();
        let call = seen.iter().find(|s| s.name == "tools/call subagent_start");
        let child = seen.iter().find(|s| s.name == "invoke_agent research-explorer");
        if let (Some(call), Some(child)) = (call, child) {
            assert_eq!(
                (hex(&call.trace_id), hex(&call.parent_span_id)),
                (TRACE_ID.to_string(), caller_span.to_string())
            );
            assert_eq!(hex(&child.trace_id), TRACE_ID, "the run it started is in the caller's trace");
            break;
        }
        assert!(Instant::now() < deadline, "no MCP call or child span: {seen:?}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    local.stop();
}
