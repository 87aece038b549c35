use k8s_openapi::api::core::v1::{ContainerState, ContainerStateRunning, ContainerStatus, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::controller::pod::{SandboxSettings, sandbox_objects};
use crate::resources::AgentSpec;
use crate::resources::agent::AgentSandbox;

const NOW: &str = "2026-12-06T10:00:00Z";

fn now() -> jiff::Timestamp {
    NOW.parse().expect("time")
}

fn parent() -> AgentRun {
    let mut run = AgentRun::new(
        "run-1",
        AgentRunSpec {
            agent: "deep-research".into(),
            input: "look".into(),
            thread_id: Some("thread-1".into()),
            uid: Some("alice".into()),
            ..AgentRunSpec::default()
        },
    );
    run.metadata.namespace = Some("team-a".into());
    run
}

fn explorer(pool: Option<WarmPool>) -> Agent {
    let mut agent = Agent::new(
        "research-explorer",
        AgentSpec {
            backend: crate::resources::BACKEND_SUBAGENT.into(),
            is_subagent: Some(true),
            sandbox: pool.map(|p| AgentSandbox { warm_pool: Some(p) }),
            ..AgentSpec::default()
        },
    );
    agent.metadata.namespace = Some("team-a".into());
    agent.metadata.uid = Some("agent-uid".into());
    agent
}

/// The child run the facade would start for `parent` (as `subagent_start` makes it).
fn child(name: &str, parent: &AgentRun) -> AgentRun {
    let mut run = AgentRun::new(
        name,
        AgentRunSpec {
            agent: "research-explorer".into(),
            input: "survey".into(),
            thread_id: Some(format!("thread-1_sub_research-explorer_{name}")),
            uid: parent.spec.uid.clone(),
            parent: Some(ParentRef {
                run_id: parent.name_any(),
                thread_id: "thread-1".into(),
                agent: "deep-research".into(),
                file_thread_id: Some("thread-1".into()),
                tool_call_id: Some(format!("call-{name}")),
                root_run_id: None,
            }),
            ..AgentRunSpec::default()
        },
    );
    run.metadata.namespace = Some("team-a".into());
    run.metadata.uid = Some(format!("uid-{name}"));
    run
}

const POOL: WarmPool = WarmPool { size: 4, max_idle_seconds: Some(120) };

fn warm_of(run: &AgentRun) -> Pod {
    let agent = explorer(Some(POOL));
    let timeout = run.spec.timeout_seconds.map_or(crate::run::inputs::DEFAULT_TIMEOUT_SECONDS as i64, |t| t.max(1));
    warm_pod(&sandbox_objects(run, &agent, &SandboxSettings::default()).expect("pod").pod, &agent, &POOL, timeout)
}

fn pool_of(pod: &Pod) -> String {
    pod.labels()[WARM_POOL_LABEL].clone()
}

#[test]
fn a_childs_pod_is_in_the_pool_its_parents_template_fills() {
    let template = template_run(&parent(), "research-explorer", None).expect("template");
    let pool = pool_of(&warm_of(&template));
    assert_eq!(pool_of(&warm_of(&child("c1", &parent()))), pool);
    assert_eq!(pool_of(&warm_of(&child("c2", &parent()))), pool, "every child of the parent");
    let mut bob = parent();
    bob.spec.uid = Some("bob".into());
    assert_ne!(pool_of(&warm_of(&child("c3", &bob))), pool, "another user's child is another pool");
    let mut other_files = child("c4", &parent());
    other_files.spec.parent.as_mut().expect("parent").file_thread_id = Some("thread-9".into());
    assert_ne!(pool_of(&warm_of(&other_files)), pool, "another conversation's files are another pool");
    let mut longer = child("c5", &parent());
    longer.spec.timeout_seconds = Some(600);
    assert_eq!(pool_of(&warm_of(&longer)), pool, "a run's own timeout does not change its pool");
}

#[test]
fn an_idle_pod_holds_no_inputs_no_token_and_only_its_scopes_paths() {
    let mut run = child("c1", &parent());
    run.metadata.annotations = Some(BTreeMap::from([(
        crate::resources::names::CREDENTIALS_ANNOTATION.to_string(),
        "c1-credentials".to_string(),
    )]));
    let cold = sandbox_objects(&run, &explorer(Some(POOL)), &SandboxSettings::default()).expect("pod").pod;
    assert!(
        cold.spec.as_ref().unwrap().containers[0].env.iter().flatten().any(|v| v.name == env_names::RUN_TOKEN),
        "the cold pod has the token this test expects the warm one to lack"
    );
    let warm = warm_pod(&cold, &explorer(Some(POOL)), &POOL, crate::run::inputs::DEFAULT_TIMEOUT_SECONDS as i64);
    let spec = warm.spec.as_ref().expect("spec");
    let volumes = spec.volumes.iter().flatten();
    assert!(
        volumes.clone().all(|v| v.secret.is_none()),
        "no Secret volume: {volumes:?}",
        volumes = volumes.clone().collect::<Vec<_>>()
    );
    let runner = &spec.containers[0];
    let env = runner.env.iter().flatten();
    assert!(env.clone().all(|v| v.name != env_names::RUN_TOKEN), "no run token");
    assert!(env.clone().any(|v| v.name == POD_UID_ENV), "the pod's uid, the key of its claim");
    let sub_paths: Vec<&str> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.volume_mounts.iter().flatten().filter_map(|m| m.sub_path.as_deref()))
        .collect();
    assert!(!sub_paths.is_empty());
    for path in &sub_paths {
        assert!(
            path.starts_with("users/alice/") && !path.contains("c1"),
            "only alice's scope, nothing of the run: {path}"
        );
    }
    let labels = warm.labels();
    assert_eq!(labels[WARM_LABEL], WARM_IDLE);
    assert!(!labels.contains_key(RUN_LABEL) && !labels.contains_key(THREAD_LABEL));
    assert_eq!(warm.metadata.owner_references.as_ref().expect("owner")[0].kind, "Agent");
    assert!(runner.args.iter().flatten().any(|a| a == "--await-claim"));
}

