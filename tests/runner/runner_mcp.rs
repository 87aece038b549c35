//! MCP tools: a real MCP server (the official SDK's streamable HTTP server on loopback) whose tools the
//! runner lists, filters by name, and calls.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;
use yuxi_operator::resources::Agent;
use yuxi_operator::runner::mcp::{McpServer, McpServers, connect_granted};
use yuxi_operator::runner::tools::{Grants, ToolBox};

/// A documentation server: `search` echoes its query, `broken` reports a tool error, `ls` collides with a
/// built-in tool.
#[derive(Clone)]
struct Docs;

fn schema() -> Arc<serde_json::Map<String, serde_json::Value>> {
    let value = json!({"type": "object", "properties": {"query": {"type": "string"}}});
    Arc::new(value.as_object().expect("object").clone())
}

impl ServerHandler for Docs {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("search", "Search the docs", schema()),
            Tool::new("broken", "Always fails", schema()),
            Tool::new("ls", "A name taken by a built-in tool", schema()),
            Tool::new("admin", "Not exposed by the filter", schema()),
            Tool::new("trace", "Answers the call's traceparent", schema()),
            Tool::new("slow", "Answers after five seconds", schema()),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let query = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("query"))
            .and_then(|q| q.as_str())
            .unwrap_or_default()
            .to_string();
        if request.name == "slow" {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
        let result = match request.name.as_ref() {
            "broken" => CallToolResult::error(vec![ContentBlock::text("the index is offline")]),
            // Answers the trace context the call carried.
            "trace" => CallToolResult::success(vec![ContentBlock::text(
                context.meta.get_traceparent().unwrap_or("none").to_string(),
            )]),
            name => CallToolResult::success(vec![ContentBlock::text(format!("{name}: results for {query}"))]),
        };
        Ok(result.into())
    }
}

/// [`Docs`] at `/mcp`.
fn docs_router() -> axum::Router {
    let service: StreamableHttpService<Docs, LocalSessionManager> =
        StreamableHttpService::new(|| Ok(Docs), Default::default(), StreamableHttpServerConfig::default());
    axum::Router::new().nest_service("/mcp", service)
}

/// Serves [`Docs`] on a free loopback port; returns its URL.
async fn serve_docs() -> String {
    let router = docs_router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("MCP server serves") });
    format!("http://{addr}/mcp")
}

fn grants(mcps: &str) -> Grants {
    let agent: Agent = serde_norway::from_str(&format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: a}}\nspec:\n  backend: ChatbotAgent\n  context: {mcps}\n"
    ))
    .expect("agent");
    Grants::for_agent(&agent.spec)
}

fn servers(url: &str, only: Option<Vec<&str>>) -> McpServers {
    McpServers::from([(
        "docs".to_string(),
        McpServer {
            url: url.to_string(),
            tools: only.map(|o| o.into_iter().map(String::from).collect()),
            headers: Default::default(),
            timeout_seconds: None,
            call_timeout_seconds: None,
            ca_bundle: None,
        },
    )])
}

#[tokio::test]
async fn mcp_tools_are_listed_filtered_and_called() {
    let url = serve_docs().await;
    let tools = connect_granted(&servers(&url, Some(vec!["search", "broken", "ls"])), &grants("{mcps: [docs]}"), None)
        .await
        .expect("connects");
    let mut toolbox = ToolBox::new();
    for tool in tools.tools {
        toolbox.insert(tool);
    }
    assert_eq!(toolbox.names(), ["broken", "search"], "filtered by the list, and no built-in name taken");
    let spec = toolbox.specs().into_iter().find(|s| s.name == "search").expect("search");
    assert_eq!(spec.description, "Search the docs");
    assert_eq!(spec.parameters["properties"]["query"]["type"], "string");

    assert_eq!(toolbox.call("search", r#"{"query": "pods"}"#).await.expect("answers"), "search: results for pods");
    let err = toolbox.call("broken", "{}").await.expect_err("a tool error");
    assert_eq!(err.0, "the index is offline");
    let err = toolbox.call("admin", "{}").await.expect_err("filtered out");
    assert!(err.0.contains("not available"), "{err}");
}

#[tokio::test]
async fn servers_the_agent_does_not_name_are_not_connected() {
    let url = serve_docs().await;
    let tools = connect_granted(&servers(&url, None), &grants("{mcps: []}"), None).await.expect("nothing to connect");
    assert!(tools.tools.is_empty() && tools.unavailable.is_empty());
    let all = connect_granted(&servers(&url, None), &grants("{}"), None).await.expect("every configured server");
    assert_eq!(all.tools.len(), 5, "absent mcps means every configured server; ls is still left out");
}

#[tokio::test]
async fn an_unknown_server_is_a_clear_error_and_an_unreachable_one_is_named_for_the_model() {
    let err = connect_granted(&McpServers::new(), &grants("{mcps: [docs]}"), None)
        .await
        .err()
        .expect("not configured")
        .to_string();
    assert_eq!(err, "spec.context.mcps names the MCP server \"docs\", which is not configured");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let connected = connect_granted(&servers(&format!("http://{addr}/mcp"), None), &grants("{}"), None)
        .await
        .expect("the run goes on");
    assert!(connected.tools.is_empty());
    assert_eq!(connected.unavailable.len(), 1);
    assert!(connected.unavailable[0].starts_with("MCP server \"docs\" at http://"), "{:?}", connected.unavailable);
    let prompt = yuxi_operator::runner::mcp::unavailable_prompt(&connected.unavailable).expect("a prompt section");
    assert!(prompt.contains(&connected.unavailable[0]), "{prompt}");
}

/// [`serve_docs`] behind a check of `Authorization: Bearer <token>`, as a real server's auth would:
/// 401 otherwise.
async fn serve_docs_requiring(token: &'static str) -> String {
    let service: StreamableHttpService<Docs, LocalSessionManager> =
        StreamableHttpService::new(|| Ok(Docs), Default::default(), StreamableHttpServerConfig::default());
    let check = move |request: axum::extract::Request, next: axum::middleware::Next| async move {
        let expected = format!("Bearer {token}");
        let given = request.headers().get("authorization").and_then(|v| v.to_str().ok()).map(String::from);
        if given.as_deref() != Some(expected.as_str()) || request.headers().get("x-team").is_none() {
            return axum::http::StatusCode::UNAUTHORIZED.into_response();
        }
        next.run(request).await
    };
    use axum::response::IntoResponse;
    let router = axum::Router::new().nest_service("/mcp", service).layer(axum::middleware::from_fn(check));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("MCP server serves") });
    format!("http://{addr}/mcp")
}

