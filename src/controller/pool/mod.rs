//! Warm pools, pure (docs/concepts/warm-pools.md): which idle sandbox pods to keep, what each one is,
//! and which one a new run may claim. The pool reconciler (`pool_reconciler`) gathers the inputs and
//! applies the actions; the run reconciler claims.
//!
//! # A warm pod is bound to a scope, never to a run
//! Kubernetes cannot add a volume to a running pod, and a run's pod mounts its user's sub-paths of the
//! shared claims (its workspace, its conversation's uploads and outputs). So a warm pod is made for one
//! *scope*: the pod a run of an agent, a user and a conversation's files would get, less everything of
//! the run itself ([`warm_pod`]):
//! - no inputs Secret: its inputs folder is an empty in-memory folder of the runner's, which the claim
//!   fills;
//! - no run token: the claim carries it;
//! - the skills scope (a sub-path of the run's own thread) on an emptyDir: the runner projects the
//!   agent's skills there at the run's start, as it does into a new thread's;
//! - a runner started with `--await-claim`, which runs nothing until its claim comes.
//!
//! The scope's volumes are the only user data an idle pod can reach: no other user's path, no run's
//! inputs or credentials. The pool label ([`fingerprint`]) is a hash of the whole pod spec, so a run
//! claims only a pod identical to its own cold pod but for those parts: a changed Agent, Model, setting
//! or scope makes a new pool, and the old pods are removed.
//!
//! # Demand
//! Pods are kept where a scope is about to be used: while a parent run is unfinished, each subagent it
//! may delegate to whose pool is set ([`effective_pool`]) keeps `size` pods of the parent's user and
//! files ([`template_run`]). The pods go when the parent ends or after `maxIdleSeconds`.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, Volume};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::pod::RUNNER_CONTAINER;
use crate::resources::agent::WarmPool;
use crate::resources::names::{
    AGENT_LABEL, RUN_LABEL, THREAD_ANNOTATION, THREAD_LABEL, WARM_CLAIMED, WARM_IDLE, WARM_LABEL, WARM_POOL_LABEL,
    label_value,
};
use crate::resources::{Agent, AgentRun, AgentRunSpec, ParentRef};
use crate::run::claim::POD_UID_ENV;
use crate::run::inputs::env as env_names;
use crate::run::scope::{Scope, ScopeIds};

/// The namespace's default pool, for its agents that set none: a ConfigMap with `size` and, optionally,
/// `maxIdleSeconds`.
pub const NAMESPACE_WARM_POOL_CONFIG_MAP: &str = "yuxi-warm-pool";
/// How much longer than its pool's `maxIdleSeconds` an idle runner waits for its claim, in seconds: the
/// pool removes the pod first, so a claim never meets a runner that has gone.
pub const CLAIM_WAIT_MARGIN_SECONDS: i64 = 30;
/// How young an idle pod must be to be claimed, short of its `maxIdleSeconds`, in seconds: a pod about
/// to be removed is not given a run.
pub const CLAIM_AGE_MARGIN_SECONDS: i64 = 10;
/// The name of a warm pod's skills folder (an emptyDir) and of its inputs folder.
const WARM_SKILLS: &str = "warm-skills";
const INPUTS: &str = "inputs";

/// The pool an agent's runs use: its own `spec.sandbox.warmPool`, else the namespace's default; `None`
/// when neither keeps a pod.
pub fn effective_pool(agent: &Agent, namespace_default: Option<WarmPool>) -> Option<WarmPool> {
    agent.spec.sandbox.as_ref().and_then(|s| s.warm_pool).or(namespace_default).filter(|pool| pool.size > 0)
}

