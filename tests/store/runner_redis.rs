//! The runner against a real Redis: the store's contract, and the `runner` binary run as the controller
//! and the local mode run it (a subprocess with the contract's files and environment).
//! `make test` starts the Redis server and sets `YUXI_TEST_REDIS_URL`.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use yuxi_operator::run::Envelope;
use yuxi_operator::run::message::Message;
use yuxi_operator::run::{EventKind, RunResult, RunStatus};
use yuxi_operator::store::keys;
use yuxi_operator::store::{Store, StoreAuth, StoreError};

use crate::support::redis::{redis_url, unique};
use crate::support::runner::{RunFiles, stderr, subagent};

async fn store() -> Store {
    Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis answers, with its password")
}

/// A new, pending parent run `run_id` of `uid` on `thread_id`, as a facade records it.
fn pending(run_id: &str, thread_id: &str, uid: &str) -> yuxi_operator::run::RunRecord {
    yuxi_operator::run::RunRecord {
        run_id: run_id.into(),
        thread_id: thread_id.into(),
        agent_slug: "research-explorer".into(),
        uid: uid.into(),
        parent: None,
        status: yuxi_operator::run::RunStatus::Pending,
        error: None,
        created_at: "2026-12-01T10:00:00Z".into(),
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    }
}

async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url()).expect("url").get_multiplexed_async_connection().await.expect("connects")
}

/// A Redis of this test's own that answers anyone: no password, listening on a Unix socket only. Stopped
/// when the guard drops.
struct AnonymousRedis {
    dir: tempfile::TempDir,
    server: std::process::Child,
}

impl AnonymousRedis {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("redis.sock");
        let server = Command::new("redis-server")
            .args(["--port", "0", "--save", "", "--appendonly", "no", "--unixsocket"])
            .arg(&socket)
            .arg("--dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (make test installs it)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "redis-server did not open its socket");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { dir, server }
    }

    fn url(&self) -> String {
        format!("redis+unix://{}", self.dir.path().join("redis.sock").display())
    }
}

