//! The AgentRun reconciler: gathers what [`decide`](super::decide::decide) looks at (the run, its pod,
//! its Agent, the result in Redis, the clock), and applies the actions it returns through the Kubernetes
//! API and the run store. Runs are watched as dynamic objects and read one by one, so an AgentRun that
//! cannot be read (an older or hand-edited object) gets a Warning event and is skipped, and never stops
//! the watch of the others.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, ObjectMeta};
use kube::runtime::controller::{Action as Requeue, Config, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::decide::{Action, Observed, ObservedPod, Outcome, Settings, decide};
use super::metrics::ControllerMetrics;
use super::namespace_reads::{named_mcp_servers, namespace_traces};
use super::pod::{CredentialsVerdict, credentials_verdict, without_credentials};
use crate::resources::names::{
    CREDENTIALS_ANNOTATION, FIELD_MANAGER, PARENT_RUN_LABEL, WARM_LABEL, label_value, pod_name,
};
use crate::resources::{Agent, AgentRun, AgentRunPhase, AgentRunStatus, Model};
use crate::store::Store;

/// How long a run waits for the credentials Secret its starter announced before it is looked at again.
pub const CREDENTIALS_WAIT: Duration = Duration::from_secs(1);
/// How long a failed reconcile waits before it is tried again the first time; each further failure in a
/// row doubles it, up to [`RETRY_MAX`].
pub const RETRY_AFTER: Duration = Duration::from_secs(2);
/// The longest wait between retries of a failing reconcile.
pub const RETRY_MAX: Duration = Duration::from_secs(300);
/// How long the controller's keep of an unfinished run lasts ([`Store::keep_run`]); it looks at the run
/// again within a third of it, renewing it, so a run whose AgentRun exists is never swept while its pod
/// is still being scheduled or pulled.
pub const KEEPER_TTL: Duration = Duration::from_secs(90);
/// Who keeps the runs of AgentRuns, in the store.
const KEEPER: &str = "controller";

/// Failures in a row, by object, for the retry backoff.
#[derive(Default)]
pub struct Backoff(std::sync::Mutex<std::collections::HashMap<String, u32>>);

impl Backoff {
    /// The wait before retrying `key` after one more failure: 2 s, 4 s, 8 s... at most 300 s.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = failures.entry(key.to_string()).or_insert(0);
        *count = count.saturating_add(1);
        RETRY_AFTER.saturating_mul(2u32.saturating_pow(*count - 1)).min(RETRY_MAX)
    }

    /// `key` succeeded: its next failure waits the shortest again.
    pub fn succeeded(&self, key: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(key);
    }
}

/// What the reconciler works with.
pub struct RunContext {
    /// The cluster.
    pub client: kube::Client,
    /// Where runners keep events, results and cancel requests.
    pub store: Store,
    /// The state machine's settings.
    pub settings: Settings,
    /// Publishes Kubernetes Events.
    pub recorder: Recorder,
    /// Counts reconciles.
    pub metrics: ControllerMetrics,
    /// Retry waits of failing runs.
    pub backoff: Backoff,
    /// The warm pools new runs claim their pods from ([`super::pool_reconciler`]); `None`: every run
    /// gets a new pod.
    pub pools: Option<Arc<super::pool_reconciler::Pools>>,
}

/// A reconcile failed; it is retried with a backoff ([`Backoff`]).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The Kubernetes API refused or failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    /// The run store failed.
    #[error("run store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// The object has no namespace (AgentRuns are namespaced).
    #[error("{0}")]
    Object(String),
}

impl ReconcileError {
    /// A short label for metrics: `kube`, `store` or `object`.
    pub fn kind(&self) -> &'static str {
        match self {
            ReconcileError::Kube(_) => "kube",
            ReconcileError::Store(_) => "store",
            ReconcileError::Object(_) => "object",
        }
    }
}

/// The AgentRun type, for the dynamic watch.
pub fn agent_run_resource() -> ApiResource {
    ApiResource::erase::<AgentRun>(&())
}