/// The namespace's default pool from its [`NAMESPACE_WARM_POOL_CONFIG_MAP`]'s data.
///
/// Errors: a message naming the key when `size` is missing or a value is not an integer, or out of the
/// bounds of [`crate::resources::validation::check_warm_pool`].
pub fn namespace_default(data: &BTreeMap<String, String>) -> Result<WarmPool, String> {
    let integer = |key: &str| -> Result<Option<i64>, String> {
        data.get(key)
            .map(|text| text.trim().parse::<i64>().map_err(|_| format!("{key}: {text:?} is not an integer")))
            .transpose()
    };
    let size = integer("size")?.ok_or("size: is required")?;
    let pool = WarmPool { size: i32::try_from(size).unwrap_or(i32::MAX), max_idle_seconds: integer("maxIdleSeconds")? };
    let mut report = crate::resources::validation::Report::default();
    crate::resources::validation::check_warm_pool(&mut report, "", &pool);
    match report.errors.first() {
        Some(issue) => Err(format!("{}: {}", issue.field.trim_start_matches('.'), issue.message)),
        None => Ok(pool),
    }
}

/// The run a child of `parent` on subagent `child` would be, as far as its pod goes: the parent's user
/// and files, a thread of its own. `None` when the parent's ids make no scope (its pod would have been
/// refused too).
pub fn template_run(parent: &AgentRun, child: &str, default_uid: Option<&str>) -> Option<AgentRun> {
    let name = parent.metadata.name.as_deref()?;
    let uid = parent.spec.uid.as_deref().or(default_uid)?;
    let thread = parent.spec.thread_id.as_deref().unwrap_or(name);
    let scopes = ScopeIds::new(uid, "spec.threadId", thread, parent.spec.parent.as_ref()).ok()?;
    let mut run = AgentRun::new(
        "warm-template",
        AgentRunSpec {
            agent: child.to_string(),
            thread_id: Some("warm-template".into()),
            uid: Some(uid.to_string()),
            parent: Some(ParentRef {
                run_id: name.to_string(),
                thread_id: thread.to_string(),
                agent: parent.spec.agent.clone(),
                file_thread_id: Some(scopes.file_thread_id),
                ..ParentRef::default()
            }),
            ..AgentRunSpec::default()
        },
    );
    run.metadata.namespace = parent.namespace();
    Some(run)
}

/// The longest `timeoutSeconds` an AgentRun may have (the CRD's bound).
pub const MAX_RUN_TIMEOUT_SECONDS: i64 = 86_400;

/// The warm form of `cold`, a run's pod as [`super::pod::sandbox_objects_on`] builds it for a run of
/// `timeout_seconds`: in `agent`'s pool `pool`, holding nothing of the run (see the module). Its
/// deadline is the longest a run may need plus the pool's idle time, so runs of any timeout share a
/// pool; the controller ends each run at its own deadline. Pure.
pub fn warm_pod(cold: &Pod, agent: &Agent, pool: &WarmPool, timeout_seconds: i64) -> Pod {
    let mut pod = cold.clone();
    let idle = pool.idle_seconds();
    if let Some(spec) = pod.spec.as_mut() {
        let skills = Scope::Skills.virtual_root();
        for container in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
            for mount in container.volume_mounts.iter_mut().flatten() {
                if mount.mount_path == skills {
                    mount.name = WARM_SKILLS.to_string();
                    mount.sub_path = None;
                }
                if mount.name == INPUTS {
                    mount.read_only = None;
                }
            }
            if container.name != RUNNER_CONTAINER {
                continue;
            }
            let env = container.env.get_or_insert_with(Vec::new);
            env.retain(|var| var.name != env_names::RUN_TOKEN);
            env.push(EnvVar {
                name: POD_UID_ENV.to_string(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector { api_version: None, field_path: "metadata.uid".into() }),
                    ..EnvVarSource::default()
                }),
            });
            let wait = (idle + CLAIM_WAIT_MARGIN_SECONDS).to_string();
            container
                .args
                .get_or_insert_with(Vec::new)
                .extend(["--await-claim", "--claim-wait-seconds", &wait].map(str::to_string));
        }
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        for volume in volumes.iter_mut().filter(|v| v.name == INPUTS) {
            *volume = empty_dir(INPUTS, "2Mi", Some("Memory"));
        }
        volumes.push(empty_dir(WARM_SKILLS, "64Mi", None));
        // A claim no container mounts any more (the skills claim, when it is its own) is not given.
        let mounted: Vec<String> = spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .flat_map(|c| c.volume_mounts.iter().flatten().map(|m| m.name.clone()))
            .collect();
        volumes.retain(|v| mounted.contains(&v.name));
        spec.active_deadline_seconds =
            spec.active_deadline_seconds.map(|d| d - timeout_seconds + MAX_RUN_TIMEOUT_SECONDS + idle);
    }
    let meta = &mut pod.metadata;
    meta.name = None;
    meta.generate_name = Some(format!("{}-warm-", label_value(&agent.name_any()).chars().take(40).collect::<String>()));
    let labels = meta.labels.get_or_insert_with(BTreeMap::new);
    labels.remove(RUN_LABEL);
    labels.remove(THREAD_LABEL);
    labels.insert(WARM_LABEL.to_string(), WARM_IDLE.to_string());
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(THREAD_ANNOTATION);
    }
    // Owned by the Agent until claimed: deleting the Agent removes its pools.
    meta.owner_references = agent.metadata.uid.as_ref().map(|uid| {
        vec![OwnerReference {
            api_version: Agent::api_version(&()).into_owned(),
            kind: Agent::kind(&()).into_owned(),
            name: agent.name_any(),
            uid: uid.clone(),
            controller: Some(true),
            block_owner_deletion: None,
        }]
    });
    let print = fingerprint(&pod);
    pod.metadata.labels.get_or_insert_with(BTreeMap::new).insert(WARM_POOL_LABEL.to_string(), print);
    pod
}

