//! Remote A2A subagents (`spec.remote.a2a`) in the local mode, delegating to a remote agent made with
//! the official A2A Python SDK (`tests/a2a/remote_agent.py`): a parent's `task` returns the remote
//! agent's answer with the parent's trace and run carried along; cancelling the parent cancels the
//! remote task (seen by the remote agent); a remote task that asks for input is answered by delegating
//! again in the same child thread; one that fails fails the child; a wrong credential fails it naming
//! the card; and the webhook's rules refuse a remote on an ordinary agent.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::extra_agents::start_with_env;
use crate::support::local_mode::{Local, LocalStore, Process, free_port};
use crate::support::mcp_client::Sdk;
use crate::support::repository::root;

/// The remote agent: its process, its port and the file it records each request in.
struct RemoteAgent {
    _child: Process,
    port: u16,
    record: PathBuf,
    _dir: TempDir,
}

impl RemoteAgent {
    async fn start() -> RemoteAgent {
        Self::start_naming(None).await
    }

    /// The remote agent, its card naming `interface` in place of its own URL when given.
    async fn start_naming(interface: Option<&str>) -> RemoteAgent {
        let dir = TempDir::new().expect("dir");
        let record = dir.path().join("record.jsonl");
        let port = free_port();
        let child = std::process::Command::new(Sdk::A2a.python())
            .arg(root().join("tests/a2a/remote_agent.py"))
            .arg(port.to_string())
            .arg(&record)
            .args(interface)
            .spawn()
            .expect("the remote agent starts");
        let agent = RemoteAgent { _child: Process(child), port, record, _dir: dir };
        let card = format!("http://127.0.0.1:{port}/.well-known/agent-card.json");
        let client = reqwest12::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answer = client.get(&card).bearer_auth("remote-secret").send().await;
            if answer.is_ok_and(|a| a.status().is_success()) {
                return agent;
            }
            assert!(Instant::now() < deadline, "the remote agent did not start");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The requests it executed or cancelled so far.
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// The records once `done` holds of them (at most 60 s).
    async fn until(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let records = self.records();
            if done(&records) {
                return records;
            }
            assert!(Instant::now() < deadline, "the remote agent saw {records:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn remote_subagent(slug: &str, port: u16, token_env: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: SubAgentBackend\n  isSubagent: true\n  description: Answers remotely.\n  share: {{readScope: {{accessLevel: Global}}}}\n  remote:\n    a2a:\n      cardUrl: http://127.0.0.1:{port}/.well-known/agent-card.json\n      headers: [{{name: Authorization, env: {token_env}, prefix: \"Bearer \"}}]\n      timeoutSeconds: 120\n      cardTtlSeconds: 0\n"
    )
}

const PARENT: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: remote-parent}\nspec:\n  backend: ChatbotAgent\n  context: {subagents: [remote-helper, remote-wrong-key]}\n  share: {readScope: {accessLevel: Global}}\n";

const SCRIPTS: &[(&str, &str)] = &[(
    "remote-parent",
    "- tool_calls: [{name: task, arguments: {subagent_slug: remote-helper, description: \"{{input}}\"}}]\n- content: \"parent got: {{call_0_0}}\"\n",
)];

async fn system(remote: &RemoteAgent) -> (Local, TempDir) {
    let agents = [
        ("remote-parent", PARENT.to_string()),
        ("remote-helper", remote_subagent("remote-helper", remote.port, "REMOTE_TOKEN")),
        ("remote-wrong-key", remote_subagent("remote-wrong-key", remote.port, "WRONG_TOKEN")),
    ];
    let agents: Vec<(&str, &str)> = agents.iter().map(|(slug, yaml)| (*slug, yaml.as_str())).collect();
    // Traces are on (sent nowhere that answers), so each run has a traceparent to pass on.
    let env = [
        ("REMOTE_TOKEN", "remote-secret"),
        ("WRONG_TOKEN", "not-the-secret"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
    ];
    start_with_env(LocalStore::InProcess, TempDir::new().expect("dir"), &agents, SCRIPTS, &env).await
}

async fn delegate(local: &Local, subagent: &str, description: &str, parent: &str, thread: Option<&str>) -> Value {
    let mut body = json!({
        "subagent_slug": subagent,
        "description": description,
        "parent": {"agent": "remote-parent", "run_id": parent, "thread_id": parent},
    });
    if let Some(thread) = thread {
        body["thread_id"] = json!(thread);
    }
    let (status, answer) = local.tool("task", "alice-token", body).await;
    assert_eq!(status, 200, "{answer}\n{}", local.log());
    answer
}

#[tokio::test]
async fn a_parents_task_to_a_remote_subagent_returns_its_answer_with_the_parents_trace_and_run() {
    let remote = RemoteAgent::start().await;
    let (local, _manifests) = system(&remote).await;
    let run = local.start_run("alice-token", &[], json!({"query": "what is up", "agent_slug": "remote-parent"})).await;
    let result = local.result_of(&run, "alice-token").await;
    assert_eq!(result["status"], "completed", "{result}\n{}", local.log());
    let output = result["output"].as_str().expect("output");
    assert!(output.contains("remote answer to: what is up"), "{output}");
    let records = remote.records();
    let executed = records.iter().find(|r| r["kind"] == "execute").expect("the remote agent ran the task");
    assert_eq!(executed["metadata"]["yuxi.dev/parent"]["run_id"], run.as_str(), "{executed}");
    let traceparent = executed["traceparent"].as_str().expect("a traceparent came along");
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert!(parts.len() == 4 && parts[1].len() == 32 && parts[2].len() == 16, "{traceparent}");
    assert!(executed["context_id"].as_str().expect("context").contains("_sub_remote-helper"), "{executed}");
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_remote_task_at_the_remote_agent() {
    let remote = RemoteAgent::start().await;
    let (local, _manifests) = system(&remote).await;
    let run = local.start_run("alice-token", &[], json!({"query": "slow work", "agent_slug": "remote-parent"})).await;
    let records = remote.until(|r| r.iter().any(|r| r["kind"] == "execute")).await;
    let task = records[0]["task_id"].clone();
    let cancelled = local
        .client
        .post(format!("{}/api/agent/runs/{run}/cancel", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancelled.status(), 200);
    let records = remote.until(|r| r.iter().any(|r| r["kind"] == "cancel")).await;
    let cancel = records.iter().find(|r| r["kind"] == "cancel").expect("a cancel");
    assert_eq!(cancel["task_id"], task, "the remote task of the run was cancelled: {records:?}");
}

#[tokio::test]
async fn a_remote_question_is_answered_in_the_same_child_thread_and_a_remote_failure_fails_the_child() {
    let remote = RemoteAgent::start().await;
    let (local, _manifests) = system(&remote).await;
    let asked = delegate(&local, "remote-helper", "ask about the year", "outside-1", None).await;
    assert_eq!(asked["status"], "completed", "{asked}");
    let question = asked["result"].as_str().expect("the question");
    assert!(question.contains("Which year do you mean?"), "{asked}");
    let thread = asked["thread_id"].as_str().expect("the child thread");
    let answered = delegate(&local, "remote-helper", "1999", "outside-1", Some(thread)).await;
    assert_eq!(answered["status"], "completed", "{answered}");
    assert!(answered["result"].as_str().expect("answer").contains("thanks, you said: 1999"), "{answered}");
    let records = remote.records();
    let tasks: Vec<&Value> = records.iter().filter(|r| r["kind"] == "execute").map(|r| &r["task_id"]).collect();
    assert_eq!(tasks.len(), 2, "{records:?}");
    assert_eq!(tasks[0], tasks[1], "the answer went to the task that asked");

    let failed = delegate(&local, "remote-helper", "fail please", "outside-2", None).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["content"]
            .as_str()
            .expect("content")
            .contains("the remote task failed: the remote agent could not do it"),
        "{failed}"
    );
}

#[tokio::test]
async fn a_remote_agent_refusing_the_credential_fails_the_child_naming_the_card() {
    let remote = RemoteAgent::start().await;
    let (local, _manifests) = system(&remote).await;
    let refused = delegate(&local, "remote-wrong-key", "hello", "outside-3", None).await;
    assert_eq!(refused["status"], "failed", "{refused}");
    assert!(refused.to_string().contains("answered HTTP 401"), "{refused}");
    assert!(remote.records().is_empty(), "nothing ran at the remote agent");
}

#[tokio::test]
async fn a_card_naming_an_interface_of_another_origin_gets_no_request_and_fails_the_child() {
    // The card names the interface of a second remote agent: the credential would go there.
    let elsewhere = RemoteAgent::start().await;
    let interface = format!("http://127.0.0.1:{}/", elsewhere.port);
    let remote = RemoteAgent::start_naming(Some(&interface)).await;
    let (local, _manifests) = system(&remote).await;
    let refused = delegate(&local, "remote-helper", "hello", "outside-4", None).await;
    assert_eq!(refused["status"], "failed", "{refused}");
    assert!(refused.to_string().contains("not a URL of the card's own origin"), "{refused}");
    assert!(elsewhere.records().is_empty() && remote.records().is_empty(), "no request was sent anywhere");
}