/// Reconciles one AgentRun.
pub async fn reconcile(object: Arc<DynamicObject>, ctx: Arc<RunContext>) -> Result<Requeue, ReconcileError> {
    let started = Instant::now();
    // The reconcile's span, in the trace of the run (its AgentRun's traceparent annotation).
    let span = tracing::trace_span!(
        target: crate::telemetry::TARGET,
        "reconcile",
        otel.name = "reconcile AgentRun",
        yuxi.run.id = %object.name_any(),
        k8s.namespace.name = object.namespace().unwrap_or_default(),
        otel.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        let traceparent = object.annotations().get(crate::run::trace::TRACEPARENT_ANNOTATION);
        crate::telemetry::set_remote_parent(&span, traceparent.map(String::as_str));
    }
    let outcome = tracing::Instrument::instrument(reconcile_inner(&object, &ctx), span.clone()).await;
    if outcome.is_err() {
        span.record("otel.status_code", "ERROR");
    }
    ctx.metrics.reconciled("AgentRun", started.elapsed(), outcome.as_ref().err().map(ReconcileError::kind));
    if outcome.is_ok() {
        ctx.backoff.succeeded(&backoff_key(&object));
    }
    outcome
}

async fn reconcile_inner(object: &DynamicObject, ctx: &RunContext) -> Result<Requeue, ReconcileError> {
    let run: AgentRun = match serde_json::to_value(object).and_then(serde_json::from_value) {
        Ok(run) => run,
        Err(err) => {
            let reference = object.object_ref(&agent_run_resource());
            let note = format!("the AgentRun cannot be read: {err}");
            tracing::warn!(run = %object.name_any(), error = %err, "skipping an AgentRun that cannot be read");
            ctx.metrics.failed("AgentRun", "InvalidObject");
            publish(ctx, &reference, true, "InvalidObject", note).await;
            return Ok(Requeue::await_change());
        }
    };
    let namespace = run.namespace().ok_or_else(|| ReconcileError::Object("an AgentRun without a namespace".into()))?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let agents: Api<Agent> = Api::namespaced(ctx.client.clone(), &namespace);
    // A pod this process claimed for the run, while the cached run does not name it yet.
    let remembered = ctx.pools.as_ref().and_then(|pools| pools.claimed_by(&run));
    let named = run.status.as_ref().and_then(|s| s.pod_name.clone()).filter(|name| name != &pod_name(&run));
    let pod = match remembered.or(named) {
        // A warm pod the run claimed: its own only while it is owned by the run (a status naming
        // another run's pod finds none).
        Some(claimed) => pods.get_opt(&claimed).await?.filter(|pod| owned_by_run(pod, &run)),
        None => pods.get_opt(&pod_name(&run)).await?,
    };
    let agent = agents.get_opt(&run.spec.agent).await?;
    // The Model is read only for a run whose pod is to be made, the one time its spec is used.
    let model = match (&agent, &pod, run.status.as_ref().and_then(|s| s.phase)) {
        (Some(agent), None, None | Some(AgentRunPhase::Pending)) => {
            match super::decide::model_name(&run, agent, &ctx.settings.sandbox) {
                Some(name) => Api::<Model>::namespaced(ctx.client.clone(), &namespace).get_opt(name).await?,
                None => None,
            }
        }
        _ => None,
    };
    let outcome = ctx.store.run_result(&run.name_any()).await?.as_ref().map(Outcome::from_result);
    // The day's counts are read only for a run whose pod is to be made.
    let quota = match (&pod, run.status.as_ref().and_then(|s| s.pod_name.as_ref())) {
        (None, None) if ctx.settings.quotas.any() => {
            let day = crate::run::budget::day_of(jiff::Timestamp::now());
            let uid = run.spec.uid.clone().unwrap_or_default();
            let (user, in_namespace) = ctx.store.usage_today(&day, &namespace, &uid).await?;
            ctx.settings.quotas.used_up(user, in_namespace)
        }
        _ => None,
    };
    let recorded = ctx.store.run_record(&run.name_any()).await?;
    // The namespace's own collector, read only for a run whose pod is to be made.
    let traces = match (&pod, run.status.as_ref().and_then(|s| s.pod_name.as_ref())) {
        (None, None) => namespace_traces(&ctx.client, &namespace).await?,
        _ => None,
    };
    // The McpServers the agent names, read only for a run whose pod is to be made.
    let mcp_servers = match (&agent, &pod, run.status.as_ref().and_then(|s| s.pod_name.as_ref())) {
        (Some(agent), None, None) => named_mcp_servers(&ctx.client, &ctx.settings.sandbox, &namespace, agent).await?,
        _ => Default::default(),
    };
    let observed = Observed {
        mcp_servers,
        traces,
        quota,
        recorded,
        run: &run,
        pod: pod.as_ref().map(ObservedPod::from_pod),
        agent: agent.as_ref(),
        model: model.as_ref(),
        outcome,
        now: jiff::Timestamp::now(),
    };
    let actions = decide(&observed, &ctx.settings);
    // A run whose pod starts now: the pod's start time, once.
    let starts = |a: &Action| matches!(a, Action::SetStatus(s) if s.phase == Some(AgentRunPhase::Running));
    if run.status.as_ref().and_then(|s| s.phase) == Some(AgentRunPhase::Pending)
        && actions.iter().any(starts)
        && let Some(started) = pod.as_ref().filter(|pod| !pod.labels().contains_key(WARM_LABEL))
        && let Some(took) = super::pod_times::pod_start(started)
    {
        ctx.metrics.pod_started(took);
        super::pod_times::pod_spans(&run, started);
    }
    let unfinished = !run.status.as_ref().and_then(|s| s.phase).is_some_and(|p| p.is_terminal());
    if unfinished && run.metadata.deletion_timestamp.is_none() {
        // The AgentRun exists and is being watched: its run is not abandoned, whatever its pod does.
        ctx.store.keep_run(&run.name_any(), KEEPER, KEEPER_TTL).await?;
    }
    let mut requeue = apply(ctx, &run, pod.as_ref(), agent.as_ref(), actions).await?;
    if unfinished {
        requeue = Some(requeue.map_or(KEEPER_TTL / 3, |r| r.min(KEEPER_TTL / 3)));
    }
    Ok(requeue.map_or_else(Requeue::await_change, Requeue::requeue))
}

