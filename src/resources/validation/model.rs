//! The rules of a Model (docs/concepts/models.md): its CEL rules and the schema's bounds and patterns,
//! with the field paths and messages the API server gives.

use std::collections::HashSet;
use std::sync::OnceLock;

use kube::ResourceExt;

use super::{DNS1123_LABEL_HINT, Report, check_len, check_namespace, check_opt_len, is_dns1123_label, validate_share};
use crate::resources::knowledge_base::SecretKeyRef;
use crate::resources::model::{
    self, API_KEY_REQUIRED_MESSAGE, AZURE_BASE_URL_MESSAGE, AZURE_MESSAGE, BASE_URL_MESSAGE, BASE_URL_PATTERN,
    BEDROCK_API_KEY_MESSAGE, BEDROCK_MESSAGE, CALLER_AUDIENCE_MESSAGE, COMPATIBLE_BASE_URL_MESSAGE, CREDENTIAL_HEADERS,
    HEADER_CREDENTIAL_MESSAGE, HEADER_ONE_OF_MESSAGE, Model, ModelHeader, ModelProvider, ModelSpec, PRESET_MESSAGE,
    PROBE_INTERVAL_SECONDS, parse_price_micros, preset_base_url,
};

/// The patterns of the schema, as the API server applies them (`regex` reads these as RE2 does).
pub(crate) const MODEL_ID_PATTERN: &str = r"^[!-~]+$";
pub(crate) const DEPLOYMENT_PATTERN: &str = r"^[A-Za-z0-9][A-Za-z0-9._-]*$";
pub(crate) const API_VERSION_PATTERN: &str = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$";
pub(crate) const REGION_PATTERN: &str = r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$";
pub(crate) const HEADER_NAME_PATTERN: &str = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$";
pub(crate) const CURRENCY_PATTERN: &str = r"^[A-Z]{3}$";

/// Every pattern [`matches`] knows.
const PATTERNS: [&str; 7] = [
    MODEL_ID_PATTERN,
    DEPLOYMENT_PATTERN,
    API_VERSION_PATTERN,
    REGION_PATTERN,
    HEADER_NAME_PATTERN,
    CURRENCY_PATTERN,
    BASE_URL_PATTERN,
];

/// Whether `text` matches `pattern`, one of [`PATTERNS`] (each compiled once).
fn matches(pattern: &str, text: &str) -> bool {
    static COMPILED: OnceLock<Vec<regex::Regex>> = OnceLock::new();
    let compiled =
        COMPILED.get_or_init(|| PATTERNS.iter().map(|p| regex::Regex::new(p).expect("the patterns compile")).collect());
    let index = PATTERNS.iter().position(|p| *p == pattern).expect("a pattern of PATTERNS");
    compiled[index].is_match(text)
}

/// Checks a string field against its schema bounds and pattern, as the API server would (the length
/// first; a pattern is only checked on a value of the right length).
fn check_pattern(report: &mut Report, field: &str, value: &str, (min, max): (usize, usize), pattern: &str) {
    let errors = report.errors.len();
    check_len(report, field, value, min, max);
    if report.errors.len() == errors && !matches(pattern, value) {
        report.error(field, format!("{value:?} does not match {pattern}"));
    }
}

fn check_secret_key_ref(report: &mut Report, field: &str, secret: &SecretKeyRef) {
    check_len(report, &format!("{field}.name"), &secret.name, 1, 253);
    check_len(report, &format!("{field}.key"), &secret.key, 1, 253);
}

