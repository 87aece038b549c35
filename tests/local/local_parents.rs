//! Main agents run by the system, end to end in the local mode: `POST /api/agent/runs` starts a parent
//! whose scripted model delegates through the task middleware (the six tools, called with the run's own
//! credentials), children tied to their parent in the events, cascading cancels, and bad tool calls
//! answered as errors the model reads. The local mode keeps runs in its own process here: the Redis path
//! of the same tools is covered by `local_tools`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::local_mode::{Local, LocalStore, command_over, free_port, launch};
use crate::support::repository::{root, yaml_files};

/// A subagent that takes 20 s to answer: long enough to be cancelled while it runs.
const SLOW_HELPER: &str = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: slow-helper}\nspec:\n  backend: SubAgentBackend\n  description: Answers slowly.\n  share: {readScope: {accessLevel: Global}}\n";

/// A main agent allowed `slow-helper` only, with the scripted model `<name>.yaml`.
fn main_agent(name: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {name}}}\nspec:\n  backend: ChatbotAgent\n  context: {{subagents: [slow-helper]}}\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}

/// The scripts of the test agents (the examples' own scripts are copied beside them).
const SCRIPTS: &[(&str, &str)] = &[
    ("slow-helper", "- delay_ms: 20000\n  content: done slowly\n"),
    // Starts the helper, then waits for it.
    (
        "waiter",
        "- tool_calls: [{name: subagent_start, arguments: {subagent_slug: slow-helper, description: take your time}}]\n- tool_calls: [{name: subagent_await, arguments: {run_id: '{{call_0_0.run_id}}'}}]\n- content: finished\n",
    ),
    // Starts the helper and ends at once.
    (
        "leaver",
        "- tool_calls: [{name: subagent_start, arguments: {subagent_slug: slow-helper, description: take your time}}]\n- content: leaving without waiting\n",
    ),
    // Tries what a parent may not do; the input is another parent's child run.
    (
        "intruder",
        "- tool_calls:\n    - {name: subagent_status, arguments: {run_id: '{{input}}'}}\n    - {name: subagent_cancel, arguments: {run_id: '{{input}}'}}\n    - {name: task, arguments: {subagent_slug: research-explorer, description: read}}\n    - {name: subagent_start, arguments: {subagent_slug: slow-helper, description: x, priority: high}}\n    - {name: task, arguments: {subagent_slug: slow-helper, description: x, thread_id: t-own}}\n    - {name: subagent_events, arguments: {run_id: '{{input}}', limit: 500}}\n- content: \"status={{call_0_0}}\\ncancel={{call_0_1}}\\nallowlist={{call_0_2}}\\nargument={{call_0_3}}\\nthread={{call_0_4}}\\nlimit={{call_0_5}}\"\n",
    ),
];

/// The local mode over the examples plus the test agents, with the examples' scripts and skills.
struct System {
    local: Local,
    _manifests: TempDir,
}

async fn start() -> System {
    let root = root();
    let manifests = TempDir::new().expect("dir");
    for file in yaml_files("examples") {
        std::fs::copy(&file, manifests.path().join(file.file_name().expect("name"))).expect("copy");
    }
    // The examples' knowledge base reads its documents from the manifests folder.
    let notes = manifests.path().join("knowledge/research-notes");
    std::fs::create_dir_all(&notes).expect("dir");
    for file in std::fs::read_dir(root.join("examples/knowledge/research-notes")).expect("notes") {
        let file = file.expect("entry").path();
        std::fs::copy(&file, notes.join(file.file_name().expect("name"))).expect("copy");
    }
    std::fs::write(manifests.path().join("slow-helper.yaml"), SLOW_HELPER).expect("write");
    for name in ["waiter", "leaver", "intruder"] {
        std::fs::write(manifests.path().join(format!("{name}.yaml")), main_agent(name)).expect("write");
    }
    let data = TempDir::new().expect("dir");
    let scripts = TempDir::new().expect("dir");
    for file in std::fs::read_dir(root.join("examples/scripts")).expect("scripts") {
        let file = file.expect("entry").path();
        std::fs::copy(&file, scripts.path().join(file.file_name().expect("name"))).expect("copy");
    }
    for (name, script) in SCRIPTS {
        std::fs::write(scripts.path().join(format!("{name}.yaml")), script).expect("write");
    }
    let port = free_port();
    let mut command = command_over(manifests.path(), LocalStore::InProcess, port, data.path());
    command
        .arg("--scripts-dir")
        .arg(scripts.path())
        .arg("--skills-library")
        .arg(root.join("examples/skills"))
        .env_remove("YUXI_DEFAULT_MODEL");
    let local = launch(command, port, data, scripts).await;
    System { local, _manifests: manifests }
}

