//! (Over 500 lines: the pure judgement and its thin watch shell belong together; the tests are in `agent_reconciler/tests.rs`.)
//! The Agent reconciler: keeps every Agent's status (`observedGeneration` and the `Accepted` and `Ready`
//! conditions) true to its spec and to the other Agents of its namespace, and keeps the built-in
//! `general-purpose` subagent present in the namespaces it serves (docs/concepts/agents.md).
//!
//! The rules are pure: [`agent_status`] judges one Agent among the Agents of its namespace with the
//! functions the admission webhook uses ([`validate_agent`] and [`validate_agent_among`]), and
//! [`dependents`] says which other Agents' status a change to one Agent can alter. The I/O is a thin
//! shell: [`apply_status`] writes a status with server-side apply, [`ensure_general_purpose`] creates the
//! built-in subagent, and [`run`] drives both from a watch of the Agents.
//!
//! # How [`run`] is wired
//!
//! One watch of the Agents (of all namespaces, or one watch per given namespace) feeds a reflector store
//! and, after the store has taken in each event, the reconcile queue of kube-runtime's
//! [`applier`] (the engine behind `Controller`):
//! - an added or changed Agent queues itself and its [`dependents`];
//! - a deleted Agent queues its dependents (a main agent that named a deleted subagent loses it);
//! - the end of a (re)list queues every Agent, since objects deleted while the watch was down vanish from
//!   the store without a delete event.
//!
//! Each reconcile reads the namespace's other Agents from that store (no LIST per reconcile), computes the
//! status and applies it when it differs. Because the triggers come from the same watch that fills the
//! store, a dependent is always reconciled against a store that already holds the change that triggered
//! it. (`Controller::watches` would open a second watch of the same Agents whose events can reach its
//! mapper before the controller's own store has them, so a main agent could be re-judged against a store
//! that still holds the subagent just deleted; `Controller::reconcile_on` and `watches_stream` need
//! kube-runtime's unstable features.)
//!
//! The watch reads Agents as [`DynamicObject`]s and decodes each one itself, so an object that does not
//! fit the Agent schema (written under an older CRD, say) cannot stop the watch: it gets `Accepted`
//! False with reason `InvalidSpec` naming the field that does not fit, and counts as absent for the
//! other Agents' rules.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, applier, watcher};

use super::metrics::ControllerMetrics;
use crate::resources::builtin_general_purpose;
use crate::resources::manifest::{ManifestError, decode};
use crate::resources::names::FIELD_MANAGER;
use crate::resources::validation::{FieldIssue, Report, validate_agent, validate_agent_among};
use crate::resources::{API_VERSION, Agent, AgentStatus, GENERAL_PURPOSE};

/// The condition type that says whether the spec is valid and every subagent it names resolves.
pub const ACCEPTED: &str = "Accepted";
/// The condition type that says whether the agent can run (true exactly when it is accepted).
pub const READY: &str = "Ready";

/// The reasons of the `Accepted` and `Ready` conditions (`Ready` mirrors `Accepted`).
pub mod reason {
    /// The spec is valid and every subagent it names resolves.
    pub const VALID: &str = "Valid";
    /// The spec breaks a rule of [`validate_agent`](crate::resources::validation::validate_agent), or the
    /// object does not fit the Agent schema at all.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// Another main agent of the namespace is also the default agent.
    pub const DUPLICATE_DEFAULT: &str = "DuplicateDefault";
    /// A `spec.context.subagents` entry names no subagent of the namespace (nor `general-purpose`).
    pub const SUBAGENT_NOT_FOUND: &str = "SubagentNotFound";
}

/// The longest condition message the API server accepts, in bytes (the schema's maxLength is 32768).
const MAX_CONDITION_MESSAGE: usize = 32_768;

/// The `kind` label of this reconciler's metrics.
const KIND: &str = "Agent";

/// How many Agents one watch scope reconciles at once.
const CONCURRENCY: u16 = 4;

/// The first retry delay after a failed reconcile; it doubles with each further failure of the object.
const RETRY_FIRST: Duration = Duration::from_secs(5);
/// The longest retry delay after failed reconciles.
const RETRY_MAX: Duration = Duration::from_secs(300);