#[test]
fn the_pool_is_the_agents_own_else_the_namespaces_and_size_zero_is_none() {
    let default = WarmPool { size: 2, max_idle_seconds: None };
    assert_eq!(effective_pool(&explorer(Some(POOL)), Some(default)), Some(POOL));
    assert_eq!(effective_pool(&explorer(None), Some(default)), Some(default));
    assert_eq!(effective_pool(&explorer(Some(WarmPool { size: 0, max_idle_seconds: None })), Some(default)), None);
    assert_eq!(effective_pool(&explorer(None), None), None);
}

#[test]
fn the_namespace_default_names_the_key_it_cannot_use() {
    let data = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(namespace_default(&data(&[("size", "3")])), Ok(WarmPool { size: 3, max_idle_seconds: None }));
    assert!(namespace_default(&data(&[])).expect_err("missing").starts_with("size"));
    assert!(namespace_default(&data(&[("size", "x")])).expect_err("text").starts_with("size"));
    assert!(namespace_default(&data(&[("size", "99")])).expect_err("too many").starts_with("size"));
    let idle = namespace_default(&data(&[("size", "1"), ("maxIdleSeconds", "5")])).expect_err("too short");
    assert!(idle.starts_with("maxIdleSeconds"), "{idle}");
}

fn held(name: &str, pool: &str, age: i64) -> Held {
    Held {
        namespace: "team-a".into(),
        name: name.into(),
        fingerprint: pool.into(),
        resource_version: format!("rv-{name}"),
        created: now() - jiff::SignedDuration::from_secs(age),
        ready: true,
        ended: false,
        deleting: false,
    }
}

fn wanted(size: usize, in_flight: usize) -> Wanted {
    Wanted { fingerprint: "p1".into(), size, idle_seconds: 120, in_flight, pod: Box::new(Pod::default()) }
}

