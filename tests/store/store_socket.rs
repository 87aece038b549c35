//! The store socket: the local mode's in-process store served to its runner subprocesses. The client
//! answers as the store it reaches; bad lines get error answers and never stop the server; the runner
//! binary runs over it, and its commands cannot reach it.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use yuxi_operator::run::message::Message;
use yuxi_operator::run::{EventKind, RunResult};
use yuxi_operator::store::socket::{MAX_LINE_BYTES, bind_store_socket, serve_store_socket};
use yuxi_operator::store::{RunnerStoreClient, Store, StoreError};

use crate::support::runner::{RunFiles, stderr, subagent};

/// `store` served on `store.sock` in a new folder under `parent` (kept while the folder lives).
async fn serve_in(parent: &Path, store: &Store) -> (TempDir, PathBuf) {
    let dir = TempDir::new_in(parent).expect("temp dir");
    let path = dir.path().join("store.sock");
    let listener = bind_store_socket(&path).await.expect("binds");
    tokio::spawn(serve_store_socket(listener, store.clone()));
    (dir, path)
}

async fn serve(store: &Store) -> (TempDir, PathBuf) {
    serve_in(&std::env::temp_dir(), store).await
}

/// The runner's operations on `store`, in the order a run makes them, with every answer; `backing` is
/// the store itself (where a cancel is asked for, and events are read back).
async fn runner_operations(store: &RunnerStoreClient, backing: &Store) -> Vec<Value> {
    const TTL: Duration = Duration::from_secs(30);
    let mut answers = vec![
        json!(store.hold_run_lease("run-1", "first", TTL).await.expect("lease")),
        json!(store.hold_run_lease("run-1", "second", TTL).await.expect("lease")),
        json!(store.hold_run_lease("run-1", "first", TTL).await.expect("renewal")),
        json!(store.run_result("run-1").await.expect("result")),
        json!(store.thread_messages("thread-1").await.expect("history")),
    ];
    for (event, payload) in
        [(EventKind::Metadata, json!({"agent_slug": "helper"})), (EventKind::Messages, json!({"type": "x"}))]
    {
        answers.push(json!(store.append_event("run-1", "thread-1", event, payload).await.expect("append")));
    }
    answers.push(json!(store.is_cancel_requested("run-1").await.expect("cancel?")));
    backing.request_cancel("run-1").await.expect("cancel");
    answers.push(json!(store.is_cancel_requested("run-1").await.expect("cancel?")));
    let noticed = tokio::time::timeout(Duration::from_secs(2), store.cancelled("run-1", Duration::from_millis(20)));
    answers.push(json!(noticed.await.is_ok()));
    let messages = vec![
        Message::User { content: "Look around.".into() },
        Message::Assistant { content: Some("Nothing here.".into()), tool_calls: vec![] },
    ];
    let result: RunResult =
        serde_json::from_value(json!({"status": "cancelled", "output": "", "run_id": "run-1"})).expect("a result");
    // The end of a run without a record (one applied with kubectl): written once, with its `end` event.
    answers.push(json!(store.finish_run("run-1", "thread-1", &messages, &result).await.expect("finish")));
    answers.push(json!(store.finish_run("run-1", "thread-1", &messages, &result).await.expect("finish again")));
    answers.push(json!(store.run_result("run-1").await.expect("result")));
    answers.push(json!(store.thread_messages("thread-1").await.expect("history")));
    store.release_run_lease("run-1", "second").await.expect("release");
    answers.push(json!(store.hold_run_lease("run-1", "second", TTL).await.expect("lease")));
    store.release_run_lease("run-1", "first").await.expect("release");
    answers.push(json!(store.hold_run_lease("run-1", "second", TTL).await.expect("lease")));
    answers.push(json!(store.hold_run_lease("run-2", "first", Duration::from_millis(1)).await.expect("lease")));
    tokio::time::sleep(Duration::from_millis(20)).await;
    answers.push(json!(store.hold_run_lease("run-2", "second", TTL).await.expect("a lapsed lease is free")));
    for event in backing.read_events("run-1", "0-0", 50).await.expect("events") {
        let e = event.envelope;
        answers.push(json!([event.seq, e.schema_version, e.run_id, e.thread_id, e.event, e.payload]));
    }
    answers
}

