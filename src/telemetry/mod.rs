//! Traces of run trees, the parts every role shares: the target of the spans that are exported
//! ([`TARGET`]), and the W3C `traceparent` going into a span (a caller's, a run's record's) and coming
//! out of one (for a run started under it). Beside the store: the roles use it, it uses the core.
//!
//! Spans of [`TARGET`] are at `TRACE` level: the logs' filter (`info`) never enables them, so with
//! export off they are never built and cost a level check; with export on (`OTEL_EXPORTER_OTLP_*`), the
//! OpenTelemetry layer alone takes them (`cli::telemetry`). No span carries a message's content or a
//! tool's arguments unless content capture is on ([`capture_content`], `traces.captureContent`), and
//! then only through [`content`], the one choke point: bounded to [`MAX_CAPTURED_BYTES`], with every
//! key and token the process knows replaced ([`register_secret`]). Otherwise only names, ids, counts,
//! times and statuses (docs/how-to/traces.md).

pub mod metrics;

use std::collections::HashMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of the spans that are exported.
pub const TARGET: &str = "yuxi::otel";

/// Makes `span` a child of the span `traceparent` names (a W3C header value); a value that does not
/// parse ([`crate::run::trace::TraceParent::parse`]) is ignored, and the span starts a trace.
pub fn set_remote_parent(span: &tracing::Span, traceparent: Option<&str>) {
    set_remote_parent_with_state(span, traceparent, None);
}

/// [`set_remote_parent`], with the caller's W3C `tracestate` (vendors' entries, kept on the trace) when
/// it sends one; a `tracestate` that does not parse is left out.
pub fn set_remote_parent_with_state(span: &tracing::Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    let Some(parent) = traceparent.and_then(crate::run::trace::TraceParent::parse) else { return };
    let mut carrier = HashMap::from([("traceparent".to_string(), parent.to_string())]);
    if let Some(state) = tracestate.filter(|s| s.len() <= 512) {
        carrier.insert("tracestate".to_string(), state.to_string());
    }
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

/// Exports a span that already happened: `name` from `start` to `end`, a child of the span
/// `traceparent` names (a trace of its own without one), with `attributes`. For what the system saw
/// only afterwards (a pod's scheduling and start, read from its status). Nothing is made with export
/// off (the global tracer is then a no-op).
pub fn past_span(
    name: &str,
    traceparent: Option<&str>,
    start: std::time::SystemTime,
    end: std::time::SystemTime,
    attributes: Vec<opentelemetry::KeyValue>,
) {
    use opentelemetry::trace::{Span, Tracer};
    let tracer = opentelemetry::global::tracer("yuxi-operator");
    let parent = match traceparent.and_then(crate::run::trace::TraceParent::parse) {
        Some(parent) => {
            let carrier = HashMap::from([("traceparent".to_string(), parent.to_string())]);
            TraceContextPropagator::new().extract(&carrier)
        }
        None => opentelemetry::Context::new(),
    };
    let mut span = tracer
        .span_builder(name.to_string())
        .with_start_time(start)
        .with_attributes(attributes)
        .start_with_context(&tracer, &parent);
    span.end_with_timestamp(end);
}

/// `request` with the current span's `traceparent` in its `_meta` (MCP's SEP-414), when traces are
/// exported: the MCP server's spans then join the caller's trace.
pub fn with_trace_meta(request: rmcp::model::CallToolRequestParams) -> rmcp::model::CallToolRequestParams {
    crate::run::trace::with_traceparent(request, current_traceparent())
}

/// The variable that turns content capture on (`true`): message contents and tool arguments and
/// results go into the spans, through [`content`].
pub const CAPTURE_CONTENT_ENV: &str = "YUXI_TRACES_CAPTURE_CONTENT";
/// The most of one content a span carries, in bytes (cut at a character boundary, `…` appended).
pub const MAX_CAPTURED_BYTES: usize = 4096;
/// Secrets shorter than this are not searched for (they would redact ordinary words).
const MIN_SECRET_CHARS: usize = 8;

/// Whether contents are captured ([`capture_content`]).
static CAPTURE: AtomicBool = AtomicBool::new(false);
/// The secrets contents are cleaned of, longest first.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Turns content capture on or off for this process (at its start). The values of the environment's
/// variables whose names say they hold a secret (`KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `HEADERS`,
/// `CREDENTIAL`) are registered as secrets.
pub fn capture_content(enabled: bool) {
    for (name, value) in std::env::vars() {
        let name = name.to_ascii_uppercase();
        if ["KEY", "TOKEN", "SECRET", "PASSWORD", "HEADERS", "CREDENTIAL"].iter().any(|word| name.contains(word)) {
            register_secret(&value);
        }
    }
    CAPTURE.store(enabled, Ordering::Relaxed);
}

/// Registers `value` (a key, a token, a header's value) as a secret no captured content carries.
pub fn register_secret(value: &str) {
    let mut secrets = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    if !secrets.iter().any(|s| s == value) {
        secrets.push(value.to_string());
        *secrets = crate::run::redact::longest_first(std::mem::take(&mut *secrets), MIN_SECRET_CHARS);
    }
}

/// `text` as a span may carry it: `None` unless content capture is on; otherwise cleaned of every
/// registered secret and of bearer credentials (`Bearer <token>`), and cut to [`MAX_CAPTURED_BYTES`].
pub fn content(text: &str) -> Option<String> {
    if !CAPTURE.load(Ordering::Relaxed) {
        return None;
    }
    let cleaned = crate::run::redact::redact(text, &SECRETS.read().unwrap_or_else(|e| e.into_inner()));
    let cleaned = crate::run::redact::redact_bearer(&cleaned);
    Some(crate::run::event::cap_text(cleaned, MAX_CAPTURED_BYTES))
}
