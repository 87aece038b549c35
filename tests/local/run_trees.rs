//! Delegation without polling, end to end in the local mode, with each store: a parent told before its
//! next turn that a child it started has ended, `subagent_wait_any` answering the first child to end,
//! and one resumable event stream for a whole run tree (`?tree=true`), read across reconnects with
//! nothing lost or repeated.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::extra_agents::start_with;
use crate::support::local_mode::{Local, LocalStore, parent};

/// A subagent that answers after `delay_ms`.
fn helper(slug: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: SubAgentBackend\n  description: Helps.\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}

/// A main agent that may call the two helpers.
fn parent_agent(slug: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: ChatbotAgent\n  context: {{subagents: [quick-helper, slow-helper]}}\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}

const SCRIPTS: &[(&str, &str)] = &[
    ("quick-helper", "- content: done quickly\n"),
    ("slow-helper", "- delay_ms: 8000\n  content: done slowly\n"),
    // Starts the quick helper in the background, works on for two seconds (its child ends meanwhile),
    // then answers with what it last read.
    (
        "notified",
        "- tool_calls: [{name: subagent_start, arguments: {subagent_slug: quick-helper, description: help}}]\n- delay_ms: 2000\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- content: \"finished; told: {{last_user}}\"\n",
    ),
    // Starts the quick helper and awaits it: told by the await, never by a notice.
    (
        "awaiter",
        "- tool_calls: [{name: subagent_start, arguments: {subagent_slug: quick-helper, description: help}}]\n- tool_calls: [{name: subagent_await, arguments: {run_id: '{{call_0_0.run_id}}'}}]\n- delay_ms: 500\n  content: finished\n",
    ),
    // Starts both helpers, waits for the first to end, then for the other.
    (
        "fan-out",
        "- tool_calls:\n    - {name: subagent_start, arguments: {subagent_slug: slow-helper, description: slow part}}\n    - {name: subagent_start, arguments: {subagent_slug: quick-helper, description: quick part}}\n- tool_calls: [{name: subagent_wait_any, arguments: {run_ids: ['{{call_0_0.run_id}}', '{{call_0_1.run_id}}']}}]\n- tool_calls: [{name: subagent_await, arguments: {run_id: '{{call_0_0.run_id}}'}}]\n- content: \"first={{call_1_0.run.run_id}} pending={{call_1_0.pending.0}}\"\n",
    ),
];

async fn system(store: LocalStore) -> (Local, TempDir) {
    let agents: Vec<(&str, String)> = vec![
        ("quick-helper", helper("quick-helper")),
        ("slow-helper", helper("slow-helper")),
        ("notified", parent_agent("notified")),
        ("awaiter", parent_agent("awaiter")),
        ("fan-out", parent_agent("fan-out")),
    ];
    let agents: Vec<(&str, &str)> = agents.iter().map(|(slug, yaml)| (*slug, yaml.as_str())).collect();
    start_with(store, TempDir::new().expect("dir"), &agents, SCRIPTS).await
}