/// After a failed reconcile: try again later, later each time it fails again.
pub fn error_policy(object: Arc<DynamicObject>, error: &ReconcileError, ctx: Arc<RunContext>) -> Requeue {
    let wait = ctx.backoff.failed(&backoff_key(&object));
    tracing::warn!(run = %object.name_any(), error = %error, retry_in_s = wait.as_secs(), "reconcile failed");
    Requeue::requeue(wait)
}

fn backoff_key(object: &DynamicObject) -> String {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}

/// Whether `pod` is `run`'s: its controller owner reference is the run's.
fn owned_by_run(pod: &Pod, run: &AgentRun) -> bool {
    run.metadata.uid.as_ref().is_some_and(|uid| {
        pod.owner_references().iter().any(|r| &r.uid == uid && r.kind == "AgentRun" && r.controller == Some(true))
    })
}

/// Applies `actions` to `run` (whose pod is `pod` and Agent `agent`, as observed), in order; returns
/// when to look again, if `decide` asked for it. What is already done counts as done: a pod or inputs
/// Secret that exists, a pod or run already gone. A pod to create is first claimed from the run's warm
/// pool when it has a ready pod ([`super::pool_reconciler::claim`]); the status then names that pod.
pub async fn apply(
    ctx: &RunContext,
    run: &AgentRun,
    pod: Option<&Pod>,
    agent: Option<&Agent>,
    actions: Vec<Action>,
) -> Result<Option<Duration>, ReconcileError> {
    let namespace = run.namespace().ok_or_else(|| ReconcileError::Object("an AgentRun without a namespace".into()))?;
    let name = run.name_any();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let runs: Api<AgentRun> = Api::namespaced(ctx.client.clone(), &namespace);
    let post = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.into()) };
    let mut requeue: Option<Duration> = None;
    let mut claimed: Option<String> = None;
    for action in actions {
        match action {
            Action::CreatePod(objects) => {
                let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
                let announced = run.annotations().get(CREDENTIALS_ANNOTATION).cloned();
                let secret = match &announced {
                    Some(name) => secrets.get_opt(name).await?,
                    None => None,
                };
                let verdict = credentials_verdict(run, secret.as_ref());
                if let (Some(pools), Some(agent), CredentialsVerdict::None | CredentialsVerdict::Mount) =
                    (&ctx.pools, agent, &verdict)
                {
                    let token = match verdict {
                        CredentialsVerdict::Mount => super::pool_reconciler::token_of(secret.as_ref()),
                        _ => None,
                    };
                    let place = super::pool_reconciler::Place { client: &ctx.client, store: &ctx.store };
                    claimed = super::pool_reconciler::claim(place, pools, run, agent, &objects, token).await?;
                    if claimed.is_some() {
                        continue;
                    }
                }
                let pod = match verdict {
                    CredentialsVerdict::None | CredentialsVerdict::Mount => objects.pod,
                    // Its starter creates the Secret right after the run: everything waits for it, and
                    // the same actions are decided again then.
                    CredentialsVerdict::Wait => return Ok(Some(CREDENTIALS_WAIT)),
                    CredentialsVerdict::Refuse(why) => {
                        tracing::warn!(run = %name, reason = %why, "not mounting the run's credentials");
                        publish(ctx, &run.object_ref(&()), true, "UntrustedCredentials", why).await;
                        without_credentials(objects.pod)
                    }
                };
                tolerate(secrets.create(&post, &objects.inputs).await.map(|_| ()), 409)?;
                tolerate(pods.create(&post, &pod).await.map(|_| ()), 409)?;
            }
            Action::DeleteCredentials => {
                if let Some(secret) = run.annotations().get(CREDENTIALS_ANNOTATION) {
                    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
                    tolerate(secrets.delete(secret, &DeleteParams::default()).await.map(|_| ()), 404)?;
                }
            }
            Action::DeletePod => {
                let name = pod.map_or_else(|| pod_name(run), |p| p.name_any());
                tolerate(pods.delete(&name, &DeleteParams::default()).await.map(|_| ()), 404)?;
            }
            Action::SignalCancel => ctx.store.request_cancel(&name).await?,
            Action::SetStatus(mut status) => {
                // The status names the pod the run has: a claimed one is not named after the run.
                if let Some(observed) = pod.map(|p| p.name_any()).filter(|name| name != &pod_name(run)) {
                    status.pod_name = Some(observed);
                }
                if let Some(name) = &claimed {
                    status.pod_name = Some(name.clone());
                    status.reason = Some("PodClaimed".into());
                    status.message = Some(format!("warm sandbox pod {name} claimed"));
                }
                if run.status.as_ref() != Some(status.as_ref()) {
                    apply_status(&runs, &name, &status).await?;
                }
            }
            Action::RecordStatus(status, error) => {
                // Runs applied with kubectl have no record; the facade's have one. An end is written with
                // the result and the one `end` event in the same step, unless the runner wrote its own.
                if status.is_terminal() {
                    ctx.store.end_run(&name, status, error.as_deref()).await?;
                } else {
                    ctx.store.set_run_status(&name, status, error.as_deref()).await?;
                }
            }
            Action::CancelChildren => cancel_children(ctx, &runs, &name).await?,
            Action::DeleteRun => tolerate(runs.delete(&name, &DeleteParams::default()).await.map(|_| ()), 404)?,
            Action::Event { warning, reason, note } => {
                let (reason, note) = match (&claimed, reason.as_str()) {
                    (Some(name), "PodCreated") => {
                        ("PodClaimed".to_string(), format!("claimed warm sandbox pod {name}"))
                    }
                    _ => (reason, note),
                };
                publish(ctx, &run.object_ref(&()), warning, &reason, note).await;
            }
            Action::RequeueAfter(after) => requeue = Some(requeue.map_or(after, |r| r.min(after))),
        }
    }
    Ok(requeue)
}