fn empty_dir(name: &str, size: &str, medium: Option<&str>) -> Volume {
    Volume {
        name: name.to_string(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity(size.to_string())),
            medium: medium.map(str::to_string),
        }),
        ..Volume::default()
    }
}

/// The pool a warm pod belongs to: 16 hex digits of the SHA-256 of its namespace, its agent and its
/// whole spec, as JSON. Two pods of one fingerprint are interchangeable.
pub fn fingerprint(warm: &Pod) -> String {
    let mut hash = Sha256::new();
    hash.update(warm.metadata.namespace.as_deref().unwrap_or_default().as_bytes());
    hash.update([0]);
    let agent = warm.metadata.labels.as_ref().and_then(|l| l.get(AGENT_LABEL)).map(String::as_str);
    hash.update(agent.unwrap_or_default().as_bytes());
    hash.update([0]);
    hash.update(serde_json::to_vec(&warm.spec).unwrap_or_default());
    hash.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A pool to keep: `size` pods like `pod`.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// The pods' [`fingerprint`].
    pub fingerprint: String,
    /// How many idle pods to keep.
    pub size: usize,
    /// How long each may stay idle, in seconds.
    pub idle_seconds: i64,
    /// Pods created for it that the pod cache does not show yet.
    pub in_flight: usize,
    /// The pod to create, [`warm_pod`].
    pub pod: Box<Pod>,
}

/// A warm pod as the pool sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its [`WARM_POOL_LABEL`].
    pub fingerprint: String,
    /// Its `resourceVersion`, the precondition of its deletion (a pod claimed meanwhile is kept).
    pub resource_version: String,
    /// When it was created.
    pub created: jiff::Timestamp,
    /// Whether its runner is up and waiting: the pod runs and its runner container has started.
    pub ready: bool,
    /// Whether it has ended (its runner gave up waiting, or it failed).
    pub ended: bool,
    /// Whether it is being deleted.
    pub deleting: bool,
}

