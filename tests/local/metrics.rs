//! The run and model metrics of `/metrics`, with each store: after a deep-research run (a parent and
//! two children), its runs' ends, durations, queue waits and times to a first event, and its model
//! calls' latencies and times to a first token are counted under the agent and the model, as
//! Prometheus histograms; and with export on, the same metrics go to an OTLP receiver.

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::Metric;
use serde_json::json;

use crate::support::local_mode::{Local, LocalStore, examples_with};

/// The value of the sample `name{labels}` (its labels in the order they are written), if any.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(name_and_labels)?.trim().parse().ok())
}

/// Runs deep-research for Alice to its end, completed.
async fn deep_research(local: &Local) {
    let run_id = local
        .start_run("alice-token", &[], json!({"query": "Which electrolytes?", "agent_slug": "deep-research"}))
        .await;
    assert_eq!(local.result_of(&run_id, "alice-token").await["status"], "completed");
}

async fn a_deep_research_tree_is_counted_in_the_run_and_model_metrics(store: LocalStore) {
    let local = examples_with(store, &[]).await;
    deep_research(&local).await;
    let text =
        local.client.get(format!("{}/metrics", local.base)).send().await.expect("reaches").text().await.expect("text");
    let agent = r#"namespace="default",agent="deep-research""#;
    assert!(
        sample(&text, &format!(r#"yuxi_runs_ended_total{{{agent},status="completed"}}"#)).is_some_and(|n| n >= 1.0),
        "{text}"
    );
    for histogram in ["yuxi_run_duration_seconds", "yuxi_run_queue_seconds", "yuxi_run_time_to_first_event_seconds"] {
        let count = sample(&text, &format!("{histogram}_count{{{agent}}}"));
        assert!(count.is_some_and(|n| n >= 1.0), "{histogram}: {text}");
        let all = sample(&text, &format!(r#"{histogram}_bucket{{{agent},le="+Inf"}}"#));
        assert_eq!(all, count, "{histogram}: the +Inf bucket holds every observation");
    }
    // Its children are counted under their own agents.
    for child in ["research-explorer", "fact-verifier"] {
        let ended = format!(r#"yuxi_runs_ended_total{{namespace="default",agent="{child}",status="completed"}}"#);
        assert!(sample(&text, &ended).is_some_and(|n| n >= 1.0), "{child}: {text}");
    }
    let model_latency = text
        .lines()
        .filter(|l| l.starts_with("yuxi_model_latency_seconds_count{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(model_latency >= 6.0, "every model call of the tree: {text}");
    assert!(text.contains("yuxi_model_time_to_first_token_seconds_count{"), "{text}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    local.stop();
}

crate::with_each_store!(a_deep_research_tree_is_counted_in_the_run_and_model_metrics);

/// An OTLP/HTTP metrics receiver: `POST /v1/metrics` with a protobuf `ExportMetricsServiceRequest`;
/// keeps the metrics of the latest request.
async fn metrics_receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Metric>>>) {
    use prost::Message;
    let latest: std::sync::Arc<std::sync::Mutex<Vec<Metric>>> = Default::default();
    let kept = latest.clone();
    let app = axum::Router::new().route(
        "/v1/metrics",
        axum::routing::post(move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportMetricsServiceRequest::decode(body).expect("an OTLP metrics request");
                let metrics =
                    request.resource_metrics.into_iter().flat_map(|r| r.scope_metrics).flat_map(|s| s.metrics);
                *kept.lock().expect("lock") = metrics.collect();
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("the receiver serves") });
    (format!("http://{address}"), latest)
}

fn has(point_attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str, value: &str) -> bool {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    point_attributes
        .iter()
        .any(|a| a.key == key && a.value.as_ref().and_then(|v| v.value.as_ref()) == Some(&V::StringValue(value.into())))
}

#[tokio::test]
async fn with_export_on_the_same_metrics_go_to_an_otlp_receiver() {
    use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value as Number};
    let (endpoint, latest) = metrics_receiver().await;
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_METRIC_EXPORT_INTERVAL", "200")];
    let local = examples_with(LocalStore::InProcess, &env).await;
    deep_research(&local).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let metrics = latest.lock().expect("lock").clone();
        let ended = metrics.iter().find(|m| m.name == "yuxi_runs_ended").and_then(|m| match &m.data {
            Some(Data::Sum(sum)) => {
                sum.data_points.iter().find(|p| has(&p.attributes, "agent", "deep-research")).cloned()
            }
            _ => None,
        });
        let duration = metrics.iter().find(|m| m.name == "yuxi_run_duration_seconds").and_then(|m| match &m.data {
            Some(Data::Histogram(histogram)) => {
                histogram.data_points.iter().find(|p| has(&p.attributes, "agent", "deep-research")).cloned()
            }
            _ => None,
        });
        if let (Some(ended), Some(duration)) = (ended, duration) {
            assert_eq!(ended.value, Some(Number::AsDouble(1.0)));
            assert_eq!(duration.count, 1);
            assert_eq!(duration.bucket_counts.iter().sum::<u64>(), 1, "{duration:?}");
            assert_eq!(duration.bucket_counts.len(), duration.explicit_bounds.len() + 1);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no run metrics over OTLP: {metrics:?}\n{}", local.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    local.stop();
}