#[tokio::test]
async fn the_socket_store_answers_as_the_store_it_serves() {
    let direct = Store::memory();
    let expected = runner_operations(&direct.clone().into(), &direct).await;
    assert_eq!(&expected[..3], [json!(true), json!(false), json!(true)], "one holder at a time, who may renew");
    assert_eq!(&expected[5..10], [json!("1-0"), json!("2-0"), json!(false), json!(true), json!(true)]);
    assert_eq!(&expected[10..12], [json!(true), json!(false)], "a run ends once: {expected:#?}");
    assert_eq!(&expected[14..18], [json!(false), json!(true), json!(true), json!(true)], "{expected:#?}");
    assert_eq!(expected.len(), 21, "three events read back, the last one `end`: {expected:#?}");
    assert_eq!(expected[20][4], json!("end"), "{expected:#?}");

    let served = Store::memory();
    let (_dir, path) = serve(&served).await;
    let client = RunnerStoreClient::connect_socket(&path).await.expect("connects");
    assert_eq!(runner_operations(&client, &served).await, expected);
}

/// The client has no other operations (`RunnerStoreClient` offers none; its doc tests check that they do
/// not compile), and the server refuses them.
#[tokio::test]
async fn the_socket_carries_only_the_runners_operations() {
    let (_dir, path) = serve(&Store::memory()).await;
    let mut raw = Raw::connect(&path).await;
    for line in [
        br#"{"op": "read_events", "run_id": "run-1", "after_seq": "0-0", "limit": 10}"#.as_slice(),
        br#"{"op": "request_cancel", "run_id": "run-1"}"#,
        br#"{"op": "run_record", "run_id": "run-1"}"#,
    ] {
        let answer = raw.ask(line).await;
        let error = answer["error"].as_str().unwrap_or_else(|| panic!("{answer}"));
        assert!(error.contains("unknown variant"), "{:?}: {error}", String::from_utf8_lossy(line));
    }
}

