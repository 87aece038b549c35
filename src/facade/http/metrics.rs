//! Prometheus metrics, served as text at `/metrics` in the exposition format
//! (<https://prometheus.io/docs/instrumenting/exposition_formats/>).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of the text exposition format.
pub const CONTENT_TYPE_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The labels of a request: its method, its route (the pattern, such as `/api/agent/{slug}`, never the
/// path, so ids do not multiply the series) and its status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `GET`, `POST`...
    pub method: String,
    /// The route pattern.
    pub route: String,
    /// The status code, such as `200`.
    pub status: String,
}

/// The labels of a request's duration: its method and route.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// `GET`, `POST`...
    pub method: String,
    /// The route pattern.
    pub route: String,
}

/// The labels of a started run: the agent's slug and whether the run is a subagent's (`subagent`) or a
/// main agent's (`parent`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    /// The agent's slug.
    pub agent: String,
    /// `subagent` or `parent`.
    pub kind: String,
}

/// The facade's metrics.
#[derive(Clone)]
pub struct FacadeMetrics {
    registry: Arc<Registry>,
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram>,
    runs_started: Family<RunLabels, Counter>,
    token_reviews: Family<super::auth::token_review::ReviewLabels, Counter>,
}

impl FacadeMetrics {
    /// The counter of TokenReview outcomes, for [`TokenReviewer::new`](super::auth::TokenReviewer::new).
    pub fn token_reviews(&self) -> Family<super::auth::token_review::ReviewLabels, Counter> {
        self.token_reviews.clone()
    }
}

impl Default for FacadeMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "yuxi_http_requests",
            "HTTP requests answered, by method, route and status",
            requests.clone(),
        );
        // 5 ms to about 160 s: long polls (`subagent_await`, `task`) and event streams end in the top buckets.
        let durations = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 16))
        });
        registry.register(
            "yuxi_http_request_duration_seconds",
            "Time to answer an HTTP request (until the response starts), in seconds",
            durations.clone(),
        );
        let runs_started = Family::<RunLabels, Counter>::default();
        registry.register("yuxi_runs_started", "Runs started, by agent and kind", runs_started.clone());
        let token_reviews = Family::<super::auth::token_review::ReviewLabels, Counter>::default();
        registry.register(
            "yuxi_token_reviews",
            "Bearer tokens checked by Kubernetes TokenReview, by result (authenticated, unauthenticated, error, cached)",
            token_reviews.clone(),
        );
        Self { registry: Arc::new(registry), requests, durations, runs_started, token_reviews }
    }
}

impl FacadeMetrics {
    /// Counts a started run of `agent`.
    pub fn run_started(&self, agent: &str, subagent: bool) {
        let kind = if subagent { "subagent" } else { "parent" };
        self.runs_started.get_or_create(&RunLabels { agent: agent.to_string(), kind: kind.to_string() }).inc();
    }

    /// The metrics in the text exposition format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// Middleware that counts and times every request of a matched route.
pub async fn track(State(metrics): State<FacadeMetrics>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_string();
    let route = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics.requests.get_or_create(&RequestLabels { method: method.clone(), route: route.clone(), status }).inc();
    metrics.durations.get_or_create(&RouteLabels { method, route }).observe(started.elapsed().as_secs_f64());
    response
}

/// `GET /metrics`.
pub async fn serve(State(metrics): State<FacadeMetrics>) -> impl IntoResponse {
    ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], metrics.render())
}
