//! The model-and-tools loop with the scripted provider and a stand-in OpenAI-compatible endpoint, on the
//! in-process store: answers, tool rounds, limits, retries, cancel, deadline, refused and failing tools.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tempfile::TempDir;
use yuxi_operator::resources::{Agent, AgentSpec};
use yuxi_operator::run::Envelope;
use yuxi_operator::run::RunStatus as Status;
use yuxi_operator::run::message::Message;
use yuxi_operator::runner::graph::{Graph, RunIdentity, RunReport};
use yuxi_operator::runner::model::scripted::ScriptedModel;
use yuxi_operator::runner::model::{Model, ModelSettings, OpenAiEndpoint};
use yuxi_operator::runner::tools::files::{FileOp, FileTool, VolumePaths, Volumes};
use yuxi_operator::runner::tools::{Grants, Tool, ToolBox, ToolError, ToolSpec};
use yuxi_operator::store::Store;

use crate::support::openai_endpoint::{FakeOpenAi, Reply};

struct Volumes4 {
    _dir: TempDir,
    paths: VolumePaths,
}

fn volumes() -> Volumes4 {
    let dir = TempDir::new().expect("temp dir");
    let paths = VolumePaths::under(dir.path());
    paths.create_all().expect("mkdir");
    Volumes4 { _dir: dir, paths }
}

/// Every file tool the grants allow, on `paths`.
fn file_tools(paths: &VolumePaths, grants: &Grants) -> ToolBox {
    let volumes = Arc::new(Volumes::open(paths).expect("open"));
    let mut tools = ToolBox::new();
    for op in FileOp::ALL.into_iter().filter(|op| grants.allows_builtin(op.name())) {
        tools.insert(Arc::new(FileTool::new(op, volumes.clone())));
    }
    tools
}

fn all_grants() -> Grants {
    Grants::for_agent(&AgentSpec { backend: "ChatbotAgent".into(), ..AgentSpec::default() })
}

fn graph(store: &Store, model: Model, tools: ToolBox) -> Graph {
    Graph {
        identity: RunIdentity { run_id: "run-1".into(), thread_id: "thread-1".into(), agent_slug: "helper".into() },
        store: store.clone().into(),
        model,
        provider: "scripted".into(),
        model_id: "scripted/echo".into(),
        pricing: None,
        tools,
        system_prompt: "You help.".into(),
        input: "Summarise the uploads.".into(),
        max_steps: 20,
        model_retries: 2,
        timeout: Duration::from_secs(30),
        cancel_poll: Duration::from_millis(200),
        end_retry_for: Duration::from_secs(5),
        delegation: None,
        approval: Default::default(),
        tool_servers: Default::default(),
        approval_timeout: Duration::from_secs(3600),
        usage: yuxi_operator::run::budget::UsageTarget {
            root_run_id: "run-1".into(),
            max_tokens: None,
            max_cost: None,
            namespace: "default".into(),
            uid: "alice".into(),
        },
        first_message: Default::default(),
    }
}

fn scripted(yaml: &str) -> Model {
    Model::Scripted(ScriptedModel::from_script(yaml).expect("valid script"))
}

async fn events(store: &Store, run_id: &str) -> Vec<Envelope> {
    store.read_events(run_id, "0-0", 10_000).await.expect("events").into_iter().map(|e| e.envelope).collect()
}

/// The run's events are `metadata` first and exactly one `end` last, whose status is the report's.
async fn assert_framed(store: &Store, report: &RunReport) -> Vec<Envelope> {
    let events = events(store, "run-1").await;
    assert_eq!(events.first().map(|e| e.event.as_str()), Some("metadata"), "{events:#?}");
    assert_eq!(events.last().map(|e| e.event.as_str()), Some("end"), "{events:#?}");
    assert_eq!(events.iter().filter(|e| e.event == "end").count(), 1);
    assert_eq!(events.last().expect("end").payload["status"], report.status.as_str());
    for event in &events {
        assert_eq!((event.schema_version, event.run_id.as_str(), event.thread_id.as_str()), (1, "run-1", "thread-1"));
    }
    events
}

fn payloads<'a>(events: &'a [Envelope], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e.event == "messages" && e.payload["type"] == kind).map(|e| &e.payload).collect()
}

