//! The delegation tools over MCP (`/mcp`) in the local mode, driven by the official MCP Python SDK
//! (`tests/mcp/client.py`): the tools listed for the session's agent, `task` with progress, a run
//! started, awaited and cancelled, a stranger refused exactly as `/api/tools` refuses, `subagent_start`
//! as an MCP task, a cancelled call cancelling its run; a session kept to its owner and the sessions
//! one user holds limited.

use tempfile::TempDir;

use crate::support::extra_agents::start_with;
use crate::support::local_mode::{Local, LocalStore};
use crate::support::mcp_client::scenario;

fn subagent(slug: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: SubAgentBackend\n  description: Helps.\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}

const PARENT: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: mcp-parent}\nspec:\n  backend: ChatbotAgent\n  context: {subagents: [quick-helper, slow-writer, sleeper, chatty]}\n  share: {readScope: {accessLevel: Global}}\n";

const SCRIPTS: &[(&str, &str)] = &[
    ("quick-helper", "- content: done quickly\n"),
    (
        "slow-writer",
        "- delay_ms: 300\n  content: drafting\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- delay_ms: 300\n  content: revising\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- delay_ms: 300\n  content: written\n",
    ),
    ("sleeper", "- delay_ms: 30000\n  content: rested\n"),
];

/// A subagent that writes a step every 20 ms, 600 times.
fn chatty() -> String {
    "- delay_ms: 20\n  content: talking\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n"
        .repeat(600)
}

async fn system() -> (Local, TempDir) {
    system_in(LocalStore::InProcess).await
}

async fn system_in(store: LocalStore) -> (Local, TempDir) {
    let agents = [
        ("quick-helper", subagent("quick-helper")),
        ("slow-writer", subagent("slow-writer")),
        ("sleeper", subagent("sleeper")),
        ("chatty", subagent("chatty")),
        ("mcp-parent", PARENT.to_string()),
    ];
    let agents: Vec<(&str, &str)> = agents.iter().map(|(slug, yaml)| (*slug, yaml.as_str())).collect();
    let chatty = chatty();
    let scripts: Vec<(&str, &str)> = SCRIPTS.iter().copied().chain([("chatty", chatty.as_str())]).collect();
    start_with(store, TempDir::new().expect("dir"), &agents, &scripts).await
}

#[tokio::test]
async fn the_sdk_lists_the_tools_of_the_sessions_agent_with_each_protocol() {
    let (local, _manifests) = system().await;
    scenario("tools", &local.base, &[]).await;
}

#[tokio::test]
async fn task_runs_a_subagent_to_its_end_reporting_progress() {
    let (local, _manifests) = system().await;
    scenario("task", &local.base, &[]).await;
}

#[tokio::test]
async fn a_run_is_started_awaited_and_cancelled_and_a_stranger_is_refused_as_over_http() {
    let (local, _manifests) = system().await;
    let printed = scenario("start_await_cancel", &local.base, &[]).await;
    let ids: serde_json::Value = serde_json::from_str(&printed).expect("the run and its parent");
    let field = |name: &str| ids[name].as_str().expect(name).to_string();
    let (run, parent_run, parent_thread) = (field("run_id"), field("parent_run_id"), field("parent_thread_id"));
    scenario(
        "stranger",
        &local.base,
        &[("RUN_ID", &run), ("PARENT_RUN_ID", &parent_run), ("PARENT_THREAD_ID", &parent_thread)],
    )
    .await;
}

#[tokio::test]
async fn progress_is_told_only_of_runs_the_caller_owns_checked_before_any_is_watched() {
    // With Redis, where a look at the store takes long enough for a run to write meanwhile.
    let (local, _manifests) = system_in(LocalStore::Redis).await;
    scenario("stranger_progress", &local.base, &[]).await;
}

#[tokio::test]
async fn subagent_start_answers_as_an_mcp_task_for_clients_of_the_tasks_extension() {
    let (local, _manifests) = system().await;
    scenario("tasks", &local.base, &[]).await;
}

#[tokio::test]
async fn a_task_call_cancelled_by_its_client_cancels_its_run() {
    let (local, _manifests) = system().await;
    scenario("cancel_call", &local.base, &[]).await;
}

