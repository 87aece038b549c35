//! Leader election and watches on control planes of their own (these tests stop controllers and the API
//! server, which the shared one's tests must not see): two controllers elect one leader on a real Lease
//! and the second takes over when the first stops; the controller's watches survive a restart of the API
//! server whose history was compacted meanwhile (its watches answered `410 Gone`, so it lists again)
//! and it goes on reconciling.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

use crate::control_plane::ControlPlane;
use crate::controller::redis_url;
use crate::install::{kubectl_ok, root};
use crate::processes::{Process, free_port, wait_until};

const NS: &str = "team-z";
const LEASE: &str = "yuxi-controller";

/// A control plane of the test's own with the CRDs applied and namespace [`NS`].
fn private_plane(name: &str) -> ControlPlane {
    let plane = ControlPlane::start(name);
    kubectl_ok(&plane, &["apply", "--server-side", "-f", &root().join("crds").display().to_string()]);
    kubectl_ok(
        &plane,
        &["wait", "--for=condition=Established", "crd/agentruns.yuxi.dev", "crd/agents.yuxi.dev", "--timeout=60s"],
    );
    kubectl_ok(&plane, &["create", "namespace", NS]);
    plane
}

/// A controller of [`NS`] named `identity` (as admin: the chart's RBAC is tested on the shared plane);
/// its process and the address of its `/readyz`.
fn start_controller(plane: &ControlPlane, identity: &str) -> (Process, String) {
    let kubeconfig = plane.kubeconfig("admin", "admin-token", None);
    let listen = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"));
    command
        .args([
            "controller",
            &format!("--namespace={NS}"),
            &format!("--lease-name={LEASE}"),
            &format!("--listen={listen}"),
        ])
        .env("KUBECONFIG", kubeconfig)
        .env("REDIS_URL", redis_url())
        .env("POD_NAMESPACE", NS)
        .env("POD_NAME", identity)
        .env("RUST_LOG", "info,kube_runtime=debug");
    (Process::start(identity, command, &plane.dir), format!("http://{listen}/readyz"))
}

fn readyz(url: &str) -> String {
    let output = Command::new("curl").args(["-s", url]).output().expect("curl");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn runs(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "AgentRun")),
    )
}

async fn create_run(client: &kube::Client, name: &str) {
    let run = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": name},
        "spec": {"agent": "general-purpose", "input": "Look around.", "uid": "alice"}});
    runs(client).create(&PostParams::default(), &serde_json::from_value(run).expect("run")).await.expect("AgentRun");
}

async fn wait_for_pod(client: &kube::Client, name: &str, context: impl Fn() -> String) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for _ in 0..300 {
        if pods.get_opt(name).await.ok().flatten().is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no pod for {name} within 60 s\n{}", context());
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    leases.get_opt(LEASE).await.ok().flatten().and_then(|l| l.spec).and_then(|s| s.holder_identity)
}