#[tokio::test]
async fn a_plain_answer_completes_and_is_persisted() {
    let store = Store::memory();
    let report =
        graph(&store, Model::resolve("scripted/echo", &ModelSettings::default()).expect("model"), ToolBox::new())
            .run(json!({"agent_slug": "helper"}))
            .await;
    assert_eq!((report.status, report.output.as_str()), (Status::Completed, "Summarise the uploads."));
    let events = assert_framed(&store, &report).await;
    let deltas: String =
        payloads(&events, "message_delta").iter().map(|p| p["content"].as_str().expect("text")).collect();
    assert_eq!(deltas, "Summarise the uploads.");

    let history = store.thread_messages("thread-1").await.expect("history");
    assert_eq!(
        history,
        vec![
            Message::User { content: "Summarise the uploads.".into() },
            Message::Assistant { content: Some("Summarise the uploads.".into()), tool_calls: vec![] },
        ]
    );
    let result = serde_json::to_value(store.run_result("run-1").await.expect("result").expect("stored")).unwrap();
    assert_eq!(result["status"], "completed");
    assert_eq!(result["output"], "Summarise the uploads.");
}

#[tokio::test]
async fn several_tool_rounds_then_an_answer() {
    let store = Store::memory();
    let v = volumes();
    let script = r##"
- tool_calls:
  - {name: write_file, arguments: {path: /home/gem/user-data/outputs/report.md, content: "# Report"}}
- tool_calls:
  - {name: read_file, arguments: {path: /home/gem/user-data/outputs/report.md}}
  - {name: ls, arguments: {path: /home/gem/user-data/outputs}}
- {delay_ms: 50, content: done}
"##;
    let report = graph(&store, scripted(script), file_tools(&v.paths, &all_grants())).run(json!({})).await;
    assert_eq!((report.status, report.output.as_str()), (Status::Completed, "done"));
    assert_eq!(std::fs::read_to_string(v.paths.outputs.join("report.md")).expect("written"), "# Report");

    let events = assert_framed(&store, &report).await;
    let calls: Vec<&str> = payloads(&events, "tool_call").iter().map(|p| p["name"].as_str().expect("name")).collect();
    assert_eq!(calls, ["write_file", "read_file", "ls"]);
    let results: Vec<String> =
        payloads(&events, "tool_result").iter().map(|p| p["content"].as_str().expect("content").to_string()).collect();
    assert_eq!(
        results,
        [
            "wrote 8 bytes to /home/gem/user-data/outputs/report.md",
            "     1\t# Report",
            "/home/gem/user-data/outputs/report.md"
        ]
    );
    // user, assistant(call), tool, assistant(2 calls), tool, tool, assistant(answer)
    assert_eq!(store.thread_messages("thread-1").await.expect("history").len(), 7);
}

#[tokio::test]
async fn the_step_limit_fails_the_run() {
    let store = Store::memory();
    let v = volumes();
    let mut g = graph(
        &store,
        scripted(
            "[{tool_calls: [{name: ls}]}, {tool_calls: [{name: ls}]}, {tool_calls: [{name: ls}]}, {tool_calls: [{name: ls}]}]",
        ),
        file_tools(&v.paths, &all_grants()),
    );
    g.max_steps = 3;
    let report = g.run(json!({})).await;
    assert_eq!(report.status, Status::Failed);
    assert!(report.error.as_deref().expect("error").contains("maxExecutionSteps (3)"), "{report:?}");
    let events = assert_framed(&store, &report).await;
    assert_eq!(payloads(&events, "tool_call").len(), 3);
    let error = events.iter().find(|e| e.event == "error").expect("an error event");
    assert_eq!(error.payload["retryable"], false);
}

fn openai(endpoint: &FakeOpenAi) -> Model {
    let settings = ModelSettings {
        openai: Some(OpenAiEndpoint { base_url: endpoint.base_url.clone(), api_key: "sk-test".into() }),
        ..ModelSettings::default()
    };
    Model::resolve("openai/test-model", &settings).expect("model")
}

