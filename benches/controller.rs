//! The controller's speed and memory, for `make bench`: `decide` alone over 10,000 AgentRuns, then the
//! real controller (watch, queue, reconcile: `decide` and the API calls that apply it) over 10,000 new
//! AgentRuns listed by an API-server stand-in on kube's mock service, which answers as an API server
//! does (the list, 404 for a pod not made yet, 201 for a create, 200 for a status patch), and the
//! controller's memory with those runs and their pods cached. Prints one Markdown table.
//!
//! `cargo bench --bench controller -- [--runs N] [--concurrency N]` (under `cargo test`, 200 runs: a check
//! that the bench still works, nothing measured).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::{Request, Response};
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use serde_json::{Value, json};
use yuxi_operator::controller::decide::{Observed, Settings, decide};
use yuxi_operator::controller::metrics::ControllerMetrics;
use yuxi_operator::controller::run_reconciler::{RunContext, run};
use yuxi_operator::resources::{Agent, AgentRun};
use yuxi_operator::store::Store;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const NAMESPACE: &str = "team-a";

fn agent_run(n: usize, created: &str) -> Value {
    json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": format!("run-{n:05}"), "namespace": NAMESPACE, "uid": format!("00000000-0000-0000-0000-{n:012}"),
                     "resourceVersion": format!("{}", 100 + n), "creationTimestamp": created, "generation": 1,
                     "labels": {"yuxi.dev/agent": "research-explorer", "yuxi.dev/parent-run": "parent-1"},
                     "managedFields": [{"manager": "yuxi-operator", "operation": "Apply", "apiVersion": "yuxi.dev/v1alpha1",
                                        "time": created, "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:spec": {"f:agent": {}, "f:input": {}, "f:uid": {}, "f:threadId": {}, "f:parent": {}}}}]},
        "spec": {"agent": "research-explorer", "uid": "alice", "threadId": format!("thread-{n}_sub_research-explorer_1a2b3c4d"),
                 "input": "Explore this research question and summarise what the material says about it, with sources.",
                 "parent": {"agent": "deep-research", "runId": "parent-1", "threadId": format!("thread-{n}"), "toolCallId": format!("call_{n}")},
                 "timeoutSeconds": 600}})
}

fn agent() -> Value {
    json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
           "metadata": {"name": "research-explorer", "namespace": NAMESPACE, "generation": 1, "resourceVersion": "7"},
           "spec": {"backend": "SubAgentBackend", "isSubagent": true, "description": "Explores a question",
                    "context": {"systemPrompt": "Explore the material and report what it says.", "skills": ["source-triage"]}},
           "status": {"observedGeneration": 1, "conditions": [
               {"type": "Accepted", "status": "True", "reason": "Valid", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"},
               {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}]}})
}

/// What the stand-in counts: status patches, pods created (one per run's first reconcile), every request.
#[derive(Default)]
struct Counts {
    patches: AtomicUsize,
    requests: AtomicUsize,
    creates: AtomicUsize,
}