impl Drop for AnonymousRedis {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

#[tokio::test]
async fn a_redis_that_answers_without_a_password_is_refused_unless_allowed() {
    let open = AnonymousRedis::start();
    let refused = Store::connect_redis(&open.url(), StoreAuth::Required).await.err().expect("refused");
    assert!(matches!(refused, StoreError::Unauthenticated { .. }), "{refused}");
    assert!(refused.to_string().contains("--allow-unauthenticated-store"), "{refused}");
    Store::connect_redis(&open.url(), StoreAuth::AllowAnonymous).await.expect("allowed, with a warning");
    // The test Redis has a password: it is accepted, and refuses a client without one.
    let url = redis_url();
    let info = redis::IntoConnectionInfo::into_connection_info(url.as_str()).expect("url");
    assert!(info.redis_settings().password().is_some(), "make test gives the test Redis a password");
    assert!(!yuxi_operator::store::admits_anonymous(&info).await, "the test Redis answers anonymous clients");
    store().await;
}

#[tokio::test]
async fn events_are_a_stream_with_a_cursor_and_a_refreshed_ttl() {
    let store = store().await;
    let run = unique("run");
    let first = store.append_event(&run, "t", EventKind::Metadata, json!({"a": 1})).await.expect("append");
    let second = store.append_event(&run, "t", EventKind::Messages, json!({"b": 2})).await.expect("append");
    let third = store.append_event(&run, "t", EventKind::End, json!({"status": "completed"})).await.expect("append");

    let all = store.read_events(&run, "0-0", 50).await.expect("read");
    assert_eq!(
        all.iter().map(|e| e.seq.as_str()).collect::<Vec<_>>(),
        [first.as_str(), second.as_str(), third.as_str()]
    );
    assert_eq!(all[0].envelope.event, "metadata");
    assert_eq!(all[0].envelope.payload, json!({"a": 1}));
    assert_eq!((all[0].envelope.schema_version, all[0].envelope.run_id.as_str()), (1, run.as_str()));
    let after_first = store.read_events(&run, &first, 1).await.expect("read");
    assert_eq!(after_first.len(), 1);
    assert_eq!(after_first[0].seq, second, "after_seq is exclusive and limit bounds the page");

    let mut connection = raw().await;
    let ttl: i64 = redis::cmd("TTL").arg(keys::run_events(&run)).query_async(&mut connection).await.expect("ttl");
    assert!(ttl > keys::EVENTS_TTL_SECONDS - 60 && ttl <= keys::EVENTS_TTL_SECONDS, "ttl {ttl}");
    // The raw entry carries the event name and the JSON envelope.
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(keys::run_events(&run))
        .arg("-")
        .arg("+")
        .query_async(&mut connection)
        .await
        .expect("xrange");
    assert_eq!(reply.ids[2].get::<String>("event").as_deref(), Some("end"));
    let envelope: Envelope =
        serde_json::from_str(&reply.ids[2].get::<String>("data").expect("data")).expect("envelope");
    assert_eq!(envelope.payload["status"], "completed");
}

#[tokio::test]
async fn a_run_record_keeps_its_time_to_live_through_status_changes() {
    let store = store().await;
    let run = unique("run");
    let record = pending(&run, &unique("thread"), "alice");
    store.create_run(&record, None, Default::default()).await.expect("create");
    let connection = raw().await;
    let ttl = |mut connection: redis::aio::MultiplexedConnection| {
        let key = keys::run_record(&run);
        async move { redis::cmd("TTL").arg(key).query_async::<i64>(&mut connection).await.expect("ttl") }
    };
    let created = ttl(connection.clone()).await;
    assert!(created > 0, "a new record has a time to live: {created}");
    assert!(store.set_run_status(&run, RunStatus::Running, None).await.expect("status"));
    let running = ttl(connection.clone()).await;
    assert!(running > 0 && running <= created, "the record kept its time to live when it started running: {running}");
}

#[tokio::test]
async fn history_and_result_are_written_together() {
    let store = store().await;
    let (run, thread) = (unique("run"), unique("thread"));
    let messages = vec![
        Message::User { content: "q".into() },
        Message::Assistant { content: Some("a".into()), tool_calls: vec![] },
    ];
    let result: RunResult = serde_json::from_value(json!({"status": "completed", "output": "a"})).expect("a result");
    store.finish_run(&run, &thread, &messages, &result).await.expect("finish");
    assert_eq!(store.thread_messages(&thread).await.expect("history"), messages);
    assert_eq!(store.run_result(&run).await.expect("result"), Some(result));
    assert_eq!(store.thread_messages(&unique("thread")).await.expect("history"), vec![]);
}

#[tokio::test]
async fn a_cancel_notice_arrives_at_once() {
    let store = store().await;
    let run = unique("run");
    assert!(!store.is_cancel_requested(&run).await.expect("flag"));
    let waiter = {
        let store = store.clone();
        let run = run.clone();
        // A long poll interval: only the pub/sub notice can wake it in time.
        tokio::spawn(async move { store.cancelled(&run, Duration::from_secs(60)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    store.request_cancel(&run).await.expect("cancel");
    tokio::time::timeout(Duration::from_secs(2), waiter).await.expect("woken by the notice").expect("no panic");
    assert!(asked.elapsed() < Duration::from_secs(2));
    assert!(store.is_cancel_requested(&run).await.expect("flag"));
    let mut connection = raw().await;
    let ttl: i64 = redis::cmd("TTL").arg(keys::run_cancel(&run)).query_async(&mut connection).await.expect("ttl");
    assert!(ttl > 0 && ttl <= keys::CANCEL_TTL_SECONDS, "ttl {ttl}");
}

async fn run_events(run_id: &str) -> Vec<Envelope> {
    store().await.read_events(run_id, "0-0", 1000).await.expect("events").into_iter().map(|e| e.envelope).collect()
}

fn assert_framed(events: &[Envelope], status: &str) {
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert_eq!(names.iter().filter(|n| **n == "end").count(), 1);
    assert_eq!(events.last().expect("end").payload["status"], status);
}

#[tokio::test]
async fn the_runner_binary_completes_a_run_and_execute_sees_no_secret() {
    let files = RunFiles::new(
        &subagent("{toolApprovalMode: AlwaysTrust}"),
        "[{tool_calls: [{name: execute, arguments: {command: env}}, {name: write_file, arguments: {path: /home/gem/user-data/outputs/out.md, content: hi}}]}, {content: all done}]",
    );
    let output = files.command().output().expect("runs");
    assert!(output.status.success(), "{}", stderr(&output));
    let log = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
    for secret in ["sk-secret-model-key", "run-token-secret"] {
        assert!(!log.contains(secret), "the runner printed a secret: {log}");
    }

    let events = run_events(&files.run_id).await;
    assert_framed(&events, "completed");
    assert_eq!(events[0].payload["model"], "scripted/file:script.yaml");
    assert_eq!(events[0].payload["thread_id"], format!("{}-thread", files.run_id));
    let env_result = events
        .iter()
        .find(|e| e.event == "messages" && e.payload["type"] == "tool_result" && e.payload["name"] == "execute")
        .expect("execute ran");
    let env = env_result.payload["content"].as_str().expect("text");
    assert!(env.contains("PATH="), "{env}");
    for secret in ["sk-secret-model-key", "run-token-secret", "YUXI_REDIS_URL", "OPENAI_API_KEY"] {
        assert!(!env.contains(secret), "execute saw {secret}: {env}");
    }
    assert_eq!(std::fs::read_to_string(files.path("outputs/out.md")).expect("written"), "hi");

    let store = store().await;
    let result = serde_json::to_value(store.run_result(&files.run_id).await.expect("result").expect("stored")).unwrap();
    assert_eq!((result["status"].as_str(), result["output"].as_str()), (Some("completed"), Some("all done")));
    let history = store.thread_messages(&format!("{}-thread", files.run_id)).await.expect("history");
    assert_eq!(history.len(), 5, "user, assistant with two calls, two tool results, answer: {history:#?}");
}

/// A warm pod's runner as its pod starts it: the run's files not there yet, waiting for the claim of
/// pod `pod_uid` for at most `wait_seconds`.
fn awaiting(files: &RunFiles, pod_uid: &str, wait_seconds: u32) -> (std::process::Child, std::path::PathBuf) {
    let inputs = files.path("inputs");
    std::fs::create_dir_all(&inputs).expect("inputs folder");
    let command = files.command();
    let args: Vec<std::ffi::OsString> = command.get_args().map(ToOwned::to_owned).collect();
    let mut warm = Command::new(command.get_program());
    warm.args(args.iter().map(|a| {
        let text = a.to_string_lossy();
        if text.ends_with("/run.yaml") {
            inputs.join("run.yaml").into_os_string()
        } else if text.ends_with("/agent.yaml") {
            inputs.join("agent.yaml").into_os_string()
        } else {
            a.clone()
        }
    }));
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => warm.env(key, value),
            None => warm.env_remove(key),
        };
    }
    warm.env_remove("YUXI_RUN_TOKEN").env("YUXI_POD_UID", pod_uid);
    warm.args(["--await-claim", "--claim-wait-seconds", &wait_seconds.to_string()]);
    warm.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    (warm.spawn().expect("runner"), inputs)
}

#[tokio::test]
async fn a_warm_runner_runs_the_claim_of_its_own_pod_and_no_other() {
    let files = RunFiles::new(&subagent("{}"), "[{content: claimed and done}]");
    let pod = unique("pod");
    let (runner, inputs) = awaiting(&files, &pod, 30);
    let store = store().await;
    let claim = |run: &str| {
        let files_of = |name: &str| std::fs::read_to_string(files.path(name)).expect("manifest");
        serde_json::to_string(&yuxi_operator::run::claim::Claim {
            run: run.to_string(),
            files: [("run.yaml", files_of("run.yaml")), ("agent.yaml", files_of("agent.yaml"))]
                .map(|(k, v)| (k.to_string(), v))
                .into(),
            token: Some("claimed-run-token".into()),
        })
        .expect("json")
    };
    // Another pod's claim is not this runner's.
    let other = unique("pod");
    store.offer_claim(&other, &claim("someone-else")).await.expect("offered");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!inputs.join("run.yaml").exists(), "the runner took no other pod's claim");
    store.offer_claim(&pod, &claim(&files.run_id)).await.expect("offered");
    let output = tokio::task::spawn_blocking(move || runner.wait_with_output()).await.expect("joined").expect("ran");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!stderr(&output).contains("claimed-run-token"), "the token is never printed");
    let result = store.run_result(&files.run_id).await.expect("result").expect("stored");
    assert_eq!(result.output, "claimed and done");
    let mut redis = raw().await;
    let left: Vec<String> =
        redis::cmd("LRANGE").arg(keys::pod_claim(&pod)).arg(0).arg(-1).query_async(&mut redis).await.expect("lrange");
    assert!(left.is_empty(), "the claim is taken, once");
    let others: Vec<String> =
        redis::cmd("LRANGE").arg(keys::pod_claim(&other)).arg(0).arg(-1).query_async(&mut redis).await.expect("lrange");
    assert_eq!(others.len(), 1, "the other pod's claim is still its own");
}

#[tokio::test]
async fn a_warm_runner_no_run_claims_ends_without_running_anything() {
    let files = RunFiles::new(&subagent("{}"), "[{content: never}]");
    let (runner, inputs) = awaiting(&files, &unique("pod"), 1);
    let output = tokio::task::spawn_blocking(move || runner.wait_with_output()).await.expect("joined").expect("ran");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("no run claimed this pod in 1 s"), "{}", stderr(&output));
    assert!(!inputs.join("run.yaml").exists());
    assert_eq!(store().await.run_result(&files.run_id).await.expect("result"), None, "nothing ran");
}