#[tokio::test]
async fn transient_model_errors_are_retried() {
    let endpoint = FakeOpenAi::start(vec![
        Reply::Error(429, "slow down"),
        Reply::Error(500, "upstream broke"),
        Reply::text(&["Hel", "lo"]),
    ])
    .await;
    let store = Store::memory();
    let report = graph(&store, openai(&endpoint), ToolBox::new()).run(json!({})).await;
    assert_eq!((report.status, report.output.as_str()), (Status::Completed, "Hello"));
    assert_eq!(report.token_usage.total_tokens, 15);
    let events = assert_framed(&store, &report).await;
    let custom = |kind: &str| -> Vec<&Value> {
        events.iter().filter(|e| e.event == "custom" && e.payload["type"] == kind).map(|e| &e.payload).collect()
    };
    let retries = custom("model_retry");
    assert_eq!(retries.len(), 2, "{retries:?}");
    // Each attempt is one model call of the run's record, the failed ones marked so.
    let calls = custom("model_call");
    let outcomes: Vec<(Value, Value)> =
        calls.iter().map(|c| (c["error"].clone(), c["finish_reason"].clone())).collect();
    assert_eq!(
        outcomes,
        [(json!("transient"), Value::Null), (json!("transient"), Value::Null), (Value::Null, json!("stop"))]
    );
    // The model as the run names it (this graph names it so), with the tokens the endpoint reported.
    assert_eq!((calls[2]["input_tokens"].clone(), calls[2]["model"].clone()), (json!(10), json!("scripted/echo")));
    assert!(retries[0]["error"].as_str().expect("error").contains("429"), "{retries:?}");
    assert!(retries[1]["error"].as_str().expect("error").contains("500"), "{retries:?}");

    let requests = endpoint.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2]["model"], "test-model");
    assert_eq!(requests[2]["stream"], true);
    assert_eq!(requests[2]["messages"][0], json!({"role": "system", "content": "You help."}));
    assert_eq!(requests[2]["messages"][1], json!({"role": "user", "content": "Summarise the uploads."}));
    assert_eq!(endpoint.authorizations()[2], "Bearer sk-test");
}

#[tokio::test]
async fn a_rate_limits_retry_after_is_waited_before_the_retry() {
    let endpoint = FakeOpenAi::start(vec![Reply::RateLimited("2"), Reply::text(&["Hello"])]).await;
    let store = Store::memory();
    let started = Instant::now();
    let report = graph(&store, openai(&endpoint), ToolBox::new()).run(json!({})).await;
    assert_eq!((report.status, report.output.as_str()), (Status::Completed, "Hello"));
    assert!(started.elapsed() >= Duration::from_secs(2), "retried after {:?}", started.elapsed());
    let events = assert_framed(&store, &report).await;
    let retry =
        events.iter().find(|e| e.event == "custom" && e.payload["type"] == "model_retry").expect("a model_retry event");
    assert_eq!(
        (retry.payload["type"].clone(), retry.payload["backoff_ms"].clone()),
        (json!("model_retry"), json!(2000))
    );
}

#[tokio::test]
async fn retries_run_out_and_the_run_fails() {
    let endpoint = FakeOpenAi::start(vec![Reply::Error(503, "busy"), Reply::Error(503, "busy")]).await;
    let store = Store::memory();
    let mut g = graph(&store, openai(&endpoint), ToolBox::new());
    g.model_retries = 1;
    let report = g.run(json!({})).await;
    assert_eq!(report.status, Status::Failed);
    assert!(report.error.as_deref().expect("error").contains("after 2 attempts"), "{report:?}");
    assert_framed(&store, &report).await;
}

#[tokio::test]
async fn a_refused_key_is_not_retried() {
    let endpoint = FakeOpenAi::start(vec![Reply::Error(401, "invalid api key"), Reply::text(&["never"])]).await;
    let store = Store::memory();
    let report = graph(&store, openai(&endpoint), ToolBox::new()).run(json!({})).await;
    assert_eq!(report.status, Status::Failed);
    let error = report.error.expect("error");
    assert!(error.contains("401") && error.contains("invalid api key") && error.contains("after 1 attempt"), "{error}");
    assert_eq!(endpoint.requests().len(), 1);
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_after_its_retries() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let settings = ModelSettings {
        openai: Some(OpenAiEndpoint { base_url: format!("http://{addr}/v1"), api_key: String::new() }),
        ..ModelSettings::default()
    };
    let store = Store::memory();
    let mut g = graph(&store, Model::resolve("openai/m", &settings).expect("model"), ToolBox::new());
    g.model_retries = 1;
    let report = g.run(json!({})).await;
    assert_eq!(report.status, Status::Failed);
    assert!(report.error.as_deref().expect("error").contains("cannot reach the model endpoint"), "{report:?}");
    assert_framed(&store, &report).await;
}