/// The status an Agent should have, at `now`.
///
/// `namespace_agents` are the Agents of the agent's namespace; it may include the agent itself (it is
/// recognised by name and skipped, the `agent` argument being the version judged), and Agents of other
/// namespaces are ignored.
///
/// `Accepted` is True with reason [`reason::VALID`] when the spec passes [`validate_agent`] and the
/// errors of [`validate_agent_among`] (the webhook's rules), and every `spec.context.subagents` entry
/// names a subagent Agent of the namespace or the built-in `general-purpose`. Otherwise it is False, with
/// the first that applies of [`reason::INVALID_SPEC`] (a single-object rule),
/// [`reason::DUPLICATE_DEFAULT`] (another main agent of the namespace is also the default; each default
/// agent gets it) and [`reason::SUBAGENT_NOT_FOUND`] (the webhook only warns about these entries, since
/// manifests may be applied in any order; they make the agent not accepted until they resolve). The
/// message lists every finding as `field: message`. `Ready` is True exactly when `Accepted` is, with the
/// same reason and message.
///
/// Both conditions carry `observedGeneration = metadata.generation`, as does the status. A condition's
/// `lastTransitionTime` is kept from the agent's current status when its `status` did not change, and is
/// `now` otherwise, so re-judging an unchanged agent yields an equal status.
pub fn agent_status(agent: &Agent, namespace_agents: &[Agent], now: Time) -> AgentStatus {
    let (verdict, message) = judge(agent, namespace_agents);
    status_from(verdict, message, agent.metadata.generation, agent.status.as_ref(), now)
}

/// The Agents of `namespace_agents` whose status depends on the Agent `changed`, to re-judge when it
/// appears, changes or goes: the main agents (not `SubAgentBackend`) of its namespace, other than itself,
/// that name it in `spec.context.subagents`, and every other main agent that claims to be the default.
///
/// Only the identity of `changed` matters: the default agents are returned whether or not `changed` is a
/// default now, because the change may be the one that made it stop being one (the watch shows the new
/// state only). A subagent never depends on another Agent: naming subagents is already invalid for it.
pub fn dependents(changed: &Agent, namespace_agents: &[Agent]) -> Vec<ObjectRef<Agent>> {
    dependents_named(changed.namespace().as_deref(), &changed.name_any(), namespace_agents)
}

/// Creates the built-in `general-purpose` subagent ([`builtin_general_purpose`]) in `namespace`, as
/// field manager `yuxi-operator`. Returns true when it created it, false when an Agent of that name was
/// already there (409 `AlreadyExists`; whatever it holds is left alone).
///
/// Errors: every other failure of the create (403 `Forbidden`, an unreachable API server...).
pub async fn ensure_general_purpose(client: kube::Client, namespace: &str) -> Result<bool, kube::Error> {
    let mut agent = builtin_general_purpose();
    agent.metadata.namespace = Some(namespace.to_string());
    let params = PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.to_string()) };
    match Api::<Agent>::namespaced(client, namespace).create(&params, &agent).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(false),
        Err(err) => Err(err),
    }
}

/// Applies `status` to `agent` with server-side apply on the status subresource:
/// `PATCH /apis/yuxi.dev/v1alpha1/namespaces/<ns>/agents/<name>/status?&force=true&fieldManager=yuxi-operator`,
/// content type `application/apply-patch+yaml`, a body of `apiVersion`, `kind`, `metadata.name` and
/// `status` only. The field manager then owns `observedGeneration` and the conditions it sets (the
/// conditions are a map keyed by `type`, so other writers' conditions stay).
///
/// Skips the call when the agent's current status already has this `observedGeneration` and these exact
/// conditions (other writers' conditions aside). Returns whether it patched. An agent without a namespace
/// is patched in the client's default namespace.
///
/// Errors: the API server's refusal (403, 404 for an agent deleted meanwhile, 422) or a transport error.
pub async fn apply_status(client: kube::Client, agent: &Agent, status: AgentStatus) -> Result<bool, kube::Error> {
    let namespace = agent.namespace().unwrap_or_else(|| client.default_namespace().to_string());
    patch_status(client, &namespace, &agent.name_any(), agent.status.as_ref(), status).await
}