#[tokio::test]
async fn a_cancel_through_redis_stops_the_runner_binary() {
    let files = RunFiles::new(&subagent("{}"), "[{delay_ms: 60000, content: never}]");
    let mut child = files.command().spawn().expect("starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while run_events(&files.run_id).await.is_empty() {
        assert!(Instant::now() < deadline, "the runner wrote no metadata");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = Instant::now();
    store().await.request_cancel(&files.run_id).await.expect("cancel");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(asked.elapsed() < Duration::from_secs(5), "the runner did not stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(asked.elapsed() < Duration::from_secs(2), "stopped in {:?}", asked.elapsed());
    assert!(status.success(), "a cancelled run exits 0");
    assert_framed(&run_events(&files.run_id).await, "cancelled");
}

fn assert_failed_with(events: &[Envelope], fragment: &str) {
    assert_framed(events, "failed");
    let error = events.iter().find(|e| e.event == "error").expect("an error event");
    let message = error.payload["message"].as_str().expect("message");
    assert!(message.contains(fragment), "{message}");
}

#[tokio::test]
async fn a_malformed_agent_fails_the_run_with_an_error_event() {
    let files = RunFiles::new(&subagent("{maxExecutionSteps: many}"), "[{content: x}]");
    let output = files.command().output().expect("runs");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_failed_with(&run_events(&files.run_id).await, "spec.context.maxExecutionSteps");
}

#[tokio::test]
async fn an_unknown_model_provider_fails_the_run() {
    let files = RunFiles::new(&subagent("{model: anthropic/claude}"), "[{content: x}]");
    let output = files.command().output().expect("runs");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_failed_with(&run_events(&files.run_id).await, "no model provider \"anthropic\"");
}

#[tokio::test]
async fn a_model_script_that_is_not_a_list_fails_the_run() {
    let files = RunFiles::new(&subagent("{}"), "content: not a list");
    let output = files.command().output().expect("runs");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_failed_with(&run_events(&files.run_id).await, "is not a list of turns");
}

#[tokio::test]
async fn an_unusable_run_file_writes_nothing_and_exits_2() {
    let files = RunFiles::new(&subagent("{}"), "[{content: x}]");
    std::fs::write(
        files.path("run.yaml"),
        "apiVersion: yuxi.dev/v1alpha1\nkind: AgentRun\nmetadata: {name: r}\nspec: {input: x}\n",
    )
    .expect("write");
    let output = files.command().output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("spec.agent: is required"), "{}", stderr(&output));
}

#[tokio::test]
async fn an_unreachable_redis_exits_2_with_a_message() {
    let files = RunFiles::new(&subagent("{}"), "[{content: x}]");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let output = files.command().env("YUXI_REDIS_URL", format!("redis://127.0.0.1:{port}")).output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot reach Redis"), "{}", stderr(&output));
}

#[test]
fn the_runner_contract_is_in_its_help() {
    let output = Command::new(env!("CARGO_BIN_EXE_yuxi-operator")).args(["runner", "--help"]).output().expect("runs");
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--run",
        "--agent",
        "--workspace",
        "--uploads",
        "--outputs",
        "--skills",
        "--sandbox-socket",
        "YUXI_REDIS_URL",
        "--store-socket",
        "YUXI_STORE_SOCKET",
    ] {
        assert!(help.contains(flag), "{flag} missing from: {help}");
    }
}