#[tokio::test]
async fn tool_calls_stream_from_the_endpoint_and_run() {
    let v = volumes();
    let endpoint = FakeOpenAi::start(vec![
        Reply::tool_call("write_file", r#"{"path": "/home/gem/user-data/outputs/a.txt", "content": "streamed"}"#),
        Reply::text(&["written"]),
    ])
    .await;
    let store = Store::memory();
    let report = graph(&store, openai(&endpoint), file_tools(&v.paths, &all_grants())).run(json!({})).await;
    assert_eq!((report.status, report.output.as_str()), (Status::Completed, "written"));
    assert_eq!(std::fs::read_to_string(v.paths.outputs.join("a.txt")).expect("written"), "streamed");
    let requests = endpoint.requests();
    let second = &requests[1];
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .map(|t| t["function"]["name"].as_str().expect("name"))
        .collect();
    assert!(tools.contains(&"write_file"), "{tools:?}");
    assert_eq!(second["messages"][2]["tool_calls"][0]["function"]["name"], "write_file");
    assert_eq!(second["messages"][3]["role"], "tool");
    assert_eq!(second["messages"][3]["tool_call_id"], "call_0");
}

#[tokio::test]
async fn a_cancel_stops_the_run_within_two_seconds() {
    let store = Store::memory();
    let g = graph(&store, scripted("[{delay_ms: 20000, content: too late}]"), ToolBox::new());
    let started = Instant::now();
    let run = tokio::spawn(async move { g.run(json!({})).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    store.request_cancel("run-1").await.expect("cancel");
    let report =
        tokio::time::timeout(Duration::from_secs(2), run).await.expect("stopped within 2 s").expect("no panic");
    assert_eq!(report.status, Status::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_framed(&store, &report).await;
    // What was said before the cancel is kept.
    assert_eq!(
        store.thread_messages("thread-1").await.expect("history"),
        vec![Message::User { content: "Summarise the uploads.".into() }]
    );
}

#[tokio::test]
async fn the_deadline_fails_the_run() {
    let store = Store::memory();
    let mut g = graph(&store, scripted("[{delay_ms: 20000, content: too late}]"), ToolBox::new());
    g.timeout = Duration::from_millis(300);
    let report = g.run(json!({})).await;
    assert_eq!(report.status, Status::Failed);
    assert!(report.error.as_deref().expect("error").contains("deadline"), "{report:?}");
    assert_framed(&store, &report).await;
}

fn subagent(yaml_context: &str) -> AgentSpec {
    let agent: Agent = serde_norway::from_str(&format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: s}}\nspec:\n  backend: SubAgentBackend\n  context: {yaml_context}\n"
    ))
    .expect("agent");
    agent.spec
}

#[test]
fn grants_follow_the_context_and_the_approval_mode() {
    assert_eq!(all_grants().builtin, ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute"]);
    assert_eq!(Grants::for_agent(&subagent("{}")).builtin, ["ls", "read_file", "glob", "grep"]);
    assert_eq!(
        Grants::for_agent(&subagent("{toolApprovalMode: AlwaysTrust}")).builtin,
        ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute"]
    );
    assert_eq!(Grants::for_agent(&subagent("{tools: [read_file, write_file]}")).builtin, ["read_file"]);
    let grants = Grants::for_agent(&subagent("{mcps: [docs]}"));
    assert!(grants.allows_mcp("docs") && !grants.allows_mcp("other"));
}

#[tokio::test]
async fn a_tool_that_is_not_granted_is_refused_when_called() {
    let store = Store::memory();
    let v = volumes();
    // A subagent in Default approval mode: no write_file, even if the model calls it.
    let tools = file_tools(&v.paths, &Grants::for_agent(&subagent("{}")));
    let script = "[{tool_calls: [{name: write_file, arguments: {path: x.txt, content: pwned}}]}, {content: ok}]";
    let report = graph(&store, scripted(script), tools).run(json!({})).await;
    assert_eq!(report.status, Status::Completed);
    assert!(!v.paths.workspace.join("x.txt").exists(), "the refused tool did not run");
    let events = assert_framed(&store, &report).await;
    let result = payloads(&events, "tool_result")[0];
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .expect("text")
            .starts_with("Error: tool \"write_file\" is not available to this agent"),
        "{result}"
    );
}

#[tokio::test]
async fn arguments_that_are_not_json_are_fed_back_to_the_model() {
    let store = Store::memory();
    let v = volumes();
    let script = "[{tool_calls: [{name: read_file, arguments: '{\"path\": '}]}, {content: recovered}]";
    let report = graph(&store, scripted(script), file_tools(&v.paths, &all_grants())).run(json!({})).await;
    assert_eq!((report.status, report.output.as_str()), (Status::Completed, "recovered"));
    let events = assert_framed(&store, &report).await;
    let result = payloads(&events, "tool_result")[0];
    assert!(result["content"].as_str().expect("text").contains("are not valid JSON"), "{result}");
}

struct Panics;

impl Tool for Panics {
    fn spec(&self) -> ToolSpec {
        ToolSpec { name: "explode".into(), description: "panics".into(), parameters: json!({"type": "object"}) }
    }

    fn call(&self, _: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin(async { panic!("boom") })
    }
}

#[tokio::test]
async fn a_tool_that_panics_fails_only_its_call() {
    let store = Store::memory();
    let mut tools = ToolBox::new();
    tools.insert(Arc::new(Panics));
    let report =
        graph(&store, scripted("[{tool_calls: [{name: explode}]}, {content: carried on}]"), tools).run(json!({})).await;
    assert_eq!((report.status, report.output.as_str()), (Status::Completed, "carried on"));
    let events = assert_framed(&store, &report).await;
    assert_eq!(payloads(&events, "tool_result")[0]["content"], "Error: the tool explode failed unexpectedly");
}

#[tokio::test]
async fn a_continued_thread_resumes_with_its_messages() {
    let endpoint = FakeOpenAi::start(vec![Reply::text(&["first answer"]), Reply::text(&["second answer"])]).await;
    let store = Store::memory();
    graph(&store, openai(&endpoint), ToolBox::new()).run(json!({})).await;
    let mut second = graph(&store, openai(&endpoint), ToolBox::new());
    second.identity.run_id = "run-2".into();
    second.input = "And the outputs?".into();
    let report = second.run(json!({})).await;
    assert_eq!(report.output, "second answer");
    let messages = &endpoint.requests()[1]["messages"];
    assert_eq!(
        messages,
        &json!([
            {"role": "system", "content": "You help."},
            {"role": "user", "content": "Summarise the uploads."},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "And the outputs?"}
        ])
    );
    assert_eq!(store.thread_messages("thread-1").await.expect("history").len(), 4);
}