async fn get(local: &Local, path: &str, token: &str) -> (u16, Value) {
    let response = local.client.get(format!("{}{path}", local.base)).bearer_auth(token).send().await.expect("reaches");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// Starts a run of `agent` for Alice: `(run_id, thread_id)`.
async fn run(local: &Local, agent: &str) -> (String, String) {
    let response = local
        .client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth("alice-token")
        .json(&json!({"query": "go", "agent_slug": agent}))
        .send()
        .await
        .expect("reaches");
    let body: Value = response.json().await.expect("JSON");
    (body["run_id"].as_str().expect("run_id").into(), body["thread_id"].as_str().expect("thread_id").into())
}

/// The run's record once it has ended (at most 60 s).
async fn ended(local: &Local, run_id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, answer) = get(local, &format!("/api/agent/runs/{run_id}"), "alice-token").await;
        let record = answer["run"].clone();
        if ["completed", "failed", "cancelled", "interrupted"].contains(&record["status"].as_str().unwrap_or("")) {
            return record;
        }
        assert!(Instant::now() < deadline, "run {run_id} did not end: {record}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The notices among a thread's messages.
async fn notices(local: &Local, thread_id: &str) -> Vec<String> {
    let (_, thread) = get(local, &format!("/api/threads/{thread_id}/messages"), "alice-token").await;
    thread["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .filter(|c| c.starts_with("[notice]"))
        .map(String::from)
        .collect()
}

async fn a_parent_is_told_before_its_next_turn_that_a_child_it_started_has_ended(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    let (run_id, thread_id) = run(&local, "notified").await;
    assert_eq!(ended(&local, &run_id).await["status"], "completed", "{}", local.log());
    // The model read the notice before its next turn...
    let (_, result) = get(&local, &format!("/api/agent/runs/{run_id}/result"), "alice-token").await;
    let output = result["output"].as_str().or(result["result"]["output"].as_str()).unwrap_or_default().to_string();
    assert!(output.contains("(quick-helper) that you started has ended: completed"), "{result}");
    // ...and the conversation the person reads holds no message they did not say.
    assert_eq!(notices(&local, &thread_id).await, Vec::<String>::new());
    let (_, thread) = get(&local, &format!("/api/threads/{thread_id}/messages"), "alice-token").await;
    let roles: Vec<&str> =
        thread["messages"].as_array().expect("messages").iter().map(|m| m["role"].as_str().unwrap_or("")).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "tool", "assistant"], "{thread}");
    // A child whose end the parent read with subagent_await is not announced again.
    let (run_id, thread_id) = run(&local, "awaiter").await;
    assert_eq!(ended(&local, &run_id).await["status"], "completed", "{}", local.log());
    assert_eq!(notices(&local, &thread_id).await, Vec::<String>::new());
}

async fn wait_any_answers_the_first_child_to_end_and_refuses_a_strangers_run(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    // Run by the system: the first to end is the quick one, the slow one is pending.
    let (run_id, _) = run(&local, "fan-out").await;
    let record = ended(&local, &run_id).await;
    assert_eq!(record["status"], "completed", "{record}\n{}", local.log());
    let (_, result) = get(&local, &format!("/api/agent/runs/{run_id}/result"), "alice-token").await;
    let output = result["output"].as_str().or(result["result"]["output"].as_str()).unwrap_or_default().to_string();
    assert!(output.starts_with("first=") && output.contains(" pending="), "{result}");
    // Called over HTTP by a parent outside the system.
    let me = parent("wait-any-parent", "wait-any-thread");
    let me = json!({"agent": "fan-out", "run_id": me["run_id"], "thread_id": me["thread_id"]});
    let start = |slug: &str| json!({"parent": me, "subagent_slug": slug, "description": "help"});
    let (_, slow) = local.tool("subagent_start", "alice-token", start("slow-helper")).await;
    let (_, quick) = local.tool("subagent_start", "alice-token", start("quick-helper")).await;
    let (slow, quick) =
        (slow["run_id"].as_str().expect("slow").to_string(), quick["run_id"].as_str().expect("quick").to_string());
    let (status, now) = local
        .tool("subagent_wait_any", "alice-token", json!({"parent": me, "run_ids": [slow], "timeout_seconds": 0}))
        .await;
    assert_eq!((status, now["wait_timed_out"].as_bool(), now["run"].is_null()), (200, Some(true), true), "{now}");
    let (status, first) = local
        .tool(
            "subagent_wait_any",
            "alice-token",
            json!({"parent": me, "run_ids": [slow, quick], "timeout_seconds": 30}),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (first["run"]["run_id"].as_str(), first["run"]["result"].as_str()),
        (Some(quick.as_str()), Some("done quickly")),
        "{first}"
    );
    assert_eq!(first["pending"], json!([slow]), "{first}");
    // Bob's parent cannot wait for Alice's run, and learns nothing of it.
    let bob = json!({"agent": "fan-out", "run_id": "bob-parent", "thread_id": "bob-thread"});
    let (status, refused) = local
        .tool("subagent_wait_any", "bob-token", json!({"parent": bob, "run_ids": [quick], "timeout_seconds": 0}))
        .await;
    let (_, missing) = local
        .tool(
            "subagent_wait_any",
            "bob-token",
            json!({"parent": bob, "run_ids": ["no-such-run"], "timeout_seconds": 0}),
        )
        .await;
    assert_eq!((status, &refused), (404, &missing), "{refused}");
    let (status, bad) = local
        .tool("subagent_wait_any", "alice-token", json!({"parent": me, "run_ids": [], "timeout_seconds": 0}))
        .await;
    assert_eq!((status, bad["field"].as_str()), (422, Some("run_ids")), "{bad}");
}

/// Reads the event stream of `run_id` (with `tree`, of its tree) from `cursor` until `take` events came
/// or it ended: the events (`(id, data)`) and whether it ended.
async fn read_stream(
    local: &Local,
    run_id: &str,
    tree: bool,
    cursor: Option<&str>,
    take: usize,
) -> (Vec<(String, Value)>, bool) {
    let mut request = local
        .client
        .get(format!("{}/api/agent/runs/{run_id}/events?tree={tree}&event_format=flat", local.base))
        .bearer_auth("alice-token");
    if let Some(cursor) = cursor {
        request = request.header("Last-Event-ID", cursor);
    }
    let mut response = request.send().await.expect("reaches");
    assert_eq!(response.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut text, mut events) = (String::new(), Vec::new());
    while events.len() < take {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(remaining, response.chunk()).await.expect("events in time").expect("chunk");
        let Some(chunk) = chunk else { return (events, true) };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let id = block.lines().find_map(|l| l.strip_prefix("id:")).map(|i| i.trim().to_string());
            let data = block.lines().find_map(|l| l.strip_prefix("data:"));
            if let (Some(id), Some(data)) = (id, data) {
                events.push((id, serde_json::from_str(data.trim()).expect("JSON")));
            }
        }
    }
    (events, false)
}