#[tokio::test]
async fn a_script_outside_the_scripts_folder_is_refused_without_quoting_it() {
    let files = RunFiles::new(&subagent("{model: \"scripted/file:../../../etc/passwd\"}"), "[{content: x}]");
    let output = files.command().output().expect("runs");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let events = run_events(&files.run_id).await;
    assert_failed_with(&events, "cannot read the model script ../../../etc/passwd");
    let all = serde_json::to_string(&events.iter().map(|e| &e.payload).collect::<Vec<_>>()).expect("json");
    assert!(!all.contains("root:"), "the file's content leaked: {all}");
}

#[tokio::test]
async fn one_runner_per_run_and_never_twice() {
    let files = RunFiles::new(&subagent("{}"), "[{delay_ms: 1500, content: finished}]");
    let mut first = files.command().spawn().expect("starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while run_events(&files.run_id).await.is_empty() {
        assert!(Instant::now() < deadline, "the first runner wrote no metadata");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = files.command().output().expect("runs");
    assert_eq!(second.status.code(), Some(2));
    assert!(stderr(&second).contains("already being executed by another runner"), "{}", stderr(&second));
    assert!(first.wait().expect("waits").success());
    let third = files.command().output().expect("runs");
    assert_eq!(third.status.code(), Some(2));
    assert!(stderr(&third).contains("has already finished"), "{}", stderr(&third));
    let events = run_events(&files.run_id).await;
    assert_framed(&events, "completed");
    assert_eq!(events.iter().filter(|e| e.event == "metadata").count(), 1);
}

#[tokio::test]
async fn run_records_keep_one_run_per_thread_and_never_leave_an_end() {
    use yuxi_operator::run::{Created, RunRecord, RunStatus};
    let store = store().await;
    let thread = unique("thread");
    let record = |run_id: &str| RunRecord {
        run_id: run_id.to_string(),
        thread_id: thread.clone(),
        agent_slug: "helper".into(),
        uid: "alice".into(),
        parent: None,
        status: RunStatus::Pending,
        error: None,
        created_at: "2026-11-30T00:00:00Z".into(),
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    };
    let (first, second) = (unique("run"), unique("run"));
    let key = unique("start");
    assert_eq!(
        store.create_run(&record(&first), Some(&key), Default::default()).await.expect("create"),
        Created::Started
    );
    assert_eq!(
        store.create_run(&record(&second), Some(&key), Default::default()).await.expect("create"),
        Created::Existing(first.clone())
    );
    assert_eq!(
        store.create_run(&record(&second), None, Default::default()).await.expect("create"),
        Created::Busy(first.clone())
    );

    assert!(store.set_run_status(&first, RunStatus::CancelRequested, None).await.expect("set"));
    assert!(!store.set_run_status(&first, RunStatus::Running, None).await.expect("set"), "running only from pending");
    assert!(store.set_run_status(&first, RunStatus::Cancelled, None).await.expect("set"));
    assert!(
        !store.set_run_status(&first, RunStatus::Completed, None).await.expect("set"),
        "a terminal status is final"
    );
    assert_eq!(store.run_record(&first).await.expect("read").expect("exists").status, RunStatus::Cancelled);
    assert_eq!(
        store.create_run(&record(&second), None, Default::default()).await.expect("create"),
        Created::Started,
        "the lock went with the end"
    );
}

#[tokio::test]
async fn a_users_unfinished_runs_are_limited_and_an_ended_run_stops_counting() {
    use yuxi_operator::run::{Created, RunLimit, RunLimits, RunStatus};
    let store = store().await;
    let uid = unique("user");
    let record = |run_id: &str| pending(run_id, &unique("thread"), &uid);
    let limits = RunLimits { per_user: 2, total: 1_000_000 };
    let (first, second, third) = (unique("run"), unique("run"), unique("run"));
    assert_eq!(store.create_run(&record(&first), None, limits).await.expect("create"), Created::Started);
    assert_eq!(store.create_run(&record(&second), None, limits).await.expect("create"), Created::Started);
    assert_eq!(
        store.create_run(&record(&third), None, limits).await.expect("create"),
        Created::Limited(RunLimit::PerUser)
    );
    assert!(store.run_record(&third).await.expect("read").is_none(), "a limited start records nothing");
    // However the first ended, it no longer counts; nor does a run whose record vanished.
    store.set_run_status(&first, RunStatus::Completed, None).await.expect("ended");
    assert_eq!(store.create_run(&record(&third), None, limits).await.expect("create"), Created::Started);
    let mut redis = raw().await;
    let () = redis::AsyncCommands::del(&mut redis, keys::run_record(&second)).await.expect("deleted");
    assert_eq!(store.create_run(&record(&unique("run")), None, limits).await.expect("create"), Created::Started);
}

#[tokio::test]
async fn the_recent_end_of_a_stream_is_read_without_reading_it_all() {
    for store in [store().await, Store::memory()] {
        let run = unique("run");
        let mut seqs = Vec::new();
        for n in 0..5 {
            seqs.push(store.append_event(&run, "t", EventKind::Messages, json!({"n": n})).await.expect("append"));
        }
        let recent = store.recent_events(&run, 2).await.expect("read");
        assert_eq!(recent.iter().map(|e| e.seq.as_str()).collect::<Vec<_>>(), [seqs[3].as_str(), seqs[4].as_str()]);
        assert_eq!(recent[1].envelope.payload, json!({"n": 4}), "oldest first");
        assert_eq!(store.recent_events(&run, 50).await.expect("read").len(), 5);
        assert!(store.recent_events(&unique("run"), 3).await.expect("read").is_empty());
    }
}

#[tokio::test]
async fn records_owners_and_histories_expire_and_a_history_is_bounded() {
    use yuxi_operator::run::RunStatus;
    let store = store().await;
    let (run, thread) = (unique("run"), unique("thread"));
    let record = pending(&run, &thread, &unique("user"));
    store.create_run(&record, None, Default::default()).await.expect("created");
    let messages: Vec<Message> =
        (0..keys::MAX_THREAD_MESSAGES + 5).map(|n| Message::User { content: format!("m{n}") }).collect();
    let result = RunResult {
        status: RunStatus::Completed,
        output: "ok".into(),
        error: None,
        agent_slug: "research-explorer".into(),
        run_id: run.clone(),
        thread_id: thread.clone(),
        token_usage: Default::default(),
        reason: None,
        tree_token_usage: None,
        tree_cost: Vec::new(),
    };
    store.finish_run(&run, &thread, &messages, &result).await.expect("finished");
    let history = store.thread_messages(&thread).await.expect("history");
    assert_eq!(history.len(), keys::MAX_THREAD_MESSAGES, "the oldest are dropped");
    assert_eq!(history[0], Message::User { content: "m5".into() });
    let mut redis = raw().await;
    for key in [keys::run_record(&run), keys::thread_owner(&thread), keys::thread_messages(&thread)] {
        let ttl: i64 = redis::cmd("TTL").arg(&key).query_async(&mut redis).await.expect("ttl");
        assert!(ttl > 0 && ttl <= keys::STATE_TTL_SECONDS, "{key}: {ttl}");
    }
}

#[tokio::test]
async fn ending_a_run_writes_record_result_lock_and_one_end_together_and_only_once() {
    use yuxi_operator::run::{Created, RunStatus};
    for store in [store().await, Store::memory()] {
        let (run, thread) = (unique("run"), unique("thread"));
        let record = pending(&run, &thread, &unique("user"));
        store.create_run(&record, None, Default::default()).await.expect("created");
        store.set_run_status(&run, RunStatus::Running, None).await.expect("running");
        assert!(store.end_run(&run, RunStatus::Interrupted, Some("the runner is gone")).await.expect("ended"));
        let after = store.run_record(&run).await.expect("read").expect("record");
        assert_eq!((after.status, after.error.as_deref()), (RunStatus::Interrupted, Some("the runner is gone")));
        let result = store.run_result(&run).await.expect("read").expect("a result");
        assert_eq!((result.status, result.error.as_deref()), (RunStatus::Interrupted, Some("the runner is gone")));
        let ends = |events: Vec<yuxi_operator::run::StoredEvent>| {
            events.into_iter().filter(|e| e.envelope.event == EventKind::End).collect::<Vec<_>>()
        };
        let end = ends(store.read_events(&run, "0-0", 50).await.expect("events"));
        assert_eq!(end.len(), 1);
        assert_eq!(end[0].envelope.payload, json!({"status": "interrupted", "error": "the runner is gone"}));
        // The thread is free, and a second end changes nothing.
        let mut next = record.clone();
        next.run_id = unique("run");
        assert_eq!(store.create_run(&next, None, Default::default()).await.expect("create"), Created::Started);
        assert!(!store.end_run(&run, RunStatus::Failed, Some("again")).await.expect("read"));
        assert_eq!(ends(store.read_events(&run, "0-0", 50).await.expect("events")).len(), 1);
        assert_eq!(store.run_record(&run).await.expect("read").expect("record").status, RunStatus::Interrupted);
    }
}
