//! Queued starts beyond what the Yuxi client fixtures show: a steered request ends the running run at
//! its next model turn, a full queue answers 429 naming its limit, and what waits in a Redis-kept queue
//! survives a restart of the local mode; a question is in its thread's history from its run's start,
//! and a run started directly is a request of its owner too.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::extra_agents::{main_agent, start_with};
use crate::support::local_mode::{Local, LocalStore};

crate::with_each_store!(
    a_steered_request_ends_the_running_run_at_its_next_model_turn,
    a_full_queue_answers_429_naming_its_limit,
    a_deleted_conversation_takes_the_requests_of_its_paused_queue_with_it,
    a_question_is_in_the_history_from_its_runs_start_and_once_after_its_end,
    a_run_started_directly_is_its_owners_request_and_nobody_elses
);

/// Says something and looks around for 1.5 s, then would think for 5 s more before its last word.
const TWO_TURNS: &str = "- delay_ms: 1500\n  content: partial answer\n  tool_calls: [{name: ls, arguments: {path: /home/gem/user-data/workspace}}]\n- delay_ms: 5000\n  content: never said when steered\n";
const SLOW: &str = "- delay_ms: 3000\n  content: slow\n";

async fn post(local: &Local, path: &str, body: Value) -> (u16, Value) {
    let response = local
        .client
        .post(format!("{}{path}", local.base))
        .bearer_auth("alice-token")
        .json(&body)
        .send()
        .await
        .expect("reaches");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

async fn get(local: &Local, path: &str) -> (u16, Value) {
    let response =
        local.client.get(format!("{}{path}", local.base)).bearer_auth("alice-token").send().await.expect("reaches");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

/// `DELETE path` as alice: the status.
async fn delete(local: &Local, path: &str) -> u16 {
    let response = local.client.delete(format!("{}{path}", local.base)).bearer_auth("alice-token").send().await;
    response.expect("reaches").status().as_u16()
}

/// Waits (at most `within`) until `path` answers something `done` holds of; that answer.
async fn until(local: &Local, path: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (_, answer) = get(local, path).await;
        if done(&answer) {
            return answer;
        }
        assert!(Instant::now() < deadline, "{path}: {answer}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn start_body(query: &str, agent: &str, thread: Option<&str>, request_id: &str, policy: &str) -> Value {
    json!({"query": query, "agent_slug": agent, "thread_id": thread, "meta": {"request_id": request_id}, "queue_policy": policy})
}

async fn a_steered_request_ends_the_running_run_at_its_next_model_turn(store: LocalStore) {
    let agent = main_agent("two-turns");
    let (local, _m) =
        start_with(store, TempDir::new().expect("dir"), &[("two-turns", &agent)], &[("two-turns", TWO_TURNS)]).await;
    let (status, first) =
        post(&local, "/api/agent/runs", start_body("first", "two-turns", None, "s-1", "enqueue")).await;
    assert_eq!(status, 200, "{first}");
    let (run1, thread) =
        (first["run_id"].as_str().expect("run").to_string(), first["thread_id"].as_str().expect("thread").to_string());
    until(&local, &format!("/api/agent/runs/{run1}"), Duration::from_secs(10), |a| a["run"]["status"] == "running")
        .await;
    let steered_at = Instant::now();
    let (status, queued) =
        post(&local, "/api/agent/runs", start_body("instead", "two-turns", Some(&thread), "s-2", "steer")).await;
    assert_eq!(
        (status, queued["status"].as_str(), queued["queue_position"].as_u64()),
        (200, Some("queued"), Some(1)),
        "{queued}"
    );
    let ended =
        until(&local, &format!("/api/agent/runs/{run1}/result"), Duration::from_secs(20), |a| a["status"].is_string())
            .await;
    // Not steered, it would have taken 6.5 s and said its last word.
    assert!(steered_at.elapsed() < Duration::from_secs(5), "the run ended {:?} after the steer", steered_at.elapsed());
    assert_eq!(ended["status"], "completed", "{ended}");
    assert!(["", "partial answer"].contains(&ended["output"].as_str().unwrap_or("?")), "{ended}");
    let request =
        until(&local, "/api/agent/requests/s-2", Duration::from_secs(10), |a| a["request"]["status"] == "dispatched")
            .await;
    let run2 = request["request"]["run_id"].as_str().expect("its run");
    let (_, item) = get(&local, &format!("/api/agent/runs/{run2}")).await;
    assert_eq!(
        (item["run"]["request_id"].as_str(), item["run"]["thread_id"].as_str()),
        (Some("s-2"), Some(thread.as_str())),
        "{item}"
    );
    until(&local, &format!("/api/agent/runs/{run2}/result"), Duration::from_secs(20), |a| a["status"] == "completed")
        .await;
    let (_, history) = get(&local, &format!("/api/chat/thread/{thread}/history")).await;
    let said: Vec<&str> =
        history["history"].as_array().expect("history").iter().filter_map(|m| m["content"].as_str()).collect();
    let steered = said.iter().position(|s| *s == "instead");
    let steered = steered.unwrap_or_else(|| panic!("the steered question is in the thread: {history}"));
    assert!(!said[..steered].contains(&"never said when steered"), "the first run said no more: {history}");
}

async fn a_full_queue_answers_429_naming_its_limit(store: LocalStore) {
    let agent = main_agent("slow-full");
    let (local, _m) =
        start_with(store, TempDir::new().expect("dir"), &[("slow-full", &agent)], &[("slow-full", SLOW)]).await;
    let (status, first) =
        post(&local, "/api/agent/runs", start_body("first", "slow-full", None, &unique("f-0"), "enqueue")).await;
    assert_eq!(status, 200, "{first}");
    let thread = first["thread_id"].as_str().expect("thread").to_string();
    let mut queued_ids = Vec::new();
    for n in 1..=10 {
        let id = unique(&format!("f-{n}"));
        let (status, queued) =
            post(&local, "/api/agent/runs", start_body("more", "slow-full", Some(&thread), &id, "enqueue")).await;
        assert_eq!((status, queued["queue_position"].as_u64()), (200, Some(n)), "{queued}");
        queued_ids.push(id);
    }
    let (status, refused) = post(
        &local,
        "/api/agent/runs",
        start_body("one too many", "slow-full", Some(&thread), &unique("f-11"), "enqueue"),
    )
    .await;
    assert_eq!((status, refused["field"].as_str()), (429, Some("max_queued_per_thread")), "{refused}");
    // The same request id again is the caller's own request: refused, naming it.
    let (status, again) =
        post(&local, "/api/agent/runs", start_body("again", "slow-full", Some(&thread), &queued_ids[2], "enqueue"))
            .await;
    assert_eq!(status, 409, "{again}");
    let (_, list) = get(&local, &format!("/api/agent/thread/{thread}/requests?agent_slug=slow-full")).await;
    assert_eq!(list["queue"]["queued_count"], 10, "{list}");
}

async fn a_deleted_conversation_takes_the_requests_of_its_paused_queue_with_it(store: LocalStore) {
    let agent = main_agent("slow-deleted");
    let (local, _m) =
        start_with(store, TempDir::new().expect("dir"), &[("slow-deleted", &agent)], &[("slow-deleted", SLOW)]).await;
    let (run1, thread, waiting) = one_running_one_waiting(&local, "slow-deleted", "p").await;
    let (status, cancelled) = post(&local, &format!("/api/agent/runs/{run1}/cancel"), json!({})).await;
    assert_eq!(status, 200, "{cancelled}");
    until(
        &local,
        &format!("/api/agent/thread/{thread}/requests?agent_slug=slow-deleted"),
        Duration::from_secs(10),
        |a| a["queue"]["status"] == "paused",
    )
    .await;
    assert_eq!(delete(&local, &format!("/api/chat/thread/{thread}")).await, 200);
    // The dispatcher looks for queues without a pump every 5 s: the request would start by then.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let (_, request) = get(&local, &format!("/api/agent/requests/{waiting}")).await;
    assert_eq!(request["request"]["status"], "cancelled", "{request}\n{}", local.log());
    let (status, history) = get(&local, &format!("/api/chat/thread/{thread}/history")).await;
    assert_eq!(status, 404, "the deleted conversation stays deleted: {history}");
}

#[tokio::test]
async fn a_queue_kept_in_redis_waits_through_a_restart_and_goes_on() {
    let agent = main_agent("slow-restart");
    let agents = [("slow-restart", agent.as_str())];
    let scripts = [("slow-restart", SLOW)];
    let (local, _m) = start_with(LocalStore::Redis, TempDir::new().expect("dir"), &agents, &scripts).await;
    let (run1, _thread, waiting) = one_running_one_waiting(&local, "slow-restart", "r").await;
    // Stopped mid-run: its run ends interrupted, and the queue goes on after it, in the new process.
    let data = local.stop();
    let (local, _m2) = start_with(LocalStore::Redis, data, &agents, &scripts).await;
    until(&local, &format!("/api/agent/runs/{run1}"), Duration::from_secs(60), |a| a["run"]["status"] == "interrupted")
        .await;
    let request = until(&local, &format!("/api/agent/requests/{waiting}"), Duration::from_secs(30), |a| {
        a["request"]["status"] == "dispatched"
    })
    .await;
    let run2 = request["request"]["run_id"].as_str().expect("run");
    until(&local, &format!("/api/agent/runs/{run2}/result"), Duration::from_secs(30), |a| a["status"] == "completed")
        .await;
}

#[tokio::test]
async fn a_conversation_retitled_as_its_first_run_starts_is_not_deleted_under_that_run() {
    let agent = main_agent("slow-retitle");
    let (local, _m) = start_with(
        LocalStore::Redis,
        TempDir::new().expect("dir"),
        &[("slow-retitle", &agent)],
        &[("slow-retitle", SLOW)],
    )
    .await;
    // A retitle reads the conversation and writes it whole: one that read it before the run was noted
    // there writes it back without the run. The delete must still see the run.
    for trial in 0..10 {
        let (status, created) = post(&local, "/api/chat/thread", json!({"agent_id": "slow-retitle"})).await;
        assert_eq!(status, 200, "{created}");
        let thread = created["id"].as_str().expect("id").to_string();
        let retitle = |n: usize| {
            let (local, thread) = (&local, &thread);
            async move {
                tokio::time::sleep(Duration::from_millis(n as u64)).await;
                local
                    .client
                    .put(format!("{}/api/chat/thread/{thread}", local.base))
                    .bearer_auth("alice-token")
                    .json(&json!({"title": format!("title {n}")}))
                    .send()
                    .await
                    .expect("reaches")
                    .status()
            }
        };
        let start =
            post(&local, "/api/agent/runs", json!({"query": "x", "agent_slug": "slow-retitle", "thread_id": thread}));
        let (retitled, (status, run)) = tokio::join!(futures::future::join_all((0..40).map(retitle)), start);
        assert!(retitled.iter().all(|s| s.is_success()));
        assert_eq!(status, 200, "{run}");
        let deleted = delete(&local, &format!("/api/chat/thread/{thread}")).await;
        let run_id = run["run_id"].as_str().expect("run");
        let (_, record) = get(&local, &format!("/api/agent/runs/{run_id}")).await;
        if record["run"]["status"] != "completed" {
            assert_eq!(deleted, 409, "trial {trial}: deleted under its unfinished run: {record}");
        }
        // One run at a time, within the caller's limit of unfinished runs.
        until(&local, &format!("/api/agent/runs/{run_id}/result"), Duration::from_secs(20), |a| {
            a["status"].is_string()
        })
        .await;
    }
}

/// A run of `agent` started and a second request queued behind it, their request ids made from
/// `prefix`: the run, its thread and the waiting request's id. (Each test has an agent of its own: the
/// local modes of the tests share one Redis, and a facade pumps only queues of agents it knows.)
async fn one_running_one_waiting(local: &Local, agent: &str, prefix: &str) -> (String, String, String) {
    let (status, first) =
        post(local, "/api/agent/runs", start_body("first", agent, None, &unique(&format!("{prefix}-1")), "enqueue"))
            .await;
    assert_eq!(status, 200, "{first}");
    let (run1, thread) =
        (first["run_id"].as_str().expect("run").to_string(), first["thread_id"].as_str().expect("thread").to_string());
    let waiting = unique(&format!("{prefix}-2"));
    let (status, queued) =
        post(local, "/api/agent/runs", start_body("second", agent, Some(&thread), &waiting, "enqueue")).await;
    assert_eq!((status, queued["status"].as_str()), (200, Some("queued")), "{queued}");
    (run1, thread, waiting)
}

/// A request id no other test run uses (they share one Redis).
fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// The `type` and `content` of each item of the thread's history.
async fn said(local: &Local, thread: &str) -> (Vec<(String, String)>, Value) {
    let (status, history) = get(local, &format!("/api/chat/thread/{thread}/history")).await;
    assert_eq!(status, 200, "{history}");
    let items = history["history"].as_array().cloned().unwrap_or_default();
    let pairs = items
        .iter()
        .map(|i| {
            (i["type"].as_str().unwrap_or_default().to_string(), i["content"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    (pairs, history)
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(k, c)| (k.to_string(), c.to_string())).collect()
}

async fn a_question_is_in_the_history_from_its_runs_start_and_once_after_its_end(store: LocalStore) {
    let agent = main_agent("asked");
    let (local, _m) = start_with(store, TempDir::new().expect("dir"), &[("asked", &agent)], &[("asked", SLOW)]).await;
    let first_id = unique("h-1");
    let (status, first) =
        post(&local, "/api/agent/runs", start_body("first", "asked", None, &first_id, "enqueue")).await;
    assert_eq!(status, 200, "{first}");
    let thread = first["thread_id"].as_str().expect("thread").to_string();
    // A reload as soon as the run is started shows the question, tagged with its request.
    let (items, history) = said(&local, &thread).await;
    assert_eq!(items, pairs(&[("human", "first")]), "{history}");
    assert_eq!(history["history"][0]["extra_metadata"]["request_id"], first_id.as_str(), "{history}");
    let (_, messages) = get(&local, &format!("/api/threads/{thread}/messages")).await;
    assert_eq!(messages["messages"], json!([{"role": "user", "content": "first"}]));
    // A queued request's question is there as soon as it is dispatched, and streamed first as Yuxi's
    // `init` chunk.
    let second_id = unique("h-2");
    let (status, queued) =
        post(&local, "/api/agent/runs", start_body("second", "asked", Some(&thread), &second_id, "enqueue")).await;
    assert_eq!((status, queued["status"].as_str()), (200, Some("queued")), "{queued}");
    let request = until(&local, &format!("/api/agent/requests/{second_id}"), Duration::from_secs(20), |a| {
        a["request"]["status"] == "dispatched"
    })
    .await;
    let run2 = request["request"]["run_id"].as_str().expect("run").to_string();
    let (items, history) = said(&local, &thread).await;
    assert_eq!(items, pairs(&[("human", "first"), ("ai", "slow"), ("human", "second")]), "{history}");
    assert_eq!(history["history"][2]["extra_metadata"]["request_id"], second_id.as_str(), "{history}");
    let text = local
        .client
        .get(format!("{}/api/agent/runs/{run2}/events?verbose=false", local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches")
        .text()
        .await
        .expect("events");
    let first_chunk = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str::<Value>(d.trim()).expect("JSON"))
        .find_map(|e| {
            e["payload"]["chunk"].as_object().cloned().or_else(|| e["payload"]["items"][0].as_object().cloned())
        })
        .map(Value::Object)
        .unwrap_or_default();
    assert_eq!(
        (first_chunk["status"].as_str(), first_chunk["msg"]["type"].as_str(), first_chunk["msg"]["content"].as_str()),
        (Some("init"), Some("human"), Some("second")),
        "{text}"
    );
    assert_eq!(first_chunk["request_id"], second_id.as_str());
    // Once the run has ended, the question is there once.
    until(&local, &format!("/api/agent/runs/{run2}"), Duration::from_secs(20), |a| a["run"]["status"] == "completed")
        .await;
    let (items, history) = said(&local, &thread).await;
    assert_eq!(items, pairs(&[("human", "first"), ("ai", "slow"), ("human", "second"), ("ai", "slow")]), "{history}");
}

async fn a_run_started_directly_is_its_owners_request_and_nobody_elses(store: LocalStore) {
    let agent = main_agent("direct");
    let (local, _m) = start_with(store, TempDir::new().expect("dir"), &[("direct", &agent)], &[("direct", SLOW)]).await;
    let request_id = unique("d-1");
    let (status, started) =
        post(&local, "/api/agent/runs", start_body("at once", "direct", None, &request_id, "reject")).await;
    assert_eq!(status, 200, "{started}");
    let run = started["run_id"].as_str().expect("run");
    // The client asks for the run's request after a reload, to know whether it may steer.
    let (status, answer) = get(&local, &format!("/api/agent/requests/{request_id}")).await;
    assert_eq!(status, 200, "{answer}");
    let request = &answer["request"];
    assert_eq!(
        (request["request_id"].as_str(), request["run_id"].as_str(), request["status"].as_str()),
        (Some(request_id.as_str()), Some(run), Some("dispatched")),
        "{answer}"
    );
    assert_eq!((request["source"].as_str(), request["content"].as_str()), (Some("chat"), Some("at once")));
    assert_eq!(request["thread_id"], started["thread_id"]);
    // Another user learns nothing of it: the same answer as for a request that does not exist.
    let as_bob = |path: String| {
        let client = local.client.clone();
        let url = format!("{}{path}", local.base);
        async move {
            let response = client.get(url).bearer_auth("bob-token").send().await.expect("reaches");
            (response.status().as_u16(), response.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let (status, bob) = as_bob(format!("/api/agent/requests/{request_id}")).await;
    let (missing_status, missing) = as_bob("/api/agent/requests/no-such-request".to_string()).await;
    assert_eq!((status, missing_status), (404, 404), "{bob}");
    assert_eq!(
        bob["message"].as_str().map(|m| m.replace(&request_id, "x")),
        missing["message"].as_str().map(|m| m.replace("no-such-request", "x"))
    );
}
