//! A sandbox pod's times, read from its status once its runner has started: its start time (for
//! `yuxi_pod_start_seconds`) and its scheduling and start as spans in the run's trace.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::resources::AgentRun;

/// The pod's scheduling (its creation to its `PodScheduled` condition) and start (to its runner
/// container's start) as spans in the run's trace, with their real times.
pub fn pod_spans(run: &AgentRun, pod: &Pod) {
    let Some(phases) = pod_phases(pod) else { return };
    let traceparent = run.annotations().get(crate::run::trace::TRACEPARENT_ANNOTATION).map(String::as_str);
    let attributes = || {
        vec![
            opentelemetry::KeyValue::new("k8s.pod.name", pod.name_any()),
            opentelemetry::KeyValue::new("k8s.namespace.name", pod.namespace().unwrap_or_default()),
            opentelemetry::KeyValue::new("yuxi.run.id", run.name_any()),
        ]
    };
    let time = |t: jiff::Timestamp| std::time::SystemTime::from(t);
    let (created, scheduled, started) = phases;
    crate::telemetry::past_span("schedule pod", traceparent, time(created), time(scheduled), attributes());
    crate::telemetry::past_span("start pod", traceparent, time(scheduled), time(started), attributes());
}

/// When `pod` was created, scheduled and its runner started, once it has.
pub fn pod_phases(pod: &Pod) -> Option<(jiff::Timestamp, jiff::Timestamp, jiff::Timestamp)> {
    let created = pod.metadata.creation_timestamp.as_ref()?.0;
    let started = created.checked_add(jiff::SignedDuration::try_from(pod_start(pod)?).ok()?).ok()?;
    let scheduled = pod
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or(created, |t| t.0)
        .clamp(created, started);
    Some((created, scheduled, started))
}

/// From `pod`'s creation to its runner container's start, once it has started.
pub fn pod_start(pod: &Pod) -> Option<std::time::Duration> {
    let created = pod.metadata.creation_timestamp.as_ref()?.0;
    let runner = pod.status.as_ref()?.container_statuses.as_ref()?.iter().find(|c| c.name == "runner")?;
    let state = runner.state.as_ref()?;
    let started = state
        .running
        .as_ref()
        .and_then(|r| r.started_at.as_ref())
        .or_else(|| state.terminated.as_ref().and_then(|t| t.started_at.as_ref()))?
        .0;
    started.duration_since(created).try_into().ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    #[test]
    fn a_pods_start_is_from_its_creation_to_its_runners_start() {
        let pod = |runner: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "r1", "creationTimestamp": "2026-12-05T10:00:00Z"},
                "status": {"containerStatuses": [{"name": "runner", "image": "i", "imageID": "", "ready": true,
                    "restartCount": 0, "state": runner}]}}))
            .expect("a pod")
        };
        let running = pod(json!({"running": {"startedAt": "2026-12-05T10:00:03Z"}}));
        assert_eq!(pod_start(&running), Some(Duration::from_secs(3)));
        let ended = pod(json!({"terminated": {"exitCode": 0, "startedAt": "2026-12-05T10:00:02Z"}}));
        assert_eq!(pod_start(&ended), Some(Duration::from_secs(2)));
        assert_eq!(pod_start(&pod(json!({"waiting": {"reason": "ContainerCreating"}}))), None);
        // Its scheduling and start, as the spans show them.
        let mut scheduled = running.clone();
        scheduled.status.as_mut().expect("status").conditions = Some(vec![
            serde_json::from_value(
                json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-05T10:00:01Z"}),
            )
            .expect("a condition"),
        ]);
        let at = |t: &str| t.parse::<jiff::Timestamp>().expect("time");
        assert_eq!(
            pod_phases(&scheduled),
            Some((at("2026-12-05T10:00:00Z"), at("2026-12-05T10:00:01Z"), at("2026-12-05T10:00:03Z")))
        );
    }
}
