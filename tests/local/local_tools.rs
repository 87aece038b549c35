//! The subagent tools end to end: the local mode started for real, runner subprocesses, driven over HTTP
//! as a parent agent would. Every scenario runs twice, with the same assertions: with the test Redis, and
//! with no Redis (runs kept in the local mode's process, runners reaching it over the store socket).

use serde_json::{Value, json};

use crate::support::local_mode::{LocalStore, parent, start};
use crate::support::redis::unique;

crate::with_each_store!(
    task_runs_the_subagent_and_returns_its_answer,
    start_await_and_ownership,
    busy_threads_idempotent_retries_cancel_and_outputs,
    a_run_streams_its_events_resumably_and_keeps_its_result_and_messages,
);

async fn task_runs_the_subagent_and_returns_its_answer(store: LocalStore) {
    let local = start(store, "scripted/echo", "[{content: unused}]").await;
    let thread = unique("thread");
    let (status, answer) = local
        .tool("task", "alice-token", json!({"parent": parent("parent-run", &thread), "description": "Survey solid electrolytes.", "subagent_slug": "research-explorer"}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["status"], "completed", "{answer}");
    let child_thread = answer["thread_id"].as_str().expect("thread");
    assert!(child_thread.starts_with(&format!("{thread}_sub_research-explorer_")), "{child_thread}");
    assert_eq!(answer["content"], format!("> 子智能体线程 ID: {child_thread}\n\n---\n\nSurvey solid electrolytes."));
}

async fn start_await_and_ownership(store: LocalStore) {
    let local = start(store, "scripted/echo", "[{content: unused}]").await;
    let thread = unique("thread");
    let (status, started) = local
        .tool("subagent_start", "alice-token", json!({"parent": parent("p1", &thread), "description": "Check the claims.", "subagent_slug": "fact-verifier"}))
        .await;
    assert_eq!((status, started["status"].as_str()), (200, Some("started")), "{started}");
    let run_id = started["run_id"].as_str().expect("run id");
    let (_, done) = local
        .tool(
            "subagent_await",
            "alice-token",
            json!({"parent": parent("p1", &thread), "run_id": run_id, "timeout_seconds": 60}),
        )
        .await;
    assert_eq!(
        (done["status"].as_str(), done["result"].as_str()),
        (Some("completed"), Some("Check the claims.")),
        "{done}"
    );

    let (_, status_answer) =
        local.tool("subagent_status", "alice-token", json!({"parent": parent("p1", &thread), "run_id": run_id})).await;
    let messages = status_answer["progress"]["messages"].as_array().expect("progress messages");
    assert_eq!(
        messages.last().map(|m| (&m["kind"], &m["content"])),
        Some((&json!("assistant_message"), &json!("Check the claims."))),
        "{status_answer}"
    );

    let events_body = |after: &str, limit: usize| json!({"parent": parent("p1", &thread), "run_id": run_id, "after_seq": after, "limit": limit});
    let (_, page) = local.tool("subagent_events", "alice-token", events_body("0-0", 2)).await;
    let first: Vec<&str> =
        page["events"].as_array().expect("events").iter().map(|e| e["event"].as_str().expect("name")).collect();
    assert_eq!(first, ["metadata", "messages"], "{page}");
    let (_, rest) =
        local.tool("subagent_events", "alice-token", events_body(page["last_seq"].as_str().expect("cursor"), 50)).await;
    let names: Vec<&str> =
        rest["events"].as_array().expect("events").iter().map(|e| e["event"].as_str().expect("name")).collect();
    assert_eq!(names.last(), Some(&"end"), "the cursor resumes where the first page stopped: {rest}");
    assert!(!names.contains(&"metadata"), "nothing repeated: {rest}");
    for (body, field) in
        [(events_body("0-0", 0), "limit"), (events_body("0-0", 51), "limit"), (events_body("later", 5), "after_seq")]
    {
        let (status, answer) = local.tool("subagent_events", "alice-token", body).await;
        assert_eq!((status, answer["field"].as_str()), (422, Some(field)), "{answer}");
    }

    let missing = "run does not exist or does not belong to the current parent run";
    let not_found = json!({"code": "not_found", "message": missing, "detail": missing});
    for (token, parent_run, id) in
        [("alice-token", "p2", run_id), ("bob-token", "p1", run_id), ("alice-token", "p1", "0123456789abcdef")]
    {
        let (status, body) =
            local.tool("subagent_status", token, json!({"parent": parent(parent_run, &thread), "run_id": id})).await;
        assert_eq!((status, &body), (404, &not_found), "{token} {parent_run} {id}");
    }

    let (status, refused) = local
        .tool(
            "subagent_start",
            "alice-token",
            json!({"parent": parent("p1", &thread), "description": "x", "subagent_slug": "general-purpose"}),
        )
        .await;
    assert_eq!((status, refused["field"].as_str()), (422, Some("subagent_slug")));
    assert!(
        refused["message"].as_str().expect("message").contains("allowed: research-explorer, fact-verifier"),
        "{refused}"
    );
    let (status, foreign) = local
        .tool("subagent_start", "alice-token", json!({"parent": parent("p1", &thread), "description": "x", "subagent_slug": "fact-verifier", "thread_id": "other_sub_fact-verifier_0a1b2c3d"}))
        .await;
    assert_eq!((status, foreign["field"].as_str()), (422, Some("thread_id")));
}

async fn busy_threads_idempotent_retries_cancel_and_outputs(store: LocalStore) {
    let script = "[{tool_calls: [{name: write_file, arguments: {path: /home/gem/user-data/outputs/report.md, content: '# Report'}}]}, {delay_ms: 2500, content: report written}]";
    let local = start(store, "scripted/file:script.yaml", script).await;
    let thread = unique("thread");
    let mut with_call = parent("p1", &thread);
    with_call["tool_call_id"] = json!("call-1");
    let start_body =
        json!({"parent": with_call, "description": "Write the report.", "subagent_slug": "research-explorer"});
    let (_, first) = local.tool("subagent_start", "alice-token", start_body.clone()).await;
    assert_eq!(first["status"], "started", "{first}");
    let (_, retried) = local.tool("subagent_start", "alice-token", start_body).await;
    assert_eq!(
        (retried["status"].as_str(), &retried["run_id"]),
        (Some("existing"), &first["run_id"]),
        "a retried tool call returns its run"
    );

    let child_thread = first["thread_id"].as_str().expect("thread").to_string();
    let again = json!({"parent": parent("p1", &thread), "description": "More.", "subagent_slug": "research-explorer", "thread_id": child_thread});
    let (_, busy) = local.tool("subagent_start", "alice-token", again.clone()).await;
    assert_eq!((busy["status"].as_str(), &busy["active_run_id"]), (Some("busy"), &first["run_id"]), "{busy}");

    let run_id = first["run_id"].as_str().expect("run id");
    let (_, waiting) = local
        .tool(
            "subagent_await",
            "alice-token",
            json!({"parent": parent("p1", &thread), "run_id": run_id, "timeout_seconds": 1}),
        )
        .await;
    assert_eq!(waiting["wait_timed_out"], true, "{waiting}");
    let (_, done) = local
        .tool(
            "subagent_await",
            "alice-token",
            json!({"parent": parent("p1", &thread), "run_id": run_id, "timeout_seconds": 60}),
        )
        .await;
    assert_eq!(done["result"], "report written", "{done}");
    let report = local.data.path().join("users/alice/threads").join(&thread).join("outputs/report.md");
    assert_eq!(std::fs::read_to_string(&report).expect("the report is in the parent's outputs"), "# Report");
    // Alice's alone: the data folder and what runs write in it are not readable by anyone else.
    use std::os::unix::fs::PermissionsExt;
    let mode = |path: &std::path::Path| std::fs::metadata(path).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode(&report), 0o600, "{}", report.display());
    assert_eq!(mode(&local.data.path().join("users/alice")), 0o700);

    // Twenty concurrent continuations of the now idle thread: exactly one starts.
    let starts = (0..20).map(|_| local.tool("subagent_start", "alice-token", again.clone()));
    let answers: Vec<(u16, Value)> = futures::future::join_all(starts).await;
    let started: Vec<&Value> = answers.iter().map(|(_, a)| a).filter(|a| a["status"] == "started").collect();
    assert_eq!(started.len(), 1, "{answers:?}");
    assert!(answers.iter().all(|(_, a)| a["status"] == "started" || a["status"] == "busy"), "{answers:?}");

    let continued = started[0]["run_id"].as_str().expect("run id");
    assert_eq!(started[0]["continuing"], true);
    let (_, cancelling) = local
        .tool("subagent_cancel", "alice-token", json!({"parent": parent("p1", &thread), "run_id": continued}))
        .await;
    assert!(
        ["cancel_requested", "cancelled"].contains(&cancelling["status"].as_str().expect("status")),
        "{cancelling}"
    );
    let (_, ended) = local
        .tool(
            "subagent_await",
            "alice-token",
            json!({"parent": parent("p1", &thread), "run_id": continued, "timeout_seconds": 60}),
        )
        .await;
    assert_eq!(ended["status"], "cancelled", "{ended}");
}

