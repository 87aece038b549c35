//! The controller against the real API server, started from the chart's Deployment with its service
//! account's token: an AgentRun becomes an inputs Secret and a sandbox pod that Pod Security `restricted`
//! admits, owned by the run, with its status conditions and `observedGeneration` written by server-side
//! apply; a run's credentials Secret mounted only when it is the run's own; deleting the run takes its pod
//! and Secrets with it through the garbage collector; a cancelled parent's children end.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::chart_pods::{Overrides, chart_pod};
use crate::install::{RELEASE, RELEASE_NAMESPACE, SERVED, installed};
use crate::processes::{Process, free_port};

/// The namespace these tests run in.
const NS: &str = SERVED[0];

/// The controller, started once from the chart's Deployment.
pub fn controller() -> &'static std::sync::Mutex<Process> {
    static CONTROLLER: OnceLock<std::sync::Mutex<Process>> = OnceLock::new();
    CONTROLLER.get_or_init(|| {
        std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let plane = installed().plane;
            let pod = runtime.block_on(chart_pod(
                plane,
                RELEASE_NAMESPACE,
                &format!("{RELEASE}-controller"),
                Overrides {
                    args: vec![],
                    env: vec![
                        ("REDIS_URL".into(), redis_url()),
                        ("YUXI_CONTROLLER_LISTEN".into(), format!("127.0.0.1:{}", free_port("127.0.0.1"))),
                        ("RUST_LOG".into(), "info,yuxi_operator=debug".into()),
                    ],
                    pod_name: "controller-0".into(),
                    account: None,
                },
            ));
            std::sync::Mutex::new(pod.start("controller"))
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// The test Redis (`scripts/with-redis`), standing for the chart's in-cluster one.
pub fn redis_url() -> String {
    std::env::var("YUXI_TEST_REDIS_URL").expect("YUXI_TEST_REDIS_URL is not set: run with `make kube-test`")
}

fn runs(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "AgentRun")),
    )
}

fn params() -> PostParams {
    PostParams { dry_run: false, field_manager: Some("yuxi-tests".into()) }
}

/// A client of `carol`, a member of `yuxi:run-creators` (who may create runs for other users, as the
/// facade does), with the rights to edit the namespace's runs.
pub async fn run_creator() -> kube::Client {
    let plane = installed().plane;
    crate::resources::grant_edit(plane, NS, "carol");
    plane.client("carol-token").await
}

/// Creates, as `client`, the AgentRun `name` of `general-purpose` for `alice`, with `metadata` and
/// `spec` merged into its own.
pub async fn create_run(client: &kube::Client, name: &str, metadata: Value, spec: Value) -> DynamicObject {
    let mut object = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": name},
        "spec": {"agent": "general-purpose", "input": "Look around.", "uid": "alice", "timeoutSeconds": 600}});
    merge(&mut object["metadata"], metadata);
    merge(&mut object["spec"], spec);
    runs(client).create(&params(), &serde_json::from_value(object).expect("run")).await.expect("AgentRun created")
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(into), Value::Object(from)) = (into, from) {
        into.extend(from);
    }
}

/// Polls `read` every 200 ms until it returns `Some`, for at most `timeout`; panics naming `what` with the
/// controller's log.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut read: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = read().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            let log = controller().lock().map(|c| c.log_tail(40)).unwrap_or_default();
            panic!("{what}: not within {timeout:?}\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_run_gets_an_owned_restricted_pod_an_inputs_secret_and_its_status() {
    controller();
    let admin = installed().plane.admin().await;
    let creator = run_creator().await;
    let name = crate::unique("sandboxed");
    let run = create_run(&creator, &name, json!({}), json!({})).await;
    let run_uid = run.metadata.uid.clone().expect("uid");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let pod =
        eventually("the run's pod", Duration::from_secs(60), || async { pods.get_opt(&name).await.ok().flatten() })
            .await;

    let owner = pod.metadata.owner_references.clone().unwrap_or_default();
    assert!(owner.iter().any(|r| r.uid == run_uid && r.kind == "AgentRun" && r.controller == Some(true)), "{owner:?}");
    let spec = pod.spec.clone().expect("spec");
    assert_eq!(spec.automount_service_account_token, Some(false));
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["runner"]);
    let sidecars: Vec<(&str, Option<&str>)> =
        spec.init_containers.iter().flatten().map(|c| (c.name.as_str(), c.restart_policy.as_deref())).collect();
    assert_eq!(sidecars, [("sandbox", Some("Always"))], "the sandbox runs beside the runner as a sidecar");
    // Admitted in a namespace that enforces restricted Pod Security: the pod exists at all.
    let labels = installed().plane.kubectl(&["get", "namespace", NS, "-o", "jsonpath={.metadata.labels}"]);
    assert!(String::from_utf8_lossy(&labels.stdout).contains("\"pod-security.kubernetes.io/enforce\":\"restricted\""));

    let inputs = secrets.get(&format!("{name}-inputs")).await.expect("the inputs Secret");
    let owned = inputs.metadata.owner_references.unwrap_or_default();
    assert!(owned.iter().any(|r| r.uid == run_uid), "{owned:?}");

    let status = eventually("the run's status", Duration::from_secs(30), || async {
        let run = runs(&admin).get(&name).await.ok()?;
        // Shown with the failure, if it comes to that (the test harness keeps a passing test's output).
        println!("status: {} generation {:?}", run.data["status"], run.metadata.generation);
        let status = run.data.get("status")?.clone();
        (status["observedGeneration"] == json!(run.metadata.generation.expect("generation"))
            && status["conditions"].is_array())
        .then_some(status)
    })
    .await;
    assert!(status["phase"].as_str().is_some(), "{status}");
    let managers: Vec<String> = runs(&admin)
        .get(&name)
        .await
        .expect("run")
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.subresource.as_deref() == Some("status"))
        .filter_map(|f| f.manager)
        .collect();
    assert_eq!(managers, ["yuxi-operator"], "the status is the controller's alone, applied server-side");

    // Deleting the run deletes what it owns, through the garbage collector.
    runs(&admin).delete(&name, &DeleteParams::background()).await.expect("delete");
    eventually("the garbage collector deletes the pod and the inputs Secret", Duration::from_secs(60), || async {
        let pod = pods.get_opt(&name).await.ok()?;
        let inputs = secrets.get_opt(&format!("{name}-inputs")).await.ok()?;
        (pod.is_none() && inputs.is_none()).then_some(())
    })
    .await;
}

