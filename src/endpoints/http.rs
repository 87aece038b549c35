//! The HTTP client of a Model's endpoint: its extra headers on every request, its CA bundle in place of
//! the system's roots, and bounded connect and read times.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::connection::{Connection, Credentials};

/// How long to wait for a connection to the endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the endpoint may stay silent while an answer streams.
pub const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a Model's HTTP client cannot be built. Names the field at fault, never a value.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A header's name or value is not valid in HTTP (a value with a line break, say).
    #[error(
        "model {model:?}: spec.headers: {name:?} is not a valid HTTP header (name, or a value with control characters)"
    )]
    Header {
        /// The Model's name.
        model: String,
        /// The header's name.
        name: String,
    },
    /// The CA bundle holds no PEM certificate, or one that cannot be read.
    #[error("model {model:?}: spec.caBundleRef: the bundle is not PEM certificates: {message}")]
    CaBundle {
        /// The Model's name.
        model: String,
        /// Why.
        message: String,
    },
    /// The TLS backend cannot start.
    #[error("model {model:?}: cannot build the HTTP client: {source}")]
    Build {
        /// The Model's name.
        model: String,
        /// Why.
        source: reqwest::Error,
    },
}

/// The extra headers of `connection`, checked.
///
/// Errors: [`ClientError::Header`] naming the header.
pub fn headers(connection: &Connection) -> Result<HeaderMap, ClientError> {
    let mut map = HeaderMap::new();
    for (name, value) in &connection.headers {
        let bad = || ClientError::Header { model: connection.name.clone(), name: name.clone() };
        let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?;
        let mut value = HeaderValue::from_str(value).map_err(|_| bad())?;
        value.set_sensitive(true);
        map.insert(header, value);
    }
    Ok(map)
}

/// A client builder for the Model `name`: [`CONNECT_TIMEOUT`], `read_timeout` as the longest silence,
/// and the PEM `ca_bundle` in place of the system's roots when set.
///
/// Errors: [`ClientError::CaBundle`] for a bundle with no readable certificate.
pub fn builder(
    name: &str,
    ca_bundle: Option<&str>,
    read_timeout: Duration,
) -> Result<reqwest::ClientBuilder, ClientError> {
    crate::tls::install_crypto_provider();
    let mut builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).read_timeout(read_timeout);
    if let Some(pem) = ca_bundle {
        let bad = |message: String| ClientError::CaBundle { model: name.to_string(), message };
        let certificates = reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| bad(e.to_string()))?;
        if certificates.is_empty() {
            return Err(bad("no certificate in it".into()));
        }
        builder = builder.tls_certs_only(certificates);
    }
    Ok(builder)
}

/// A client for `connection`'s endpoint, with its extra headers on every request and `read_timeout` as
/// the longest silence.
///
/// Errors: [`ClientError`], naming the header or the CA bundle at fault.
pub fn client(connection: &Connection, read_timeout: Duration) -> Result<reqwest::Client, ClientError> {
    builder(&connection.name, connection.ca_bundle.as_deref(), read_timeout)?
        .default_headers(headers(connection)?)
        .build()
        .map_err(|source| ClientError::Build { model: connection.name.clone(), source })
}

/// Secrets shorter than this are not searched for in messages (they would blank common words).
pub const MIN_SECRET_CHARS: usize = 4;

/// Every credential `connection` sends (its key, its AWS keys, its extra headers' values), longest
/// first, those under [`MIN_SECRET_CHARS`] left out: what [`redact`] removes from messages.
pub fn secrets(connection: &Connection) -> Vec<String> {
    let mut secrets: Vec<String> = connection.headers.iter().map(|(_, value)| value.clone()).collect();
    match &connection.credentials {
        Credentials::ApiKey(key) => secrets.push(key.clone()),
        Credentials::Aws { access_key_id, secret_access_key, session_token } => {
            secrets.extend([access_key_id.clone(), secret_access_key.clone()]);
            secrets.extend(session_token.clone());
        }
        Credentials::None | Credentials::AwsFromEnvironment => {}
    }
    sorted_secrets(secrets)
}

/// `secrets` as [`redact`] wants them: those under [`MIN_SECRET_CHARS`] left out, longest first (so a
/// secret containing another is removed whole).
pub fn sorted_secrets(secrets: Vec<String>) -> Vec<String> {
    crate::run::redact::longest_first(secrets, MIN_SECRET_CHARS)
}

/// `text` with each of `secrets` replaced by `<redacted>`: an endpoint may echo what it was sent.
pub use crate::run::redact::redact;
