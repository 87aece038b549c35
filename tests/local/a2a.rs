//! Every agent over A2A (`/a2a/{namespace}/{slug}`) in the local mode, driven by the official A2A Python
//! SDK (`tests/a2a/client.py`): the card, a deep-research task streamed to its end with the report as an
//! artifact, a blocking send, a task followed again and cancelled, an approval given in the task, a
//! stranger answered as for an unknown task, and tasks read across a restart with Redis.

use tempfile::TempDir;

use crate::support::extra_agents::{main_agent, start_with};
use crate::support::local_mode::{Local, LocalStore};
use crate::support::mcp_client::{Sdk, sdk_scenario};

fn subagent(slug: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: SubAgentBackend\n  description: Helps.\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}

/// alice's own subagent, which nobody else may see, and a parent everyone sees that names it.
const ALICE_SUB: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: alice-sub}\nspec:\n  backend: SubAgentBackend\n  description: SECRET plans of alice.\n  owner: alice\n";
const PARENT: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: a2a-parent}\nspec:\n  backend: ChatbotAgent\n  context: {subagents: [alice-sub, quick-helper]}\n  share: {readScope: {accessLevel: Global}}\n";

/// alice's own agent, which nobody else may see.
const PRIVATE: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: alice-notes}\nspec:\n  backend: ChatbotAgent\n  owner: alice\n";

const SCRIPTS: &[(&str, &str)] = &[
    ("quick-helper", "- content: done quickly\n"),
    ("a2a-sleeper", "- delay_ms: 30000\n  content: rested\n"),
    ("a2a-slow", "- delay_ms: 4000\n  content: slept well\n"),
    // Writes a note (which waits for a person), then says it did.
    (
        "a2a-writer",
        "- tool_calls: [{name: write_file, arguments: {path: /home/gem/user-data/outputs/note.txt, content: the note}}]\n- content: written\n",
    ),
];

async fn system(store: LocalStore, data: TempDir) -> (Local, TempDir) {
    let agents = [
        ("quick-helper", subagent("quick-helper")),
        ("a2a-sleeper", main_agent("a2a-sleeper")),
        ("a2a-slow", main_agent("a2a-slow")),
        ("a2a-writer", main_agent("a2a-writer")),
        ("alice-notes", PRIVATE.to_string()),
        ("alice-sub", ALICE_SUB.to_string()),
        ("a2a-parent", PARENT.to_string()),
    ];
    let agents: Vec<(&str, &str)> = agents.iter().map(|(slug, yaml)| (*slug, yaml.as_str())).collect();
    start_with(store, data, &agents, SCRIPTS).await
}

async fn a2a(scenario: &str, local: &Local, env: &[(&str, &str)]) -> String {
    sdk_scenario(Sdk::A2a, scenario, &local.base, env).await
}

#[tokio::test]
async fn the_sdk_streams_a_deep_research_task_to_its_end_with_the_report_as_an_artifact() {
    let (local, _manifests) = system(LocalStore::InProcess, TempDir::new().expect("dir")).await;
    a2a("research", &local, &[]).await;
}

#[tokio::test]
async fn a_send_that_does_not_stream_answers_the_ended_task_and_an_ended_task_takes_no_input() {
    let (local, _manifests) = system(LocalStore::InProcess, TempDir::new().expect("dir")).await;
    a2a("blocking", &local, &[]).await;
}

#[tokio::test]
async fn a_task_is_followed_again_and_cancelled_and_push_notifications_are_refused() {
    let (local, _manifests) = system(LocalStore::InProcess, TempDir::new().expect("dir")).await;
    a2a("cancel", &local, &[]).await;
}

#[tokio::test]
async fn a_task_waiting_for_approval_is_input_required_and_goes_on_when_approved_in_the_task() {
    let (local, _manifests) = system(LocalStore::InProcess, TempDir::new().expect("dir")).await;
    a2a("approval", &local, &[]).await;
}

#[tokio::test]
async fn a_strangers_task_answers_as_an_unknown_one_and_an_invisible_agent_as_a_missing_one() {
    let (local, _manifests) = system(LocalStore::InProcess, TempDir::new().expect("dir")).await;
    let printed = a2a("research", &local, &[]).await;
    let ids: serde_json::Value = serde_json::from_str(&printed).expect("the task");
    let (task, context) = (ids["task_id"].as_str().expect("id"), ids["context_id"].as_str().expect("context"));
    a2a("stranger", &local, &[("TASK_ID", task), ("CONTEXT_ID", context)]).await;
}

#[tokio::test]
async fn tasks_kept_in_redis_read_back_after_a_restart_and_a_stopped_one_ends_failed() {
    let (local, _manifests) = system(LocalStore::Redis, TempDir::new().expect("dir")).await;
    let printed = a2a("start", &local, &[]).await;
    let ids: serde_json::Value = serde_json::from_str(&printed).expect("the tasks");
    let data = local.stop();
    let (local, _manifests) = system(LocalStore::Redis, data).await;
    let (done, slow) = (ids["done"].as_str().expect("id"), ids["slow"].as_str().expect("id"));
    a2a("resubscribe", &local, &[("DONE", done), ("SLOW", slow)]).await;
}