#[tokio::test]
async fn headers_from_a_file_or_the_environment_authenticate_and_a_refusal_is_named_for_the_model() {
    let url = serve_docs_requiring("s3cret").await;
    let dir = tempfile::TempDir::new().expect("dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret\n").expect("write");
    let configured = |authorization: &str| -> McpServers {
        let text = format!(
            "docs:\n  url: {url}\n  headers:\n    Authorization: {authorization}\n    X-Team: {{value: research}}\n"
        );
        let file = dir.path().join("servers.yaml");
        std::fs::write(&file, text).expect("write");
        yuxi_operator::runner::mcp::load_servers(&file).expect("valid servers")
    };
    let from_file = configured(&format!("{{file: {}, prefix: 'Bearer '}}", token_file.display()));
    let connected = connect_granted(&from_file, &grants("{}"), None).await.expect("connects");
    assert_eq!(connected.tools.len(), 5, "{:?}", connected.unavailable);
    assert_eq!(yuxi_operator::runner::mcp::header_files(&from_file), vec![token_file.clone()]);
    // SAFETY: this test binary reads the variable in this test only.
    unsafe { std::env::set_var("YUXI_TEST_DOCS_TOKEN", "s3cret") };
    let from_env = configured("{env: YUXI_TEST_DOCS_TOKEN, prefix: 'Bearer '}");
    assert_eq!(connect_granted(&from_env, &grants("{}"), None).await.expect("connects").tools.len(), 5);
    let wrong = configured("{value: 'Bearer guessed'}");
    let refused = connect_granted(&wrong, &grants("{}"), None).await.expect("the run goes on");
    assert!(refused.tools.is_empty());
    assert!(refused.unavailable[0].starts_with("MCP server \"docs\""), "{:?}", refused.unavailable);
    assert!(!refused.unavailable[0].contains("guessed"), "the value is never quoted: {:?}", refused.unavailable);
    let unset = configured("{env: YUXI_TEST_NO_SUCH_TOKEN}");
    let missing = connect_granted(&unset, &grants("{}"), None).await.expect("the run goes on");
    assert!(missing.unavailable[0].contains("YUXI_TEST_NO_SUCH_TOKEN is not set"), "{:?}", missing.unavailable);
    // A header with two sources, or one the transport sets, is refused when the file is read.
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, format!("docs:\n  url: {url}\n  headers:\n    Mcp-Session-Id: {{value: x}}\n")).expect("w");
    let err = yuxi_operator::runner::mcp::load_servers(&file).expect_err("refused").to_string();
    assert!(err.contains("\"Mcp-Session-Id\": is set by the MCP transport itself"), "{err}");
}

