//! Token budgets of run trees and daily quotas, end to end in the local mode with each store: a tree
//! stopped at its budget with the reason on each of its runs (a child that spends it, a parent whose
//! overspending stops its running child), the tree's usage on its root, and starts, queued requests and
//! resumes refused once a user's daily quota is used up.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::extra_agents::start_with;
use crate::support::local_mode::{Local, LocalStore, command_with_users, free_port, launch};
use crate::support::repository::yaml_files;

fn subagent(slug: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: SubAgentBackend\n  description: Spends tokens.\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}

fn main_agent(slug: &str, budget: Option<i64>) -> String {
    let budget = budget.map(|max| format!("  budget: {{maxTokens: {max}}}\n")).unwrap_or_default();
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: ChatbotAgent\n  context: {{subagents: [burner, sleeper]}}\n  share: {{readScope: {{accessLevel: Global}}}}\n{budget}"
    )
}

const SCRIPTS: &[(&str, &str)] = &[
    // 40 tokens a turn, three turns calling a tool, then the last again without one (a script repeats
    // its last turn without its tool calls): 160 tokens, past a budget of 100 by its own turns alone,
    // whenever its parent's turns are counted.
    (
        "burner",
        "- usage: {prompt_tokens: 30, completion_tokens: 10}\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- usage: {prompt_tokens: 30, completion_tokens: 10}\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- usage: {prompt_tokens: 30, completion_tokens: 10}\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n",
    ),
    // Sleeps, spending little.
    ("sleeper", "- delay_ms: 15000\n  usage: {prompt_tokens: 1, completion_tokens: 1}\n  content: rested\n"),
    // Delegates to the burner and waits for it.
    (
        "spender",
        "- usage: {prompt_tokens: 5, completion_tokens: 5}\n  tool_calls: [{name: subagent_start, arguments: {subagent_slug: burner, description: burn}}]\n- usage: {prompt_tokens: 5, completion_tokens: 5}\n  tool_calls: [{name: subagent_await, arguments: {run_id: '{{call_0_0.run_id}}'}}]\n- usage: {prompt_tokens: 5, completion_tokens: 5}\n  content: done\n",
    ),
    // Starts the sleeper, then spends past the budget itself.
    (
        "overspender",
        "- usage: {prompt_tokens: 5, completion_tokens: 5}\n  tool_calls: [{name: subagent_start, arguments: {subagent_slug: sleeper, description: rest}}]\n- delay_ms: 500\n  usage: {prompt_tokens: 150, completion_tokens: 50}\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- content: never reached\n",
    ),
];

fn agents() -> Vec<(&'static str, String)> {
    vec![
        ("burner", subagent("burner")),
        ("sleeper", subagent("sleeper")),
        ("spender", main_agent("spender", Some(100))),
        ("overspender", main_agent("overspender", None)),
    ]
}

async fn system(store: LocalStore) -> (Local, TempDir) {
    let agents = agents();
    let agents: Vec<(&str, &str)> = agents.iter().map(|(slug, yaml)| (*slug, yaml.as_str())).collect();
    start_with(store, TempDir::new().expect("dir"), &agents, SCRIPTS).await
}