/// Both controllers' `/readyz` answers, sorted.
fn states(first: &str, second: &str) -> [String; 2] {
    let mut states = [readyz(first), readyz(second)];
    states.sort();
    states
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_controllers_elect_one_leader_and_the_second_takes_over_when_the_first_stops() {
    let plane = private_plane("election");
    let client = plane.admin().await;
    // The Lease as an earlier version left it when its leader died: held under the field manager all
    // its replicas shared, long expired.
    let stale = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE, "namespace": NS},
        "spec": {"holderIdentity": "controller-of-an-earlier-version", "leaseDurationSeconds": 15,
                 "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:00.000000Z"}});
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    leases.patch(LEASE, &PatchParams::apply("yuxi-operator"), &Patch::Apply(&stale)).await.expect("a stale Lease");

    let (mut first, first_ready) = start_controller(&plane, "controller-a");
    let (mut second, second_ready) = start_controller(&plane, "controller-b");
    let logs = |a: &Process, b: &Process| format!("{}\n{}", a.log_tail(20), b.log_tail(20));
    wait_until(
        "one controller leads and the other stands by",
        Duration::from_secs(60),
        || states(&first_ready, &second_ready) == ["leader", "standby"],
        || logs(&first, &second),
    );
    // Never two leaders: watched for a Lease's whole duration and more.
    for _ in 0..100 {
        let now = states(&first_ready, &second_ready);
        assert_ne!(now, ["leader", "leader"], "two controllers lead at once\n{}", logs(&first, &second));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let led = |p: &Process| p.log().matches("leading: reconciling").count();
    assert_eq!(led(&first) + led(&second), 1, "one replica ever led\n{}", logs(&first, &second));
    let leader = holder(&client).await.expect("the Lease has a holder");
    let (leading, leading_ready, standing, standing_ready) = if leader == "controller-a" {
        (&mut first, first_ready.clone(), &mut second, second_ready.clone())
    } else {
        (&mut second, second_ready.clone(), &mut first, first_ready.clone())
    };
    assert_eq!(readyz(&leading_ready), "leader", "the Lease's holder is the one that says it leads");
    create_run(&client, "before-takeover").await;
    wait_for_pod(&client, "before-takeover", || leading.log_tail(30)).await;

    let status = leading.stop(Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "the leader stops cleanly on SIGTERM: {}", leading.log_tail(20));
    wait_until(
        "the standby takes over",
        Duration::from_secs(30),
        || readyz(&standing_ready) == "leader",
        || standing.log_tail(30),
    );
    let new_holder = holder(&client).await.expect("a holder");
    assert_ne!(new_holder, leader, "the Lease changed hands");
    create_run(&client, "after-takeover").await;
    wait_for_pod(&client, "after-takeover", || standing.log_tail(30)).await;
    plane.stop();
}

/// etcd's current revision, through its HTTP gateway.
fn etcd_call(url: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    let output = Command::new("curl")
        .args(["-s", "-X", "POST", &format!("{url}{path}"), "-d", &body.to_string()])
        .output()
        .expect("curl");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("etcd {path}: {e}: {}", String::from_utf8_lossy(&output.stdout)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_watches_survive_an_api_server_restart_over_compacted_history() {
    let plane = private_plane("restart");
    let client = plane.admin().await;
    let (controller, ready) = start_controller(&plane, "controller-r");
    wait_until(
        "the controller leads",
        Duration::from_secs(60),
        || readyz(&ready) == "leader",
        || controller.log_tail(30),
    );
    create_run(&client, "before-restart").await;
    wait_for_pod(&client, "before-restart", || controller.log_tail(30)).await;

    plane.stop_apiserver();
    // While the API server is down, the store moves on and its history is compacted: the controller's
    // last resource version is gone, so its watches must be answered 410 Gone and it must list again.
    let etcd = plane.etcd_url();
    let key = |k: &str| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(k)
    };
    etcd_call(&etcd, "/v3/kv/put", json!({"key": key("/yuxi-test/bump"), "value": key("1")}));
    let revision = etcd_call(&etcd, "/v3/kv/range", json!({"key": key("/yuxi-test/bump")}))["header"]["revision"]
        .as_str()
        .expect("revision")
        .to_string();
    etcd_call(&etcd, "/v3/kv/compaction", json!({"revision": revision, "physical": true}));
    plane.start_apiserver();

    let client = plane.admin().await;
    create_run(&client, "after-restart").await;
    wait_for_pod(&client, "after-restart", || controller.log_tail(60)).await;
    // A change to a run it knew before the restart reaches it too: the cancel ends that run.
    let cancel = json!({"spec": {"cancel": true}});
    runs(&client).patch("before-restart", &PatchParams::default(), &Patch::Merge(&cancel)).await.expect("cancel");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut gone = false;
    for _ in 0..300 {
        let run = runs(&client).get("before-restart").await.expect("run");
        if run.data["status"]["phase"] == "Cancelled" && pods.get_opt("before-restart").await.ok().flatten().is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(gone, "the cancel after the restart ended the run and deleted its pod\n{}", controller.log_tail(60));
    let log = controller.log();
    assert!(
        log.contains("code: 410"),
        "the controller's watches were answered 410 Gone after the restart and listed again:\n{}",
        controller.log_tail(60)
    );
    plane.stop();
}
