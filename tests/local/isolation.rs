//! Tenant isolation in the local mode, started for real, with each store: a retried start never answers
//! across users, a refused request claims nothing, a thread id another user claims reaches none of the
//! first user's files, over-limit input is refused before anything starts, and only a running parent
//! starts children, and the list of runs holds the caller's runs alone.

use serde_json::json;

use crate::support::local_mode::{LocalStore, parent, start};
use crate::support::redis::unique;

crate::with_each_store!(
    a_retried_start_finds_only_the_callers_own_run,
    a_refused_start_claims_no_thread,
    over_limit_input_is_refused_naming_the_field_before_anything_starts,
    only_a_running_parent_starts_children,
    the_list_of_runs_shows_a_user_their_own_runs_alone,
);

async fn a_retried_start_finds_only_the_callers_own_run(store: LocalStore) {
    let local = start(store, "scripted/echo", "[{content: unused}]").await;
    let run = unique("run");
    let call = |thread: &str| {
        let mut p = parent(&run, thread);
        p["tool_call_id"] = json!("call_0");
        json!({"parent": p, "description": "Check the claims.", "subagent_slug": "fact-verifier"})
    };
    let (alice_thread, bob_thread) = (unique("alice-thread"), unique("bob-thread"));
    let (status, alices) = local.tool("task", "alice-token", call(&alice_thread)).await;
    assert_eq!((status, alices["status"].as_str()), (200, Some("completed")), "{alices}");
    // Bob, with the same parent run id, tool call id and subagent from his own thread, gets a run of his
    // own: never Alice's, never her result.
    let (status, bobs) = local.tool("task", "bob-token", call(&bob_thread)).await;
    assert_eq!((status, bobs["status"].as_str()), (200, Some("completed")), "{bobs}");
    assert_ne!(bobs["run_id"], alices["run_id"], "Bob was handed Alice's run");
    assert!(bobs["thread_id"].as_str().expect("thread").starts_with(&bob_thread), "{bobs}");
    // Alice's own retry finds her run.
    let (_, again) = local.tool("subagent_start", "alice-token", call(&alice_thread)).await;
    assert_eq!((again["status"].as_str(), &again["run_id"]), (Some("existing"), &alices["run_id"]), "{again}");
}

async fn a_refused_start_claims_no_thread(store: LocalStore) {
    let local = start(store, "scripted/echo", "[{content: unused}]").await;
    let squatted = unique("alice-next-conversation");
    // Bob's start fails (no such subagent; an empty description; a run the webhook would refuse)...
    for body in [
        json!({"parent": parent(&unique("bob-run"), &squatted), "description": "x", "subagent_slug": "no-such-agent"}),
        json!({"parent": parent(&unique("bob-run"), &squatted), "description": " ", "subagent_slug": "fact-verifier"}),
        json!({"parent": parent(&unique("bob-run"), &squatted), "description": "x".repeat(262_145), "subagent_slug": "fact-verifier"}),
    ] {
        let (status, answer) = local.tool("subagent_start", "bob-token", body).await;
        assert_eq!(status, 422, "{answer}");
    }
    // ...so the thread is still nobody's, and Alice can have it.
    let (status, answer) = local
        .tool("task", "alice-token", json!({"parent": parent(&unique("alice-run"), &squatted), "description": "Check.", "subagent_slug": "fact-verifier"}))
        .await;
    assert_eq!((status, answer["status"].as_str()), (200, Some("completed")), "{answer}");
}

async fn over_limit_input_is_refused_naming_the_field_before_anything_starts(store: LocalStore) {
    let local = start(store, "scripted/echo", "[{content: unused}]").await;
    let client = reqwest12::Client::new();
    let thread = unique("thread");
    let response = client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth("alice-token")
        .json(&json!({"query": "q".repeat(300_000), "agent_slug": "deep-research", "thread_id": thread}))
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status().as_u16(), 422);
    let answer: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(answer["field"], "query", "{answer}");
    assert!(answer["message"].as_str().expect("message").contains("262144"), "{answer}");
    let mut p = parent(&unique("run"), &unique("thread"));
    p["tool_call_id"] = json!("c".repeat(257));
    let (status, answer) = local
        .tool(
            "subagent_start",
            "alice-token",
            json!({"parent": p, "description": "Check.", "subagent_slug": "fact-verifier"}),
        )
        .await;
    assert_eq!((status, answer["field"].as_str()), (422, Some("parent.tool_call_id")), "{answer}");
    // Nothing was claimed: Bob may still start on that thread id, which was refused to Alice.
    let (status, _) = local
        .tool("task", "bob-token", json!({"parent": parent(&unique("bob-run"), &thread), "description": "Check.", "subagent_slug": "fact-verifier"}))
        .await;
    assert_eq!(status, 200, "the refused run claimed its thread");
}

