//! The metrics over OTLP, when export is on: every [`EXPORT_INTERVAL_ENV`] the process's `/metrics`
//! text (the same counters, gauges and histograms Prometheus scrapes, with the same labels) is sent to
//! the collector as an OTLP `ExportMetricsServiceRequest`, over HTTP (protobuf, `<endpoint>/v1/metrics`)
//! or gRPC as `OTEL_EXPORTER_OTLP_PROTOCOL` says, with `OTEL_EXPORTER_OTLP_HEADERS`. Counters go as
//! cumulative monotonic sums (named without `_total`), gauges as gauges, histograms as explicit-bucket
//! histograms in seconds. The text is this system's own, so the reading here knows its shapes.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics,
    ScopeMetrics, Sum, metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

/// How often the metrics are sent, in milliseconds (default 60,000), as OpenTelemetry names it.
pub const EXPORT_INTERVAL_ENV: &str = "OTEL_METRIC_EXPORT_INTERVAL";

/// A label set, in the order the text gives it.
type Labels = Vec<(String, String)>;

#[derive(Default)]
struct Family {
    kind: String,
    help: String,
    numbers: Vec<(Labels, f64)>,
    /// By label set (without `le`).
    histograms: BTreeMap<Labels, Series>,
}

/// One histogram series as the text gives it.
#[derive(Default)]
struct Series {
    /// The cumulative count at each bound (`+Inf` as infinity).
    buckets: Vec<(f64, u64)>,
    sum: f64,
    count: u64,
}

/// The metrics of `text` (the Prometheus text format this system writes) as OTLP metrics, stamped
/// `now` and counted since `start` (both in ns since the epoch). Lines it cannot read are left out.
pub fn from_text(text: &str, start: u64, now: u64) -> Vec<Metric> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.splitn(2, ' ');
            if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                families.entry(name.to_string()).or_default().kind = kind.trim().to_string();
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let mut parts = rest.splitn(2, ' ');
            if let (Some(name), Some(help)) = (parts.next(), parts.next()) {
                families.entry(name.to_string()).or_default().help = help.trim().to_string();
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((name, labels, value)) = sample(line) else { continue };
        let family_of =
            |suffix: &str| name.strip_suffix(suffix).filter(|f| families.contains_key(*f)).map(String::from);
        if let Some(family) = family_of("_bucket") {
            let Some(le) = labels.iter().find(|(k, _)| k == "le").map(|(_, v)| v.clone()) else { continue };
            let bound = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::NAN) };
            let rest: Labels = labels.into_iter().filter(|(k, _)| k != "le").collect();
            let entry = families.get_mut(&family).expect("known").histograms.entry(rest).or_default();
            entry.buckets.push((bound, value as u64));
        } else if let Some(family) = family_of("_sum").filter(|f| families[f].kind == "histogram") {
            families.get_mut(&family).expect("known").histograms.entry(labels).or_default().sum = value;
        } else if let Some(family) = family_of("_count").filter(|f| families[f].kind == "histogram") {
            families.get_mut(&family).expect("known").histograms.entry(labels).or_default().count = value as u64;
        } else if let Some(family) = family_of("_total").or_else(|| families.contains_key(&name).then(|| name.clone()))
        {
            families.get_mut(&family).expect("known").numbers.push((labels, value));
        }
    }
    families.into_iter().filter_map(|(name, family)| metric(name, family, start, now)).collect()
}

