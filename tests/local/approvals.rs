//! Human approval of tool calls, end to end in the local mode with each store: a main agent's run
//! pauses before `write_file` (an `interrupt` event, status `waiting`, its thread held, no runner left),
//! and a person's `resume` decides each call: approved, edited or rejected; decisions that do not fit
//! are refused (404, 409, 422), a cancel ends a waiting run, and a subagent never waits.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::extra_agents::start_with;
use crate::support::local_mode::{Local, LocalStore};

const CAREFUL: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: careful}\nspec:\n  backend: ChatbotAgent\n  context: {subagents: [research-explorer]}\n  share: {readScope: {accessLevel: Global}}\n";

const DELEGATOR: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: delegator}\nspec:\n  backend: ChatbotAgent\n  context: {subagents: [research-explorer]}\n  share: {readScope: {accessLevel: Global}}\n";

const SCRIPTS: &[(&str, &str)] = &[
    // Writes a file (which waits for a person) beside a listing (which does not), then says what the
    // write answered.
    (
        "careful",
        "- tool_calls:\n    - {name: write_file, arguments: {path: /home/gem/user-data/outputs/note.txt, content: model text}}\n    - {name: ls, arguments: {path: /home/gem/user-data/outputs}}\n- content: \"write: {{call_0_0}}\"\n",
    ),
    // Delegates; its subagent never waits for anyone.
    (
        "delegator",
        "- tool_calls: [{name: task, arguments: {subagent_slug: research-explorer, description: read}}]\n- content: delegated\n",
    ),
];

async fn system(store: LocalStore) -> (Local, TempDir) {
    start_with(store, TempDir::new().expect("dir"), &[("careful", CAREFUL), ("delegator", DELEGATOR)], SCRIPTS).await
}

