//! The run metrics of `GET /metrics`, from every agent's run totals in the run store (each runner adds
//! its run's end there, [`crate::store::Store::record_run_end`]):
//! - `yuxi_runs_ended_total{namespace, agent, status}`: runs by how they ended (`waiting` counts a
//!   pause for a person);
//! - `yuxi_run_duration_seconds{namespace, agent}`: from a runner's start to its end;
//! - `yuxi_run_queue_seconds{namespace, agent}`: from a run's creation to its runner's start (in a
//!   cluster, the pod's scheduling and start included);
//! - `yuxi_run_time_to_first_event_seconds{namespace, agent}`: from a run's creation to its first
//!   message event, what a user waits before anything shows.
//!
//! An agent is named only when everyone may read it, as in `yuxi_runs_started`; the others are summed
//! under `agent="(private)"`.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;

use crate::facade::http::metrics::PRIVATE_AGENT;
use crate::facade::services::state::FacadeState;
use crate::resources::AccessLevel;
use crate::run::metrics::{self, Histogram};

/// The run totals as Prometheus text, each line ending in a new line (no closing `# EOF`); empty when
/// there are none or the store cannot be
/// read (logged: a scrape is not worth failing for it).
pub async fn run_totals_text(state: &FacadeState) -> String {
    let Ok(store) = state.store() else { return String::new() };
    let totals = match store.run_totals().await {
        Ok(totals) => totals,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the run totals for /metrics");
            return String::new();
        }
    };
    let public: HashSet<String> = match state.agents.all().await {
        Ok(agents) => agents
            .into_iter()
            .filter(|a| {
                a.spec
                    .share
                    .as_ref()
                    .and_then(|s| s.read_scope.as_ref())
                    .is_some_and(|s| s.access_level == AccessLevel::Global)
                    || a.metadata.name.as_deref() == Some(crate::resources::GENERAL_PURPOSE)
            })
            .filter_map(|a| a.metadata.name)
            .collect(),
        Err(_) => HashSet::new(),
    };
    let mut ended: BTreeMap<String, i64> = BTreeMap::new();
    let mut histograms: [BTreeMap<String, Histogram>; 3] = Default::default();
    for (namespace, agent, kind, amount) in totals {
        let shown = if public.contains(&agent) { agent.as_str() } else { PRIVATE_AGENT };
        let labels = format!("{},{}", metrics::label("namespace", &namespace), metrics::label("agent", shown));
        if let Some(status) = kind.strip_prefix("status:") {
            *ended.entry(format!("{labels},{}", metrics::label("status", status))).or_default() += amount;
            continue;
        }
        for (at, prefix) in ["duration:", "queue:", "first_event:"].into_iter().enumerate() {
            if let Some(field) = kind.strip_prefix(prefix) {
                histograms[at].entry(labels.clone()).or_default().add(field, amount);
            }
        }
    }
    let mut text = String::new();
    if !ended.is_empty() {
        let _ = writeln!(text, "# HELP yuxi_runs_ended Runs ended, by namespace, agent and status");
        let _ = writeln!(text, "# TYPE yuxi_runs_ended counter");
        for (labels, count) in &ended {
            let _ = writeln!(text, "yuxi_runs_ended_total{{{labels}}} {count}");
        }
    }
    let [duration, queue, first_event] = &histograms;
    metrics::render(
        &mut text,
        "yuxi_run_duration_seconds",
        "Time from a runner's start to its run's end, in seconds",
        duration,
    );
    metrics::render(
        &mut text,
        "yuxi_run_queue_seconds",
        "Time from a run's creation to its runner's start (a pod's start included), in seconds",
        queue,
    );
    metrics::render(
        &mut text,
        "yuxi_run_time_to_first_event_seconds",
        "Time from a run's creation to its first message event, in seconds",
        first_event,
    );
    text
}