impl System {
    async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        let response = self
            .local
            .client
            .get(format!("{}{path}", self.local.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("reaches");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Starts a run of `agent` for `token`'s user: `(run_id, thread_id)`.
    async fn run(&self, token: &str, agent: &str, query: &str) -> (String, String) {
        let response = self
            .local
            .client
            .post(format!("{}/api/agent/runs", self.local.base))
            .bearer_auth(token)
            .json(&json!({"query": query, "agent_slug": agent}))
            .send()
            .await
            .expect("reaches");
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.expect("JSON");
        assert_eq!(body["stream_url"], format!("/api/agent/runs/{}/events", body["run_id"].as_str().expect("id")));
        (body["run_id"].as_str().expect("id").into(), body["thread_id"].as_str().expect("thread").into())
    }

    /// The run's record once it has ended (at most 60 s).
    async fn ended(&self, token: &str, run_id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, answer) = self.get(&format!("/api/agent/runs/{run_id}"), token).await;
            let record = answer["run"].clone();
            assert_eq!(status, 200, "{record}");
            if ["completed", "failed", "cancelled", "interrupted"].contains(&record["status"].as_str().unwrap_or("")) {
                return record;
            }
            assert!(Instant::now() < deadline, "run {run_id} did not end: {record}\n{}", self.local.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The run's status right now.
    async fn status(&self, token: &str, run_id: &str) -> String {
        self.get(&format!("/api/agent/runs/{run_id}"), token).await.1["run"]["status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// The run's events, as server-sent events with the payloads as the runner wrote them, until `enough`
    /// holds of those read (or the stream ends).
    async fn events_until(&self, token: &str, run_id: &str, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut response = self
            .local
            .client
            .get(format!("{}/api/agent/runs/{run_id}/events?event_format=flat", self.local.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("reaches");
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut text, mut events) = (String::new(), Vec::new());
        while !enough(&events) {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let chunk =
                tokio::time::timeout(remaining, response.chunk()).await.expect("events in time").expect("chunk");
            let Some(chunk) = chunk else { break };
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data:")) {
                    events.push(serde_json::from_str(data.trim()).expect("an envelope"));
                }
            }
        }
        events
    }

    /// The child runs the parent's events name, in the order they were started.
    async fn children(&self, token: &str, run_id: &str, count: usize) -> Vec<Value> {
        let events = self.events_until(token, run_id, |e| announced(e).len() >= count).await;
        announced(&events)
    }
}

/// The `custom` `subagent_run` events among `events`: the children a parent started.
fn announced(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == "custom" && e["payload"]["type"] == "subagent_run")
        .map(|e| e["payload"].clone())
        .collect()
}

/// Every file and folder under `dir`, recursively (none when it does not exist).
fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walkdir(&path));
        }
        found.push(path);
    }
    found
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn deep_research_writes_its_report_from_two_children_started_in_parallel() {
    let system = start().await;
    let question = "Which solid electrolytes conduct lithium best at room temperature?";
    let (run_id, thread_id) = system.run("alice-token", "deep-research", question).await;
    let record = system.ended("alice-token", &run_id).await;
    assert_eq!(record["status"], "completed", "{record}\n{}", system.local.log());

    let events = system.events_until("alice-token", &run_id, |_| false).await;
    let children = announced(&events);
    let slugs: Vec<&str> = children.iter().map(|c| c["subagent_slug"].as_str().expect("slug")).collect();
    assert_eq!(slugs, ["research-explorer", "fact-verifier"]);
    // Both were started before the parent waited for either: they ran in parallel.
    let first_wait =
        events.iter().position(|e| e["payload"]["type"] == "tool_call" && e["payload"]["name"] == "subagent_await");
    let last_start = events.iter().rposition(|e| e["payload"]["type"] == "subagent_run");
    assert!(last_start < first_wait, "both children start before the first await");
    // The parent's tool results name the child runs, for a UI to nest them under the calls.
    let linked: Vec<&str> = events
        .iter()
        .filter(|e| e["payload"]["type"] == "tool_result" && e["payload"]["name"] == "subagent_start")
        .map(|e| e["payload"]["child_run_id"].as_str().expect("the child run"))
        .collect();
    let started: Vec<&str> = children.iter().map(|c| c["run_id"].as_str().expect("run")).collect();
    assert_eq!(linked, started);

    for child in &children {
        let child_run = child["run_id"].as_str().expect("run");
        assert_eq!(system.ended("alice-token", child_run).await["status"], "completed");
        // Each child's metadata names its parent run and the tool call that started it.
        let child_events = system.events_until("alice-token", child_run, |e| !e.is_empty()).await;
        assert_eq!(child_events[0]["event"], "metadata");
        assert_eq!(child_events[0]["payload"]["parent"]["runId"], run_id.as_str());
        assert_eq!(child_events[0]["payload"]["parent"]["toolCallId"], child["tool_call_id"]);
        // Subagents search their knowledge bases too: research-explorer lists research-notes, and
        // fact-verifier, listing none, gets every one Alice may read (research-notes is Global).
        let tools = child_events[0]["payload"]["tools"].as_array().expect("tools");
        assert!(tools.iter().any(|t| t == "knowledge_search"), "{tools:?}");
    }

    let data = system.local.data.path();
    let report = read(&data.join(format!("users/alice/threads/{thread_id}/outputs/report.md")));
    assert!(report.starts_with("# Research report"), "{report}");
    assert!(
        report.contains(&format!("Explore this research question and summarise what the material says: {question}"))
    );
    assert!(report.contains(&format!("List the claims this question rests on and check each one: {question}")));
    // It cites the examples' knowledge base: the passage on conductivity at room temperature.
    assert!(
        report.contains("research-notes: solid-electrolytes.md, Solid electrolytes for lithium batteries › Conductivity at room temperature"),
        "{report}"
    );
    assert!(report.contains("Li10GeP2S12 reaches about 12 mS/cm"), "{report}");
    let result: Value = system.get(&format!("/api/agent/runs/{run_id}/result"), "alice-token").await.1;
    assert!(result["output"].as_str().expect("output").contains("report.md"), "{result}");

    // Skills: each child has its own skills, never the parent's.
    let explorer_thread = children[0]["thread_id"].as_str().expect("thread");
    assert!(data.join(format!("users/alice/skills/{explorer_thread}/source-triage/checklist.md")).is_file());
    assert!(!data.join(format!("users/alice/skills/{explorer_thread}/report-writing")).exists());
    assert!(data.join(format!("users/alice/skills/{thread_id}/report-writing/SKILL.md")).is_file());
    assert!(!data.join(format!("skills/{thread_id}/source-triage")).exists());
}

