//! The README's deep-research flow in real pods (`make e2e-local`): a control plane and a node built from
//! pinned sources (`scripts/kube-bin`) on this machine, in namespaces of the test's own
//! (`scripts/kube-netns`), the two images `make image` built (the control plane's and the sandbox's)
//! imported into the node's containerd, the chart installed by Helm as a platform team installs it on a
//! one-node cluster, and a deep-research run asked of the facade through its Service: the chart's roles
//! and every AgentRun's sandbox pod run in pods, the runner reaches the facade with its run token, the
//! events stream, the report lands in the outputs volume and the AgentRuns end `Completed`.
//!
//! What differs from a cloud cluster, each named: storage is hostPath PersistentVolumes bound to the
//! chart's claims (there is no provisioner); Redis is a server on the node address named by
//! `redis.existingSecret` (no Redis image can be pulled); the pods' network is the CNI bridge plugin,
//! which does not enforce NetworkPolicies.

// Shared with tests/kube.rs, which uses the parts this test does not.
#[allow(dead_code)]
#[path = "kube/control_plane.rs"]
mod control_plane;
#[path = "kube/node.rs"]
mod node;
// The control plane starts the suite's OpenID provider; this binary uses no more of it.
#[allow(dead_code)]
#[path = "support/oidc_provider.rs"]
mod oidc_provider;
#[allow(dead_code)]
#[path = "kube/processes.rs"]
mod processes;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use control_plane::{ControlPlane, node_ip};
use node::Node;
use processes::{Process, free_port, wait_until};

const NS: &str = "yuxi-e2e";
const RELEASE: &str = "yuxi";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `kubectl` as admin; its stdout, or a panic with its output.
fn kubectl(plane: &ControlPlane, args: &[&str]) -> String {
    let output = plane.kubectl(args);
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn apply(plane: &ControlPlane, object: Value) {
    let file = plane.dir.join(format!("object-{}.json", object["metadata"]["name"].as_str().unwrap_or("x")));
    std::fs::write(&file, object.to_string()).expect("write");
    kubectl(plane, &["apply", "--server-side", "-f", &file.display().to_string()]);
}

/// A hostPath PersistentVolume at `path`, bound to the claim `claim` of [`NS`].
fn volume(plane: &ControlPlane, name: &str, path: &Path, claim: &str, mode: &str) {
    apply(
        plane,
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "20Gi"}, "accessModes": [mode], "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "", "claimRef": {"namespace": NS, "name": claim},
                "hostPath": {"path": path.display().to_string(), "type": "Directory"}}}),
    );
}

/// Copies the folder `from` into `to`, owned by the sandbox's user.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("folder");
    let status = Command::new("cp").arg("-a").arg(format!("{}/.", from.display())).arg(to).status().expect("cp");
    assert!(status.success());
}

/// Gives `path` to the sandbox's user and group, its folders group-writable and setgid: as a volume that
/// supports `fsGroup` is prepared, so that the sub-path folders the kubelet makes in it (as root, with the
/// volume root's mode) are the group's too and the runner can write in them.
fn prepare_volume(path: &Path) {
    let status = Command::new("chown").args(["-R", "65532:65532"]).arg(path).status().expect("chown");
    assert!(status.success());
    let status = Command::new("find")
        .arg(path)
        .args(["-type", "d", "-exec", "chmod", "2775", "{}", "+"])
        .status()
        .expect("chmod");
    assert!(status.success());
}