fn creates(actions: &[PoolAction]) -> usize {
    actions.iter().filter(|a| matches!(a, PoolAction::Create(_))).count()
}

fn deleted(actions: &[PoolAction]) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| match a {
            PoolAction::Delete { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_pool_is_filled_to_its_size_counting_pods_in_flight() {
    assert_eq!(creates(&pool_actions(&[wanted(4, 0)], &[], now())), 4);
    assert_eq!(creates(&pool_actions(&[wanted(4, 1)], &[held("a", "p1", 5)], now())), 2);
    assert_eq!(pool_actions(&[wanted(2, 0)], &[held("a", "p1", 5), held("b", "p1", 6)], now()), vec![]);
}

#[test]
fn pods_of_no_pool_ended_expired_or_surplus_are_deleted_oldest_first() {
    let mut ended = held("ended", "p1", 5);
    ended.ended = true;
    let pods = [held("orphan", "p0", 5), ended, held("old", "p1", 121), held("a", "p1", 50), held("b", "p1", 10)];
    let actions = pool_actions(&[wanted(1, 0)], &pods, now());
    assert_eq!(deleted(&actions), ["orphan", "ended", "old", "a"]);
    assert_eq!(creates(&actions), 0);
    let mut going = held("going", "p0", 5);
    going.deleting = true;
    assert_eq!(pool_actions(&[], &[going], now()), vec![], "a pod being deleted is not deleted again");
    let delete = &pool_actions(&[], &[held("x", "p0", 1)], now())[0];
    assert_eq!(
        delete,
        &PoolAction::Delete { namespace: "team-a".into(), name: "x".into(), resource_version: "rv-x".into() },
        "with its version"
    );
}

#[test]
fn only_a_ready_young_idle_pod_is_claimable() {
    assert!(held("a", "p1", 100).claimable(120, now()));
    assert!(!held("a", "p1", 111).claimable(120, now()), "about to be removed");
    let mut starting = held("a", "p1", 1);
    starting.ready = false;
    assert!(!starting.claimable(120, now()));
}

#[test]
fn a_pod_is_read_as_held_only_while_idle_and_ready_once_its_runner_runs() {
    let mut pod = warm_of(&template_run(&parent(), "research-explorer", None).expect("template"));
    pod.metadata.name = Some("w1".into());
    pod.metadata.namespace = Some("team-a".into());
    pod.metadata.creation_timestamp = Some(Time(now()));
    let unready = Held::of(&pod).expect("idle");
    assert!(!unready.ready);
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        container_statuses: Some(vec![ContainerStatus {
            name: RUNNER_CONTAINER.into(),
            state: Some(ContainerState { running: Some(ContainerStateRunning::default()), ..Default::default() }),
            ..Default::default()
        }]),
        ..Default::default()
    });
    assert!(Held::of(&pod).expect("idle").ready);
    pod.metadata.labels.as_mut().expect("labels").insert(WARM_LABEL.into(), WARM_CLAIMED.into());
    assert_eq!(Held::of(&pod), None, "a claimed pod is in no pool");
}

#[test]
fn the_claim_moves_the_pod_to_the_run_with_its_version_as_precondition() {
    let run = child("c1", &parent());
    let cold = sandbox_objects(&run, &explorer(Some(POOL)), &SandboxSettings::default()).expect("pod").pod;
    let patch = claim_patch(&cold, "42");
    let meta = &patch["metadata"];
    assert_eq!(meta["resourceVersion"], "42");
    assert_eq!(meta["labels"][WARM_LABEL], WARM_CLAIMED);
    assert_eq!(meta["labels"][RUN_LABEL], "c1");
    assert_eq!(meta["ownerReferences"][0]["kind"], "AgentRun");
    assert_eq!(meta["ownerReferences"][0]["uid"], "uid-c1");
    assert_eq!(meta["annotations"][THREAD_ANNOTATION], "thread-1_sub_research-explorer_c1");
}
