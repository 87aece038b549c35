//! Warm pools against the real API server, with the controller the chart deploys (docs/concepts/
//! warm-pools.md): an unfinished parent run fills its subagent's pool with idle pods that hold nothing of
//! a run; each new child claims a different pod (the claim's precondition decides), its inputs handed
//! to that pod alone; a pod claimed once serves no other run; the pool empties when the parent ends.
//! No kubelet runs here: the test reports the idle pods running, as a kubelet would.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::controller::{controller, create_run, eventually, redis_url, run_creator};
use crate::install::{SERVED, installed};

const NS: &str = SERVED[0];

fn agents(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "Agent")),
    )
}

/// The idle pods of the pool a child of `parent` (alice's, its files in `parent`'s thread) would use.
async fn idle_of(pods: &Api<Pod>, parent: &str) -> Vec<Pod> {
    let uploads = format!("users/alice/threads/{parent}/uploads");
    let listed = pods.list(&ListParams::default().labels("yuxi.dev/warm=idle")).await.expect("pods");
    listed
        .items
        .into_iter()
        .filter(|pod| {
            pod.spec
                .iter()
                .flat_map(|s| &s.containers)
                .flat_map(|c| c.volume_mounts.iter().flatten())
                .any(|m| m.sub_path.as_deref() == Some(uploads.as_str()))
        })
        .collect()
}

/// Reports `pod` running with its runner started, as the kubelet would.
async fn report_running(pods: &Api<Pod>, pod: &Pod) {
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {"phase": "Running", "containerStatuses": [{"name": "runner", "image": "yuxi-operator",
        "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": now}}}]}});
    pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&status)).await.expect("status reported");
}

fn child_spec(parent: &str, n: u32) -> Value {
    json!({"agent": "pool-sub", "uid": "alice", "threadId": format!("{parent}_sub_pool-sub_{n:08x}"),
        "parent": {"runId": parent, "threadId": parent, "agent": "pool-main", "fileThreadId": parent}})
}