/// Runs the Agent reconciler until `shutdown` resolves, over the Agents of every namespace (`None`) or of
/// the given namespaces (one watch each); see the module documentation for how it is wired.
///
/// It first ensures `general-purpose` in each given namespace, then in each namespace it reconciles an
/// Agent of (once per namespace per process; a namespace whose reflector store already shows one needs
/// no request). A failed ensure or status write is retried after 5 s, doubling per further failure of
/// the same Agent up to 5 min; failed watches are retried with kube-runtime's default backoff. Up to 4
/// Agents per watch are reconciled at once. When `shutdown` resolves no new reconcile starts, the ones
/// running finish, and the function returns.
///
/// `metrics` counts, with `kind="Agent"`: every reconcile with its duration and result
/// (`yuxi_reconciles_total{kind,result}`, `yuxi_reconcile_duration_seconds{kind}`), and failures by
/// reason (`yuxi_reconcile_failures_total{kind,reason}`): `kube` for a reconcile the API server failed
/// (a refused status or `general-purpose` create) and for a failed create of `general-purpose` at start, `InvalidObject` for an Agent that does not fit the
/// schema (it still gets its status), `watch` for a failed list or watch of the Agents.
///
/// Errors: an empty namespace list (serve every namespace with `None`). API failures are not errors of
/// this function: they are logged, counted and retried.
pub async fn run(
    client: kube::Client,
    namespaces: Option<Vec<String>>,
    metrics: ControllerMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if namespaces.as_ref().is_some_and(Vec::is_empty) {
        anyhow::bail!("the Agent reconciler was given an empty list of namespaces; pass none to serve every namespace");
    }
    let shutdown = shutdown.boxed().shared();
    let shared =
        Arc::new(Shared { client, metrics, ensured: Mutex::new(HashSet::new()), failures: Mutex::new(HashMap::new()) });
    match namespaces {
        None => serve(shared, None, shutdown).await,
        Some(namespaces) => {
            for namespace in &namespaces {
                if let Err(err) = shared.ensure_once(namespace, None).await {
                    shared.metrics.failed(KIND, "kube");
                    tracing::warn!(namespace, error = %err, "cannot create the built-in general-purpose subagent; retrying when an Agent of the namespace is reconciled");
                }
            }
            let scopes =
                namespaces.into_iter().map(|namespace| serve(shared.clone(), Some(namespace), shutdown.clone()));
            futures::future::join_all(scopes).await;
        }
    }
    Ok(())
}

/// What [`agent_status`] concluded: the reason (accepted exactly when it is [`reason::VALID`]).
type Verdict = &'static str;

/// Judges `agent` among `namespace_agents`: the reason and the message of its conditions.
fn judge(agent: &Agent, namespace_agents: &[Agent]) -> (Verdict, String) {
    let namespace = agent.namespace();
    let same_namespace: Cow<'_, [Agent]> = if namespace_agents.iter().all(|a| a.namespace() == namespace) {
        Cow::Borrowed(namespace_agents)
    } else {
        Cow::Owned(namespace_agents.iter().filter(|a| a.namespace() == namespace).cloned().collect())
    };
    let own = validate_agent(agent);
    let among = validate_agent_among(agent, &same_namespace);
    let (duplicate, mut invalid): (Vec<FieldIssue>, Vec<FieldIssue>) =
        among.errors.into_iter().partition(|issue| issue.field == "spec.default");
    invalid.splice(0..0, own.errors);
    let unresolved: Vec<FieldIssue> =
        among.warnings.into_iter().filter(|issue| issue.field.starts_with("spec.context.subagents")).collect();
    let verdict = if !invalid.is_empty() {
        reason::INVALID_SPEC
    } else if !duplicate.is_empty() {
        reason::DUPLICATE_DEFAULT
    } else if !unresolved.is_empty() {
        reason::SUBAGENT_NOT_FOUND
    } else {
        return (reason::VALID, "the spec is valid and every subagent it names resolves".to_string());
    };
    let findings =
        Report { errors: invalid.into_iter().chain(duplicate).chain(unresolved).collect(), warnings: vec![] };
    (verdict, findings.error_summary())
}