/// An API-server stand-in: the list of `runs` (pre-serialized), empty pod lists, watches that stay
/// open, the Agent, 404 for a pod not made, 201 for creates (echoing the body), 200 for status patches.
fn api_server(runs_list: Arc<Vec<u8>>, counts: Arc<Counts>, created: String) -> kube::Client {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let agent = Arc::new(agent().to_string().into_bytes());
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (runs_list, counts, agent, created) =
                (runs_list.clone(), counts.clone(), agent.clone(), created.clone());
            tokio::spawn(async move {
                counts.requests.fetch_add(1, Ordering::Relaxed);
                let method = request.method().clone();
                let path = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
                let body = request.into_body().collect_bytes().await.unwrap_or_default();
                let watching = path.contains("watch=true");
                let (status, bytes): (u16, Vec<u8>) = if watching {
                    // A watch with nothing new: it stays open for the whole bench.
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    (200, Vec::new())
                } else if method == http::Method::GET && path.contains("/agentruns?") {
                    (200, runs_list.to_vec())
                } else if method == http::Method::GET && path.contains("/pods?") {
                    (200, json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": []}).to_string().into_bytes())
                } else if method == http::Method::GET && path.contains("/agents/") {
                    (200, agent.to_vec())
                } else if method == http::Method::GET {
                    let status = json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"});
                    (404, status.to_string().into_bytes())
                } else if method == http::Method::PATCH {
                    // A status patch answers the whole object with the status applied.
                    counts.patches.fetch_add(1, Ordering::Relaxed);
                    let n =
                        path.split("/agentruns/run-").nth(1).and_then(|rest| rest.get(..5)?.parse().ok()).unwrap_or(0);
                    let mut object = agent_run(n, &created);
                    let patch: Value = serde_json::from_slice(&body).unwrap_or_default();
                    object["status"] = patch["status"].clone();
                    (200, object.to_string().into_bytes())
                } else {
                    if path.contains("/pods?") {
                        counts.creates.fetch_add(1, Ordering::Relaxed);
                    }
                    (201, body.to_vec())
                };
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(bytes))
                    .expect("a response");
                send.send_response(response);
            });
        }
    });
    kube::Client::new(service, NAMESPACE)
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this as a quick check of the bench.
    let measuring = std::env::args().any(|a| a == "--bench");
    let runs = arg("--runs", if measuring { 10_000 } else { 200 });
    let concurrency = arg("--concurrency", 16) as u16;
    let created = jiff::Timestamp::now().to_string();
    let objects: Vec<Value> = (0..runs).map(|n| agent_run(n, &created)).collect();

    // decide alone, over typed runs.
    let typed: Vec<AgentRun> =
        objects.iter().map(|o| serde_json::from_value(o.clone()).expect("an AgentRun")).collect();
    let agent: Agent = serde_json::from_value(agent()).expect("an Agent");
    let settings = Settings::default();
    let now = jiff::Timestamp::now();
    let started = Instant::now();
    let mut actions = 0;
    for run in &typed {
        let observed = Observed {
            run,
            pod: None,
            agent: Some(&agent),
            model: None,
            outcome: None,
            quota: None,
            recorded: None,
            traces: None,
            mcp_servers: Default::default(),
            now,
        };
        let decided = decide(&observed, &settings);
        actions += decided.len();
    }
    let decide_per_s = runs as f64 / started.elapsed().as_secs_f64();
    drop(typed);

    let list = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRunList", "metadata": {"resourceVersion": "20000"}, "items": objects});
    let list = Arc::new(list.to_string().into_bytes());
    drop(objects);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let (reconcile_per_s, rss_before, rss_after, requests) = runtime.block_on(async move {
        let counts = Arc::new(Counts::default());
        let client = api_server(list, counts.clone(), created);
        let reporter = Reporter { controller: "yuxi-operator".into(), instance: Some("bench".into()) };
        let ctx = Arc::new(RunContext {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            store: Store::memory(),
            settings: Settings::default(),
            metrics: ControllerMetrics::default(),
            backoff: Default::default(),
            pools: None,
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let rss_before = rss_mib();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = futures::FutureExt::shared(futures::FutureExt::boxed(async move {
            let _ = stopped.await;
        }));
        let started = Instant::now();
        let controller = tokio::spawn(run(ctx, Some(vec![NAMESPACE.into()]), concurrency, shutdown));
        while counts.creates.load(Ordering::Relaxed) < runs {
            assert!(started.elapsed() < Duration::from_secs(600), "the controller did not reconcile every run");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let reconcile_per_s = runs as f64 / started.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_after = rss_mib();
        let _ = stop.send(());
        controller.abort();
        let creates = counts.creates.load(Ordering::Relaxed);
        assert!(creates >= runs, "each run's first reconcile creates its pod: {creates} creates for {runs} runs");
        (reconcile_per_s, rss_before, rss_after, counts.requests.load(Ordering::Relaxed))
    });
    println!("| controller | value |");
    println!("| --- | --- |");
    println!("| `decide` alone, runs/s ({runs} new AgentRuns, {actions} actions) | {decide_per_s:.0} |");
    println!(
        "| watch + reconcile (decide and apply: {:.1} API requests per run), runs/s at concurrency {concurrency} | {reconcile_per_s:.0} |",
        requests as f64 / runs as f64
    );
    println!("| RSS before the controller starts (MiB) | {rss_before:.1} |");
    println!("| RSS with {runs} AgentRuns reconciled and cached (MiB) | {rss_after:.1} |");
    println!("| RSS per cached AgentRun (KiB) | {:.1} |", (rss_after - rss_before) * 1024.0 / runs as f64);
}
