//! Whether a Model's endpoint answers: one cheap, free request per provider (the model list, or the one
//! model's description), never a generation. What it says back is kept short and cleared of every
//! credential the request carried, since it is written to the Model's status.
//!
//! The requests, from each provider's API reference:
//! - OpenAI and OpenAI-compatible servers: `GET {base}/models` with `Authorization: Bearer <key>` (a
//!   server without a key gets none);
//! - Azure OpenAI: `GET {base}/openai/models?api-version=<version>` with `api-key`;
//! - Anthropic: `GET {base}/v1/models?limit=1` with `x-api-key` and `anthropic-version: 2023-06-01`;
//! - Gemini: `GET {base}/v1beta/models/<model>` with `x-goog-api-key` (which also says the model exists);
//! - Bedrock: not probed here (its list is on another host and every request is signed); its Models say
//!   so in their status.

use std::time::{Duration, Instant};

use super::connection::{Connection, Credentials};
use crate::resources::ModelProvider;

/// How long a probe may take, connection included.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(15);
/// The most characters of the endpoint's answer a failed probe keeps.
pub const MAX_MESSAGE_CHARS: usize = 300;

/// What a probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// `Some(true)`: the endpoint answered and took the key; `Some(false)`: it did not; `None`: the
    /// provider is not probed.
    pub available: Option<bool>,
    /// A CamelCase reason: `Answered`, `RateLimited`, `PerUserCredentials`, `Unauthorized`, `ModelNotFound`, `ServerError`,
    /// `Unreachable`, `BadRequest`, `NotProbed`.
    pub reason: &'static str,
    /// What it found, with no credential in it.
    pub message: String,
    /// How long the endpoint took to answer; `None` when nothing answered.
    pub latency: Option<Duration>,
}

