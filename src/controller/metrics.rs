//! The controller's Prometheus metrics, served at `/metrics`: reconciles and their failures by kind and
//! reason, reconcile durations, runs by phase (counted from the controller's cache when scraped), and
//! sandbox pods' start times.

use crate::resources::AgentRunPhase;
use crate::run::RunStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::DynamicObject;
use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A reconcile's labels: the kind reconciled and `ok` or `error`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// `AgentRun` or `Agent`.
    pub kind: String,
    /// `ok` or `error`.
    pub result: String,
}

/// A failure's labels: the kind and why (`kube`, `store`, `InvalidObject`...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// `AgentRun` or `Agent`.
    pub kind: String,
    /// Why.
    pub reason: String,
}

/// A kind's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `AgentRun` or `Agent`.
    pub kind: String,
}

/// A phase's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// `Pending`, `Running`...
    pub phase: String,
}

/// The controller's metrics; cheap to clone.
#[derive(Clone)]
pub struct ControllerMetrics {
    registry: Arc<Registry>,
    reconciles: Family<ReconcileLabels, Counter>,
    failures: Family<FailureLabels, Counter>,
    durations: Family<KindLabels, Histogram>,
    runs: Family<PhaseLabels, Gauge>,
    run_stores: Arc<Mutex<Vec<Store<DynamicObject>>>>,
    pod_starts: Histogram,
}

/// The phases a run can be in, as the gauge names them: the AgentRun phase's CRD spelling (`Pending` for a
/// run without a status yet).
fn phases() -> impl Iterator<Item = (AgentRunPhase, String)> {
    RunStatus::ALL.into_iter().map(|status| {
        let phase = AgentRunPhase::from(status);
        let name = serde_json::to_value(phase).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
        (phase, name)
    })
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register("yuxi_reconciles", "Reconciles, by kind and result", reconciles.clone());
        let failures = Family::<FailureLabels, Counter>::default();
        registry.register("yuxi_reconcile_failures", "Failed reconciles, by kind and reason", failures.clone());
        // 1 ms to about 16 s.
        let durations = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 15))
        });
        registry.register(
            "yuxi_reconcile_duration_seconds",
            "Time to reconcile one object, in seconds",
            durations.clone(),
        );
        let runs = Family::<PhaseLabels, Gauge>::default();
        registry.register("yuxi_agent_runs", "AgentRuns the controller sees, by phase", runs.clone());
        // 100 ms to about 7 min: a cached image starts in a second or two, a pulled one in minutes.
        let pod_starts = Histogram::new(exponential_buckets(0.1, 2.0, 13));
        registry.register(
            "yuxi_pod_start_seconds",
            "Time from a sandbox pod's creation to its runner container's start, in seconds",
            pod_starts.clone(),
        );
        Self {
            registry: Arc::new(registry),
            reconciles,
            failures,
            durations,
            runs,
            run_stores: Arc::default(),
            pod_starts,
        }
    }
}

impl ControllerMetrics {
    /// Counts a reconcile of `kind` that took `elapsed`, failed with `error` (its kind) or not.
    pub fn reconciled(&self, kind: &str, elapsed: Duration, error: Option<&str>) {
        let result = if error.is_some() { "error" } else { "ok" };
        self.reconciles.get_or_create(&ReconcileLabels { kind: kind.into(), result: result.into() }).inc();
        if let Some(reason) = error {
            self.failed(kind, reason);
        }
        self.durations.get_or_create(&KindLabels { kind: kind.into() }).observe(elapsed.as_secs_f64());
    }

    /// Observes one sandbox pod's start: from its creation to its runner container's start.
    pub fn pod_started(&self, took: Duration) {
        self.pod_starts.observe(took.as_secs_f64());
    }

    /// Counts a failure of `kind` for `reason`.
    pub fn failed(&self, kind: &str, reason: &str) {
        self.failures.get_or_create(&FailureLabels { kind: kind.into(), reason: reason.into() }).inc();
    }

    /// Counts the runs of `store` by phase at each scrape.
    pub fn watch_runs(&self, store: Store<DynamicObject>) {
        self.run_stores.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(store);
    }

    /// The metrics in the text exposition format.
    pub fn render(&self) -> String {
        let mut counts = std::collections::HashMap::<AgentRunPhase, i64>::new();
        for store in self.run_stores.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
            for run in store.state() {
                let phase = run.data["status"]["phase"].clone();
                // A run without a status yet is pending; an unknown phase is not counted.
                let phase =
                    if phase.is_null() { Some(AgentRunPhase::Pending) } else { serde_json::from_value(phase).ok() };
                if let Some(phase) = phase {
                    *counts.entry(phase).or_default() += 1;
                }
            }
        }
        for (phase, name) in phases() {
            self.runs.get_or_create(&PhaseLabels { phase: name }).set(counts.get(&phase).copied().unwrap_or(0));
        }
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_and_failures_are_counted_by_kind_and_reason() {
        let metrics = ControllerMetrics::default();
        metrics.reconciled("AgentRun", Duration::from_millis(3), None);
        metrics.reconciled("AgentRun", Duration::from_millis(3), Some("kube"));
        metrics.failed("AgentRun", "InvalidObject");
        let text = metrics.render();
        assert!(text.contains(r#"yuxi_reconciles_total{kind="AgentRun",result="ok"} 1"#), "{text}");
        assert!(text.contains(r#"yuxi_reconciles_total{kind="AgentRun",result="error"} 1"#), "{text}");
        assert!(text.contains(r#"yuxi_reconcile_failures_total{kind="AgentRun",reason="kube"} 1"#), "{text}");
        assert!(text.contains(r#"yuxi_reconcile_failures_total{kind="AgentRun",reason="InvalidObject"} 1"#), "{text}");
        assert!(text.contains(r#"yuxi_reconcile_duration_seconds_count{kind="AgentRun"} 2"#), "{text}");
        assert!(text.contains(r#"yuxi_agent_runs{phase="Running"} 0"#), "{text}");
    }
}
