//! The prober's pure rules: when a Model is probed next, and the status a judgement and a probe give.

use std::time::Duration;

use serde_json::json;

use super::*;

const NOW: &str = "2026-12-05T10:00:00Z";

fn now() -> jiff::Timestamp {
    NOW.parse().expect("time")
}

fn model(generation: i64, status: serde_json::Value) -> Model {
    serde_json::from_value(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Model",
        "metadata": {"name": "ds", "namespace": "team-a", "generation": generation},
        "spec": {"provider": "OpenAICompatible", "preset": "deepseek", "model": "deepseek-chat", "probeIntervalSeconds": 300},
        "status": status}))
    .expect("a Model")
}

fn probed_ago(seconds: i64) -> serde_json::Value {
    let at = now() - jiff::SignedDuration::from_secs(seconds);
    json!({"observedGeneration": 2, "lastProbeTime": at.to_string()})
}

#[test]
fn a_model_is_probed_at_once_when_new_or_changed_then_every_interval() {
    assert_eq!(next_probe(&model(1, json!(null)), 0, now()), Duration::ZERO, "never probed");
    assert_eq!(next_probe(&model(3, probed_ago(10)), 0, now()), Duration::ZERO, "spec changed");
    assert_eq!(next_probe(&model(2, probed_ago(10)), 0, now()), Duration::from_secs(290));
    assert_eq!(next_probe(&model(2, probed_ago(301)), 0, now()), Duration::ZERO, "overdue");
}

#[test]
fn failed_probes_are_retried_sooner_doubling_up_to_the_interval() {
    let waits: Vec<u64> =
        (1..=6).map(|failures| next_probe(&model(2, probed_ago(0)), failures, now()).as_secs()).collect();
    assert_eq!(waits, [30, 60, 120, 240, 300, 300]);
}

fn condition<'a>(status: &'a ModelStatus, kind: &str) -> (&'a str, &'a str) {
    let c = status.conditions.iter().find(|c| c.type_ == kind).expect("a condition");
    (c.status.as_str(), c.reason.as_str())
}

#[test]
fn a_probe_sets_available_and_keeps_its_transition_time_while_it_holds() {
    let up = ProbeOutcome {
        available: Some(true),
        reason: "Answered",
        message: "the endpoint answered 200".into(),
        latency: Some(Duration::from_millis(42)),
    };
    let first = status_after(&model(2, json!(null)), Ok(()), Some(&up), now());
    assert_eq!(condition(&first, ACCEPTED), ("True", "Valid"));
    assert_eq!(condition(&first, AVAILABLE), ("True", "Answered"));
    assert_eq!((first.last_probe_latency_milliseconds, first.last_probe_error.as_deref()), (Some(42), None));
    assert_eq!(first.observed_generation, Some(2));
    let mut probed = model(2, json!(null));
    probed.status = Some(first.clone());
    let later = now() + jiff::SignedDuration::from_secs(300);
    let again = status_after(&probed, Ok(()), Some(&up), later);
    let since = |s: &ModelStatus| {
        s.conditions.iter().find(|c| c.type_ == AVAILABLE).map(|c| c.last_transition_time.clone()).expect("c")
    };
    assert_eq!(since(&again), since(&first));
    let down = ProbeOutcome {
        available: Some(false),
        reason: "Unreachable",
        message: "the endpoint cannot be reached".into(),
        latency: None,
    };
    let flipped = status_after(&probed, Ok(()), Some(&down), later);
    assert_eq!(condition(&flipped, AVAILABLE), ("False", "Unreachable"));
    assert_eq!(flipped.last_probe_error.as_deref(), Some("the endpoint cannot be reached"));
    assert_ne!(since(&flipped), since(&first));
}

#[test]
fn a_refused_model_is_not_probed_and_says_why() {
    let status = status_after(
        &model(1, json!(null)),
        Err(("ReferenceNotFound", "spec.apiKeySecretRef ...".into())),
        None,
        now(),
    );
    assert_eq!(condition(&status, ACCEPTED), ("False", "ReferenceNotFound"));
    assert_eq!(condition(&status, AVAILABLE), ("Unknown", "NotAccepted"));
    assert_eq!(status.last_probe_time, None);
}
