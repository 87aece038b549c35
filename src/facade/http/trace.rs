//! A span per request of a matched route (when traces are exported, [`crate::telemetry`]): named
//! `<METHOD> <route>`, a child of the caller's W3C `traceparent` (with its `tracestate`) when it sends
//! one, so that a caller outside the system sees the runs it starts inside its own trace. A run started
//! by the request
//! records the span's `traceparent` ([`crate::telemetry::current_traceparent`]) and its runner's span
//! goes under it. No header, body or query value is recorded.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// Middleware that runs each request of a matched route inside its span.
pub async fn trace(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    let method = request.method().as_str().to_string();
    let span = tracing::trace_span!(
        target: crate::telemetry::TARGET,
        "request",
        otel.name = %format!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
        crate::telemetry::set_remote_parent_with_state(&span, header("traceparent"), header("tracestate"));
    }
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    if response.status().is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    response
}