/// A credentials Secret for the run `run`, owned by the run whose uid is `owner_uid`.
fn credentials(run: &str, owner: &str, owner_uid: &str) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "yuxi.dev/run-credentials",
        "metadata": {"name": format!("{run}-credentials"), "labels": {"yuxi.dev/run": run},
            "ownerReferences": [{"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "name": owner, "uid": owner_uid}]},
        "stringData": {"token": "run-token"},
    }))
    .expect("a Secret")
}

fn mounts_credentials(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.env.iter().flatten())
        .any(|e| e.name == "YUXI_RUN_TOKEN")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_credentials_are_mounted_only_when_the_secret_is_its_own() {
    controller();
    let admin = installed().plane.admin().await;
    let creator = run_creator().await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);

    let own = crate::unique("credentialed");
    let run = create_run(
        &creator,
        &own,
        json!({"annotations": {"yuxi.dev/run-credentials": format!("{own}-credentials")}}),
        json!({}),
    )
    .await;
    secrets.create(&params(), &credentials(&own, &own, &run.metadata.uid.expect("uid"))).await.expect("Secret");
    let pod = eventually("the credentialed run's pod", Duration::from_secs(60), || async {
        pods.get_opt(&own).await.ok().flatten()
    })
    .await;
    assert!(mounts_credentials(&pod), "its own Secret is mounted");

    // A run announcing a Secret that another run owns gets no token, and a Warning says why.
    let other = crate::unique("bystander");
    let bystander = create_run(&creator, &other, json!({}), json!({})).await;
    let thief = crate::unique("thief");
    secrets
        .create(&params(), &credentials(&thief, &other, &bystander.metadata.uid.expect("uid")))
        .await
        .expect("Secret");
    create_run(
        &creator,
        &thief,
        json!({"annotations": {"yuxi.dev/run-credentials": format!("{thief}-credentials")}}),
        json!({}),
    )
    .await;
    let pod =
        eventually("the thief's pod", Duration::from_secs(60), || async { pods.get_opt(&thief).await.ok().flatten() })
            .await;
    assert!(!mounts_credentials(&pod), "another run's Secret is not mounted");
    let events = installed().plane.kubectl(&[
        "get",
        "events.events.k8s.io",
        "-n",
        NS,
        "--field-selector",
        &format!("regarding.name={thief}"),
        "-o",
        "jsonpath={.items[*].reason}",
    ]);
    assert!(String::from_utf8_lossy(&events.stdout).contains("UntrustedCredentials"), "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_parent_ends_its_children() {
    controller();
    let admin = installed().plane.admin().await;
    let creator = run_creator().await;
    let parent = crate::unique("parent");
    create_run(&creator, &parent, json!({}), json!({"threadId": format!("{parent}-thread")})).await;
    let mut children = Vec::new();
    for n in 0..2 {
        let child = crate::unique("child");
        create_run(
            &creator,
            &child,
            json!({"labels": {"yuxi.dev/parent-run": parent}}),
            json!({"threadId": format!("{parent}-thread_sub_general-purpose_0000000{n}"),
                   "parent": {"runId": parent, "threadId": format!("{parent}-thread"), "agent": "deep-research"}}),
        )
        .await;
        children.push(child);
    }
    let patch = json!({"spec": {"cancel": true}});
    runs(&admin).patch(&parent, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("cancel the parent");
    for child in &children {
        let phase = eventually("a child ends after its parent's cancel", Duration::from_secs(90), || async {
            let run = runs(&admin).get(child).await.ok()?;
            let phase = run.data["status"]["phase"].as_str()?.to_string();
            ["Cancelled", "Failed", "Interrupted", "Completed"].contains(&phase.as_str()).then_some(phase)
        })
        .await;
        assert_eq!(phase, "Cancelled", "{child}");
        let cancel = runs(&admin).get(child).await.expect("child").data["spec"]["cancel"].clone();
        assert_eq!(cancel, json!(true), "the controller marks the child cancelled");
    }
}