/// The single-object rules of a Model, each naming the field and giving the message the API server
/// gives (the CEL rules' messages are shared with [`crate::resources::model`]):
/// - `metadata.name` is a DNS-1123 label;
/// - `spec.preset` only with provider OpenAICompatible;
/// - `spec.baseURL`: required for OpenAICompatible without a hosted preset and for AzureOpenAI;
///   `https://`, or `http://` to loopback or a cluster Service ([`BASE_URL_PATTERN`]);
/// - `spec.azure` exactly for AzureOpenAI, `spec.bedrock` exactly for Bedrock;
/// - `spec.apiKeySecretRef` required for OpenAI, AzureOpenAI, Anthropic and Gemini, refused for Bedrock;
/// - `spec.headers`: at most 32, unique names, each exactly one of `value` and `secretKeyRef`, and a
///   credential header ([`CREDENTIAL_HEADERS`]) never a literal value;
/// - the schema's bounds and patterns: lengths, the model id, Azure's deployment and API version, the
///   AWS region, prices ([`model::PRICE_PATTERN`]), currency, temperature, token counts,
///   `probeIntervalSeconds`; share scopes as for Agents.
pub fn validate_model(model: &Model) -> Report {
    let mut report = Report::default();
    check_namespace(&mut report, &model.metadata);
    let name = model.name_any();
    if !is_dns1123_label(&name) {
        report.error("metadata.name", format!("{name:?} is not a valid name: a Model's name {DNS1123_LABEL_HINT}"));
    }
    let spec = &model.spec;
    check_pattern(&mut report, "spec.model", &spec.model, (1, 256), MODEL_ID_PATTERN);
    check_opt_len(&mut report, "spec.displayName", spec.display_name.as_deref(), 200);
    check_opt_len(&mut report, "spec.description", spec.description.as_deref(), 4096);
    check_opt_len(&mut report, "spec.owner", spec.owner.as_deref(), 128);
    check_endpoint(&mut report, spec);
    check_credentials(&mut report, spec);
    check_headers(&mut report, &spec.headers);
    if let Some(ca) = &spec.ca_bundle_ref {
        check_len(&mut report, "spec.caBundleRef.name", &ca.name, 1, 253);
        check_len(&mut report, "spec.caBundleRef.key", &ca.key, 1, 253);
    }
    check_numbers(&mut report, spec);
    if let Some(pricing) = &spec.pricing {
        check_pattern(&mut report, "spec.pricing.currency", &pricing.currency, (3, 3), CURRENCY_PATTERN);
        let prices = [
            ("inputPerMillion", &pricing.input_per_million),
            ("outputPerMillion", &pricing.output_per_million),
            ("cachedInputPerMillion", &pricing.cached_input_per_million),
        ];
        for (field, price) in prices {
            let Some(price) = price else { continue };
            let field = format!("spec.pricing.{field}");
            let errors = report.errors.len();
            check_len(&mut report, &field, price, 1, 13);
            if report.errors.len() == errors && parse_price_micros(price).is_none() {
                report.error(field, format!("{price:?} does not match {}", model::PRICE_PATTERN));
            }
        }
    }
    if let Some(share) = &spec.share {
        validate_share(&mut report, share);
    }
    report
}

/// `preset`, `baseURL`, `azure` and `bedrock`.
fn check_endpoint(report: &mut Report, spec: &ModelSpec) {
    let provider = spec.provider;
    if spec.preset.is_some() && provider != ModelProvider::OpenAICompatible {
        report.error("spec.preset", PRESET_MESSAGE);
    }
    let hosted_preset = spec.preset.is_some_and(|p| preset_base_url(p).is_some());
    if provider == ModelProvider::OpenAICompatible && spec.base_url.is_none() && !hosted_preset {
        report.error("spec.baseURL", COMPATIBLE_BASE_URL_MESSAGE);
    }
    if provider == ModelProvider::AzureOpenAI && spec.base_url.is_none() {
        report.error("spec.baseURL", AZURE_BASE_URL_MESSAGE);
    }
    if let Some(url) = &spec.base_url {
        let errors = report.errors.len();
        check_len(report, "spec.baseURL", url, 1, 2048);
        if report.errors.len() == errors && !matches(BASE_URL_PATTERN, url) {
            report.error("spec.baseURL", BASE_URL_MESSAGE);
        }
    }
    if (provider == ModelProvider::AzureOpenAI) != spec.azure.is_some() {
        report.error("spec.azure", AZURE_MESSAGE);
    }
    if let Some(azure) = &spec.azure {
        check_pattern(report, "spec.azure.deployment", &azure.deployment, (1, 64), DEPLOYMENT_PATTERN);
        check_pattern(report, "spec.azure.apiVersion", &azure.api_version, (10, 18), API_VERSION_PATTERN);
    }
    if (provider == ModelProvider::Bedrock) != spec.bedrock.is_some() {
        report.error("spec.bedrock", BEDROCK_MESSAGE);
    }
    if let Some(bedrock) = &spec.bedrock {
        check_pattern(report, "spec.bedrock.region", &bedrock.region, (1, 32), REGION_PATTERN);
        if let Some(keys) = &bedrock.access_key_secret_ref {
            let field = "spec.bedrock.accessKeySecretRef";
            check_len(report, &format!("{field}.name"), &keys.name, 1, 253);
            let optional = [
                ("accessKeyIdKey", &keys.access_key_id_key),
                ("secretAccessKeyKey", &keys.secret_access_key_key),
                ("sessionTokenKey", &keys.session_token_key),
            ];
            for (key_field, key) in optional {
                if let Some(key) = key {
                    check_len(report, &format!("{field}.{key_field}"), key, 1, 253);
                }
            }
        }
    }
}