/// Server-side apply of the status subresource, owned by [`FIELD_MANAGER`].
async fn apply_status(runs: &Api<AgentRun>, name: &str, status: &AgentRunStatus) -> Result<(), kube::Error> {
    let patch =
        json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": name}, "status": status});
    runs.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await.map(|_| ())
}

/// Cancels the unfinished AgentRuns `parent` started (labelled with it), and their records.
async fn cancel_children(ctx: &RunContext, runs: &Api<AgentRun>, parent: &str) -> Result<(), ReconcileError> {
    let selector = format!("{PARENT_RUN_LABEL}={}", label_value(parent));
    let children = runs.list(&ListParams::default().labels(&selector)).await?;
    for child in children.items {
        let ended = child.status.as_ref().and_then(|s| s.phase).is_some_and(|p| p.is_terminal());
        if ended || child.spec.is_cancel_requested() {
            continue;
        }
        let patch = json!({"spec": {"cancel": true}});
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        tolerate(runs.patch(&child.name_any(), &params, &Patch::Merge(&patch)).await.map(|_| ()), 404)?;
    }
    ctx.store.cancel_children(parent).await?;
    Ok(())
}

/// `result`, with an API answer of status `code` taken as success.
fn tolerate(result: Result<(), kube::Error>, code: u16) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == code => Ok(()),
        other => other,
    }
}