/// What the cluster looks like, for a failure message.
fn diagnose(plane: &ControlPlane, node: &Node) -> String {
    let show = |args: &[&str]| {
        let output = plane.kubectl(args);
        format!(
            "$ kubectl {}\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    };
    [
        show(&["get", "pods,agentruns,agents,pvc", "-A", "-o", "wide"]),
        show(&["get", "events", "-A", "--sort-by=.lastTimestamp"]),
        show(&["logs", "-n", NS, "-l", "app.kubernetes.io/instance=yuxi", "--all-containers", "--prefix", "--tail=40"]),
        show(&[
            "logs",
            "-n",
            NS,
            "-l",
            "app.kubernetes.io/name=yuxi-sandbox",
            "--all-containers",
            "--prefix",
            "--tail=40",
        ]),
        node.logs(),
    ]
    .join("\n")
}

#[test]
fn the_readme_deep_research_flow_runs_in_real_pods() {
    yuxi_operator::tls::install_crypto_provider();
    let archive =
        PathBuf::from(std::env::var("YUXI_IMAGE_ARCHIVE").expect("YUXI_IMAGE_ARCHIVE: run with `make e2e-local`"));
    let sandbox_archive = PathBuf::from(
        std::env::var("YUXI_SANDBOX_IMAGE_ARCHIVE").expect("YUXI_SANDBOX_IMAGE_ARCHIVE: run with `make e2e-local`"),
    );
    let plane = ControlPlane::start("e2e");
    let pause = plane.dir.join("pause.oci.tar");
    let made = Command::new(root().join("scripts/pause-image"))
        .arg(&pause)
        .arg(node::PAUSE_IMAGE)
        .output()
        .expect("pause-image");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let node = Node::start(&plane, &[pause, archive, sandbox_archive]);
    let node_ip = node_ip();

    // Redis on the node address, with a password, for the chart's `redis.existingSecret`.
    let redis_dir = plane.dir.join("redis");
    std::fs::create_dir_all(&redis_dir).expect("redis folder");
    let password = format!("{:032x}", rand_u128());
    let redis_port = free_port(&node_ip);
    std::fs::write(redis_dir.join("redis.conf"), format!("requirepass {password}\n")).expect("redis.conf");
    let mut redis = Command::new("redis-server");
    redis
        .arg(redis_dir.join("redis.conf"))
        .args(["--bind", &node_ip, "--port", &redis_port.to_string(), "--save", "", "--appendonly", "no", "--dir"])
        .arg(&redis_dir);
    let _redis = Process::start("redis", redis, &plane.dir);

    // The namespace, as a platform team prepares it, with the release's Redis URL and storage.
    apply(
        &plane,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}}),
    );
    apply(
        &plane,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "yuxi-redis", "namespace": NS},
        "stringData": {"url": format!("redis://:{password}@{node_ip}:{redis_port}")}}),
    );
    let data = plane.dir.join("volumes/data");
    let skills = plane.dir.join("volumes/skills");
    let sources = plane.dir.join("volumes/knowledge-sources");
    std::fs::create_dir_all(&data).expect("data");
    copy_tree(&root().join("examples/skills"), &skills);
    copy_tree(&root().join("examples/knowledge"), &sources.join("knowledge"));
    for path in [&data, &skills, &sources] {
        prepare_volume(path);
    }
    volume(&plane, "yuxi-e2e-data", &data, "yuxi-data", "ReadWriteMany");
    volume(&plane, "yuxi-e2e-skills", &skills, "yuxi-skills-library", "ReadOnlyMany");
    volume(&plane, "yuxi-e2e-sources", &sources, "knowledge-sources", "ReadOnlyMany");
    apply(
        &plane,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "knowledge-sources", "namespace": NS},
        "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "resources": {"requests": {"storage": "1Gi"}}}}),
    );

    // The chart, one replica of each role, the images as `make image` names them and never pulled.
    let kubeconfig = plane.dir.join("admin.kubeconfig");
    let helm = Command::new(control_plane::kube_bin().join("helm"))
        .args(["install", RELEASE, "charts/yuxi-operator", "--namespace", NS, "--server-side=true", "--timeout", "5m"])
        .args([
            "--set",
            "image.pullPolicy=Never",
            "--set",
            "redis.internal.enabled=false",
            "--set",
            "redis.existingSecret=yuxi-redis",
        ])
        .args(["--set", "controller.replicas=1", "--set", "webhook.replicas=1", "--set", "api.replicas=1"])
        .args(["--set", "knowledge.sourcesClaim=knowledge-sources"])
        // Two cores hold the control plane, the node, the roles and the pods: sandbox pods ask for
        // little CPU, so that a warm pool of 4 beside the runs under way can be scheduled.
        .args([
            "--set",
            "sandbox.runnerResources.requests.cpu=20m",
            "--set",
            "sandbox.sandboxResources.requests.cpu=20m",
        ])
        .env("KUBECONFIG", &kubeconfig)
        .env("HELM_CACHE_HOME", plane.dir.join("helm/cache"))
        .env("HELM_CONFIG_HOME", plane.dir.join("helm/config"))
        .env("HELM_DATA_HOME", plane.dir.join("helm/data"))
        .current_dir(root())
        .output()
        .expect("helm");
    assert!(
        helm.status.success(),
        "helm install: {}{}",
        String::from_utf8_lossy(&helm.stdout),
        String::from_utf8_lossy(&helm.stderr)
    );
    let available = plane.kubectl(&[
        "wait",
        "-n",
        NS,
        "--for=condition=Available",
        "deployment",
        "-l",
        "app.kubernetes.io/instance=yuxi",
        "--timeout=300s",
    ]);
    assert!(available.status.success(), "the release's Deployments are available\n{}", diagnose(&plane, &node));

    // The examples, applied once the webhook answers.
    let manifests: Vec<String> =
        ["general-purpose", "research-explorer", "fact-verifier", "deep-research", "research-notes"]
            .iter()
            .map(|f| root().join(format!("examples/{f}.yaml")).display().to_string())
            .collect();
    let mut args = vec!["apply", "-n", NS];
    for file in &manifests {
        args.extend(["-f", file.as_str()]);
    }
    wait_until(
        "the examples are admitted",
        Duration::from_secs(60),
        || plane.kubectl(&args).status.success(),
        || diagnose(&plane, &node),
    );
    for agent in ["general-purpose", "research-explorer", "fact-verifier", "deep-research"] {
        let ready =
            plane.kubectl(&["wait", "-n", NS, "--for=condition=Ready", &format!("agent/{agent}"), "--timeout=120s"]);
        assert!(ready.status.success(), "agent {agent} is Ready\n{}", diagnose(&plane, &node));
    }

    // A person: a service account's token for the facade's audience.
    kubectl(&plane, &["create", "serviceaccount", "alice", "-n", NS]);
    let token =
        kubectl(&plane, &["create", "token", "alice", "-n", NS, "--audience", "yuxi-operator", "--duration", "1h"])
            .trim()
            .to_string();
    let uid = yuxi_operator::access::uid_of(&format!("system:serviceaccount:{NS}:alice"));
    let address = kubectl(&plane, &["get", "service", "yuxi-api", "-n", NS, "-o", "jsonpath={.spec.clusterIP}"]);
    let api = format!("http://{address}:8080");

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let redis_url = format!("redis://:{password}@{node_ip}:{redis_port}");
    let (status, events, thread_id, parent_run) = runtime.block_on(async {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(300)).build().expect("client");
        let started: Value = client
            .post(format!("{api}/api/agent/runs"))
            .bearer_auth(&token)
            .json(&json!({"query": "Which solid electrolytes conduct lithium best?", "agent_slug": "deep-research"}))
            .send()
            .await
            .expect("the facade answers through its Service")
            .json()
            .await
            .expect("json");
        let run_id = started["run_id"].as_str().unwrap_or_else(|| panic!("a run: {started}")).to_string();
        let thread_id = started["thread_id"].as_str().expect("thread_id").to_string();
        let events = client
            .get(format!("{api}/api/agent/runs/{run_id}/events"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("events")
            .text()
            .await
            .expect("the stream ends after `end`");
        let run: Value = client
            .get(format!("{api}/api/agent/runs/{run_id}"))
            .bearer_auth(&token)
            .send()
            .await
            .expect("run")
            .json()
            .await
            .expect("json");
        (run["run"]["status"].as_str().unwrap_or_default().to_string(), events, thread_id, run_id)
    });
    assert_eq!(status, "completed", "the run completes\n{events}\n{}", diagnose(&plane, &node));
    for wanted in ["subagent_start", "subagent_await", "knowledge_search", "event: end"] {
        assert!(events.contains(wanted), "the events show {wanted}:\n{events}");
    }
    // What the parent's tools answered, for a failure below to be read.
    eprintln!("the parent run's events:\n{events}");
    // The controller ends each AgentRun once it sees its pod end.
    let phases = || {
        kubectl(
            &plane,
            &["get", "agentruns", "-n", NS, "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}"],
        )
    };
    wait_until(
        "every AgentRun (the parent and its two children) ends Completed",
        Duration::from_secs(120),
        || {
            let now = phases();
            now.split_whitespace().count() >= 3 && now.split_whitespace().all(|r| r.ends_with("=Completed"))
        },
        || format!("{}\n{}", phases(), diagnose(&plane, &node)),
    );
    let runs = phases().split_whitespace().count();
    let report = data.join(format!("users/{uid}/threads/{thread_id}/outputs/report.md"));
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("{}: {e}\n{}", report.display(), diagnose(&plane, &node)));
    for part in ["(research-explorer)", "(fact-verifier)", "research-notes: solid-electrolytes.md", "Li10GeP2S12"] {
        assert!(
            text.contains(part),
            "the report holds both children's parts and cites the knowledge base ({part}): {text}"
        );
    }
    println!("e2e-local: {runs} AgentRuns Completed; the report is {} bytes", text.len());
    // The cold path in real pods: from a run's record (made by the facade in the request that asked for
    // the run: the parent's `POST /api/agent/runs`, each child's `subagent_start`) to its first event.
    for (run, role, ms) in runtime.block_on(first_event_latencies(&redis_url, &parent_run)) {
        println!("e2e-local: cold start, {role} {run}: {ms:.0} ms from its request to its first event");
    }
    println!("{}", kubectl(&plane, &["get", "agentruns", "-n", NS]));

    // Warm pools: a parent that delegates 20 times in a row (examples/scripts/delegation-probe.yaml),
    // once with no pool (every child a new pod) and once with a pool of 4 on its subagent.
    apply(
        &plane,
        json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "delegation-probe", "namespace": NS},
        "spec": {"backend": "ChatbotAgent", "owner": "platform-team", "context": {"tools": [], "subagents": ["research-explorer"],
            "toolApprovalMode": "AlwaysTrust"},
            "share": {"readScope": {"accessLevel": "Global"}}}}),
    );
    let mut figures = Vec::new();
    for pool in [None, Some(4)] {
        if let Some(size) = pool {
            let patch = json!({"spec": {"sandbox": {"warmPool": {"size": size, "maxIdleSeconds": 600}}}}).to_string();
            kubectl(&plane, &["patch", "agent", "research-explorer", "-n", NS, "--type", "merge", "-p", &patch]);
        }
        let parent = runtime.block_on(probe(&api, &token));
        let children: Vec<(String, f64)> = runtime
            .block_on(first_event_latencies(&redis_url, &parent))
            .into_iter()
            .filter(|(_, role, _)| *role == "child")
            .map(|(run, _, ms)| (run, ms))
            .collect();
        assert_eq!(children.len(), 20, "the probe delegated 20 times\n{}", diagnose(&plane, &node));
        let pods = kubectl(
            &plane,
            &[
                "get",
                "agentruns",
                "-n",
                NS,
                "-l",
                &format!("yuxi.dev/parent-run={parent}"),
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}={.status.podName} {end}",
            ],
        );
        let on_warm: Vec<&str> =
            pods.split_whitespace().filter(|p| p.contains("-warm-")).filter_map(|p| p.split('=').next()).collect();
        match pool {
            None => assert!(on_warm.is_empty(), "without a pool no child gets a warm pod: {pods}"),
            Some(_) => {
                assert!(
                    !on_warm.is_empty(),
                    "with a pool the children claim warm pods: {pods}\n{}",
                    diagnose(&plane, &node)
                )
            }
        }
        let (warm, cold): (Vec<_>, Vec<_>) = children.iter().partition(|(run, _)| on_warm.contains(&run.as_str()));
        let ms = |list: Vec<&(String, f64)>| list.into_iter().map(|(_, ms)| *ms).collect::<Vec<f64>>();
        figures.push((pool, children.iter().map(|(_, ms)| *ms).collect::<Vec<f64>>(), ms(warm), ms(cold)));
    }
    let quantiles = |mut list: Vec<f64>| {
        list.sort_by(f64::total_cmp);
        let at = |q: f64| list[((list.len() as f64 * q).ceil() as usize).clamp(1, list.len()) - 1];
        if list.is_empty() {
            "none".to_string()
        } else {
            format!("p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms", at(0.5), at(0.9), at(0.99))
        }
    };
    for (pool, all, warm, cold) in figures {
        let label = pool.map_or("no pool".to_string(), |size| format!("a warm pool of {size}"));
        println!(
            "e2e-local: {label}: {} children in a row, subagent_start to first event: {}; the {} on warm pods: {}; the {} on new pods: {}",
            all.len(),
            quantiles(all.clone()),
            warm.len(),
            quantiles(warm),
            cold.len(),
            quantiles(cold)
        );
    }
    // A claimed pod served one run: every warm pod that ran a child names that child alone, and none is
    // idle in a pool once the probe's parent has ended.
    wait_until(
        "the pools empty once no parent runs",
        Duration::from_secs(60),
        || {
            // Deleted by the pool: gone, or on their way (each container ends on SIGTERM).
            let idle = kubectl(
                &plane,
                &[
                    "get",
                    "pods",
                    "-n",
                    NS,
                    "-l",
                    "yuxi.dev/warm=idle",
                    "-o",
                    "jsonpath={range .items[*]}{.metadata.name}={.metadata.deletionTimestamp} {end}",
                ],
            );
            idle.split_whitespace().all(|pod| !pod.ends_with('='))
        },
        || diagnose(&plane, &node),
    );
}

