//! The delegation tools over MCP (`/mcp`) in the local mode, driven by the official MCP Python SDK
//! (`tests/mcp/client.py`): the tools listed for the session's agent, `task` with progress, a run
//! started, awaited and cancelled, a stranger refused exactly as `/api/tools` refuses, `subagent_start`
//! as an MCP task, and a cancelled call cancelling its run.

use tempfile::TempDir;

use crate::support::extra_agents::start_with;
use crate::support::local_mode::{Local, LocalStore};
use crate::support::mcp_client::scenario;

fn subagent(slug: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: SubAgentBackend\n  description: Helps.\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}

const PARENT: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: mcp-parent}\nspec:\n  backend: ChatbotAgent\n  context: {subagents: [quick-helper, slow-writer, sleeper]}\n  share: {readScope: {accessLevel: Global}}\n";

const SCRIPTS: &[(&str, &str)] = &[
    ("quick-helper", "- content: done quickly\n"),
    (
        "slow-writer",
        "- delay_ms: 300\n  content: drafting\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- delay_ms: 300\n  content: revising\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- delay_ms: 300\n  content: written\n",
    ),
    ("sleeper", "- delay_ms: 30000\n  content: rested\n"),
];

async fn system() -> (Local, TempDir) {
    let agents = [
        ("quick-helper", subagent("quick-helper")),
        ("slow-writer", subagent("slow-writer")),
        ("sleeper", subagent("sleeper")),
        ("mcp-parent", PARENT.to_string()),
    ];
    let agents: Vec<(&str, &str)> = agents.iter().map(|(slug, yaml)| (*slug, yaml.as_str())).collect();
    start_with(LocalStore::InProcess, TempDir::new().expect("dir"), &agents, SCRIPTS).await
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
async fn subagent_start_answers_as_an_mcp_task_for_clients_of_the_tasks_extension() {
    let (local, _manifests) = system().await;
    scenario("tasks", &local.base, &[]).await;
}

#[tokio::test]
async fn a_task_call_cancelled_by_its_client_cancels_its_run() {
    let (local, _manifests) = system().await;
    scenario("cancel_call", &local.base, &[]).await;
}