async fn get(local: &Local, path: &str, token: &str) -> (u16, Value) {
    let response = local.client.get(format!("{}{path}", local.base)).bearer_auth(token).send().await.expect("reaches");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

async fn start(local: &Local, agent: &str, budget: Option<i64>) -> (u16, Value) {
    let mut body = json!({"query": "go", "agent_slug": agent});
    if let Some(max) = budget {
        body["budget"] = json!({"max_tokens": max});
    }
    let response = local
        .client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth("alice-token")
        .json(&body)
        .send()
        .await
        .expect("reaches");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// The run's result once it has ended (at most 60 s).
async fn result(local: &Local, run_id: &str) -> Value {
    result_for(local, run_id, "alice-token").await
}

/// [`result`], read as the user of `token`.
async fn result_for(local: &Local, run_id: &str, token: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, answer) = get(local, &format!("/api/agent/runs/{run_id}/result"), token).await;
        if status == 200 {
            return answer;
        }
        assert!(Instant::now() < deadline, "run {run_id} did not end: {answer}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The children the run's events name.
async fn children(local: &Local, run_id: &str) -> Vec<String> {
    let response = local
        .client
        .get(format!("{}/api/agent/runs/{run_id}/events?event_format=flat", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    let text = response.text().await.expect("events");
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|e| e["event"] == "custom" && e["payload"]["type"] == "subagent_run")
        .filter_map(|e| e["payload"]["run_id"].as_str().map(String::from))
        .collect()
}

async fn a_tree_stops_at_its_budget_with_the_reason_on_each_run(store: LocalStore) {
    let (local, _manifests) = system(store).await;
    // The agent's own budget (100 tokens): the burner spends it, then its parent stops at its next turn.
    let (status, started) = start(&local, "spender", None).await;
    assert_eq!(status, 200, "{started}");
    let root = started["run_id"].as_str().expect("run_id").to_string();
    let parent = result(&local, &root).await;
    let kids = children(&local, &root).await;
    assert_eq!(kids.len(), 1, "{kids:?}");
    let child = result(&local, &kids[0]).await;
    for (run, ended) in [("parent", &parent), ("child", &child)] {
        assert_eq!(
            (ended["status"].as_str(), ended["reason"].as_str()),
            (Some("failed"), Some("BudgetExceeded")),
            "{run}: {ended}"
        );
        assert!(ended["error"].as_str().unwrap_or_default().contains("of its budget of 100"), "{run}: {ended}");
    }
    assert_eq!(parent["max_tokens"], 100);
    let tree = parent["tree_token_usage"]["total_tokens"].as_i64().expect("the tree's usage on its root");
    let own = parent["token_usage"]["total_tokens"].as_i64().expect("own usage");
    let childs = child["token_usage"]["total_tokens"].as_i64().expect("child usage");
    assert_eq!(tree, own + childs, "{parent}\n{child}");
    // At most one burner turn (40) past the budget, and the parent's await turn (10), which under load
    // can be counted after the burner's turns: 10 + 3 × 40 + 10 = 140 at the most.
    assert!((100..=140).contains(&tree), "stopped by the call that reached the budget: {tree}");
    assert!(child.get("tree_token_usage").is_none(), "only the root reports the tree: {child}");

    // A parent that spends past its budget stops, and its running child with it, for the same reason.
    let (_, started) = start(&local, "overspender", Some(100)).await;
    let root = started["run_id"].as_str().expect("run_id").to_string();
    let parent = result(&local, &root).await;
    assert_eq!(parent["reason"], "BudgetExceeded", "{parent}");
    let kids = children(&local, &root).await;
    let child = result(&local, &kids[0]).await;
    assert_eq!(
        (child["status"].as_str(), child["reason"].as_str()),
        (Some("failed"), Some("BudgetExceeded")),
        "{child}"
    );

    // A parent outside the system that acts for the spender starts a tree bounded by the spender's
    // budget: the budget cannot be escaped by delegating from outside.
    let outside = json!({"agent": "spender", "run_id": "outside-parent-1", "thread_id": "outside-thread-1"});
    let (status, started) = local
        .tool(
            "subagent_start",
            "alice-token",
            json!({"subagent_slug": "burner", "description": "burn", "parent": outside}),
        )
        .await;
    assert_eq!(status, 200, "{started}");
    let child = result(&local, started["run_id"].as_str().expect("run_id")).await;
    assert_eq!(child["max_tokens"], 100, "{child}");

    // A budget is bounded, and more than the agent allows is for administrators.
    let (status, bad) = start(&local, "spender", Some(0)).await;
    assert_eq!((status, bad["field"].as_str()), (422, Some("budget.max_tokens")), "{bad}");
    let (status, refused) = start(&local, "spender", Some(1000)).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused["message"].as_str().unwrap_or_default().starts_with("budget.max_tokens"), "{refused}");
}

async fn starts_past_a_users_daily_quota_are_refused_naming_it(store: LocalStore) {
    let manifests = TempDir::new().expect("dir");
    for file in yaml_files("examples") {
        std::fs::copy(&file, manifests.path().join(file.file_name().expect("name"))).expect("copy");
    }
    // Users of their own: the test Redis keeps the day's counts of every test's users.
    let data = TempDir::new().expect("dir");
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let users = data.path().join("users.yaml");
    std::fs::write(
        &users,
        format!("- {{token: q-alice-token, uid: q-alice-{tag}, role: user}}\n- {{token: q-bob-token, uid: q-bob-{tag}, role: user}}\n"),
    )
    .expect("users");
    let port = free_port();
    let mut command = command_with_users(manifests.path(), store, port, data.path(), &users);
    command.args(["--default-model", "scripted/echo", "--max-tokens-per-user-per-day", "30"]);
    let local = launch(command, port, data, TempDir::new().expect("dir")).await;
    let body = json!({"query": "a question long enough to cost more than thirty tokens when it is echoed back in full", "agent_slug": "deep-research"});
    let run = |token: &'static str| {
        local.client.post(format!("{}/api/agent/runs", local.base)).bearer_auth(token).json(&body).send()
    };
    let first: Value = run("q-alice-token").await.expect("reaches").json().await.expect("JSON");
    let run_id = first["run_id"].as_str().expect("run_id").to_string();
    result_for(&local, &run_id, "q-alice-token").await;
    let refused = run("q-alice-token").await.expect("reaches");
    assert_eq!(refused.status(), 429);
    let retry_after: u64 = refused.headers()["retry-after"].to_str().expect("text").parse().expect("seconds");
    assert!((1..=86_400).contains(&retry_after), "{retry_after}");
    let refused: Value = refused.json().await.expect("JSON");
    assert_eq!(refused["field"], "max_tokens_per_user_per_day", "{refused}");
    // Delegations count against it too; another user's quota is their own.
    let parent = json!({"agent": "deep-research", "run_id": "quota-parent", "thread_id": "quota-thread"});
    let (status, refused) = local
        .tool(
            "subagent_start",
            "q-alice-token",
            json!({"parent": parent, "subagent_slug": "research-explorer", "description": "x"}),
        )
        .await;
    assert_eq!((status, refused["field"].as_str()), (429, Some("max_tokens_per_user_per_day")), "{refused}");
    // A question to a model spends from the same quota.
    let call = |token: &'static str| {
        local
            .client
            .post(format!("{}/api/chat/call", local.base))
            .bearer_auth(token)
            .json(&json!({"query": "a question long enough to cost more than thirty tokens when it is echoed back in full"}))
            .send()
    };
    let refused: Value = call("q-alice-token").await.expect("reaches").json().await.expect("JSON");
    assert_eq!(refused["field"], "max_tokens_per_user_per_day", "{refused}");
    assert_eq!(call("q-bob-token").await.expect("reaches").status(), 200, "Bob's first question");
    let refused: Value = call("q-bob-token").await.expect("reaches").json().await.expect("JSON");
    assert_eq!(refused["field"], "max_tokens_per_user_per_day", "Bob's question spent his day: {refused}");
    assert_eq!(run("q-bob-token").await.expect("reaches").status(), 429, "and his runs' too");
}

/// A main agent that answers after a second, spending 40 tokens.
const SLOW_SPENDER: &str = "- delay_ms: 1000\n  usage: {prompt_tokens: 30, completion_tokens: 10}\n  content: spent\n";

async fn queued_requests_are_held_to_the_daily_quota_when_they_start(store: LocalStore) {
    let data = TempDir::new().expect("dir");
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let users = data.path().join("users.yaml");
    std::fs::write(&users, format!("- {{token: q-alice-token, uid: q-alice-{tag}, role: user}}\n")).expect("users");
    let manifests = TempDir::new().expect("dir");
    let agent = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: slow-spender}\nspec:\n  backend: ChatbotAgent\n  share: {readScope: {accessLevel: Global}}\n";
    std::fs::write(manifests.path().join("slow-spender.yaml"), agent).expect("agent");
    let scripts = TempDir::new().expect("dir");
    std::fs::write(scripts.path().join("slow-spender.yaml"), SLOW_SPENDER).expect("script");
    let port = free_port();
    let mut command = command_with_users(manifests.path(), store, port, data.path(), &users);
    command.arg("--scripts-dir").arg(scripts.path());
    command.args(["--default-model", "scripted/auto", "--max-tokens-per-user-per-day", "30"]);
    let local = launch(command, port, data, scripts).await;
    let start = |policy: Option<&str>| {
        let mut body = json!({"query": "spend", "agent_slug": "slow-spender", "thread_id": "quota-queue"});
        if let Some(policy) = policy {
            body["queue_policy"] = json!(policy);
        }
        local.client.post(format!("{}/api/agent/runs", local.base)).bearer_auth("q-alice-token").json(&body).send()
    };
    let first: Value = start(None).await.expect("reaches").json().await.expect("JSON");
    let run_id = first["run_id"].as_str().expect("run_id").to_string();
    let mut requests = Vec::new();
    for _ in 0..3 {
        let queued: Value = start(Some("enqueue")).await.expect("reaches").json().await.expect("JSON");
        assert_eq!(queued["status"], "queued", "{queued}");
        requests.push(queued["request_id"].as_str().expect("request_id").to_string());
    }
    result_for(&local, &run_id, "q-alice-token").await;
    // The first spent the day's 30 tokens: none of the queued ones runs.
    for request_id in &requests {
        let deadline = Instant::now() + Duration::from_secs(30);
        let request = loop {
            let (status, answer) = get(&local, &format!("/api/agent/requests/{request_id}"), "q-alice-token").await;
            assert_eq!(status, 200, "{answer}");
            if answer["request"]["status"] != "queued" {
                break answer["request"].clone();
            }
            assert!(Instant::now() < deadline, "request {request_id} still waits: {answer}\n{}", local.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(request["status"], "failed", "{request}");
        assert_eq!(request["run_id"], Value::Null, "{request}");
        let error = request["error"].as_str().unwrap_or_default();
        assert!(error.contains("max_tokens_per_user_per_day"), "{request}");
    }
}

/// The run once it waits for its user's decisions (at most 60 s), read as the user of `token`.
async fn waiting(local: &Local, run_id: &str, token: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, answer) = get(local, &format!("/api/agent/runs/{run_id}"), token).await;
        assert_eq!(status, 200, "{answer}");
        if answer["run"]["status"] == "waiting" {
            return answer["run"].clone();
        }
        assert!(Instant::now() < deadline, "run {run_id} does not wait: {answer}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A main agent that spends 40 tokens on a turn whose `write_file` waits for its user's decision.
const CAREFUL_SPENDER: &str = "- usage: {prompt_tokens: 30, completion_tokens: 10}\n  tool_calls: [{name: write_file, arguments: {path: /home/gem/user-data/outputs/note.txt, content: spent}}]\n- content: written\n";

async fn a_resume_past_a_users_daily_quota_is_refused_naming_it(store: LocalStore) {
    let data = TempDir::new().expect("dir");
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let users = data.path().join("users.yaml");
    std::fs::write(&users, format!("- {{token: q-alice-token, uid: q-alice-{tag}, role: user}}\n")).expect("users");
    let manifests = TempDir::new().expect("dir");
    let agent = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: careful-spender}\nspec:\n  backend: ChatbotAgent\n  share: {readScope: {accessLevel: Global}}\n";
    std::fs::write(manifests.path().join("careful-spender.yaml"), agent).expect("agent");
    let scripts = TempDir::new().expect("dir");
    std::fs::write(scripts.path().join("careful-spender.yaml"), CAREFUL_SPENDER).expect("script");
    let port = free_port();
    let mut command = command_with_users(manifests.path(), store, port, data.path(), &users);
    command.arg("--scripts-dir").arg(scripts.path());
    command.args(["--default-model", "scripted/auto", "--max-tokens-per-user-per-day", "30"]);
    let local = launch(command, port, data, scripts).await;
    let post = |body: Value| {
        local.client.post(format!("{}/api/agent/runs", local.base)).bearer_auth("q-alice-token").json(&body).send()
    };
    let started: Value = post(json!({"query": "write it", "agent_slug": "careful-spender"}))
        .await
        .expect("reaches")
        .json()
        .await
        .expect("JSON");
    let run_id = started["run_id"].as_str().expect("run_id").to_string();
    // The run waits for Alice's decision, its turn having spent the day's 30 tokens.
    let run = waiting(&local, &run_id, "q-alice-token").await;
    let call = run["waiting"]["action_requests"][0]["tool_call_id"].as_str().expect("the waiting call").to_string();
    let resume = json!({"resume": {"run_id": run_id, "decisions": [{"tool_call_id": call, "decision": "approve"}]}});
    let refused = post(resume).await.expect("reaches");
    assert_eq!(refused.status(), 429);
    let retry_after: u64 = refused.headers()["retry-after"].to_str().expect("text").parse().expect("seconds");
    assert!((1..=86_400).contains(&retry_after), "{retry_after}");
    let refused: Value = refused.json().await.expect("JSON");
    assert_eq!(refused["field"], "max_tokens_per_user_per_day", "{refused}");
    assert!(refused["message"].as_str().unwrap_or_default().contains("30"), "{refused}");
    // The run was not resumed: it still waits, and nothing was written.
    assert_eq!(
        waiting(&local, &run_id, "q-alice-token").await["waiting"]["action_requests"][0]["tool_call_id"],
        call.as_str()
    );
    let threads = local.data.path().join(format!("users/q-alice-{tag}/threads"));
    let written = std::fs::read_dir(&threads)
        .map(|threads| threads.filter_map(Result::ok).any(|t| t.path().join("outputs/note.txt").exists()))
        .unwrap_or(false);
    assert!(!written, "the refused resume ran the call");
}

crate::with_each_store!(
    a_tree_stops_at_its_budget_with_the_reason_on_each_run,
    starts_past_a_users_daily_quota_are_refused_naming_it,
    queued_requests_are_held_to_the_daily_quota_when_they_start,
    a_resume_past_a_users_daily_quota_is_refused_naming_it,
);