/// Runs the delegation probe as a person would, to its end; returns its run id.
async fn probe(api: &str, token: &str) -> String {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(600)).build().expect("client");
    let started: Value = client
        .post(format!("{api}/api/agent/runs"))
        .bearer_auth(token)
        .json(&json!({"query": "probe", "agent_slug": "delegation-probe"}))
        .send()
        .await
        .expect("the facade answers")
        .json()
        .await
        .expect("json");
    let run_id = started["run_id"].as_str().unwrap_or_else(|| panic!("a run: {started}")).to_string();
    let events = client
        .get(format!("{api}/api/agent/runs/{run_id}/events"))
        .bearer_auth(token)
        .send()
        .await
        .expect("events")
        .text()
        .await
        .expect("the stream ends after `end`");
    assert!(events.contains("Delegated 20 tasks"), "the probe ran to its end:\n{events}");
    run_id
}

/// For the parent run and each of its children: the milliseconds from its record's creation to the first
/// entry of its event stream (a stream entry's id is the Redis server's time in milliseconds), with
/// "parent" or "child".
async fn first_event_latencies(redis_url: &str, parent: &str) -> Vec<(String, &'static str, f64)> {
    let client = redis::Client::open(redis_url).expect("the Redis URL");
    let mut redis = client.get_multiplexed_async_connection().await.expect("Redis answers");
    let mut children: Vec<String> = redis::cmd("SMEMBERS")
        .arg(format!("yuxi:run:{parent}:children"))
        .query_async(&mut redis)
        .await
        .expect("children");
    children.sort();
    let mut out = Vec::new();
    for (run, role) in std::iter::once((parent.to_string(), "parent")).chain(children.into_iter().map(|c| (c, "child")))
    {
        let record: String =
            redis::cmd("GET").arg(format!("yuxi:run:{run}:record")).query_async(&mut redis).await.expect("a record");
        let record: Value = serde_json::from_str(&record).expect("a JSON record");
        let created: jiff::Timestamp =
            record["created_at"].as_str().and_then(|t| t.parse().ok()).expect("the record's created_at");
        let first: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(format!("yuxi:run:{run}:events"))
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut redis)
            .await
            .expect("the run's events");
        let id = &first.ids.first().expect("a first event").id;
        let first_ms: i64 = id.split('-').next().and_then(|ms| ms.parse().ok()).expect("a stream id");
        out.push((run, role, (first_ms - created.as_millisecond()) as f64));
    }
    out
}

/// A random number, for the Redis password.
fn rand_u128() -> u128 {
    u128::from_le_bytes(*uuid::Uuid::new_v4().as_bytes())
}