/// The status for `verdict` and `message`, keeping the transition times of `current` where the
/// condition's status is unchanged.
fn status_from(
    verdict: Verdict,
    message: String,
    generation: Option<i64>,
    current: Option<&AgentStatus>,
    now: Time,
) -> AgentStatus {
    let accepted = verdict == reason::VALID;
    let ready_message = if accepted { "the agent can run".to_string() } else { message.clone() };
    let condition = |type_: &str, message: String| {
        let status = if accepted { "True" } else { "False" };
        let last_transition_time = current
            .and_then(|current| current.conditions.iter().find(|c| c.type_ == type_))
            .filter(|c| c.status == status)
            .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason: verdict.to_string(),
            message: bounded(message),
            observed_generation: generation,
            last_transition_time,
        }
    };
    AgentStatus {
        observed_generation: generation,
        conditions: vec![condition(ACCEPTED, message), condition(READY, ready_message)],
    }
}

/// `message` cut to [`MAX_CONDITION_MESSAGE`] bytes at a character boundary.
fn bounded(mut message: String) -> String {
    if message.len() > MAX_CONDITION_MESSAGE {
        let mut end = MAX_CONDITION_MESSAGE - 3;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str("...");
    }
    message
}

/// [`dependents`] by the changed Agent's namespace and name.
fn dependents_named(namespace: Option<&str>, name: &str, namespace_agents: &[Agent]) -> Vec<ObjectRef<Agent>> {
    namespace_agents
        .iter()
        .filter(|a| a.namespace().as_deref() == namespace && a.name_any() != name)
        .filter(|a| !a.spec.has_subagent_backend())
        .filter(|a| {
            a.spec.is_default()
                || a.spec
                    .context
                    .as_ref()
                    .and_then(|c| c.subagents.as_ref())
                    .is_some_and(|s| s.iter().any(|s| s == name))
        })
        .map(|a| {
            let reference = ObjectRef::new(&a.name_any());
            match namespace {
                Some(namespace) => reference.within(namespace),
                None => reference,
            }
        })
        .collect()
}

/// Whether `current` already holds `status`: the same `observedGeneration`, and each condition of
/// `status` present and equal (conditions of other types are other writers' and do not count).
fn already_holds(current: Option<&AgentStatus>, status: &AgentStatus) -> bool {
    current.is_some_and(|current| {
        current.observed_generation == status.observed_generation
            && status.conditions.iter().all(|c| current.conditions.iter().any(|have| have == c))
    })
}

/// The server-side apply of [`apply_status`], by namespace and name, through the dynamic API so that the
/// answer is read whatever the object holds.
async fn patch_status(
    client: kube::Client,
    namespace: &str,
    name: &str,
    current: Option<&AgentStatus>,
    status: AgentStatus,
) -> Result<bool, kube::Error> {
    if already_holds(current, &status) {
        return Ok(false);
    }
    let body = serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": "Agent",
        "metadata": {"name": name},
        "status": status,
    });
    let api: Api<DynamicObject> = Api::namespaced_with(client, namespace, &agent_resource());
    api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await?;
    Ok(true)
}

/// The API resource of Agents, for the dynamic API.
fn agent_resource() -> ApiResource {
    ApiResource::erase::<Agent>(&())
}

/// Decodes a watched object as an Agent; the error is `field: message` for the field that does not fit.
fn decode_agent(object: &DynamicObject) -> Result<Agent, String> {
    let value = serde_json::to_value(object).map_err(|err| format!("cannot read the object: {err}"))?;
    decode::<Agent>(value, 1).map_err(|err| match err {
        ManifestError::Field { field, message, .. } => format!("{field}: {message}"),
        other => other.to_string(),
    })
}

/// The decodable Agents of `namespace` in `store`.
fn agents_of(store: &Store<DynamicObject>, namespace: &str) -> Vec<Agent> {
    store
        .state()
        .iter()
        .filter(|object| object.metadata.namespace.as_deref() == Some(namespace))
        .filter_map(|object| decode_agent(object).ok())
        .collect()
}

