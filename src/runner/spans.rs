//! What a run says of itself beside its events: its span (`invoke_agent`, when traces are exported)
//! and its end in its agent's run totals (the run metrics).

use kube::ResourceExt;

use super::graph::RunIdentity;
use crate::resources::AgentRun;

/// What the run's end adds to the run metrics: its status, its runner's time, the wait from its
/// creation (the AgentRun's `creationTimestamp`) to its runner's start, and the time to its first
/// message from its creation (or its start, when its creation time is unknown).
pub(super) fn run_end(
    run: &AgentRun,
    identity: &RunIdentity,
    status: crate::run::RunStatus,
    started: jiff::Timestamp,
    first_message: Option<jiff::Timestamp>,
) -> crate::run::metrics::RunEnd {
    let ms = |from: jiff::Timestamp, to: jiff::Timestamp| to.duration_since(from).as_millis().max(0) as u64;
    let created = run.metadata.creation_timestamp.as_ref().map(|t| t.0).filter(|created| *created <= started);
    crate::run::metrics::RunEnd {
        namespace: run.namespace().unwrap_or_else(|| crate::resources::manifest_set::DEFAULT_NAMESPACE.to_string()),
        agent: identity.agent_slug.clone(),
        status,
        duration_ms: ms(started, jiff::Timestamp::now()),
        queue_ms: created.map(|created| ms(created, started)),
        first_event_ms: first_message.map(|at| ms(created.unwrap_or(started), at)),
    }
}

/// The span of a run (OpenTelemetry's `invoke_agent`), a child of the span its AgentRun's
/// [`TRACEPARENT_ANNOTATION`](crate::run::trace::TRACEPARENT_ANNOTATION) names, when there is one.
pub(super) fn run_span(run: &AgentRun, identity: &RunIdentity) -> tracing::Span {
    // The queue ends when the run begins: read before the run's span is made, so that it never ends
    // after the run's span starts, however slowly this runs.
    let queue_end = jiff::Timestamp::now();
    let span = tracing::trace_span!(
        target: crate::telemetry::TARGET,
        "invoke_agent",
        otel.name = %format!("invoke_agent {}", identity.agent_slug),
        otel.status_code = tracing::field::Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = %identity.agent_slug,
        gen_ai.conversation.id = %identity.thread_id,
        yuxi.run.id = %identity.run_id,
        yuxi.run.parent_id = run.spec.parent.as_ref().map(|p| p.run_id.as_str()),
        yuxi.run.status = tracing::field::Empty,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
    );
    let traceparent = run.metadata.annotations.as_ref().and_then(|a| a.get(crate::run::trace::TRACEPARENT_ANNOTATION));
    crate::telemetry::set_remote_parent(&span, traceparent.map(String::as_str));
    // The wait before it, from the run's creation (its queue, and in a cluster its pod's start).
    if !span.is_disabled()
        && let Some(created) = run.metadata.creation_timestamp.as_ref().map(|t| t.0)
        && created < queue_end
    {
        crate::telemetry::past_span(
            &format!("queue {}", identity.agent_slug),
            traceparent.map(String::as_str),
            created.into(),
            queue_end.into(),
            vec![opentelemetry::KeyValue::new("yuxi.run.id", identity.run_id.clone())],
        );
    }
    span
}