#[tokio::test]
async fn a_call_carries_the_current_spans_traceparent_in_its_meta_when_traces_are_exported() {
    use opentelemetry::trace::TracerProvider;
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    let url = serve_docs().await;
    let tools =
        connect_granted(&servers(&url, Some(vec!["trace"])), &grants("{mcps: [docs]}"), None).await.expect("connects");
    let mut toolbox = ToolBox::new();
    for tool in tools.tools {
        toolbox.insert(tool);
    }
    // Without export: no trace context.
    assert_eq!(toolbox.call("trace", "{}").await.expect("answers"), "none");
    // With export, as the processes set it up: the call's span's context.
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::registry().with(
        tracing_opentelemetry::layer().with_tracer(provider.tracer("test")).with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target(yuxi_operator::telemetry::TARGET, tracing::Level::TRACE),
        ),
    );
    let _default = tracing::subscriber::set_default(subscriber);
    let span = tracing::trace_span!(target: yuxi_operator::telemetry::TARGET, "execute_tool");
    let expected = yuxi_operator::telemetry::traceparent_of(&span).expect("an exported span");
    let answer = tracing::Instrument::instrument(toolbox.call("trace", "{}"), span).await.expect("answers");
    assert_eq!(answer, expected);
}

#[tokio::test]
async fn an_agents_tool_allowlist_narrows_a_server_to_the_tools_it_names() {
    let url = serve_docs().await;
    let narrow = grants("{mcps: [docs], mcpTools: [{server: docs, tools: [search, trace]}]}");
    let connected = connect_granted(&servers(&url, None), &narrow, None).await.expect("connects");
    let mut names: Vec<String> = connected.tools.iter().map(|t| t.spec().name).collect();
    names.sort();
    assert_eq!(names, ["search", "trace"]);
    // The server's own filter and the agent's both apply.
    let both = connect_granted(&servers(&url, Some(vec!["search", "broken"])), &narrow, None).await.expect("connects");
    assert_eq!(both.tools.iter().map(|t| t.spec().name).collect::<Vec<_>>(), ["search"]);
}

#[tokio::test]
async fn a_call_past_the_servers_call_timeout_is_an_error_the_model_reads() {
    let url = serve_docs().await;
    let mut configured = servers(&url, Some(vec!["slow", "search"]));
    configured.get_mut("docs").expect("docs").call_timeout_seconds = Some(1);
    let connected = connect_granted(&configured, &grants("{mcps: [docs]}"), None).await.expect("connects");
    let mut toolbox = ToolBox::new();
    for tool in connected.tools {
        toolbox.insert(tool);
    }
    let started = std::time::Instant::now();
    let err = toolbox.call("slow", "{}").await.expect_err("past its time");
    assert_eq!(err.0, "the MCP tool slow did not answer within 1 s");
    assert!(started.elapsed() < std::time::Duration::from_secs(4), "cut at the timeout, not at the server's answer");
    assert_eq!(toolbox.call("search", r#"{"query": "q"}"#).await.expect("answers"), "search: results for q");
}

#[tokio::test]
async fn a_ca_bundle_replaces_the_system_roots_for_an_mcp_server() {
    yuxi_operator::tls::install_crypto_provider();
    let trusted = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let config = axum_server::tls_rustls::RustlsConfig::from_pem(
        trusted.cert.pem().into_bytes(),
        trusted.signing_key.serialize_pem().into_bytes(),
    )
    .await
    .expect("TLS config");
    let handle = axum_server::Handle::<std::net::SocketAddr>::new();
    let listening = handle.clone();
    let addr: std::net::SocketAddr = "127.0.0.1:0".parse().expect("address");
    tokio::spawn(async move {
        axum_server::bind_rustls(addr, config)
            .handle(listening)
            .serve(docs_router().into_make_service())
            .await
            .expect("serves")
    });
    let port = handle.listening().await.expect("listens").port();
    let url = format!("https://localhost:{port}/mcp");
    let with = |bundle: Option<String>| {
        let mut configured = servers(&url, Some(vec!["search"]));
        configured.get_mut("docs").expect("docs").ca_bundle = bundle;
        configured
    };
    for (bundle, what) in
        [(None, "the system's roots"), (Some(other.cert.pem()), "another CA"), (Some(String::new()), "an empty bundle")]
    {
        let connected = connect_granted(&with(bundle), &grants("{mcps: [docs]}"), None).await.expect("the run goes on");
        assert!(connected.tools.is_empty(), "{what}: the certificate is not trusted");
        assert_eq!(connected.unavailable.len(), 1, "{what}: named for the model");
    }
    let connected =
        connect_granted(&with(Some(trusted.cert.pem())), &grants("{mcps: [docs]}"), None).await.expect("connects");
    assert_eq!(connected.tools.iter().map(|t| t.spec().name).collect::<Vec<_>>(), ["search"]);
    // Discovery checks the same way.
    let found = yuxi_operator::endpoints::mcp_discovery::discover(
        &url,
        Default::default(),
        Some(&trusted.cert.pem()),
        std::time::Duration::from_secs(10),
    )
    .await
    .expect("listed");
    assert_eq!(found.count, 6);
    let refused = yuxi_operator::endpoints::mcp_discovery::discover(
        &url,
        Default::default(),
        Some(&other.cert.pem()),
        std::time::Duration::from_secs(10),
    )
    .await;
    assert!(refused.is_err(), "another CA's certificate is refused");
}