async fn only_a_running_parent_starts_children(store: LocalStore) {
    let local = start(store, "scripted/echo", "[{content: unused}]").await;
    let client = reqwest12::Client::new();
    let json = |request: reqwest12::RequestBuilder| async move {
        request
            .bearer_auth("alice-token")
            .send()
            .await
            .expect("reaches")
            .json::<serde_json::Value>()
            .await
            .expect("JSON")
    };
    let started = json(
        client
            .post(format!("{}/api/agent/runs", local.base))
            .json(&json!({"query": "Which electrolytes?", "agent_slug": "deep-research"})),
    )
    .await;
    let (run_id, thread_id) = (started["run_id"].as_str().expect("id"), started["thread_id"].as_str().expect("thread"));
    // Wait for the parent run to end.
    for _ in 0..200 {
        let record = json(client.get(format!("{}/api/agent/runs/{run_id}", local.base))).await;
        if ["completed", "failed", "cancelled", "interrupted"].contains(&record["status"].as_str().unwrap_or("")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Alice, as a user, names her own ended run as the parent: refused, whoever calls.
    let (status, answer) = local
        .tool(
            "subagent_start",
            "alice-token",
            json!({"parent": parent(run_id, thread_id), "description": "Check.", "subagent_slug": "fact-verifier"}),
        )
        .await;
    assert_eq!(status, 409, "{answer}");
    assert!(answer["message"].as_str().expect("message").contains("only a running run starts subagents"), "{answer}");
}

#[tokio::test]
async fn a_thread_id_claimed_after_the_store_forgot_reaches_none_of_its_first_owners_files() {
    use crate::support::local_mode::start_in;
    // Each run reads the conversation's report and answers with what it read.
    let script = "[{tool_calls: [{name: read_file, arguments: {path: /home/gem/user-data/outputs/report.md}}]}, {content: 'read: {{call_0_0}}'}]";
    let local =
        start_in(tempfile::TempDir::new().expect("dir"), LocalStore::InProcess, "scripted/file:script.yaml", script)
            .await;
    let thread = unique("thread-1");
    let task = |run: &str| json!({"parent": parent(run, &thread), "description": "Read the report.", "subagent_slug": "research-explorer"});
    // Alice's conversation has a report (as one of her runs would leave it).
    let (status, answer) = local.tool("task", "alice-token", task(&unique("alice-run"))).await;
    assert_eq!(status, 200, "{answer}");
    let report = local.data.path().join("users/alice/threads").join(&thread).join("outputs/report.md");
    std::fs::write(&report, "alice's findings").expect("write");
    let (_, answer) = local.tool("task", "alice-token", task(&unique("alice-run"))).await;
    assert!(answer["content"].as_str().expect("content").contains("alice's findings"), "{answer}");
    // The local mode restarts without Redis: thread owners are forgotten, the files stay.
    let data = local.stop();
    let local = start_in(data, LocalStore::InProcess, "scripted/file:script.yaml", script).await;
    let (status, answer) = local.tool("task", "bob-token", task(&unique("bob-run"))).await;
    assert_eq!(status, 200, "the thread id is free again: {answer}");
    let content = answer["content"].as_str().expect("content");
    assert!(!content.contains("alice's findings"), "Bob read Alice's report: {content}");
    assert!(local.data.path().join("users/bob/threads").join(&thread).is_dir(), "Bob's run has a folder of his own");
}

async fn the_list_of_runs_shows_a_user_their_own_runs_alone(store: LocalStore) {
    let local = start(store, "scripted/echo", "[{content: unused}]").await;
    let task = unique("Check the claims of");
    let body = json!({"parent": parent(&unique("run"), &unique("alice-thread")), "description": task, "subagent_slug": "fact-verifier"});
    let (status, alices) = local.tool("task", "alice-token", body).await;
    assert_eq!((status, alices["status"].as_str()), (200, Some("completed")), "{alices}");
    let run_id = alices["run_id"].as_str().expect("run id");
    // Alice finds it by its words, its kind and its status; it is listed with the task it was given.
    let query = format!(
        "/api/agent/runs?q={}&run_type=subagent&status=completed&agent_slug=fact-verifier",
        task.to_uppercase()
    );
    let found = local.get_json(&query, "alice-token").await;
    let runs = found["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{found}");
    assert_eq!(
        (runs[0]["run_id"].as_str(), runs[0]["summary"].as_str()),
        (Some(run_id), Some(task.as_str())),
        "{found}"
    );
    assert_eq!(runs[0]["run_type"], "subagent");
    assert_eq!(found["next_cursor"], serde_json::Value::Null);
    // Filters that do not hold find nothing.
    let none = local.get_json(&format!("/api/agent/runs?q={task}&status=failed"), "alice-token").await;
    assert_eq!(none["runs"], json!([]), "{none}");
    // Bob's list never names it, and neither he nor an admin may list everyone's.
    let bobs = local.get_json("/api/agent/runs?limit=100", "bob-token").await;
    assert!(
        bobs["runs"].as_array().expect("runs").iter().all(|r| r["run_id"] != run_id && r["uid"] == "bob"),
        "{bobs}"
    );
    let client = reqwest12::Client::new();
    for token in ["bob-token", "admin-token"] {
        let response = client
            .get(format!("{}/api/agent/runs?scope=all", local.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("reaches");
        assert_eq!(response.status().as_u16(), 403, "{token}");
    }
    let response = client
        .get(format!("{}/api/agent/runs?limit=500", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status().as_u16(), 422);
    let answer: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(answer["field"], "query.limit", "{answer}");
}