/// `apiKeySecretRef`: required or refused by provider.
fn check_credentials(report: &mut Report, spec: &ModelSpec) {
    let provider = spec.provider;
    let optional = matches!(provider, ModelProvider::Bedrock | ModelProvider::OpenAICompatible);
    if !optional && spec.api_key_secret_ref.is_none() {
        report.error("spec.apiKeySecretRef", API_KEY_REQUIRED_MESSAGE);
    }
    if provider == ModelProvider::Bedrock && spec.api_key_secret_ref.is_some() {
        report.error("spec.apiKeySecretRef", BEDROCK_API_KEY_MESSAGE);
    }
    if let Some(audience) = &spec.caller_audience {
        if provider != ModelProvider::OpenAICompatible || spec.api_key_secret_ref.is_some() {
            report.error("spec.callerAudience", CALLER_AUDIENCE_MESSAGE);
        }
        check_len(report, "spec.callerAudience", audience, 1, 256);
    }
    if let Some(secret) = &spec.api_key_secret_ref {
        check_secret_key_ref(report, "spec.apiKeySecretRef", secret);
    }
}

fn check_headers(report: &mut Report, headers: &[ModelHeader]) {
    if headers.len() > 32 {
        report.error("spec.headers", format!("must have at most 32 entries (has {})", headers.len()));
        return;
    }
    let mut seen = HashSet::new();
    for (i, header) in headers.iter().enumerate() {
        let field = format!("spec.headers[{i}]");
        check_pattern(report, &format!("{field}.name"), &header.name, (1, 128), HEADER_NAME_PATTERN);
        if !seen.insert(header.name.as_str()) {
            report.error(&field, format!("duplicate header name {:?}", header.name));
        }
        if header.value.is_some() == header.secret_key_ref.is_some() {
            report.error(&field, HEADER_ONE_OF_MESSAGE);
        }
        if let Some(value) = &header.value {
            check_len(report, &format!("{field}.value"), value, 0, 4096);
            if CREDENTIAL_HEADERS.contains(&header.name.to_ascii_lowercase().as_str()) {
                report.error(format!("{field}.value"), HEADER_CREDENTIAL_MESSAGE);
            }
        }
        if let Some(secret) = &header.secret_key_ref {
            check_secret_key_ref(report, &format!("{field}.secretKeyRef"), secret);
        }
    }
}

/// The ranges of the numbers.
fn check_numbers(report: &mut Report, spec: &ModelSpec) {
    if let Some(seconds) = spec.probe_interval_seconds
        && !PROBE_INTERVAL_SECONDS.contains(&seconds)
    {
        let (min, max) = (PROBE_INTERVAL_SECONDS.start(), PROBE_INTERVAL_SECONDS.end());
        report.error("spec.probeIntervalSeconds", format!("must be within {min}..{max} (is {seconds})"));
    }
    if let Some(parameters) = &spec.parameters {
        if let Some(temperature) = parameters.temperature
            && !(0.0..=2.0).contains(&temperature)
        {
            report.error("spec.parameters.temperature", format!("must be within 0..2 (is {temperature})"));
        }
        if let Some(tokens) = parameters.max_output_tokens
            && !(1..=1_000_000).contains(&tokens)
        {
            report.error("spec.parameters.maxOutputTokens", format!("must be within 1..1000000 (is {tokens})"));
        }
    }
    if let Some(window) = spec.capabilities.as_ref().and_then(|c| c.context_window)
        && !(1..=100_000_000).contains(&window)
    {
        report.error("spec.capabilities.contextWindow", format!("must be within 1..100000000 (is {window})"));
    }
}

#[cfg(test)]
mod tests;