async fn pod_of(runs: &Api<DynamicObject>, name: &str) -> String {
    let name = name.to_string();
    eventually("the child's pod is named", Duration::from_secs(60), || {
        let runs = runs.clone();
        let name = name.clone();
        async move { runs.get(&name).await.ok()?.data["status"]["podName"].as_str().map(str::to_string) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_pool_gives_each_pod_to_one_run_only_and_empties_when_its_parent_ends() {
    controller();
    let plane = installed().plane;
    let admin = plane.admin().await;
    let post = PostParams::default();
    for agent in [
        json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "pool-sub"},
            "spec": {"backend": "SubAgentBackend", "isSubagent": true, "sandbox": {"warmPool": {"size": 2, "maxIdleSeconds": 600}}}}),
        json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "pool-main"},
            "spec": {"backend": "ChatbotAgent", "context": {"subagents": ["pool-sub"]}}}),
    ] {
        agents(&admin).create(&post, &serde_json::from_value(agent).expect("agent")).await.expect("agent created");
    }
    let creator = run_creator().await;
    let parent = crate::unique("pool-parent");
    create_run(&creator, &parent, json!({}), json!({"agent": "pool-main", "threadId": parent})).await;

    // The pool fills: two idle pods of alice's scope, holding nothing of a run.
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let idle = eventually("the pool fills", Duration::from_secs(60), || async {
        let idle = idle_of(&pods, &parent).await;
        (idle.len() == 2).then_some(idle)
    })
    .await;
    for pod in &idle {
        let spec = pod.spec.as_ref().expect("spec");
        assert!(spec.volumes.iter().flatten().all(|v| v.secret.is_none()), "no inputs Secret: {}", pod.name_any());
        let runner = spec.containers.iter().find(|c| c.name == "runner").expect("runner");
        assert!(runner.env.iter().flatten().all(|v| v.name != "YUXI_RUN_TOKEN"), "no run token");
        let sub_paths = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .flat_map(|c| c.volume_mounts.iter().flatten().filter_map(|m| m.sub_path.clone()));
        for path in sub_paths {
            assert!(path.starts_with("users/alice/"), "only alice's paths: {path}");
        }
        assert!(!pod.labels().contains_key("yuxi.dev/run"), "no run");
        assert_eq!(pod.owner_references()[0].kind, "Agent");
        report_running(&pods, pod).await;
    }

    // The controller sees the pods running through its watch; nothing outside it shows when it has.
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Two children at once: each claims a pod of its own.
    let runs = Api::<DynamicObject>::namespaced_with(
        creator.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "AgentRun")),
    );
    let (c1, c2) = (crate::unique("pool-child"), crate::unique("pool-child"));
    tokio::join!(
        create_run(&creator, &c1, json!({}), child_spec(&parent, 1)),
        create_run(&creator, &c2, json!({}), child_spec(&parent, 2))
    );
    let (p1, p2) = (pod_of(&runs, &c1).await, pod_of(&runs, &c2).await);
    let warm: BTreeSet<String> = idle.iter().map(|p| p.name_any()).collect();
    assert_ne!(p1, p2, "two runs never share a pod");
    assert!(warm.contains(&p1) || warm.contains(&p2), "the children claimed the pool's pods: {p1}, {p2}");
    let redis = redis::Client::open(redis_url()).expect("redis");
    let mut redis = redis.get_multiplexed_async_connection().await.expect("redis answers");
    for (child, pod_name, other) in [(&c1, &p1, &c2), (&c2, &p2, &c1)] {
        if !warm.contains(pod_name) {
            // A new pod, named after its run: nothing was claimed for it.
            assert_eq!(pod_name, child);
            continue;
        }
        let pod = pods.get(pod_name).await.expect("claimed pod");
        assert_eq!(pod.labels()["yuxi.dev/warm"], "claimed");
        assert_eq!(&pod.labels()["yuxi.dev/run"], child);
        let owner = &pod.owner_references()[0];
        assert_eq!((owner.kind.as_str(), &owner.name), ("AgentRun", child), "the pod is the run's now");
        // The run's inputs wait for that pod's runner alone, under its uid.
        let claims: Vec<String> = redis::cmd("LRANGE")
            .arg(format!("yuxi:pod:{}:claim", pod.uid().expect("uid")))
            .arg(0)
            .arg(-1)
            .query_async(&mut redis)
            .await
            .expect("the claim");
        assert_eq!(claims.len(), 1, "one claim for {pod_name}");
        let claim: Value = serde_json::from_str(&claims[0]).expect("json");
        assert_eq!(&claim["run"], child.as_str());
        assert!(claim["files"]["run.yaml"].as_str().expect("run.yaml").contains(child.as_str()));
        assert!(!claims[0].contains(other.as_str()), "nothing of the other child");
    }

    // A third child never gets a pod claimed before.
    let c3 = crate::unique("pool-child");
    create_run(&creator, &c3, json!({}), child_spec(&parent, 3)).await;
    let p3 = pod_of(&runs, &c3).await;
    assert!(p3 != p1 && p3 != p2, "a claimed pod serves one run: {p3}");

    // The parent ends: its scope's pool is emptied.
    let parents = Api::<DynamicObject>::namespaced_with(
        creator.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "AgentRun")),
    );
    parents.delete(&parent, &DeleteParams::default()).await.expect("parent deleted");
    eventually("the pool empties", Duration::from_secs(60), || async {
        idle_of(&pods, &parent).await.is_empty().then_some(())
    })
    .await;
    for run in [&c1, &c2, &c3] {
        runs.delete(run, &DeleteParams::default()).await.expect("child deleted");
    }
    for agent in ["pool-main", "pool-sub"] {
        agents(&admin).delete(agent, &DeleteParams::default()).await.expect("agent deleted");
    }
}