/// One JSON-RPC request to `/mcp` with `token` (and `session`, when given): its status, the session
/// id it answers with, and its body.
async fn mcp_post(
    local: &Local,
    token: &str,
    session: Option<&str>,
    body: serde_json::Value,
) -> (u16, Option<String>, String) {
    let mut request = local
        .client
        .post(format!("{}/mcp", local.base))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let response = request.send().await.expect("mcp answers");
    let status = response.status().as_u16();
    let id = response.headers().get("mcp-session-id").map(|v| v.to_str().expect("ascii").to_string());
    (status, id, response.text().await.expect("body"))
}

/// Opens a session for `token`: its status and id.
async fn open_session(local: &Local, token: &str) -> (u16, Option<String>, String) {
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let opened = mcp_post(local, token, None, initialize).await;
    if let (200, Some(id), _) = &opened {
        let initialized = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(mcp_post(local, token, Some(id), initialized).await.0, 202);
    }
    opened
}

async fn session_request(local: &Local, method: reqwest12::Method, token: &str, session: &str) -> (u16, String) {
    let response = local
        .client
        .request(method, format!("{}/mcp", local.base))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", session)
        .send()
        .await
        .expect("mcp answers");
    (response.status().as_u16(), response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn a_strangers_request_on_a_session_is_answered_as_for_a_session_that_does_not_exist() {
    let (local, _manifests) = system().await;
    let (status, id, body) = open_session(&local, "alice-token").await;
    assert_eq!(status, 200, "{body}");
    let alice = id.expect("a session id");
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, _, missing) = mcp_post(&local, "bob-token", Some("made-up-session"), list.clone()).await;
    assert_eq!(status, 404, "{missing}");
    let (status, _, strangers) = mcp_post(&local, "bob-token", Some(&alice), list.clone()).await;
    assert_eq!((status, strangers.as_str()), (404, missing.as_str()));
    for method in [reqwest12::Method::GET, reqwest12::Method::DELETE] {
        let answer = session_request(&local, method.clone(), "bob-token", "made-up-session").await;
        assert_eq!(session_request(&local, method.clone(), "bob-token", &alice).await, answer, "{method}");
    }
    // Bob's DELETE ended nothing: the session is still Alice's to use, and then to end.
    let (status, _, tools) = mcp_post(&local, "alice-token", Some(&alice), list.clone()).await;
    assert_eq!(status, 200, "{tools}");
    assert!(tools.contains("subagent_start"), "{tools}");
    assert_eq!(session_request(&local, reqwest12::Method::DELETE, "alice-token", &alice).await.0, 204);
    assert_eq!(mcp_post(&local, "alice-token", Some(&alice), list).await.0, 404);
}

#[tokio::test]
async fn sessions_past_a_users_limit_are_refused_with_429_naming_it_until_one_ends() {
    let (local, _manifests) = system().await;
    let limit = yuxi_operator::facade::http::limits::Limits::default().mcp_sessions_per_user;
    let mut open = Vec::new();
    for _ in 0..limit {
        let (status, id, body) = open_session(&local, "bob-token").await;
        assert_eq!(status, 200, "{body}");
        open.push(id.expect("a session id"));
    }
    let (status, id, body) = open_session(&local, "bob-token").await;
    assert_eq!((status, id), (429, None), "{body}");
    let refused: serde_json::Value = serde_json::from_str(&body).expect("the facade's error body");
    assert_eq!(refused["field"], "max_mcp_sessions_per_user", "{refused}");
    // A session id that is not text opens no session around the count.
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let unreadable = local
        .client
        .post(format!("{}/mcp", local.base))
        .bearer_auth("bob-token")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", reqwest12::header::HeaderValue::from_bytes(b"\xff").expect("a header value"))
        .json(&initialize)
        .send()
        .await
        .expect("mcp answers");
    assert_eq!((unreadable.status().as_u16(), unreadable.headers().contains_key("mcp-session-id")), (400, false));
    // Another user is not held back by Bob's sessions.
    assert_eq!(open_session(&local, "alice-token").await.0, 200);
    // An ended session gives its place back.
    assert_eq!(session_request(&local, reqwest12::Method::DELETE, "bob-token", &open[0]).await.0, 204);
    assert_eq!(open_session(&local, "bob-token").await.0, 200);
}