#[tokio::test]
async fn long_answers_stream_in_batches() {
    let long = "x".repeat(1300);
    let endpoint = FakeOpenAi::start(vec![Reply::Turn {
        pieces: long.chars().map(|c| c.to_string()).collect(),
        tool_calls: vec![],
    }])
    .await;
    let store = Store::memory();
    let report = graph(&store, openai(&endpoint), ToolBox::new()).run(json!({})).await;
    assert_eq!(report.output, long);
    let events = assert_framed(&store, &report).await;
    let batches: Vec<usize> =
        payloads(&events, "message_delta").iter().map(|p| p["content"].as_str().expect("text").len()).collect();
    assert_eq!(batches.iter().sum::<usize>(), 1300);
    assert!(
        batches.len() >= 3 && batches.len() < 1300,
        "1300 deltas are batched, at most 512 characters each: {batches:?}"
    );
    assert!(batches.iter().all(|&b| b <= 512), "{batches:?}");
}

#[tokio::test]
async fn a_cancel_requested_before_the_run_starts_runs_nothing() {
    let store = Store::memory();
    let v = volumes();
    store.request_cancel("run-1").await.expect("cancel");
    let script = "[{tool_calls: [{name: write_file, arguments: {path: early.txt, content: x}}]}, {content: done}]";
    let report = graph(&store, scripted(script), file_tools(&v.paths, &all_grants())).run(json!({})).await;
    assert_eq!(report.status, Status::Cancelled);
    assert!(!v.paths.workspace.join("early.txt").exists(), "no tool ran after the cancel");
    let events = assert_framed(&store, &report).await;
    assert!(payloads(&events, "tool_call").is_empty());
}

