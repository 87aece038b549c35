//! Logs and traces of this process: logs on stderr (`RUST_LOG`, default `info`), and, when an OTLP
//! endpoint is configured, the spans of run trees ([`yuxi_operator::telemetry::TARGET`]) exported over
//! OTLP/HTTP (protobuf) or, with `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`, OTLP/gRPC, configured by the
//! standard variables: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`),
//! `OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER_ARG` (the ratio of traces
//! this system starts that are kept; a caller's sampled flag is followed) and `OTEL_SDK_DISABLED`;
//! and `YUXI_TRACES_CAPTURE_CONTENT=true` to export contents ([`yuxi_operator::telemetry::content`]).
//! Off by default: with no endpoint nothing is built, nothing is sent, and the spans are never made.

use opentelemetry::trace::TracerProvider;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Exports until dropped, then sends what is left (a runner's spans before its process exits).
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    /// The runtime the gRPC exporter's connection lives on (gRPC only).
    grpc_runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(err) = provider.shutdown()
        {
            eprintln!("warning: the last spans could not be exported: {err}");
        }
        if let Some(runtime) = self.grpc_runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Whether `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` (or `OTEL_EXPORTER_OTLP_PROTOCOL`) asks for gRPC; the
/// default, and `http/protobuf`, is OTLP/HTTP.
fn grpc_asked() -> bool {
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    protocol.trim().eq_ignore_ascii_case("grpc")
}

/// Whether the environment asks for traces to be exported.
pub fn export_configured() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// Sets up logging, and the trace export when configured, for the role `role` (the default service
/// name is `yuxi-operator-<role>`). An exporter that cannot be built is reported and left off.
pub fn init(role: &str) -> Telemetry {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    let mut grpc_runtime = None;
    let provider = if export_configured() {
        match provider(role, &mut grpc_runtime) {
            Ok(provider) => Some(provider),
            Err(err) => {
                eprintln!("warning: traces are not exported: {err}");
                None
            }
        }
    } else {
        None
    };
    if provider.is_some() {
        let capture = std::env::var(yuxi_operator::telemetry::CAPTURE_CONTENT_ENV)
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
        yuxi_operator::telemetry::capture_content(capture);
    }
    if let Some(provider) = &provider {
        // For the spans made with explicit times (`telemetry::past_span`).
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    let traces = provider.as_ref().map(|provider| {
        let targets = tracing_subscriber::filter::Targets::new()
            .with_target(yuxi_operator::telemetry::TARGET, tracing::Level::TRACE);
        tracing_opentelemetry::layer().with_tracer(provider.tracer("yuxi-operator")).with_filter(targets)
    });
    tracing_subscriber::registry().with(logs).with(traces).init();
    Telemetry { provider, grpc_runtime }
}

fn provider(role: &str, grpc_runtime: &mut Option<tokio::runtime::Runtime>) -> anyhow::Result<SdkTracerProvider> {
    // The exporter's client (an https:// collector) needs the process's TLS provider.
    yuxi_operator::tls::install_crypto_provider();
    let exporter = if grpc_asked() {
        // The gRPC channel's connection is driven by a runtime of its own, beside the process's.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("otlp-grpc")
            .enable_all()
            .build()?;
        let exporter = {
            let _entered = runtime.enter();
            opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?
        };
        *grpc_runtime = Some(runtime);
        exporter
    } else {
        opentelemetry_otlp::SpanExporter::builder().with_http().build()?
    };
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| format!("yuxi-operator-{role}"));
    let ratio = std::env::var("OTEL_TRACES_SAMPLER_ARG").ok().and_then(|r| r.trim().parse::<f64>().ok()).unwrap_or(1.0);
    let resource = opentelemetry_sdk::Resource::builder().with_service_name(service).build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio.clamp(0.0, 1.0)))))
        .with_resource(resource)
        .build())
}