/// Publishes an Event; a failure is logged (an Event is never worth failing a reconcile for).
async fn publish(
    ctx: &RunContext,
    reference: &k8s_openapi::api::core::v1::ObjectReference,
    warning: bool,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_: if warning { EventType::Warning } else { EventType::Normal },
        reason: reason.to_string(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(err) = ctx.recorder.publish(&event, reference).await {
        tracing::warn!(reason, error = %err, "cannot publish an event");
    }
}

/// Runs the AgentRun reconciler over `namespaces` (all when `None`) until `shutdown` resolves: AgentRuns
/// watched as dynamic objects, their pods watched through their owner references, at most
/// `concurrency` reconciles at once. Returns the runs' reflector stores, for the runs-by-phase metric.
pub async fn run(
    ctx: Arc<RunContext>,
    namespaces: Option<Vec<String>>,
    concurrency: u16,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let resource = agent_run_resource();
    let scopes: Vec<Option<String>> = match namespaces {
        None => vec![None],
        Some(list) => list.into_iter().map(Some).collect(),
    };
    let controllers = scopes.into_iter().map(|scope| {
        let (runs, pods): (Api<DynamicObject>, Api<Pod>) = match &scope {
            None => (Api::all_with(ctx.client.clone(), &resource), Api::all(ctx.client.clone())),
            Some(ns) => {
                (Api::namespaced_with(ctx.client.clone(), ns, &resource), Api::namespaced(ctx.client.clone(), ns))
            }
        };
        let controller = Controller::new_with(runs, watcher::Config::default(), resource.clone())
            .owns(pods, watcher::Config::default().labels("app.kubernetes.io/managed-by=yuxi-operator"))
            .with_config(Config::default().concurrency(concurrency))
            .graceful_shutdown_on(shutdown.clone());
        ctx.metrics.watch_runs(controller.store());
        controller.run(reconcile, error_policy, ctx.clone()).for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "AgentRun controller");
            }
        })
    });
    futures::future::join_all(controllers).await;
}

/// The metadata of an object the controller creates for a run: owned by it.
pub fn owned_by(run: &AgentRun, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: run.namespace(),
        owner_references: run.controller_owner_ref(&()).map(|r| vec![r]),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_and_a_success_starts_over() {
        let backoff = Backoff::default();
        let waits: Vec<u64> = (0..10).map(|_| backoff.failed("team-a/r1").as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(backoff.failed("team-a/other").as_secs(), 2, "per object");
        backoff.succeeded("team-a/r1");
        assert_eq!(backoff.failed("team-a/r1").as_secs(), 2);
    }

    #[test]
    fn only_the_tolerated_code_counts_as_success() {
        let status = |code| kube::Error::Api(kube::core::Status::failure("x", "Reason").with_code(code).boxed());
        assert!(tolerate(Err(status(409)), 409).is_ok());
        assert!(tolerate(Err(status(403)), 409).is_err());
        assert!(tolerate(Ok(()), 404).is_ok());
    }
}
