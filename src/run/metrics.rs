//! Latency histograms kept as counters in the run store, so that every process (runners in pods
//! included) adds to the same ones and `/metrics` serves their sums: each observation adds one to its
//! bucket, to a count and its milliseconds to a sum, as fields `<prefix>:le:<ms>` (or `<prefix>:le:inf`),
//! `<prefix>:count` and `<prefix>:sum_ms` of the totals a metric reads ([`observation`]); [`Histogram`]
//! reads them back and writes the Prometheus text. Also what one run's end adds ([`RunEnd`]).

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::status::RunStatus;

/// The upper bounds of the buckets, in milliseconds: 50 ms to 30 min (model calls, time to a first
/// token, queue waits and whole runs alike).
pub const BUCKETS_MS: [u64; 14] =
    [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000];

/// The fields one observation of `ms` milliseconds adds to, under `prefix`, each by the amount given.
pub fn observation(prefix: &str, ms: u64) -> [(String, i64); 3] {
    let bucket = BUCKETS_MS.iter().find(|bound| ms <= **bound).map_or("inf".to_string(), |b| b.to_string());
    [
        (format!("{prefix}:le:{bucket}"), 1),
        (format!("{prefix}:count"), 1),
        (format!("{prefix}:sum_ms"), i64::try_from(ms).unwrap_or(i64::MAX)),
    ]
}

/// One histogram's counters, as [`observation`] writes them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// Observations per bucket (not cumulative), by upper bound in ms; `None` for `+Inf`.
    pub buckets: BTreeMap<Option<u64>, i64>,
    /// How many observations.
    pub count: i64,
    /// Their sum, in milliseconds.
    pub sum_ms: i64,
}

impl Histogram {
    /// Adds a field's `amount` (`le:<ms>`, `le:inf`, `count` or `sum_ms`: the part after the prefix);
    /// answers whether it was one.
    pub fn add(&mut self, field: &str, amount: i64) -> bool {
        match field {
            "count" => self.count += amount,
            "sum_ms" => self.sum_ms += amount,
            "le:inf" => *self.buckets.entry(None).or_default() += amount,
            other => match other.strip_prefix("le:").and_then(|ms| ms.parse::<u64>().ok()) {
                Some(ms) => *self.buckets.entry(Some(ms)).or_default() += amount,
                None => return false,
            },
        }
        true
    }
}

/// Writes the series of the histogram `name` (in seconds) in the Prometheus text format: its `TYPE`
/// and `HELP`, then per label set every bucket (cumulative, `le` in seconds), `_sum` and `_count`.
/// `series` maps label sets (`key="value"` pairs, already escaped by [`label`]) to histograms.
pub fn render(out: &mut String, name: &str, help: &str, series: &BTreeMap<String, Histogram>) {
    if series.is_empty() {
        return;
    }
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (labels, histogram) in series {
        let mut cumulative = 0;
        for bound in BUCKETS_MS {
            cumulative += histogram.buckets.get(&Some(bound)).copied().unwrap_or(0);
            let le = bound as f64 / 1000.0;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", histogram.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", histogram.sum_ms as f64 / 1000.0);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", histogram.count);
    }
}

/// `key="value"` with the value escaped as the text format asks (`\`, `"` and new lines).
pub fn label(key: &str, value: &str) -> String {
    let escaped = value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    format!("{key}=\"{escaped}\"")
}

/// What one run's end adds to the run totals: how it ended and how long it took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    /// The run's namespace (`local` in the local mode).
    pub namespace: String,
    /// Its agent.
    pub agent: String,
    /// How it ended (or `waiting`, when it paused for a person).
    pub status: RunStatus,
    /// From its runner's start to its end, in milliseconds.
    pub duration_ms: u64,
    /// From its creation to its runner's start (the queue, and in a cluster the pod's start), in
    /// milliseconds, when its creation time is known.
    pub queue_ms: Option<u64>,
    /// From its creation (or its runner's start) to its first message event, in milliseconds, when it
    /// wrote one.
    pub first_event_ms: Option<u64>,
}

impl RunEnd {
    /// The fields of the run totals it adds to, each by the amount given: `status:<status>`, and the
    /// histograms `duration`, `queue` and `first_event`.
    pub fn kinds(&self) -> Vec<(String, i64)> {
        let mut kinds = vec![(format!("status:{}", self.status), 1)];
        kinds.extend(observation("duration", self.duration_ms));
        if let Some(ms) = self.queue_ms {
            kinds.extend(observation("queue", ms));
        }
        if let Some(ms) = self.first_event_ms {
            kinds.extend(observation("first_event", ms));
        }
        kinds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_are_bucketed_and_rendered_cumulative_in_seconds() {
        let mut histogram = Histogram::default();
        for ms in [40, 120, 120, 4_000_000] {
            for (field, amount) in observation("latency", ms) {
                assert!(histogram.add(field.strip_prefix("latency:").expect("prefixed"), amount));
            }
        }
        assert!(!histogram.add("le:soon", 1), "not a bucket");
        assert_eq!((histogram.count, histogram.sum_ms), (4, 4_000_280));
        let mut out = String::new();
        let series = BTreeMap::from([(label("model", "a\"b"), histogram)]);
        render(&mut out, "yuxi_model_latency_seconds", "Model calls.", &series);
        assert!(out.contains("# TYPE yuxi_model_latency_seconds histogram\n"), "{out}");
        assert!(out.contains("yuxi_model_latency_seconds_bucket{model=\"a\\\"b\",le=\"0.05\"} 1\n"), "{out}");
        assert!(out.contains("yuxi_model_latency_seconds_bucket{model=\"a\\\"b\",le=\"0.25\"} 3\n"), "{out}");
        assert!(out.contains("yuxi_model_latency_seconds_bucket{model=\"a\\\"b\",le=\"1800\"} 3\n"), "{out}");
        assert!(out.contains("yuxi_model_latency_seconds_bucket{model=\"a\\\"b\",le=\"+Inf\"} 4\n"), "{out}");
        assert!(out.contains("yuxi_model_latency_seconds_sum{model=\"a\\\"b\"} 4000.28\n"), "{out}");
        assert!(out.contains("yuxi_model_latency_seconds_count{model=\"a\\\"b\"} 4\n"), "{out}");
    }

    #[test]
    fn a_run_end_counts_its_status_and_the_times_it_knows() {
        let end = RunEnd {
            namespace: "local".into(),
            agent: "a".into(),
            status: RunStatus::Completed,
            duration_ms: 300,
            queue_ms: None,
            first_event_ms: Some(20),
        };
        let fields: Vec<String> = end.kinds().into_iter().map(|(f, _)| f).collect();
        assert!(fields.contains(&"status:completed".to_string()));
        assert!(fields.contains(&"duration:le:500".to_string()));
        assert!(fields.contains(&"first_event:le:50".to_string()));
        assert!(!fields.iter().any(|f| f.starts_with("queue:")));
    }
}