/// The `(id, event)` pairs of a server-sent events body.
fn sse_events(body: &str) -> Vec<(String, String)> {
    body.split("\n\n")
        .filter_map(|block| {
            let field = |name: &str| {
                block.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.trim().to_string()))
            };
            Some((field("id")?, field("event")?))
        })
        .collect()
}

async fn a_run_streams_its_events_resumably_and_keeps_its_result_and_messages(store: LocalStore) {
    let local = start(store, "scripted/echo", "[{content: unused}]").await;
    let thread = unique("thread");
    let (_, started) = local
        .tool("subagent_start", "alice-token", json!({"parent": parent("p1", &thread), "description": "Hello there.", "subagent_slug": "research-explorer"}))
        .await;
    let run_id = started["run_id"].as_str().expect("run id").to_string();
    let get = |path: String, token: &'static str| {
        let request = local.client.get(format!("{}{path}", local.base)).bearer_auth(token);
        async move { request.send().await.expect("reaches the facade") }
    };
    let full = get(format!("/api/agent/runs/{run_id}/events"), "alice-token").await;
    assert_eq!(full.headers()["content-type"], "text/event-stream");
    let all = sse_events(&full.text().await.expect("body"));
    let names: Vec<&str> = all.iter().map(|(_, e)| e.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"));
    assert_eq!(names.last(), Some(&"end"));

    let resumed = local
        .client
        .get(format!("{}/api/agent/runs/{run_id}/events", local.base))
        .bearer_auth("alice-token")
        .header("last-event-id", &all[1].0)
        .send()
        .await
        .expect("reaches");
    let rest = sse_events(&resumed.text().await.expect("body"));
    assert_eq!(rest, all[2..].to_vec(), "a resumed stream loses and repeats nothing");
    // Yuxi's web client asks with `verbose=false`, and gets the same stream.
    let quiet = get(format!("/api/agent/runs/{run_id}/events?verbose=false"), "alice-token").await;
    assert_eq!(sse_events(&quiet.text().await.expect("body")), all);
    let (status, unknown) = {
        let answer = get(format!("/api/agent/runs/{run_id}/events?verbos=false"), "alice-token").await;
        (answer.status().as_u16(), answer.json::<Value>().await.expect("JSON"))
    };
    assert_eq!((status, unknown["code"].as_str()), (400, Some("bad_request")), "{unknown}");

    assert_eq!(get(format!("/api/agent/runs/{run_id}/events"), "bob-token").await.status(), 404);
    let result: Value =
        get(format!("/api/agent/runs/{run_id}/result"), "alice-token").await.json().await.expect("JSON");
    assert_eq!((result["status"].as_str(), result["output"].as_str()), (Some("completed"), Some("Hello there.")));
    let record: Value = get(format!("/api/agent/runs/{run_id}"), "alice-token").await.json().await.expect("JSON");
    assert_eq!(record["run"]["status"], "completed");
    let child_thread = started["thread_id"].as_str().expect("thread");
    let messages: Value =
        get(format!("/api/threads/{child_thread}/messages"), "alice-token").await.json().await.expect("JSON");
    assert_eq!(messages["messages"].as_array().map(Vec::len), Some(2), "{messages}");
    assert_eq!(get(format!("/api/threads/{child_thread}/messages"), "bob-token").await.status(), 404);
}