fn metric(name: String, family: Family, start: u64, now: u64) -> Option<Metric> {
    let number = |(labels, value): (Labels, f64)| NumberDataPoint {
        attributes: attributes(&labels),
        start_time_unix_nano: start,
        time_unix_nano: now,
        value: Some(number_data_point::Value::AsDouble(value)),
        ..Default::default()
    };
    let data = match family.kind.as_str() {
        "counter" => metric::Data::Sum(Sum {
            data_points: family.numbers.into_iter().map(number).collect(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        }),
        "gauge" => metric::Data::Gauge(Gauge { data_points: family.numbers.into_iter().map(number).collect() }),
        "histogram" => metric::Data::Histogram(Histogram {
            data_points: family
                .histograms
                .into_iter()
                .map(|(labels, Series { mut buckets, sum, count })| {
                    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let bounds: Vec<f64> = buckets.iter().map(|b| b.0).filter(|b| b.is_finite()).collect();
                    let mut counts = Vec::with_capacity(bounds.len() + 1);
                    let mut below = 0;
                    for (bound, cumulative) in &buckets {
                        if bound.is_finite() {
                            counts.push(cumulative.saturating_sub(below));
                            below = *cumulative;
                        }
                    }
                    counts.push(count.saturating_sub(below));
                    HistogramDataPoint {
                        attributes: attributes(&labels),
                        start_time_unix_nano: start,
                        time_unix_nano: now,
                        count,
                        sum: Some(sum),
                        bucket_counts: counts,
                        explicit_bounds: bounds,
                        ..Default::default()
                    }
                })
                .collect(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        }),
        _ => return None,
    };
    Some(Metric { name, description: family.help, data: Some(data), ..Default::default() })
}

fn attributes(labels: &Labels) -> Vec<KeyValue> {
    labels.iter().map(|(k, v)| string_attribute(k, v)).collect()
}

fn string_attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.to_string())) }),
        ..Default::default()
    }
}

/// `name{k="v",...} value` (labels optional; `\\`, `\"` and `\n` escaped in values).
fn sample(line: &str) -> Option<(String, Labels, f64)> {
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let Some((name, rest)) = head.split_once('{') else { return Some((head.trim().to_string(), Vec::new(), value)) };
    let body = rest.strip_suffix('}')?;
    let mut labels = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() {
            break;
        }
        if chars.next()? != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break,
                other => value.push(other),
            }
        }
        labels.push((key.trim_start_matches(',').to_string(), value));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    Some((name.to_string(), labels, value))
}

/// Where and how the metrics go, from the standard variables.
struct Destination {
    grpc: bool,
    url: String,
    headers: Vec<(String, String)>,
    resource: Vec<KeyValue>,
}

fn destination(service: &str) -> Option<Destination> {
    let var = |name: &str| std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let protocol = var("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    let grpc = protocol.is_some_and(|p| p.eq_ignore_ascii_case("grpc"));
    let url = match var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") {
        Some(url) => url,
        None => {
            let base = var("OTEL_EXPORTER_OTLP_ENDPOINT")?;
            if grpc { base } else { format!("{}/v1/metrics", base.trim_end_matches('/')) }
        }
    };
    let pairs = |text: Option<String>| -> Vec<(String, String)> {
        text.unwrap_or_default()
            .split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), percent_decode(v.trim())))
            .collect()
    };
    let headers = pairs(var("OTEL_EXPORTER_OTLP_METRICS_HEADERS").or_else(|| var("OTEL_EXPORTER_OTLP_HEADERS")));
    let service = var("OTEL_SERVICE_NAME").unwrap_or_else(|| service.to_string());
    let mut resource = vec![string_attribute("service.name", &service)];
    resource.extend(pairs(var("OTEL_RESOURCE_ATTRIBUTES")).iter().map(|(k, v)| string_attribute(k, v)));
    Some(Destination { grpc, url, headers, resource })
}

/// `text` with its `%XX` escapes decoded (the variables' values are URL-encoded).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text.get(i + 1..i + 3).and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn nanos(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Sends what `render` answers (the process's `/metrics` text) every interval, until the task is
/// aborted; the default service name is `service`. Does nothing when no OTLP endpoint is set. A send
/// that fails is logged and the next one goes on.
pub async fn export<F, Fut>(service: String, render: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = String>,
{
    let Some(destination) = destination(&service) else { return };
    let every = std::env::var(EXPORT_INTERVAL_ENV)
        .ok()
        .and_then(|ms| ms.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(60), |ms| Duration::from_millis(ms.max(100)));
    crate::tls::install_crypto_provider();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap_or_default();
    let start = nanos(SystemTime::now());
    loop {
        tokio::time::sleep(every).await;
        let metrics = from_text(&render().await, start, nanos(SystemTime::now()));
        let request = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource { attributes: destination.resource.clone(), ..Default::default() }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope { name: "yuxi-operator".into(), ..Default::default() }),
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        if let Err(err) = send(&client, &destination, request).await {
            tracing::warn!(error = %err, url = %destination.url, "cannot send the metrics over OTLP");
        }
    }
}

