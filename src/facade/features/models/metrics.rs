//! `GET /metrics`: the facade's own metrics and every model's totals from the run store (the runs'
//! model calls are counted where they happen, in runners that come and go; the store keeps the sums):
//! - `yuxi_model_tokens_total{namespace, model, kind}`, kind `prompt`, `completion` or `cached`;
//! - `yuxi_model_cost_total{namespace, model, currency}`, in units of the currency.
//!
//! A Model is named only when everyone may read it (its `readScope` is `Global`), like agents in the
//! run counters: a metric is read by whoever scrapes it, and a private Model's name says something of
//! its team. The others are summed under `model="(private)"`; `<provider>/<model>` ids are the
//! installation's and always named.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::facade::http::metrics::CONTENT_TYPE_TEXT;
use crate::facade::services::state::FacadeState;
use crate::resources::AccessLevel;
use crate::run::metrics::{self, Histogram};

/// The model label of Models not everyone may read.
pub const PRIVATE_MODEL: &str = "(private)";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    namespace: String,
    model: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    namespace: String,
    model: String,
    currency: String,
}

/// The model totals as Prometheus text (without the closing `# EOF`); empty when the store cannot be
/// read (logged: a scrape is not worth failing for it).
pub async fn model_totals_text(state: &FacadeState) -> String {
    let Ok(store) = state.store() else { return String::new() };
    let totals = match store.model_totals().await {
        Ok(totals) => totals,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the model totals for /metrics");
            return String::new();
        }
    };
    let public: std::collections::HashSet<String> = match state.model_resources.all().await {
        Ok(models) => models
            .into_iter()
            .filter(|m| {
                m.spec
                    .share
                    .as_ref()
                    .and_then(|s| s.read_scope.as_ref())
                    .is_some_and(|s| s.access_level == AccessLevel::Global)
            })
            .filter_map(|m| m.metadata.name)
            .collect(),
        Err(_) => Default::default(),
    };
    let label = |model: &str| {
        if model.contains('/') || public.contains(model) { model.to_string() } else { PRIVATE_MODEL.to_string() }
    };
    let mut tokens: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    let mut costs: BTreeMap<(String, String, String), i64> = BTreeMap::new();
    let mut latency: BTreeMap<String, Histogram> = BTreeMap::new();
    let mut first_token: BTreeMap<String, Histogram> = BTreeMap::new();
    for (namespace, model, kind, amount) in totals {
        let labels =
            || format!("{},{}", metrics::label("namespace", &namespace), metrics::label("model", &label(&model)));
        if let Some(field) = kind.strip_prefix("latency:") {
            latency.entry(labels()).or_default().add(field, amount);
        } else if let Some(field) = kind.strip_prefix("ttft:") {
            first_token.entry(labels()).or_default().add(field, amount);
        } else if let Some(currency) = kind.strip_prefix("cost:") {
            *costs.entry((namespace, label(&model), currency.to_string())).or_default() += amount;
        } else {
            *tokens.entry((namespace, label(&model), kind)).or_default() += amount.max(0) as u64;
        }
    }
    let token_family = Family::<TokenLabels, Counter>::default();
    for ((namespace, model, kind), amount) in tokens {
        token_family.get_or_create(&TokenLabels { namespace, model, kind }).inc_by(amount);
    }
    let cost_family = Family::<CostLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
    for ((namespace, model, currency), picos) in costs {
        cost_family.get_or_create(&CostLabels { namespace, model, currency }).inc_by(picos.max(0) as f64 / 1e12);
    }
    let mut registry = Registry::default();
    registry.register("yuxi_model_tokens", "Tokens of model calls, by namespace, model and kind", token_family);
    registry.register(
        "yuxi_model_cost",
        "What model calls cost, priced by their Models, in units of the currency",
        cost_family,
    );
    let mut text = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    let mut text = text.trim_end().trim_end_matches("# EOF").to_string();
    metrics::render(
        &mut text,
        "yuxi_model_latency_seconds",
        "Time of a model call, to its last token, in seconds",
        &latency,
    );
    metrics::render(
        &mut text,
        "yuxi_model_time_to_first_token_seconds",
        "Time from a model call to its first streamed token, in seconds",
        &first_token,
    );
    text
}

/// `GET /metrics`.
pub async fn serve(State(state): State<FacadeState>) -> impl IntoResponse {
    ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], metrics_text(&state).await)
}

/// The facade's metrics as `/metrics` answers them: its own, every model's totals and every agent's
/// run totals, ending in `# EOF`. Also what goes over OTLP when export is on.
pub async fn metrics_text(state: &FacadeState) -> String {
    let own = state.metrics.render();
    let models = model_totals_text(state).await;
    let runs = crate::facade::services::run_metrics::run_totals_text(state).await;
    match own.trim_end().strip_suffix("# EOF") {
        Some(head) => format!("{head}{models}{runs}# EOF\n"),
        None => format!("{own}{models}{runs}"),
    }
}
