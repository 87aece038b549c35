//! What every native client shares: the HTTP client of a Model (its time-outs and CA bundle), the
//! headers sent with every request, and the reading of an error answer ([`super::errors`]).
//!
//! Messages never carry a credential: every key, token and extra header value the client sends is
//! removed from the text of an error before it is built ([`Http::redact`]), since gateways and some
//! providers echo what they were sent.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::connection::Connection;
use super::errors::answer_error;
use super::turn::ModelError;

pub use crate::endpoints::http::{CONNECT_TIMEOUT, READ_TIMEOUT, redact};
/// The most of an error answer that is read, in bytes.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A Model's client cannot be set up. Messages name the Model and the header, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The HTTP client cannot be built (its TLS backend cannot start).
    #[error("model {name:?}: cannot build the HTTP client: {source}")]
    HttpClient {
        /// The Model's name, or the model id.
        name: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The CA bundle holds no readable PEM certificate.
    #[error("model {name:?}: the CA bundle holds no readable PEM certificate")]
    CaBundle {
        /// The Model's name.
        name: String,
    },
    /// A header cannot be sent: its name is not an HTTP token or its value not visible ASCII.
    #[error(
        "model {name:?}: header {header:?} cannot be sent (its name must be an HTTP token, its value visible ASCII)"
    )]
    Header {
        /// The Model's name.
        name: String,
        /// The header's name.
        header: String,
    },
    /// The endpoint lacks what the provider needs (Azure's API version, Bedrock's region).
    #[error("model {name:?}: {what}")]
    Endpoint {
        /// The Model's name.
        name: String,
        /// What is missing.
        what: String,
    },
}

/// The HTTP side of one Model: a client, the headers of every request, and the secrets to keep out of
/// messages.
pub struct Http {
    client: reqwest::Client,
    headers: HeaderMap,
    secrets: Vec<String>,
}

impl Http {
    /// A client for the Model `name`: time-outs [`CONNECT_TIMEOUT`] and [`READ_TIMEOUT`], the PEM
    /// `ca_bundle` in place of the system's roots when set, and `auth` then `extra` headers on every
    /// request (an extra header of the same name replaces an auth header). `secrets` are the credentials
    /// sent some other way (Bedrock's signing keys), also kept out of messages.
    ///
    /// Errors: [`SetupError::CaBundle`], [`SetupError::Header`], [`SetupError::HttpClient`].
    pub fn new(
        name: &str,
        ca_bundle: Option<&str>,
        auth: &[(&str, String)],
        extra: &[(String, String)],
        secrets: Vec<String>,
    ) -> Result<Self, SetupError> {
        let builder = crate::endpoints::http::builder(name, ca_bundle, READ_TIMEOUT)
            .map_err(|_| SetupError::CaBundle { name: name.to_string() })?;
        let client = builder.build().map_err(|source| SetupError::HttpClient { name: name.to_string(), source })?;
        let mut headers = HeaderMap::new();
        let mut all_secrets = secrets;
        let pairs =
            auth.iter().map(|(n, v)| (*n, v.as_str())).chain(extra.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        for (header, value) in pairs {
            let bad = || SetupError::Header { name: name.to_string(), header: header.to_string() };
            let header_name = HeaderName::from_bytes(header.as_bytes()).map_err(|_| bad())?;
            let mut header_value = HeaderValue::from_str(value).map_err(|_| bad())?;
            header_value.set_sensitive(true);
            headers.insert(header_name, header_value);
            all_secrets.push(value.to_string());
        }
        Ok(Self { client, headers, secrets: crate::endpoints::http::sorted_secrets(all_secrets) })
    }

    /// [`Http::new`] for a Model resource: its CA bundle and extra headers, its credentials kept out of
    /// messages.
    pub fn for_connection(connection: &Connection, auth: &[(&str, String)]) -> Result<Self, SetupError> {
        let secrets = crate::endpoints::http::secrets(connection);
        Http::new(&connection.name, connection.ca_bundle.as_deref(), auth, &connection.headers, secrets)
    }

    /// Keeps `more` secrets (credentials obtained later, such as temporary AWS keys) out of messages.
    pub fn with_secrets(&self, more: &[&str]) -> Vec<String> {
        let mut secrets = self.secrets.clone();
        secrets.extend(more.iter().map(|s| s.to_string()));
        crate::endpoints::http::sorted_secrets(secrets)
    }

    /// `text` with every secret this client sends replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        redact(text, &self.secrets)
    }