async fn send(
    client: &reqwest::Client,
    destination: &Destination,
    request: ExportMetricsServiceRequest,
) -> Result<(), String> {
    if destination.grpc {
        use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
        let mut grpc = MetricsServiceClient::connect(destination.url.clone()).await.map_err(|e| e.to_string())?;
        let mut call = tonic::Request::new(request);
        for (key, value) in &destination.headers {
            if let (Ok(key), Ok(value)) = (
                tonic::metadata::MetadataKey::from_bytes(key.to_ascii_lowercase().as_bytes()),
                tonic::metadata::MetadataValue::try_from(value.as_str()),
            ) {
                call.metadata_mut().insert(key, value);
            }
        }
        grpc.export(call).await.map(|_| ()).map_err(|e| e.to_string())
    } else {
        let mut post = client
            .post(&destination.url)
            .header("content-type", "application/x-protobuf")
            .body(request.encode_to_vec());
        for (key, value) in &destination.headers {
            post = post.header(key.as_str(), value.as_str());
        }
        let answer = post.send().await.map_err(|e| e.to_string())?;
        if answer.status().is_success() { Ok(()) } else { Err(format!("the collector answered {}", answer.status())) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP yuxi_runs_ended Runs ended.\n# TYPE yuxi_runs_ended counter\n\
        yuxi_runs_ended_total{namespace=\"a\",agent=\"x\\\"y\",status=\"completed\"} 3\n\
        # TYPE yuxi_agent_runs gauge\nyuxi_agent_runs{phase=\"Running\"} 2\n\
        # HELP yuxi_run_duration_seconds Time.\n# TYPE yuxi_run_duration_seconds histogram\n\
        yuxi_run_duration_seconds_bucket{agent=\"x\",le=\"0.05\"} 1\n\
        yuxi_run_duration_seconds_bucket{agent=\"x\",le=\"0.1\"} 3\n\
        yuxi_run_duration_seconds_bucket{agent=\"x\",le=\"+Inf\"} 4\n\
        yuxi_run_duration_seconds_sum{agent=\"x\"} 9.5\n\
        yuxi_run_duration_seconds_count{agent=\"x\"} 4\n# EOF\n";

    #[test]
    fn counters_gauges_and_histograms_become_otlp_metrics_with_their_labels() {
        let metrics = from_text(TEXT, 1, 2);
        let find =
            |name: &str| metrics.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("{name}: {metrics:?}"));
        let Some(metric::Data::Sum(sum)) = &find("yuxi_runs_ended").data else { panic!("a sum") };
        assert!(sum.is_monotonic);
        let point = &sum.data_points[0];
        assert_eq!(point.value, Some(number_data_point::Value::AsDouble(3.0)));
        let agent = point.attributes.iter().find(|a| a.key == "agent").and_then(|a| a.value.clone());
        assert_eq!(agent, Some(AnyValue { value: Some(any_value::Value::StringValue("x\"y".into())) }));
        assert_eq!(find("yuxi_runs_ended").description, "Runs ended.");
        assert!(matches!(find("yuxi_agent_runs").data, Some(metric::Data::Gauge(_))));
        let Some(metric::Data::Histogram(histogram)) = &find("yuxi_run_duration_seconds").data else { panic!() };
        let point = &histogram.data_points[0];
        assert_eq!((point.count, point.sum), (4, Some(9.5)));
        assert_eq!(point.explicit_bounds, [0.05, 0.1]);
        assert_eq!(point.bucket_counts, [1, 2, 1]);
        assert_eq!(point.attributes.len(), 1, "le is a bound, not a label");
    }

    #[test]
    fn escaped_headers_and_unreadable_lines() {
        assert_eq!(percent_decode("Basic%20abc%3D"), "Basic abc=");
        assert_eq!(sample("no value here"), None);
        assert_eq!(sample("x{a=\"1\"} 2"), Some(("x".into(), vec![("a".into(), "1".into())], 2.0)));
    }
}