async fn post(local: &Local, token: &str, body: Value) -> (u16, Value) {
    let response = local
        .client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("reaches");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

async fn run_of(local: &Local, run_id: &str) -> Value {
    let response = local
        .client
        .get(format!("{}/api/agent/runs/{run_id}", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    response.json::<Value>().await.expect("JSON")["run"].clone()
}

/// The run once its status is one of `statuses` (at most 60 s).
async fn until(local: &Local, run_id: &str, statuses: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = run_of(local, run_id).await;
        if statuses.contains(&run["status"].as_str().unwrap_or_default()) {
            return run;
        }
        assert!(Instant::now() < deadline, "run {run_id} is {run}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts `careful` for Alice and waits until it waits: `(run_id, thread_id, the waiting run)`.
async fn paused(local: &Local) -> (String, String, Value) {
    let (status, started) = post(local, "alice-token", json!({"query": "write it", "agent_slug": "careful"})).await;
    assert_eq!(status, 200, "{started}");
    let run_id = started["run_id"].as_str().expect("run_id").to_string();
    let run = until(local, &run_id, &["waiting"]).await;
    (run_id, started["thread_id"].as_str().expect("thread").to_string(), run)
}

async fn events(local: &Local, run_id: &str) -> Vec<Value> {
    let text = local
        .client
        .get(format!("{}/api/agent/runs/{run_id}/events?event_format=flat", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches")
        .text()
        .await
        .expect("events");
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).expect("JSON"))
        .collect()
}

async fn result(local: &Local, run_id: &str) -> Value {
    let response = local
        .client
        .get(format!("{}/api/agent/runs/{run_id}/result", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    response.json().await.expect("JSON")
}

fn note(local: &Local) -> Option<String> {
    let threads = local.data.path().join("users/alice/threads");
    std::fs::read_dir(threads)
        .ok()?
        .filter_map(Result::ok)
        .find_map(|t| std::fs::read_to_string(t.path().join("outputs/note.txt")).ok())
}

async fn a_run_waits_for_approval_then_runs_the_approved_call(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    let (run_id, thread_id, run) = paused(&local).await;
    let requests = run["waiting"]["action_requests"].as_array().expect("the calls waiting").clone();
    assert_eq!(requests.len(), 1, "only write_file waits: {run}");
    assert_eq!(
        (requests[0]["name"].as_str(), requests[0]["arguments"]["content"].as_str()),
        (Some("write_file"), Some("model text"))
    );
    assert_eq!(run["waiting"]["reason"], "ApprovalRequired");
    let (status, busy) =
        post(&local, "alice-token", json!({"query": "again", "agent_slug": "careful", "thread_id": thread_id})).await;
    assert_eq!((status, busy["code"].as_str()), (409, Some("run_busy")), "the thread stays held: {busy}");
    assert_eq!(note(&local), None, "nothing written before the decision");
    let call = requests[0]["tool_call_id"].as_str().expect("id");
    let (status, resumed) = post(
        &local,
        "alice-token",
        json!({"resume": {"run_id": run_id, "decisions": [{"tool_call_id": call, "decision": "approve"}]}}),
    )
    .await;
    assert_eq!((status, resumed["run_id"].as_str()), (200, Some(run_id.as_str())), "{resumed}");
    let ended = until(&local, &run_id, &["completed", "failed", "cancelled", "interrupted"]).await;
    assert_eq!(ended["status"], "completed", "{ended}\n{}", local.log());
    assert_eq!(note(&local).as_deref(), Some("model text"));
    let events = events(&local, &run_id).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap_or_default()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "interrupt").count(), 1, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "end").count(), 1, "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"end"));
    let interrupt = events.iter().find(|e| e["event"] == "interrupt").expect("interrupt");
    assert_eq!(interrupt["payload"]["action_requests"][0]["tool_call_id"], call);
    assert!(result(&local, &run_id).await["output"].as_str().unwrap_or_default().starts_with("write: "));
}

async fn an_edited_call_runs_the_persons_arguments_and_a_rejected_one_answers_the_model(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    let (run_id, _, run) = paused(&local).await;
    let call = run["waiting"]["action_requests"][0]["tool_call_id"].as_str().expect("id").to_string();
    let edit = json!({"tool_call_id": call, "decision": "edit",
                      "arguments": {"path": "/home/gem/user-data/outputs/note.txt", "content": "person text"}});
    let (status, _) = post(&local, "alice-token", json!({"resume": {"run_id": run_id, "decisions": [edit]}})).await;
    assert_eq!(status, 200);
    assert_eq!(until(&local, &run_id, &["completed", "failed"]).await["status"], "completed");
    assert_eq!(note(&local).as_deref(), Some("person text"));
    let edited = events(&local, &run_id).await.into_iter().find(|e| e["payload"]["edited_by_user"] == true);
    assert!(edited.is_some(), "the call's event says it was edited");

    let (local, _manifests) = system(store).await;
    let (run_id, _, run) = paused(&local).await;
    let call = run["waiting"]["action_requests"][0]["tool_call_id"].as_str().expect("id").to_string();
    let reject = json!({"tool_call_id": call, "decision": "reject", "message": "not there"});
    let (status, _) = post(&local, "alice-token", json!({"resume": {"run_id": run_id, "decisions": [reject]}})).await;
    assert_eq!(status, 200);
    assert_eq!(until(&local, &run_id, &["completed", "failed"]).await["status"], "completed");
    assert_eq!(note(&local), None, "a rejected call does not run");
    let output = result(&local, &run_id).await["output"].as_str().unwrap_or_default().to_string();
    assert_eq!(output, "write: The user rejected this call of write_file: not there");
}

async fn decisions_that_do_not_fit_are_refused_and_a_cancel_ends_a_waiting_run(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    let (run_id, _, run) = paused(&local).await;
    let call = run["waiting"]["action_requests"][0]["tool_call_id"].as_str().expect("id").to_string();
    let resume = |decisions: Value| json!({"resume": {"run_id": run_id, "decisions": decisions}});
    // Bob cannot decide on Alice's run, and learns nothing of it.
    let (status, bob) = post(&local, "bob-token", resume(json!([{"tool_call_id": call, "decision": "approve"}]))).await;
    let missing = post(&local, "bob-token", json!({"resume": {"run_id": "no-such-run", "decisions": []}})).await.1;
    assert_eq!(status, 404, "{bob}");
    assert_eq!(
        bob["message"].as_str().map(|m| m.replace(&run_id, "x")),
        missing["message"].as_str().map(|m| m.replace("no-such-run", "x"))
    );
    let (status, other) =
        post(&local, "alice-token", resume(json!([{"tool_call_id": "call_9_9", "decision": "approve"}]))).await;
    assert_eq!(status, 409, "a call that is not waiting: {other}");
    // A field that would start the run otherwise is refused, not ignored.
    let mut trusting = resume(json!([{"tool_call_id": call, "decision": "approve"}]));
    trusting["tool_approval_mode"] = json!("always_trust");
    let (status, refused) = post(&local, "alice-token", trusting).await;
    assert_eq!((status, refused["field"].as_str()), (422, Some("tool_approval_mode")), "{refused}");
    let (status, none) = post(&local, "alice-token", resume(json!([]))).await;
    assert_eq!((status, none["field"].as_str()), (422, Some("resume.decisions")), "{none}");
    let (status, bare) = post(&local, "alice-token", resume(json!([{"tool_call_id": call, "decision": "edit"}]))).await;
    assert_eq!((status, bare["field"].as_str()), (422, Some("resume.decisions[0].arguments")), "{bare}");
    assert_eq!(run_of(&local, &run_id).await["status"], "waiting", "nothing changed");
    // A cancel ends it at once, with one end.
    let cancelled = local
        .client
        .post(format!("{}/api/agent/runs/{run_id}/cancel", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    assert_eq!(cancelled.status(), 200);
    assert_eq!(until(&local, &run_id, &["cancelled"]).await["status"], "cancelled");
    let ends = events(&local, &run_id).await.into_iter().filter(|e| e["event"] == "end").count();
    assert_eq!(ends, 1);
    let (status, late) =
        post(&local, "alice-token", resume(json!([{"tool_call_id": call, "decision": "approve"}]))).await;
    assert_eq!(status, 409, "a run that is not waiting: {late}");
    assert_eq!(note(&local), None);
}

async fn a_cancelled_waiting_run_keeps_its_conversation(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    let (run_id, thread_id, _) = paused(&local).await;
    let cancelled = local
        .client
        .post(format!("{}/api/agent/runs/{run_id}/cancel", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    assert_eq!(cancelled.status(), 200);
    let ended = until(&local, &run_id, &["cancelled"]).await;
    assert!(ended.get("waiting").is_none(), "an ended run waits for nothing: {ended}");
    let get = |path: String| {
        let client = local.client.clone();
        let url = format!("{}{path}", local.base);
        async move { client.get(url).bearer_auth("alice-token").send().await.expect("reaches").json::<Value>().await }
    };
    let messages = get(format!("/api/threads/{thread_id}/messages")).await.expect("JSON");
    let roles: Vec<&str> =
        messages["messages"].as_array().expect("messages").iter().filter_map(|m| m["role"].as_str()).collect();
    // The question, the turn whose calls waited, and an answer for each call, which never ran.
    assert_eq!(roles, ["user", "assistant", "tool", "tool"], "{messages}");
    assert_eq!(messages["messages"][0]["content"], "write it");
    assert_eq!(messages["messages"][1]["tool_calls"][0]["function"]["name"], "write_file");
    assert!(
        messages["messages"][2]["content"].as_str().unwrap_or_default().contains("cancelled"),
        "the waiting call is answered as not run: {messages}"
    );
    let history = get(format!("/api/chat/thread/{thread_id}/history")).await.expect("JSON");
    assert_eq!(history["history"][0]["content"], "write it", "{history}");
    assert_eq!(note(&local), None, "the waiting call never ran");
}

async fn a_subagent_never_waits(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    let (_, started) = post(&local, "alice-token", json!({"query": "go", "agent_slug": "delegator"})).await;
    let run_id = started["run_id"].as_str().expect("run_id").to_string();
    let ended = until(&local, &run_id, &["completed", "failed", "waiting"]).await;
    assert_eq!(ended["status"], "completed", "{ended}");
}

crate::with_each_store!(
    a_run_waits_for_approval_then_runs_the_approved_call,
    an_edited_call_runs_the_persons_arguments_and_a_rejected_one_answers_the_model,
    decisions_that_do_not_fit_are_refused_and_a_cancel_ends_a_waiting_run,
    a_cancelled_waiting_run_keeps_its_conversation,
    a_subagent_never_waits,
);

#[tokio::test]
async fn a_waiting_run_leaves_no_runner_process() {
    use crate::support::local_mode::{command_over, free_port, launch};
    let manifests = TempDir::new().expect("dir");
    for file in crate::support::repository::yaml_files("examples") {
        std::fs::copy(&file, manifests.path().join(file.file_name().expect("name"))).expect("copy");
    }
    std::fs::write(manifests.path().join("careful.yaml"), CAREFUL).expect("write");
    let scripts = TempDir::new().expect("dir");
    std::fs::write(scripts.path().join("careful.yaml"), SCRIPTS[0].1).expect("write");
    let data = TempDir::new().expect("dir");
    let port = free_port();
    let mut command = command_over(manifests.path(), LocalStore::InProcess, port, data.path());
    command.args(["--runner-processes", "--default-model", "scripted/auto", "--scripts-dir"]).arg(scripts.path());
    let local = launch(command, port, data, scripts).await;
    let (run_id, _, _) = paused(&local).await;
    // The runner subprocess of the run has exited: it is no child of the local mode any more.
    let deadline = Instant::now() + Duration::from_secs(10);
    let runners = || {
        std::fs::read_dir("/proc")
            .expect("proc")
            .filter_map(Result::ok)
            .filter_map(|p| std::fs::read(p.path().join("cmdline")).ok())
            .filter(|c| String::from_utf8_lossy(c).contains(&format!("runs/{run_id}/run.yaml")))
            .count()
    };
    while runners() > 0 {
        assert!(Instant::now() < deadline, "a runner of the waiting run still runs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let call = run_of(&local, &run_id).await["waiting"]["action_requests"][0]["tool_call_id"]
        .as_str()
        .expect("id")
        .to_string();
    let (status, _) = post(
        &local,
        "alice-token",
        json!({"resume": {"run_id": run_id, "decisions": [{"tool_call_id": call, "decision": "approve"}]}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(until(&local, &run_id, &["completed", "failed"]).await["status"], "completed", "{}", local.log());
}