    /// POSTs `body` to `url` with the Model's headers, then `extra` ones (a signature), and returns the
    /// answer when its status is a success.
    ///
    /// Errors: a refused, broken or timed-out connection is [`ModelError::Transient`]; an error status
    /// is read by [`answer_error`]. Messages are redacted.
    pub async fn post(&self, url: &str, body: Vec<u8>, extra: HeaderMap) -> Result<reqwest::Response, ModelError> {
        let mut headers = self.headers.clone();
        headers.extend(extra);
        let sent = self.client.post(url).headers(headers).body(body).send().await;
        let response = sent.map_err(|e| self.unreachable(e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let mut body = Vec::new();
        let mut response = response;
        while body.len() < MAX_ERROR_BODY {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
        body.truncate(MAX_ERROR_BODY);
        let error = answer_error(status, &headers, &String::from_utf8_lossy(&body));
        Err(self.redacted(error))
    }

    /// POSTs the JSON `body` to `url` as [`Http::post`] does, with `Content-Type: application/json` and
    /// `extra` headers.
    ///
    /// Errors: those of [`json_body`] and [`Http::post`].
    pub async fn post_json(
        &self,
        url: &str,
        body: &serde_json::Value,
        mut extra: HeaderMap,
    ) -> Result<reqwest::Response, ModelError> {
        extra.insert(reqwest::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        self.post(url, json_body(body)?, extra).await
    }

    /// The error of a connection that could not be made or timed out (transient).
    pub fn unreachable(&self, e: reqwest::Error) -> ModelError {
        ModelError::transient(self.redact(&format!("cannot reach the model endpoint: {e}")))
    }

    /// The error of a stream that broke while the answer was read (transient).
    pub fn broken(&self, e: reqwest::Error) -> ModelError {
        ModelError::transient(self.redact(&format!("the model's stream broke: {e}")))
    }

    /// `error` with its message redacted.
    pub fn redacted(&self, error: ModelError) -> ModelError {
        redact_error(error, &self.secrets)
    }

    /// The HTTP client, for requests that carry none of the Model's headers (a credential exchange).
    pub fn client(&self) -> reqwest::Client {
        self.client.clone()
    }
}

/// `error` with each of `secrets` removed from its message.
pub fn redact_error(error: ModelError, secrets: &[String]) -> ModelError {
    match error {
        ModelError::Transient { message, retry_after } => {
            ModelError::Transient { message: redact(&message, secrets), retry_after }
        }
        ModelError::Fatal(message) => ModelError::Fatal(redact(&message, secrets)),
    }
}

/// A request body as JSON bytes (a fatal error, not expected for built requests, when it cannot be).
pub fn json_body(body: &serde_json::Value) -> Result<Vec<u8>, ModelError> {
    serde_json::to_vec(body).map_err(|e| ModelError::fatal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderMap;

    use super::*;

    #[test]
    fn secrets_and_header_values_are_removed_from_messages() {
        let http = Http::new(
            "team-a",
            None,
            &[("x-api-key", "sk-ant-secret-key".to_string())],
            &[("X-Gateway-Token".to_string(), "gateway-secret".to_string())],
            vec!["aws-secret-access-key".to_string()],
        )
        .expect("client");
        let echoed = "invalid key sk-ant-secret-key with gateway-secret and aws-secret-access-key";
        assert_eq!(http.redact(echoed), "invalid key <redacted> with <redacted> and <redacted>");
        let error = http.redacted(answer_error(401, &HeaderMap::new(), &format!(r#"{{"message":"{echoed}"}}"#)));
        assert!(!error.to_string().contains("secret"), "{error}");
    }

    #[test]
    fn a_bad_header_or_ca_bundle_is_refused_without_its_value() {
        let bad = Http::new("m", None, &[], &[("X-Token".into(), "line\nbreak-secret".into())], Vec::new());
        let message = bad.err().expect("refused").to_string();
        assert!(message.contains("X-Token") && !message.contains("secret"), "{message}");
        let no_pem = Http::new("m", Some("not a certificate"), &[], &[], Vec::new());
        assert!(matches!(no_pem, Err(SetupError::CaBundle { .. })));
    }
}