/// `now`, to the second: the API server keeps condition times to the second.
fn now() -> Time {
    let now = jiff::Timestamp::now();
    Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// What every watch scope of one [`run`] shares.
struct Shared {
    client: kube::Client,
    metrics: ControllerMetrics,
    /// The namespaces where `general-purpose` is known to exist.
    ensured: Mutex<HashSet<String>>,
    /// Consecutive failed reconciles per Agent, for the retry delay.
    failures: Mutex<HashMap<ObjectRef<DynamicObject>, u32>>,
}

impl Shared {
    /// Ensures `general-purpose` in `namespace` unless done before by this process, or `store` shows it.
    async fn ensure_once(&self, namespace: &str, store: Option<&Store<DynamicObject>>) -> Result<(), kube::Error> {
        if self.ensured.lock().unwrap_or_else(PoisonError::into_inner).contains(namespace) {
            return Ok(());
        }
        let seen = store.is_some_and(|store| {
            store.get(&ObjectRef::new_with(GENERAL_PURPOSE, agent_resource()).within(namespace)).is_some()
        });
        if !seen && ensure_general_purpose(self.client.clone(), namespace).await? {
            tracing::info!(namespace, "created the built-in general-purpose subagent");
        }
        self.ensured.lock().unwrap_or_else(PoisonError::into_inner).insert(namespace.to_string());
        Ok(())
    }
}

/// One watch scope's reconcile context.
struct Context {
    shared: Arc<Shared>,
    store: Store<DynamicObject>,
    /// The namespace this scope watches; `None` for all.
    namespace: Option<String>,
}

impl Context {
    /// Whether this scope's watch covers `namespace`.
    fn serves(&self, namespace: &str) -> bool {
        self.namespace.as_deref().is_none_or(|own| own == namespace)
    }
}

/// Why a reconcile failed; the Agent is retried after a delay.
#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    /// The status could not be written.
    #[error("cannot apply the status of Agent {namespace}/{name}: {source}")]
    ApplyStatus { namespace: String, name: String, source: kube::Error },
    /// `general-purpose` could not be created in the Agent's namespace.
    #[error("cannot create the built-in general-purpose subagent in namespace {namespace}: {source}")]
    EnsureGeneralPurpose { namespace: String, source: kube::Error },
}

/// Watches the Agents of `namespace` (all namespaces for `None`) and reconciles them until `shutdown`.
async fn serve(shared: Arc<Shared>, namespace: Option<String>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let resource = agent_resource();
    let api: Api<DynamicObject> = match &namespace {
        Some(namespace) => Api::namespaced_with(shared.client.clone(), namespace, &resource),
        None => Api::all_with(shared.client.clone(), &resource),
    };
    let writer = Writer::new(resource);
    let store = writer.as_reader();
    let trigger_store = store.clone();
    let metrics = shared.metrics.clone();
    let queue = reflector::reflector(writer, watcher(api, watcher::Config::default()).default_backoff())
        .flat_map(move |event| {
            let refs = match event {
                Ok(event) => triggers(&event, &trigger_store),
                Err(err) => {
                    metrics.failed(KIND, "watch");
                    tracing::warn!(error = %err, "cannot watch the Agents; retrying with backoff");
                    Vec::new()
                }
            };
            stream::iter(refs.into_iter().map(Ok::<_, Infallible>))
        })
        .take_until(shutdown);
    let context = Arc::new(Context { shared, store: store.clone(), namespace: namespace.clone() });
    let config = Config::default().concurrency(CONCURRENCY);
    applier(|object, context| Box::pin(timed_reconcile(object, context)), error_policy, context, store, queue, config)
        .for_each(|result| async move {
            match result {
                Ok(_) => {}
                // Queued by a trigger, then deleted before its turn: nothing to do.
                Err(kube::runtime::controller::Error::ObjectNotFound(reference)) => {
                    tracing::debug!(object = %reference, "an Agent went before its reconcile");
                }
                // Logged and counted by `error_policy`.
                Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
                Err(err) => tracing::warn!(error = %err, "the Agent reconciler's queue failed"),
            }
        })
        .await;
    tracing::info!(namespace = namespace.as_deref().unwrap_or("*"), "the Agent reconciler stopped");
}