/// The probe request of `connection`: its URL and its authentication headers; `None` for Bedrock.
pub fn request(connection: &Connection) -> Option<(String, Vec<(&'static str, String)>)> {
    let endpoint = &connection.endpoint;
    let key = match &connection.credentials {
        Credentials::ApiKey(key) => Some(key.clone()),
        _ => None,
    };
    let base = endpoint.base_url.trim_end_matches('/');
    let (url, mut headers) = match endpoint.provider {
        ModelProvider::OpenAI | ModelProvider::OpenAICompatible => {
            (format!("{base}/models"), key.map(|k| vec![("authorization", format!("Bearer {k}"))]).unwrap_or_default())
        }
        ModelProvider::AzureOpenAI => (
            format!("{base}/openai/models?api-version={}", endpoint.api_version.as_deref().unwrap_or_default()),
            key.map(|k| vec![("api-key", k)]).unwrap_or_default(),
        ),
        ModelProvider::Anthropic => {
            (format!("{base}/v1/models?limit=1"), key.map(|k| vec![("x-api-key", k)]).unwrap_or_default())
        }
        ModelProvider::Gemini => (
            format!("{base}/v1beta/models/{}", endpoint.model),
            key.map(|k| vec![("x-goog-api-key", k)]).unwrap_or_default(),
        ),
        ModelProvider::Bedrock => return None,
    };
    if endpoint.provider == ModelProvider::Anthropic {
        headers.push(("anthropic-version", "2023-06-01".to_string()));
    }
    Some((url, headers))
}

/// Probes `connection`'s endpoint once, within [`PROBE_TIMEOUT`].
pub async fn probe(connection: &Connection) -> ProbeOutcome {
    let Some((url, auth)) = request(connection) else {
        return ProbeOutcome {
            available: None,
            reason: "NotProbed",
            message: format!("{} endpoints are not probed", connection.endpoint.provider.as_str()),
            latency: None,
        };
    };
    let client = match super::http::client(connection, PROBE_TIMEOUT) {
        Ok(client) => client,
        Err(err) => return failed("BadRequest", redact(&err.to_string(), connection), None),
    };
    let mut call = client.get(&url).timeout(PROBE_TIMEOUT);
    for (name, value) in auth {
        call = call.header(name, value);
    }
    let started = Instant::now();
    let response = match call.send().await {
        Ok(response) => response,
        Err(err) => {
            let what = if err.is_timeout() { "did not answer in time" } else { "cannot be reached" };
            let message = format!("the endpoint {what}: {}", error_chain(&err));
            return failed("Unreachable", redact(&message, connection), None);
        }
    };
    let latency = started.elapsed();
    let status = response.status();
    if status.is_success() {
        return ProbeOutcome {
            available: Some(true),
            reason: "Answered",
            message: format!("the endpoint answered {}", status.as_u16()),
            latency: Some(latency),
        };
    }
    let body = response.text().await.unwrap_or_default();
    let said: String = body.chars().filter(|c| !c.is_control()).take(MAX_MESSAGE_CHARS).collect();
    let message = redact(&format!("the endpoint answered {}: {said}", status.as_u16()), connection);
    match status.as_u16() {
        // Up and taking the key, only busy.
        429 => ProbeOutcome { available: Some(true), reason: "RateLimited", message, latency: Some(latency) },
        // Asked without a user's token, a Model called as each run's user is up when it refuses.
        401 | 403 if connection.caller_audience.is_some() => ProbeOutcome {
            available: Some(true),
            reason: "PerUserCredentials",
            message: format!("{message} (without a user's token; runs call it with their user's)"),
            latency: Some(latency),
        },
        401 | 403 => failed("Unauthorized", message, Some(latency)),
        404 => failed("ModelNotFound", message, Some(latency)),
        code if code >= 500 => failed("ServerError", message, Some(latency)),
        _ => failed("BadRequest", message, Some(latency)),
    }
}

fn failed(reason: &'static str, message: String, latency: Option<Duration>) -> ProbeOutcome {
    ProbeOutcome { available: Some(false), reason, message, latency }
}

/// An error with its causes, `: `-separated (reqwest's own message stops at "error sending request").
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `text` with every credential of `connection` (its key, AWS secrets, header values) replaced by
/// `<redacted>`: an endpoint may echo what it was sent, and URLs in errors may carry it.
pub fn redact(text: &str, connection: &Connection) -> String {
    super::http::redact(text, &super::http::secrets(connection))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::model::Endpoint;

    fn connection(provider: ModelProvider, base_url: &str) -> Connection {
        Connection {
            caller_audience: None,
            name: "m".into(),
            endpoint: Endpoint {
                provider,
                base_url: base_url.into(),
                model: "gemini-2.5-flash".into(),
                api_version: Some("2024-10-21".into()),
                region: None,
            },
            credentials: Credentials::ApiKey("sk-team-a-0123456789".into()),
            headers: vec![("X-Route".into(), "route-secret".into())],
            ca_bundle: None,
            parameters: Default::default(),
            pricing: None,
        }
    }

    #[test]
    fn each_provider_is_probed_at_its_documented_list_with_its_own_key_header() {
        let cases = [
            (ModelProvider::OpenAI, "https://api.openai.com/v1/models", "authorization", "Bearer sk-team-a-0123456789"),
            (
                ModelProvider::AzureOpenAI,
                "https://api.openai.com/v1/openai/models?api-version=2024-10-21",
                "api-key",
                "sk-team-a-0123456789",
            ),
            (
                ModelProvider::Anthropic,
                "https://api.openai.com/v1/v1/models?limit=1",
                "x-api-key",
                "sk-team-a-0123456789",
            ),
            (
                ModelProvider::Gemini,
                "https://api.openai.com/v1/v1beta/models/gemini-2.5-flash",
                "x-goog-api-key",
                "sk-team-a-0123456789",
            ),
        ];
        for (provider, url, header, value) in cases {
            let (found_url, headers) = request(&connection(provider, "https://api.openai.com/v1/")).expect("probed");
            assert_eq!(found_url, url, "{provider:?}");
            assert_eq!(headers[0], (header, value.to_string()), "{provider:?}");
        }
        assert!(
            request(&connection(ModelProvider::Bedrock, "https://bedrock-runtime.us-east-1.amazonaws.com")).is_none()
        );
        let mut keyless = connection(ModelProvider::OpenAICompatible, "http://127.0.0.1:8000/v1");
        keyless.credentials = Credentials::None;
        assert_eq!(request(&keyless).expect("probed").1, []);
    }

    #[test]
    fn redaction_removes_the_key_and_header_values() {
        let c = connection(ModelProvider::OpenAI, "https://x");
        let text = redact("Incorrect API key provided: sk-team-a-0123456789 (route route-secret)", &c);
        assert_eq!(text, "Incorrect API key provided: <redacted> (route <redacted>)");
    }

    #[tokio::test]
    async fn a_refused_key_and_a_closed_port_are_unavailable_without_the_key_in_the_message_and_a_per_user_model_is_up()
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let app = axum::Router::new().route(
            "/v1/models",
            axum::routing::get(|headers: axum::http::HeaderMap| async move {
                let key = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                (axum::http::StatusCode::UNAUTHORIZED, format!("{{\"error\": \"Incorrect API key provided: {key}\"}}"))
            }),
        );
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let refused = probe(&connection(ModelProvider::OpenAI, &format!("http://{address}/v1"))).await;
        assert_eq!((refused.available, refused.reason), (Some(false), "Unauthorized"));
        assert!(refused.message.contains("401") && refused.message.contains("<redacted>"), "{}", refused.message);
        assert!(!refused.message.contains("0123456789"), "{}", refused.message);
        let mut per_user = connection(ModelProvider::OpenAICompatible, &format!("http://{address}/v1"));
        per_user.credentials = Credentials::None;
        per_user.caller_audience = Some("model-gateway".into());
        let asked = probe(&per_user).await;
        assert_eq!((asked.available, asked.reason), (Some(true), "PerUserCredentials"), "{}", asked.message);
        server.abort();
        let _ = server.await;
        let closed = probe(&connection(ModelProvider::OpenAI, &format!("http://{address}/v1"))).await;
        assert_eq!((closed.available, closed.reason, closed.latency), (Some(false), "Unreachable", None));
    }
}
