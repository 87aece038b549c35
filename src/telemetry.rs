//! Traces of run trees, the parts every role shares: the target of the spans that are exported
//! ([`TARGET`]), and the W3C `traceparent` going into a span (a caller's, a run's record's) and coming
//! out of one (for a run started under it). Beside the store: the roles use it, it uses the core.
//!
//! Spans of [`TARGET`] are at `TRACE` level: the logs' filter (`info`) never enables them, so with
//! export off they are never built and cost a level check; with export on (`OTEL_EXPORTER_OTLP_*`), the
//! OpenTelemetry layer alone takes them (`cli::telemetry`). No span carries a message's content, a tool's
//! arguments, a key or a token: only names, ids, counts, times and statuses (docs/how-to/traces.md).

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of the spans that are exported.
pub const TARGET: &str = "yuxi::otel";

/// Makes `span` a child of the span `traceparent` names (a W3C header value); a value that does not
/// parse ([`crate::run::trace::TraceParent::parse`]) is ignored, and the span starts a trace.
pub fn set_remote_parent(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(parent) = traceparent.and_then(crate::run::trace::TraceParent::parse) else { return };
    let carrier = HashMap::from([("traceparent".to_string(), parent.to_string())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(context);
}

/// The `traceparent` of `span` (for work started under it elsewhere), when it is exported; `None`
/// with export off.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

/// The `traceparent` of the current span ([`traceparent_of`]).
pub fn current_traceparent() -> Option<String> {
    traceparent_of(&tracing::Span::current())
}