struct Sleeps;

impl Tool for Sleeps {
    fn spec(&self) -> ToolSpec {
        ToolSpec { name: "wait".into(), description: "sleeps".into(), parameters: json!({"type": "object"}) }
    }

    fn call(&self, _: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok("woke".into())
        })
    }
}

#[tokio::test]
async fn a_run_stopped_during_a_tool_call_leaves_a_valid_history() {
    let store = Store::memory();
    let mut tools = ToolBox::new();
    tools.insert(Arc::new(Sleeps));
    let mut g = graph(&store, scripted("[{tool_calls: [{name: wait}, {name: wait}]}, {content: never}]"), tools);
    g.timeout = Duration::from_millis(300);
    let report = g.run(json!({})).await;
    assert_eq!(report.status, Status::Failed);
    let history = store.thread_messages("thread-1").await.expect("history");
    let answered: Vec<(String, String)> = history
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, content } => Some((tool_call_id.clone(), content.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        answered,
        [
            ("call_0_0".to_string(), "Error: the run ended (failed) before this tool call finished".to_string()),
            ("call_0_1".to_string(), "Error: the run ended (failed) before this tool call finished".to_string()),
        ],
        "every tool call of the history has its answer"
    );
}

#[tokio::test]
async fn one_turn_runs_at_most_sixty_four_tool_calls() {
    let store = Store::memory();
    let v = volumes();
    let calls: Vec<String> = (0..66).map(|_| "{name: ls}".to_string()).collect();
    let script = format!("[{{tool_calls: [{}]}}, {{content: done}}]", calls.join(", "));
    let report = graph(&store, scripted(&script), file_tools(&v.paths, &all_grants())).run(json!({})).await;
    assert_eq!(report.status, Status::Completed);
    let events = assert_framed(&store, &report).await;
    assert_eq!(payloads(&events, "tool_call").len(), 64);
    let history = store.thread_messages("thread-1").await.expect("history");
    let refused = history
        .iter()
        .filter(|m| matches!(m, Message::Tool { content, .. } if content.starts_with("Error: at most 64 tool calls")))
        .count();
    assert_eq!(refused, 2);
}

#[tokio::test]
async fn a_huge_tool_result_is_cut_for_the_model_the_events_and_the_history() {
    let store = Store::memory();
    let v = volumes();
    // A 4 MB file, read sixteen times: each result is cut, so the run's events and history stay small.
    std::fs::write(v.paths.uploads.join("big.txt"), format!("{}\n", "x".repeat(99)).repeat(40_000)).expect("write");
    let reads = (0..16)
        .map(|_| "  - {name: read_file, arguments: {path: /home/gem/user-data/uploads/big.txt}}".to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let script = format!("- tool_calls:\n{reads}\n- {{content: done}}\n");
    let report = graph(&store, scripted(&script), file_tools(&v.paths, &all_grants())).run(json!({})).await;
    assert_eq!(report.status, Status::Completed, "{report:?}");
    let events = events(&store, "run-1").await;
    let results = payloads(&events, "tool_result");
    assert_eq!(results.len(), 16);
    let max = yuxi_operator::run::event::MAX_TOOL_RESULT_BYTES;
    for result in results {
        let content = result["content"].as_str().expect("content");
        assert!(content.len() < max + 100, "{} bytes", content.len());
        assert!(
            content.contains("more bytes cut: this result is limited to 65536 bytes"),
            "{}",
            &content[content.len() - 120..]
        );
    }
    let history: usize = store
        .thread_messages("thread-1")
        .await
        .expect("history")
        .iter()
        .map(|m| serde_json::to_string(m).expect("json").len())
        .sum();
    assert!(history < 17 * (max + 200), "the history holds {history} bytes");
}