#[tokio::test]
async fn the_socket_is_private_and_a_served_one_is_not_taken_over() {
    let (_dir, path) = serve(&Store::memory()).await;
    let metadata = std::fs::metadata(&path).expect("exists");
    assert!(metadata.file_type().is_socket());
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
    let err = bind_store_socket(&path).await.expect_err("served already");
    assert!(err.to_string().contains("another process serves it"), "{err}");
    RunnerStoreClient::connect_socket(&path).await.expect("the first server still answers");

    // A socket file nobody serves (a local mode that was killed) is replaced.
    let dir = TempDir::new().expect("dir");
    let stale = dir.path().join("store.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("binds"));
    assert!(RunnerStoreClient::connect_socket(&stale).await.is_err(), "nobody serves it");
    let listener = bind_store_socket(&stale).await.expect("replaces the stale file");
    tokio::spawn(serve_store_socket(listener, Store::memory()));
    let client = RunnerStoreClient::connect_socket(&stale).await.expect("connects");
    assert!(!client.is_cancel_requested("run-1").await.expect("answers"));
    let leftovers: Vec<_> =
        std::fs::read_dir(dir.path()).expect("list").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(leftovers, ["store.sock"], "no staging file is left");
}

/// A raw connection to the socket: sends lines, reads answers.
struct Raw {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
}

impl Raw {
    async fn connect(path: &Path) -> Raw {
        let (read, writer) = UnixStream::connect(path).await.expect("connects").into_split();
        Raw { reader: BufReader::new(read), writer }
    }

    async fn ask(&mut self, line: &[u8]) -> Value {
        self.writer.write_all(line).await.expect("writes");
        self.writer.write_all(b"\n").await.expect("writes");
        let mut answer = String::new();
        self.reader.read_line(&mut answer).await.expect("reads");
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{answer:?} is not JSON: {e}"))
    }
}

#[tokio::test]
async fn a_malformed_request_gets_an_error_answer_and_the_connection_goes_on() {
    let (_dir, path) = serve(&Store::memory()).await;
    let mut raw = Raw::connect(&path).await;
    let cases: [(&[u8], &str); 7] = [
        (b"not json", "not a store request"),
        (b"", "not a store request"),
        (b"\xff\xfe", "not a store request"),
        (br#"{"op": "drop_everything"}"#, "unknown variant `drop_everything`"),
        (br#"{"run_id": "run-1"}"#, "missing field `op`"),
        (br#"{"op": "run_result"}"#, "missing field `run_id`"),
        (br#"{"op": "run_result", "run_id": "../run-1"}"#, "\"../run-1\" is not a valid id"),
    ];
    for (line, fragment) in cases {
        let answer = raw.ask(line).await;
        let error = answer["error"].as_str().unwrap_or_else(|| panic!("{answer}"));
        assert!(error.contains(fragment), "{:?}: {error}", String::from_utf8_lossy(line));
    }
    let appended = raw
        .ask(br#"{"op": "append_event", "run_id": "run-1", "thread_id": "t", "event": "metadata", "payload": {}}"#)
        .await;
    assert_eq!(appended, json!({"ok": "1-0"}));
    assert_eq!(raw.ask(br#"{"op": "is_cancel_requested", "run_id": "run-1"}"#).await, json!({"ok": false}));
}

#[tokio::test]
async fn an_oversized_request_is_refused_and_the_server_goes_on() {
    let (_dir, path) = serve(&Store::memory()).await;
    let mut raw = Raw::connect(&path).await;
    let oversized = vec![b'a'; MAX_LINE_BYTES + 1];
    raw.writer.write_all(&oversized).await.expect("the server reads up to the limit");
    let mut answer = String::new();
    raw.reader.read_line(&mut answer).await.expect("answers");
    let answer: Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["error"], format!("the request is longer than {MAX_LINE_BYTES} bytes"));
    let mut rest = Vec::new();
    raw.reader.read_to_end(&mut rest).await.expect("reads");
    assert!(rest.is_empty(), "the server hung up");

    // The client refuses to send such a request; the server and the client's connection go on.
    let client = RunnerStoreClient::connect_socket(&path).await.expect("connects");
    let huge: RunResult =
        serde_json::from_value(json!({"status": "completed", "output": "x".repeat(MAX_LINE_BYTES)})).expect("a result");
    let err = client.finish_run("run-1", "thread-1", &[], &huge).await.expect_err("too long");
    assert!(err.to_string().contains("longer than the socket's limit"), "{err}");
    assert_eq!(client.run_result("run-1").await.expect("answers"), None);
}

#[test]
fn the_client_reconnects_when_the_server_comes_back() {
    let dir = TempDir::new().expect("dir");
    let path = dir.path().join("store.sock");
    let memory = Store::memory();
    let start_server = || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let listener = runtime.block_on(bind_store_socket(&path)).expect("binds");
        runtime.spawn(serve_store_socket(listener, memory.clone()));
        runtime
    };
    let client_runtime = tokio::runtime::Runtime::new().expect("runtime");
    let server = start_server();
    let client = client_runtime.block_on(RunnerStoreClient::connect_socket(&path)).expect("connects");
    let append = |event: EventKind| client_runtime.block_on(client.append_event("run-1", "t", event, json!({})));
    assert_eq!(append(EventKind::Metadata).expect("appends"), "1-0");

    // Dropping the runtime drops the server and its connections, as when the local mode stops.
    drop(server);
    let err = append(EventKind::Messages).expect_err("nobody serves the socket");
    assert!(matches!(&err, StoreError::Socket { path: p, .. } if *p == path), "{err}");
    assert!(err.to_string().contains("cannot connect"), "{err}");

    let _server = start_server();
    assert_eq!(append(EventKind::Messages).expect("a new connection"), "2-0");
    let events = client_runtime.block_on(memory.read_events("run-1", "0-0", 10)).expect("events");
    assert_eq!(events.len(), 2, "nothing was written twice: {events:?}");
}

/// Waits for `command` to finish without blocking the server that runs on this runtime.
async fn output(mut command: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || command.output().expect("runs")).await.expect("joins")
}

#[tokio::test]
async fn the_runner_binary_runs_over_the_socket_and_its_commands_cannot_reach_it() {
    let store = Store::memory();
    // In /var/tmp: the sandbox shows /tmp, /home and /root empty, which would hide it anyway (and the
    // repository, hence its target folder, may live in any of them).
    let (_dir, socket) = serve_in(Path::new("/var/tmp"), &store).await;
    let probe = format!("test -S {} && echo reachable || echo hidden", socket.display());
    let files = RunFiles::new(
        &subagent("{toolApprovalMode: AlwaysTrust}"),
        &format!("[{{tool_calls: [{{name: execute, arguments: {{command: '{probe}'}}}}]}}, {{content: all done}}]"),
    );
    let output = output(files.command_on_socket(&socket)).await;
    assert!(output.status.success(), "{}", stderr(&output));

    let events: Vec<_> = store.read_events(&files.run_id, "0-0", 100).await.expect("events");
    let names: Vec<&str> = events.iter().map(|e| e.envelope.event.as_str()).collect();
    assert_eq!((names.first(), names.last()), (Some(&"metadata"), Some(&"end")), "{names:?}");
    let probed = events
        .iter()
        .find(|e| e.envelope.payload["type"] == "tool_result" && e.envelope.payload["name"] == "execute")
        .and_then(|e| e.envelope.payload["content"].as_str())
        .expect("execute ran");
    assert!(probed.contains("hidden") && !probed.contains("reachable"), "a command reached the store socket: {probed}");
    let result = serde_json::to_value(store.run_result(&files.run_id).await.expect("result").expect("stored")).unwrap();
    assert_eq!((result["status"].as_str(), result["output"].as_str()), (Some("completed"), Some("all done")));
    let history = store.thread_messages(&format!("{}-thread", files.run_id)).await.expect("history");
    assert_eq!(history.len(), 4, "user, assistant with the call, its result, answer: {history:#?}");
}

#[tokio::test]
async fn a_cancel_stops_a_runner_on_the_socket_within_two_seconds() {
    let store = Store::memory();
    let (_dir, socket) = serve(&store).await;
    let files = RunFiles::new(&subagent("{}"), "[{delay_ms: 60000, content: never}]");
    let mut child = files.command_on_socket(&socket).spawn().expect("starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.read_events(&files.run_id, "0-0", 1).await.expect("events").is_empty() {
        assert!(Instant::now() < deadline, "the runner wrote no metadata");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = Instant::now();
    store.request_cancel(&files.run_id).await.expect("cancel");
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(asked.elapsed() < Duration::from_secs(5), "the runner did not stop");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(asked.elapsed() < Duration::from_secs(2), "stopped in {:?}", asked.elapsed());
    assert!(status.success(), "a cancelled run exits 0");
    let result = serde_json::to_value(store.run_result(&files.run_id).await.expect("result").expect("stored")).unwrap();
    assert_eq!(result["status"], "cancelled");
}

#[tokio::test]
async fn the_runner_takes_exactly_one_store() {
    let files = RunFiles::new(&subagent("{}"), "[{content: x}]");
    let neither = output(files.command_without_store()).await;
    assert_eq!(neither.status.code(), Some(2));
    assert!(stderr(&neither).contains("<--redis-url <REDIS_URL>|--store-socket <PATH>>"), "{}", stderr(&neither));

    let mut both = files.command_on_socket(Path::new("/nonexistent/store.sock"));
    both.env("YUXI_REDIS_URL", "redis://127.0.0.1:1");
    let both = output(both).await;
    assert_eq!(both.status.code(), Some(2));
    assert!(stderr(&both).contains("cannot be used with"), "{}", stderr(&both));

    let dir = TempDir::new().expect("dir");
    let unreachable = output(files.command_on_socket(&dir.path().join("store.sock"))).await;
    assert_eq!(unreachable.status.code(), Some(2));
    assert!(
        stderr(&unreachable).contains("cannot reach the store socket (YUXI_STORE_SOCKET)"),
        "{}",
        stderr(&unreachable)
    );
}