/// The Agents to reconcile after `event` was applied to `store`.
fn triggers(event: &watcher::Event<DynamicObject>, store: &Store<DynamicObject>) -> Vec<ObjectRef<DynamicObject>> {
    let dependents_of = |object: &DynamicObject| match object.namespace() {
        Some(namespace) => dependents_named(Some(&namespace), &object.name_any(), &agents_of(store, &namespace))
            .into_iter()
            .map(ObjectRef::erase)
            .collect(),
        None => Vec::new(),
    };
    match event {
        watcher::Event::Apply(object) => {
            let mut refs = vec![ObjectRef::from_obj_with(object, agent_resource())];
            refs.extend(dependents_of(object));
            refs
        }
        watcher::Event::Delete(object) => dependents_of(object),
        watcher::Event::InitDone => {
            store.state().iter().map(|object| ObjectRef::from_obj_with(object.as_ref(), agent_resource())).collect()
        }
        // During a (re)list the store still shows the old state; `InitDone` swaps the new one in.
        watcher::Event::Init | watcher::Event::InitApply(_) => Vec::new(),
    }
}

/// [`reconcile`], counted in the metrics with its duration and outcome.
async fn timed_reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let outcome = reconcile(object, context.clone()).await;
    context.shared.metrics.reconciled(KIND, started.elapsed(), outcome.as_ref().err().map(|_| "kube"));
    outcome
}

/// Judges one Agent, writes its status when it changed, and ensures `general-purpose` in its namespace.
async fn reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Action, ReconcileError> {
    let Some(namespace) = object.namespace() else { return Ok(Action::await_change()) };
    let name = object.name_any();
    let shared = &context.shared;
    let applied = match decode_agent(&object) {
        Ok(agent) => {
            let status = agent_status(&agent, &agents_of(&context.store, &namespace), now());
            apply_status(shared.client.clone(), &agent, status).await
        }
        Err(problem) => {
            shared.metrics.failed(KIND, "InvalidObject");
            let current = object.data.get("status").and_then(|s| serde_json::from_value::<AgentStatus>(s.clone()).ok());
            let message = format!("the object does not fit the Agent schema: {problem}");
            let status =
                status_from(reason::INVALID_SPEC, message, object.metadata.generation, current.as_ref(), now());
            patch_status(shared.client.clone(), &namespace, &name, current.as_ref(), status).await
        }
    };
    let applied = applied.map_err(|source| ReconcileError::ApplyStatus {
        namespace: namespace.clone(),
        name: name.clone(),
        source,
    })?;
    shared
        .ensure_once(&namespace, Some(&context.store))
        .await
        .map_err(|source| ReconcileError::EnsureGeneralPurpose { namespace: namespace.clone(), source })?;
    if applied {
        tracing::debug!(namespace, name, "applied an Agent's status");
    }
    let reference = ObjectRef::from_obj_with(object.as_ref(), agent_resource());
    shared.failures.lock().unwrap_or_else(PoisonError::into_inner).remove(&reference);
    Ok(Action::await_change())
}

/// Retries a failed Agent after [`retry_delay`] of its consecutive failures.
fn error_policy(object: Arc<DynamicObject>, err: &ReconcileError, context: Arc<Context>) -> Action {
    let shared = &context.shared;
    let reference = ObjectRef::from_obj_with(object.as_ref(), agent_resource());
    let failures = {
        let mut failures = shared.failures.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget the Agents of this watch that are gone, so the map only holds Agents that still fail.
        failures.retain(|other, _| {
            other.namespace.as_deref().is_some_and(|ns| !context.serves(ns)) || context.store.get(other).is_some()
        });
        let count = failures.entry(reference).or_insert(0);
        *count = count.saturating_add(1);
        *count
    };
    let delay = retry_delay(failures);
    tracing::warn!(error = %err, retry_in_seconds = delay.as_secs(), "Agent reconcile failed");
    Action::requeue(delay)
}

/// The delay before retrying after `failures` consecutive failures: 5 s, doubling, at most 5 min.
fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    RETRY_FIRST.saturating_mul(1 << doublings).min(RETRY_MAX)
}

#[cfg(test)]
mod tests;