impl Held {
    /// What the pool reads of `pod`, `None` for a pod that is not idle in a pool.
    pub fn of(pod: &Pod) -> Option<Held> {
        let labels = pod.metadata.labels.as_ref()?;
        if labels.get(WARM_LABEL).map(String::as_str) != Some(WARM_IDLE) {
            return None;
        }
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref());
        let runner_started = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.iter().find(|c| c.name == RUNNER_CONTAINER))
            .is_some_and(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
        Some(Held {
            namespace: pod.namespace()?,
            name: pod.name_any(),
            fingerprint: labels.get(WARM_POOL_LABEL).cloned().unwrap_or_default(),
            resource_version: pod.resource_version().unwrap_or_default(),
            created: pod.metadata.creation_timestamp.as_ref().map_or(jiff::Timestamp::UNIX_EPOCH, |t| t.0),
            ready: phase == Some("Running") && runner_started,
            ended: matches!(phase, Some("Succeeded" | "Failed")),
            deleting: pod.metadata.deletion_timestamp.is_some(),
        })
    }

    fn age(&self, now: jiff::Timestamp) -> i64 {
        now.duration_since(self.created).as_secs()
    }

    /// Whether a run may claim this pod now: ready, not going, and young enough that its runner still
    /// waits ([`CLAIM_AGE_MARGIN_SECONDS`]).
    pub fn claimable(&self, idle_seconds: i64, now: jiff::Timestamp) -> bool {
        self.ready && !self.ended && !self.deleting && self.age(now) < idle_seconds - CLAIM_AGE_MARGIN_SECONDS
    }
}

/// One thing for the pool reconciler to do.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolAction {
    /// Create this idle pod.
    Create(Box<Pod>),
    /// Delete this idle pod, if its `resourceVersion` is still this one.
    Delete {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        name: String,
        /// The precondition.
        resource_version: String,
    },
}

/// What to do so that each pool of `wanted` holds its size, from the idle pods `held` of the same
/// namespaces: a pod of no wanted pool, ended, or idle past its pool's time is deleted; a pool short of
/// its size gets pods, one over it loses its oldest. Pods being deleted count for nothing.
pub fn pool_actions(wanted: &[Wanted], held: &[Held], now: jiff::Timestamp) -> Vec<PoolAction> {
    let mut actions = Vec::new();
    let delete = |pod: &Held| PoolAction::Delete {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        resource_version: pod.resource_version.clone(),
    };
    let mut live: BTreeMap<&str, Vec<&Held>> = BTreeMap::new();
    for pod in held.iter().filter(|p| !p.deleting) {
        match wanted.iter().find(|w| w.fingerprint == pod.fingerprint) {
            Some(pool) if !pod.ended && pod.age(now) < pool.idle_seconds => {
                live.entry(&pool.fingerprint).or_default().push(pod)
            }
            _ => actions.push(delete(pod)),
        }
    }
    for pool in wanted {
        let mut pods = live.remove(pool.fingerprint.as_str()).unwrap_or_default();
        pods.sort_by_key(|p| (p.created, p.name.clone()));
        let have = pods.len() + pool.in_flight;
        if have < pool.size {
            actions.extend((have..pool.size).map(|_| PoolAction::Create(pool.pod.clone())));
        } else {
            let surplus = pods.len().saturating_sub(pool.size.saturating_sub(pool.in_flight));
            actions.extend(pods.iter().take(surplus).map(|p| delete(p)));
        }
    }
    actions
}

/// The merge patch that gives the idle pod at `resource_version` to the run whose cold pod is `cold`:
/// the run's labels, thread annotation and controller owner reference in place of the Agent's, and
/// [`WARM_LABEL`] `claimed`, with the version as a precondition (a pod claimed or changed since answers
/// 409, so two runs never both win).
pub fn claim_patch(cold: &Pod, resource_version: &str) -> serde_json::Value {
    let label = |key: &str| cold.metadata.labels.as_ref().and_then(|l| l.get(key)).cloned();
    let thread = cold.metadata.annotations.as_ref().and_then(|a| a.get(THREAD_ANNOTATION)).cloned();
    json!({
        "metadata": {
            "resourceVersion": resource_version,
            "labels": {
                WARM_LABEL: WARM_CLAIMED,
                RUN_LABEL: label(RUN_LABEL),
                THREAD_LABEL: label(THREAD_LABEL),
            },
            "annotations": { THREAD_ANNOTATION: thread },
            "ownerReferences": cold.metadata.owner_references,
        }
    })
}
