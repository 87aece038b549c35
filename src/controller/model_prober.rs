//! The Model prober: keeps every Model's status true to its spec and to its endpoint
//! (docs/concepts/models.md).
//!
//! - `Accepted`: the spec follows the rules the webhook applies ([`validate_model`]) and every Secret and
//!   ConfigMap key it references exists in its namespace.
//! - `Available`: the last probe of the endpoint ([`crate::endpoints::probe`]) answered and took the key;
//!   `Unknown` while the Model is not accepted or its provider is not probed.
//!
//! A Model is probed when its spec changes and then every `probeIntervalSeconds` (never per run); a
//! failed probe is tried again after 30 s, then twice as long each time, up to the interval, so a
//! recovered endpoint is seen soon without a failing one being asked more than twice a minute. The key is
//! read for the probe and dropped; it never reaches the status, an event or a log ([`crate::endpoints::probe::redact`]).
//!
//! The rules are pure ([`next_probe`], [`status_after`]); the shell reads the Model's Secrets, probes, and
//! writes the status with server-side apply.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::decide::set_condition;
use super::metrics::ControllerMetrics;
use crate::endpoints::connection::Connection;
use crate::endpoints::probe::{ProbeOutcome, probe};
use crate::resources::model::secrets::{Reference, Source};
use crate::resources::model::{ACCEPTED, AVAILABLE, PROBE_INTERVAL_SECONDS};
use crate::resources::names::FIELD_MANAGER;
use crate::resources::validation::validate_model;
use crate::resources::{Model, ModelStatus};

/// The kind, in metrics.
const KIND: &str = "Model";
/// How soon a failed probe is tried again, the first time.
pub const FIRST_RETRY: Duration = Duration::from_secs(30);

/// When `model` is next to be probed, from now: zero when its spec changed since the last probe, or
/// when it was never probed; otherwise what is left of the interval (after `failures` failed probes in
/// a row: of `30 s × 2^(failures-1)`, capped at the interval).
pub fn next_probe(model: &Model, failures: u32, now: jiff::Timestamp) -> Duration {
    let status = model.status.clone().unwrap_or_default();
    let (Some(probed), true) = (status.last_probe_time, status.observed_generation == model.metadata.generation) else {
        return Duration::ZERO;
    };
    let interval = Duration::from_secs(model.spec.probe_interval_seconds().into());
    let wait = match failures {
        0 => interval,
        n => FIRST_RETRY.saturating_mul(1 << (n - 1).min(16)).min(interval),
    };
    let due = probed.0 + jiff::SignedDuration::try_from(wait).unwrap_or_default();
    let left = now.duration_until(due);
    if left.is_negative() { Duration::ZERO } else { left.unsigned_abs() }
}

/// The status of `model` after judging its spec (`accepted`: `Ok`, or the reason and message of its
/// refusal) and, when it was probed, the probe's `outcome`; its conditions keep their transition times
/// while their status stays.
pub fn status_after(
    model: &Model,
    accepted: Result<(), (&'static str, String)>,
    outcome: Option<&ProbeOutcome>,
    now: jiff::Timestamp,
) -> ModelStatus {
    let mut status = model.status.clone().unwrap_or_default();
    status.observed_generation = model.metadata.generation;
    match &accepted {
        Ok(()) => set_condition(
            &mut status.conditions,
            ACCEPTED,
            "True",
            "Valid",
            "the spec is valid and its references exist",
            now,
        ),
        Err((reason, message)) => set_condition(&mut status.conditions, ACCEPTED, "False", reason, message, now),
    }
    match (accepted, outcome) {
        (Err(_), _) => {
            set_condition(
                &mut status.conditions,
                AVAILABLE,
                "Unknown",
                "NotAccepted",
                "not probed while the Model is not accepted",
                now,
            );
        }
        (Ok(()), Some(outcome)) => {
            let state = match outcome.available {
                Some(true) => "True",
                Some(false) => "False",
                None => "Unknown",
            };
            set_condition(&mut status.conditions, AVAILABLE, state, outcome.reason, &outcome.message, now);
            status.last_probe_time = Some(Time(now));
            status.last_probe_latency_milliseconds = outcome.latency.map(|l| l.as_millis() as i64);
            status.last_probe_error = (outcome.available == Some(false)).then(|| outcome.message.clone());
        }
        (Ok(()), None) => {}
    }
    status
}

/// The shared state of the prober.
struct Context {
    client: kube::Client,
    metrics: ControllerMetrics,
    /// Failed probes in a row, by `namespace/name`.
    failures: Mutex<HashMap<String, u32>>,
}

/// Why a reconcile failed (the Kubernetes API); retried with the controller's backoff.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ProbeError(#[from] kube::Error);

/// Probes the Models of `namespaces` (all when `None`) until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    namespaces: Option<Vec<String>>,
    metrics: ControllerMetrics,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let context = Arc::new(Context { client: client.clone(), metrics, failures: Mutex::new(HashMap::new()) });
    let apis: Vec<Api<Model>> = super::watched_apis(&client, namespaces.as_deref());
    let controllers = apis.into_iter().map(|api| {
        Controller::new(api, watcher::Config::default())
            .graceful_shutdown_on(shutdown.clone())
            .run(reconcile, error_policy, context.clone())
            .for_each(|_| async {})
    });
    futures::future::join_all(controllers).await;
    tracing::info!("the Model prober stopped");
}

