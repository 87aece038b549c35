//! McpServer resources in the local mode: an McpServer of the manifests folder is a server its agents
//! name in `context.mcps`, reached with its headers; the official MCP Python SDK serves it
//! (`tests/mcp/dynamic_server.py`).

use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;

use crate::support::extra_agents::start_with_env;
use crate::support::local_mode::{LocalStore, Process, free_port};
use crate::support::mcp_client::Sdk;
use crate::support::repository::root;

/// `tests/mcp/dynamic_server.py` on a free port, needing `token` when given, once it answers.
async fn dynamic_server(token: Option<&str>) -> (Process, u16) {
    let port = free_port();
    let mut command = std::process::Command::new(Sdk::Mcp.python());
    command.arg(root().join("tests/mcp/dynamic_server.py")).arg(port.to_string()).args(token);
    let server = Process(command.spawn().expect("the MCP server starts"));
    let client = reqwest12::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.post(format!("http://127.0.0.1:{port}/control/remove")).send().await.is_err() {
        assert!(Instant::now() < deadline, "the MCP server did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (server, port)
}

#[tokio::test]
async fn an_agent_uses_a_tool_of_an_mcp_server_declared_in_the_manifests() {
    let (_server, port) = dynamic_server(Some("docs-token")).await;
    let client = reqwest12::Client::new();
    let server = format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: McpServer\nmetadata: {{name: dyn-docs}}\nspec:\n  url: http://127.0.0.1:{port}/mcp\n  headers: [{{name: Authorization, env: DOCS_TOKEN, prefix: \"Bearer \"}}]\n"
    );
    let agent = |slug: &str| {
        format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: ChatbotAgent\n  context: {{mcps: [dyn-docs], subagents: []}}\n  share: {{readScope: {{accessLevel: Global}}}}\n"
        )
    };
    let (uses, erases) = (agent("uses-docs"), agent("erases-notes"));
    let script = "- tool_calls: [{name: search, arguments: {query: solid electrolytes}}]\n- content: \"the server said: {{call_0_0}}\"\n";
    let erase =
        "- tool_calls: [{name: delete_note, arguments: {name: old}}]\n- content: \"the server said: {{call_0_0}}\"\n";
    client.post(format!("http://127.0.0.1:{port}/control/add")).send().await.expect("a destructive tool added");
    let (local, _manifests) = start_with_env(
        LocalStore::InProcess,
        TempDir::new().expect("dir"),
        &[("dyn-docs", server.as_str()), ("uses-docs", uses.as_str()), ("erases-notes", erases.as_str())],
        &[("uses-docs", script), ("erases-notes", erase)],
        &[("DOCS_TOKEN", "docs-token")],
    )
    .await;
    // The local mode lists the server's tools as the controller does, for the facade's lists.
    let deadline = Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let listed = local.get_json("/api/system/mcp-servers", "alice-token").await;
        if listed["data"][0]["status"] == "ready" {
            break listed;
        }
        assert!(Instant::now() < deadline, "{listed}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let docs = &listed["data"][0];
    assert_eq!(
        (&docs["slug"], &docs["source"], &docs["tools"]),
        (&json!("dyn-docs"), &json!("resource"), &json!(["search", "delete_note"]))
    );
    assert_eq!(docs["agents"], json!(["erases-notes", "uses-docs"]));
    let tools = local.get_json("/api/system/mcp-servers/dyn-docs/tools", "alice-token").await;
    assert_eq!((&tools["data"][1]["name"], &tools["data"][1]["destructive"]), (&json!("delete_note"), &json!(true)));
    assert!(
        !listed.to_string().contains("docs-token") && !tools.to_string().contains("docs-token"),
        "no header value is shown"
    );

    let run = local.start_run("alice-token", &[], json!({"query": "look it up", "agent_slug": "uses-docs"})).await;
    let result = local.result_of(&run, "alice-token").await;
    assert_eq!(result["status"], "completed", "{result}\n{}", local.log());
    assert_eq!(result["output"], "the server said: found: solid electrolytes", "{result}");

    // A tool its server marks destructive waits for a person, then runs once approved.
    let run = local.start_run("alice-token", &[], json!({"query": "tidy up", "agent_slug": "erases-notes"})).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let waiting = loop {
        let view = local.get_json(&format!("/api/agent/runs/{run}"), "alice-token").await;
        if view["run"]["status"] == "waiting" {
            break view;
        }
        assert!(Instant::now() < deadline, "{view}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let asked = waiting["run"].to_string();
    assert!(asked.contains("delete_note"), "{asked}");
    let call = waiting["run"]["waiting"]["action_requests"][0]["tool_call_id"].as_str().expect("the call").to_string();
    let resumed = local
        .client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth("alice-token")
        .json(&json!({"resume": {"run_id": run, "decisions": [{"tool_call_id": call, "decision": "approve"}]}}))
        .send()
        .await
        .expect("resume");
    assert_eq!(resumed.status(), 200);
    let result = local.result_of(&run, "alice-token").await;
    assert_eq!(result["output"], "the server said: deleted old", "{result}");
}

#[tokio::test]
async fn a_watch_hears_each_tool_list_change_the_server_announces() {
    let (_server, port) = dynamic_server(None).await;
    let client = reqwest12::Client::new();
    let heard = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = heard.clone();
    let watch = yuxi_operator::endpoints::mcp_discovery::watch_changes(
        &format!("http://127.0.0.1:{port}/mcp"),
        Default::default(),
        None,
        Duration::from_secs(10),
        std::sync::Arc::new(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }),
    )
    .await
    .expect("connects")
    .expect("the server announces changes");
    // The standing stream opens a moment after the connection: a change is announced until heard.
    let deadline = Instant::now() + Duration::from_secs(20);
    while heard.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no change was heard");
        client.post(format!("http://127.0.0.1:{port}/control/add")).send().await.expect("changed");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Then each one is.
    let before = heard.load(std::sync::atomic::Ordering::SeqCst);
    client.post(format!("http://127.0.0.1:{port}/control/remove")).send().await.expect("changed");
    let deadline = Instant::now() + Duration::from_secs(10);
    while heard.load(std::sync::atomic::Ordering::SeqCst) == before {
        assert!(Instant::now() < deadline, "the removal was not heard");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(watch.answers(Duration::from_secs(5)).await, "the server answers on the watch");
    drop(_server);
    assert!(!watch.answers(Duration::from_secs(5)).await, "a server that stopped does not");
}

/// The tools the local mode lists for `dyn-docs` once its discovery reports it ready with `tools`.
async fn listed_tools(local: &crate::support::local_mode::Local, tools: serde_json::Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = local.get_json("/api/system/mcp-servers", "alice-token").await;
        if listed["data"][0]["status"] == "ready" && listed["data"][0]["tools"] == tools {
            return;
        }
        assert!(Instant::now() < deadline, "{listed}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_mcp_server_changed_while_the_local_mode_serves_is_listed_and_reached_at_its_new_address() {
    let (first_server, first_port) = dynamic_server(None).await;
    let (_second_server, second_port) = dynamic_server(None).await;
    let client = reqwest12::Client::new();
    // The second server offers one more tool, so its listing tells it from the first.
    client.post(format!("http://127.0.0.1:{second_port}/control/add")).send().await.expect("a tool added");
    let server = |port: u16| {
        format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: McpServer\nmetadata: {{name: dyn-docs}}\nspec:\n  url: http://127.0.0.1:{port}/mcp\n"
        )
    };
    let agent = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: uses-docs}\nspec:\n  backend: ChatbotAgent\n  context: {mcps: [dyn-docs], subagents: []}\n  share: {readScope: {accessLevel: Global}}\n";
    let script = "- tool_calls: [{name: search, arguments: {query: solid electrolytes}}]\n- content: \"the server said: {{call_0_0}}\"\n";
    let first = server(first_port);
    let (local, manifests) = start_with_env(
        LocalStore::InProcess,
        TempDir::new().expect("dir"),
        &[("dyn-docs", first.as_str()), ("uses-docs", agent)],
        &[("uses-docs", script)],
        &[],
    )
    .await;
    listed_tools(&local, json!(["search"])).await;
    std::fs::write(manifests.path().join("dyn-docs.yaml"), server(second_port)).expect("edit");
    listed_tools(&local, json!(["search", "delete_note"])).await;
    // With the first server gone, a run reaches the tool only at the new address.
    drop(first_server);
    let run = local.start_run("alice-token", &[], json!({"query": "look it up", "agent_slug": "uses-docs"})).await;
    let result = local.result_of(&run, "alice-token").await;
    assert_eq!(result["output"], "the server said: found: solid electrolytes", "{result}\n{}", local.log());
}