#[tokio::test]
async fn a_second_run_on_a_busy_thread_is_409_run_busy_naming_the_active_run() {
    let system = start().await;
    let (run_id, thread_id) = system.run("alice-token", "waiter", "go").await;
    let response = system
        .local
        .client
        .post(format!("{}/api/agent/runs", system.local.base))
        .bearer_auth("alice-token")
        .json(&json!({"query": "again", "agent_slug": "waiter", "thread_id": thread_id}))
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["code"], "run_busy");
    assert_eq!(
        (body["active_run_id"].as_str(), body["thread_id"].as_str()),
        (Some(run_id.as_str()), Some(thread_id.as_str()))
    );
    assert_eq!(body["agent_slug"], "waiter");
    assert!(["pending", "running"].contains(&body["active_run_status"].as_str().expect("status")));
    // Bob cannot continue Alice's thread: it does not exist for him.
    let bob = system
        .local
        .client
        .post(format!("{}/api/agent/runs", system.local.base))
        .bearer_auth("bob-token")
        .json(&json!({"query": "mine now", "agent_slug": "waiter", "thread_id": thread_id}))
        .send()
        .await
        .expect("reaches");
    assert_eq!(bob.status(), 404);
    let (status, _) = system.get(&format!("/api/agent/runs/{run_id}"), "bob-token").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_running_child() {
    let system = start().await;
    let (run_id, _) = system.run("alice-token", "waiter", "go").await;
    let child = system.children("alice-token", &run_id, 1).await.remove(0);
    let child_run = child["run_id"].as_str().expect("run");
    let response = system
        .local
        .client
        .post(format!("{}/api/agent/runs/{run_id}/cancel", system.local.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status(), 200);
    assert_eq!(system.ended("alice-token", child_run).await["status"], "cancelled");
    assert_eq!(system.ended("alice-token", &run_id).await["status"], "cancelled");
}

#[tokio::test]
async fn a_parent_that_ends_leaves_no_child_running() {
    let system = start().await;
    let (run_id, _) = system.run("alice-token", "leaver", "go").await;
    assert_eq!(system.ended("alice-token", &run_id).await["status"], "completed");
    let events = system.events_until("alice-token", &run_id, |_| false).await;
    let children = announced(&events);
    assert_eq!(children.len(), 1);
    let child_run = children[0]["run_id"].as_str().expect("run");
    assert_eq!(system.ended("alice-token", child_run).await["status"], "cancelled");
}

#[tokio::test]
async fn a_child_of_another_parent_is_invisible_and_bad_tool_calls_are_errors_the_model_reads() {
    let system = start().await;
    let (victim_parent, _) = system.run("alice-token", "waiter", "go").await;
    let child = system.children("alice-token", &victim_parent, 1).await.remove(0);
    let child_run = child["run_id"].as_str().expect("run").to_string();

    // Another parent run of the same user, given the child's id, sees nothing of it.
    let (intruder, _) = system.run("alice-token", "intruder", &child_run).await;
    let record = system.ended("alice-token", &intruder).await;
    assert_eq!(record["status"], "completed", "the bad calls did not crash the parent: {record}");
    let result: Value = system.get(&format!("/api/agent/runs/{intruder}/result"), "alice-token").await.1;
    let output = result["output"].as_str().expect("output");
    let line = |name: &str| {
        output.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).unwrap_or_else(|| panic!("{name} in {output}"))
    };
    let stranger = "run does not exist or does not belong to the current parent run";
    assert!(line("status").contains(stranger), "{output}");
    assert!(line("cancel").contains(stranger), "{output}");
    assert!(line("allowlist").contains("\"research-explorer\" is not allowed here; allowed: slow-helper"), "{output}");
    assert!(line("argument").contains("priority"), "{output}");
    assert!(line("thread").contains("thread_id"), "{output}");
    assert!(line("limit").contains("limit"), "{output}");
    assert!(["pending", "running"].contains(&system.status("alice-token", &child_run).await.as_str()));

    // Nor does the user's own token make the intruder's calls succeed on it: the parent is the caller's
    // run, named in the body, and the child was started by another one.
    let (status, body) = system
        .local
        .tool(
            "subagent_status",
            "alice-token",
            json!({"parent": {"agent": "intruder", "run_id": intruder, "thread_id": "t"}, "run_id": child_run}),
        )
        .await;
    assert_eq!((status, body["message"].as_str()), (404, Some(stranger)));
}

