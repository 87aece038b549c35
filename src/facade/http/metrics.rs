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

/// The labels of a started run: the agent's slug when everyone may read the agent (`/metrics` takes no
/// token, so it names no agent a stranger could not see; [`PRIVATE_AGENT`] for the others) and whether
/// the run is a subagent's (`subagent`) or a main agent's (`parent`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    /// The agent's slug.
    pub agent: String,
    /// `subagent` or `parent`.
    pub kind: String,
}

/// The `agent` label of a run whose agent not everyone may read.
pub const PRIVATE_AGENT: &str = "(private)";

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
    /// Counts a started run of `agent`, named by its slug only when everyone may read it.
    pub fn run_started(&self, agent: &crate::resources::Agent, subagent: bool) {
        let everyone = agent
            .spec
            .share
            .as_ref()
            .and_then(|share| share.read_scope.as_ref())
            .is_some_and(|scope| scope.access_level == crate::resources::AccessLevel::Global);
        let name = kube::ResourceExt::name_any(agent);
        let agent = if everyone || name == crate::resources::GENERAL_PURPOSE { name.as_str() } else { PRIVATE_AGENT };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, share: &str) -> crate::resources::Agent {
        serde_norway::from_str(&format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {name}}}\nspec: {{backend: ChatbotAgent{share}}}"
        ))
        .expect("an agent")
    }

    #[test]
    fn runs_are_counted_by_agent_only_for_agents_everyone_may_read() {
        let metrics = FacadeMetrics::default();
        metrics.run_started(&agent("open-helper", ", share: {readScope: {accessLevel: Global}}"), false);
        metrics.run_started(
            &agent("alices-secret-project", ", share: {readScope: {accessLevel: User, userUids: [alice]}}"),
            false,
        );
        metrics.run_started(
            &agent("teams-tool", ", share: {readScope: {accessLevel: Department, departmentIds: [1]}}"),
            true,
        );
        let text = metrics.render();
        assert!(text.contains(r#"yuxi_runs_started_total{agent="open-helper",kind="parent"} 1"#), "{text}");
        assert!(text.contains(r#"yuxi_runs_started_total{agent="(private)",kind="parent"} 1"#), "{text}");
        assert!(text.contains(r#"yuxi_runs_started_total{agent="(private)",kind="subagent"} 1"#), "{text}");
        assert!(!text.contains("alices-secret-project") && !text.contains("teams-tool"), "{text}");
    }
}