fn key(model: &Model) -> String {
    format!("{}/{}", model.namespace().unwrap_or_default(), model.name_any())
}

async fn reconcile(model: Arc<Model>, context: Arc<Context>) -> Result<Action, ProbeError> {
    let started = std::time::Instant::now();
    let outcome = reconcile_inner(&model, &context).await;
    context.metrics.reconciled(KIND, started.elapsed(), outcome.as_ref().err().map(|_| "kube"));
    outcome
}

async fn reconcile_inner(model: &Model, context: &Context) -> Result<Action, ProbeError> {
    let namespace = model.namespace().unwrap_or_default();
    let failures = *context.failures.lock().unwrap_or_else(PoisonError::into_inner).get(&key(model)).unwrap_or(&0);
    let now = jiff::Timestamp::now();
    let wait = next_probe(model, failures, now);
    if !wait.is_zero() {
        return Ok(Action::requeue(wait));
    }
    let (accepted, connection) = judge(model, &context.client, &namespace).await?;
    let outcome = match &connection {
        Some(connection) => Some(probe(connection).await),
        None => None,
    };
    drop(connection);
    let failed = outcome.as_ref().is_some_and(|o| o.available == Some(false));
    let failures = {
        let mut map = context.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let count = map.entry(key(model)).or_insert(0);
        *count = if failed { count.saturating_add(1) } else { 0 };
        *count
    };
    let status = status_after(model, accepted, outcome.as_ref(), jiff::Timestamp::now());
    if model.status.as_ref() != Some(&status) {
        let patch = json!({"apiVersion": Model::api_version(&()), "kind": "Model", "metadata": {"name": model.name_any()}, "status": status});
        let api: Api<Model> = Api::namespaced(context.client.clone(), &namespace);
        api.patch_status(&model.name_any(), &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await?;
    }
    let interval = Duration::from_secs(
        model.spec.probe_interval_seconds().clamp(*PROBE_INTERVAL_SECONDS.start(), *PROBE_INTERVAL_SECONDS.end())
            as u64,
    );
    let wait = match failures {
        0 => interval,
        n => FIRST_RETRY.saturating_mul(1 << (n - 1).min(16)).min(interval),
    };
    Ok(Action::requeue(wait))
}

/// Judges `model`: `Ok` with its connection when its spec is valid and its references exist, else the
/// reason and message (naming the field, never a value).
async fn judge(
    model: &Model,
    client: &kube::Client,
    namespace: &str,
) -> Result<(Result<(), (&'static str, String)>, Option<Connection>), kube::Error> {
    let report = validate_model(model);
    if !report.is_ok() {
        return Ok((Err(("InvalidSpec", report.error_summary())), None));
    }
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let mut values: HashMap<(Source, String, String), String> = HashMap::new();
    for reference in crate::resources::model::secrets::references(&model.spec) {
        let value = match reference.source {
            Source::Secret => secrets.get_opt(&reference.name).await?.and_then(|secret| {
                let bytes = secret.data.as_ref()?.get(&reference.key)?.0.clone();
                String::from_utf8(bytes).ok()
            }),
            Source::ConfigMap => config_maps
                .get_opt(&reference.name)
                .await?
                .and_then(|map| map.data.as_ref()?.get(&reference.key).cloned()),
        };
        if let Some(value) = value {
            values.insert((reference.source, reference.name.clone(), reference.key.clone()), value);
        }
    }
    let lookup = |r: &Reference| values.get(&(r.source, r.name.clone(), r.key.clone())).cloned();
    match Connection::from_spec(&model.name_any(), &model.spec, lookup, |_| String::new()) {
        Ok(connection) => Ok((Ok(()), Some(connection))),
        Err(err) => Ok((Err(("ReferenceNotFound", err.to_string())), None)),
    }
}

fn error_policy(model: Arc<Model>, error: &ProbeError, context: Arc<Context>) -> Action {
    context.metrics.failed(KIND, "kube");
    tracing::warn!(model = %key(&model), error = %error, "cannot reconcile a Model; retrying");
    Action::requeue(FIRST_RETRY)
}

#[cfg(test)]
mod tests;