#[tokio::test]
async fn another_users_threads_runs_and_files_named_as_a_parent_reach_nothing_of_theirs_and_answer_as_unused_names() {
    let system = start().await;
    let (alice_run, alice_thread) = system.run("alice-token", "deep-research", "what is in the report?").await;
    assert_eq!(system.ended("alice-token", &alice_run).await["status"], "completed");
    let events = system.events_until("alice-token", &alice_run, |_| false).await;
    let alice_children = announced(&events);
    let alice_child_thread = alice_children[0]["thread_id"].as_str().expect("thread").to_string();
    let start = |parent: Value, extra: Value| {
        let mut body = json!({"parent": parent, "description": "read it", "subagent_slug": "research-explorer"});
        body.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        body
    };
    // Bob names Alice's conversation as the file thread, her thread as his, her run as his parent: each
    // answers as a name nobody uses does, and reaches only Bob's own.
    let parent = |run: &str, thread: &str, file: Option<&str>| {
        let mut parent = json!({"agent": "deep-research", "run_id": run, "thread_id": thread});
        if let Some(file) = file {
            parent["file_thread_id"] = json!(file);
        }
        parent
    };
    let pairs = [
        (parent("bob-run", "bob-thread", Some(&alice_thread)), parent("bob-run", "bob-thread", Some("unused-file"))),
        (parent("bob-run", &alice_thread, None), parent("bob-run", "unused-thread", None)),
        (parent(&alice_run, "bob-thread-2", None), parent("unused-run", "bob-thread-2", None)),
    ];
    let keys = |answer: &Value| answer.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
    let alices_files = || {
        let mut found: Vec<std::path::PathBuf> = walkdir(&system.local.data.path().join("users/alice"));
        found.sort();
        found
    };
    let before = alices_files();
    for (strangers, unused) in pairs {
        let (status, answer) =
            system.local.tool("subagent_start", "bob-token", start(strangers.clone(), json!({}))).await;
        let (unused_status, unused_answer) =
            system.local.tool("subagent_start", "bob-token", start(unused, json!({}))).await;
        assert_eq!((status, unused_status), (200, 200), "{strangers} → {answer}; unused → {unused_answer}");
        assert_eq!(keys(&answer), keys(&unused_answer));
        assert_ne!(answer["created_by_run_id"], json!(alice_run), "{answer}");
        let child = answer["run_id"].as_str().expect("run id").to_string();
        assert_eq!(system.ended("bob-token", &child).await["status"], "completed");
        // Alice does not see Bob's child, and Bob's child sees nothing of Alice's.
        assert_eq!(system.get(&format!("/api/agent/runs/{child}"), "alice-token").await.0, 404);
    }
    let after = system.events_until("alice-token", &alice_run, |_| false).await;
    assert_eq!(announced(&after), alice_children, "Alice's run gained no child");
    assert_eq!(alices_files(), before, "nothing of Bob's children lands in Alice's folders");
    // Continuing Alice's child thread answers as continuing a child thread nobody used.
    let named = |thread: &str| start(parent("bob-run", &alice_thread, None), json!({"thread_id": thread}));
    let unused_child = format!("{alice_thread}_sub_research-explorer_0000abcd");
    let (status, refused) = system.local.tool("task", "bob-token", named(&alice_child_thread)).await;
    let (unused_status, unused_refused) = system.local.tool("task", "bob-token", named(&unused_child)).await;
    assert_eq!((status, unused_status), (422, 422), "{refused} / {unused_refused}");
    assert_eq!(
        refused["message"].as_str().map(|m| m.replace(&alice_child_thread, "x")),
        unused_refused["message"].as_str().map(|m| m.replace(&unused_child, "x"))
    );
    let (status, messages) = system.get(&format!("/api/threads/{alice_child_thread}/messages"), "alice-token").await;
    assert_eq!(status, 200);
    assert_eq!(
        messages["messages"].as_array().expect("messages").len(),
        2,
        "nothing added to Alice's thread: {messages}"
    );

    // A parent run's thread id leaves room for its children's ids.
    let response = system
        .local
        .client
        .post(format!("{}/api/agent/runs", system.local.base))
        .bearer_auth("alice-token")
        .json(&json!({"query": "q", "agent_slug": "deep-research", "thread_id": format!("M{}", "a".repeat(200))}))
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status(), 422);
}
