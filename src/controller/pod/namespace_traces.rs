//! A namespace's own trace export: the ConfigMap [`NAMESPACE_TRACES_CONFIG_MAP`] in a run's namespace
//! names the OTLP collector its runners export to, in place of the installation's, so that one team's
//! spans never go to another team's backend (docs/how-to/traces.md#one-collector-per-namespace).
//!
//! Keys: `endpoint` (an `http://` or `https://` base URL; required), `protocol` (`grpc` or
//! `http/protobuf`), `headersSecret` (a Secret of the namespace whose key `headers` holds
//! `OTEL_EXPORTER_OTLP_HEADERS`), `samplerRatio` (0 to 1) and `captureContent` (`true` or `false`).
//! A ConfigMap that does not follow these rules exports nothing (never to the installation's collector
//! instead), and the reason is said.

use std::collections::BTreeMap;

use super::settings::{SecretKey, TraceExport};

/// The name of the ConfigMap a namespace names its collector in.
pub const NAMESPACE_TRACES_CONFIG_MAP: &str = "yuxi-traces";
/// The key of the headers in the Secret `headersSecret` names.
pub const HEADERS_KEY: &str = "headers";

/// The export a namespace's ConfigMap `data` asks for. Errors: which key is wrong and why.
pub fn namespace_traces(data: &BTreeMap<String, String>) -> Result<TraceExport, String> {
    const KNOWN: [&str; 5] = ["endpoint", "protocol", "headersSecret", "samplerRatio", "captureContent"];
    if let Some(unknown) = data.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(format!("{NAMESPACE_TRACES_CONFIG_MAP}: unknown key {unknown:?} (known: {})", KNOWN.join(", ")));
    }
    let field = |key: &str| data.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let endpoint = field("endpoint").ok_or(format!("{NAMESPACE_TRACES_CONFIG_MAP}: endpoint is missing"))?;
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) || endpoint.contains(char::is_whitespace)
    {
        return Err(format!("{NAMESPACE_TRACES_CONFIG_MAP}: endpoint {endpoint:?} is not an http:// or https:// URL"));
    }
    let protocol = match field("protocol") {
        None => None,
        Some(p @ ("grpc" | "http/protobuf")) => Some(p.to_string()),
        Some(p) => {
            return Err(format!("{NAMESPACE_TRACES_CONFIG_MAP}: protocol {p:?} is neither grpc nor http/protobuf"));
        }
    };
    let headers_secret = match field("headersSecret") {
        None => None,
        Some(name) if crate::resources::validation::is_dns1123_subdomain(name) => {
            Some(SecretKey { name: name.to_string(), key: HEADERS_KEY.to_string() })
        }
        Some(name) => {
            return Err(format!("{NAMESPACE_TRACES_CONFIG_MAP}: headersSecret {name:?} is not a Secret name"));
        }
    };
    let sampler_ratio = match field("samplerRatio") {
        None => None,
        Some(text) => match text.parse::<f64>() {
            Ok(ratio) if (0.0..=1.0).contains(&ratio) => Some(ratio),
            _ => {
                return Err(format!(
                    "{NAMESPACE_TRACES_CONFIG_MAP}: samplerRatio {text:?} is not a number within 0..1"
                ));
            }
        },
    };
    let capture_content = match field("captureContent") {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(format!("{NAMESPACE_TRACES_CONFIG_MAP}: captureContent {other:?} is neither true nor false"));
        }
    };
    Ok(TraceExport { endpoint: endpoint.to_string(), headers_secret, sampler_ratio, protocol, capture_content })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_namespaces_collector_with_its_headers_protocol_ratio_and_capture() {
        let export = namespace_traces(&data(&[
            ("endpoint", "https://tempo.team-a.svc:4317"),
            ("protocol", "grpc"),
            ("headersSecret", "team-a-otel"),
            ("samplerRatio", "0.5"),
            ("captureContent", "true"),
        ]))
        .expect("valid");
        assert_eq!(export.endpoint, "https://tempo.team-a.svc:4317");
        assert_eq!(export.protocol.as_deref(), Some("grpc"));
        assert_eq!(export.headers_secret, Some(SecretKey { name: "team-a-otel".into(), key: "headers".into() }));
        assert_eq!((export.sampler_ratio, export.capture_content), (Some(0.5), true));
    }

    #[test]
    fn each_wrong_key_is_named() {
        for (pairs, says) in [
            (vec![], "endpoint is missing"),
            (vec![("endpoint", "tempo:4318")], "not an http:// or https:// URL"),
            (vec![("endpoint", "http://t:4318"), ("protocol", "thrift")], "protocol \"thrift\""),
            (vec![("endpoint", "http://t:4318"), ("headersSecret", "Team_A")], "headersSecret \"Team_A\""),
            (vec![("endpoint", "http://t:4318"), ("samplerRatio", "2")], "samplerRatio \"2\""),
            (vec![("endpoint", "http://t:4318"), ("captureContent", "yes")], "captureContent \"yes\""),
            (vec![("endpoint", "http://t:4318"), ("endpont", "x")], "unknown key \"endpont\""),
        ] {
            let err = namespace_traces(&data(&pairs)).expect_err("refused");
            assert!(err.contains(says), "{err}");
        }
    }
}