async fn a_run_trees_stream_resumes_across_reconnects_losing_and_repeating_nothing(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    let (run_id, _) = run(&local, "fan-out").await;
    // Reconnect after every three events, from the last id read, until the stream ends.
    let mut seen: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..200 {
        let (page, done) = read_stream(&local, &run_id, true, cursor.as_deref(), 3).await;
        if let Some((id, _)) = page.last() {
            cursor = Some(id.clone());
        }
        seen.extend(page.into_iter().map(|(_, data)| data));
        if done {
            break;
        }
    }
    // What each run wrote, read from each run's own stream afterwards: the tree stream held exactly that.
    let runs: BTreeSet<String> = seen.iter().map(|e| e["run_id"].as_str().expect("run_id").to_string()).collect();
    assert_eq!(runs.len(), 3, "the parent and its two children: {runs:?}");
    for run in &runs {
        let (own, done) = read_stream(&local, run, false, None, usize::MAX).await;
        assert!(done);
        let streamed: Vec<&Value> = seen.iter().filter(|e| e["run_id"] == run.as_str()).collect();
        assert_eq!(streamed.len(), own.len(), "{run}: every event once");
        for (got, (_, want)) in streamed.iter().zip(&own) {
            assert_eq!((&got["event"], &got["payload"]), (&want["event"], &want["payload"]), "{run}");
            if *run == run_id {
                assert!(got["parent_run_id"].is_null(), "{got}");
            } else {
                assert_eq!(got["parent_run_id"], run_id.as_str(), "{got}");
                assert!(got["parent_tool_call_id"].as_str().is_some_and(|c| c.starts_with("call_0_")), "{got}");
            }
        }
    }
    let ends = seen.iter().filter(|e| e["event"] == "end").count();
    assert_eq!(ends, 3, "one end per run");
    // The same tree through subagent_events, page by page with its cursor.
    let me = json!({"agent": "fan-out", "run_id": "tree-parent", "thread_id": "tree-thread"});
    let (_, child) = local
        .tool(
            "subagent_start",
            "alice-token",
            json!({"parent": me, "subagent_slug": "quick-helper", "description": "x"}),
        )
        .await;
    let child = child["run_id"].as_str().expect("child").to_string();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut after, mut listed) = ("0-0".to_string(), Vec::new());
    while !listed.iter().any(|e: &Value| e["event"] == "end") {
        let body = json!({"parent": me, "run_id": child, "after_seq": after, "limit": 2, "tree": true});
        let (status, page) = local.tool("subagent_events", "alice-token", body).await;
        assert_eq!(status, 200, "{page}");
        listed.extend(page["events"].as_array().expect("events").iter().cloned());
        after = page["last_seq"].as_str().expect("cursor").to_string();
        assert!(after.starts_with("t1."), "{page}");
        assert!(Instant::now() < deadline, "{listed:?}");
    }
    let seqs: Vec<&str> = listed.iter().map(|e| e["seq"].as_str().expect("seq")).collect();
    let unique: BTreeSet<&&str> = seqs.iter().collect();
    assert_eq!(unique.len(), seqs.len(), "nothing repeated: {seqs:?}");
    let (status, bad) = local
        .tool(
            "subagent_events",
            "alice-token",
            json!({"parent": me, "run_id": child, "after_seq": "t1.!!", "tree": true}),
        )
        .await;
    assert_eq!((status, bad["field"].as_str()), (422, Some("after_seq")), "{bad}");
}

crate::with_each_store!(
    a_parent_is_told_before_its_next_turn_that_a_child_it_started_has_ended,
    wait_any_answers_the_first_child_to_end_and_refuses_a_strangers_run,
    a_run_trees_stream_resumes_across_reconnects_losing_and_repeating_nothing,
);
