//! The admission webhook server: AdmissionReview v1 over TLS.
//!
//! Routes: `POST /validate` (Agent and AgentRun), `POST /mutate` (Agent: derive `spec.isSubagent`),
//! `GET /healthz`. A body that is not a review answers 400 with the reason. The certificate and key are
//! re-read when their files change, so a rotated certificate (cert-manager, a renewed Secret) is served
//! without a restart.

pub mod admission;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use hyper_util::rt::TokioTimer;
use tower_http::timeout::TimeoutLayer;

pub use admission::{Admission, BadReview};

/// The default of [`ServeOptions::header_read_timeout`].
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, its body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest review body accepted, in bytes: an object and its old version, each up to etcd's 1.5 MiB.
const MAX_REVIEW_BYTES: usize = 8 * 1024 * 1024;

/// Why the webhook server could not run.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The certificate or key could not be loaded.
    #[error("cannot load the TLS certificate {cert} and key {key}")]
    Tls {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The listener failed.
    #[error("the webhook server on {addr} failed")]
    Serve {
        /// The listen address.
        addr: SocketAddr,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// The HTTP routes of the webhook, without TLS (the server adds it).
pub fn router(admission: Admission) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
        .with_state(admission)
}

async fn validate(State(admission): State<Admission>, body: Bytes) -> Response {
    answer(admission.validate(&body).await)
}

async fn mutate(State(admission): State<Admission>, body: Bytes) -> Response {
    answer(admission.mutate(&body).await)
}

fn answer(result: Result<kube::core::admission::AdmissionReview<kube::core::DynamicObject>, BadReview>) -> Response {
    match result {
        Ok(review) => axum::Json(review).into_response(),
        Err(err) => {
            tracing::warn!(error = %err, "rejected a malformed admission review");
            (StatusCode::BAD_REQUEST, err.to_string()).into_response()
        }
    }
}

/// Where the server listens and what it serves with.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The PEM certificate chain file.
    pub tls_cert: PathBuf,
    /// The PEM private key file.
    pub tls_key: PathBuf,
    /// How often the certificate files are checked for changes.
    pub reload_interval: Duration,
    /// How long a client may take to send a request's headers, and may sit idle between requests.
    pub header_read_timeout: Duration,
}

/// Serves the webhook until `handle` is told to shut down.
///
/// Errors: [`WebhookError::Tls`] when the certificate or key cannot be loaded at start,
/// [`WebhookError::Serve`] when the listener fails. A certificate that fails to load on a later reload
/// is logged and the previous one stays in use.
pub async fn serve(
    options: ServeOptions,
    admission: Admission,
    handle: Handle<SocketAddr>,
) -> Result<(), WebhookError> {
    let tls_error = |source| WebhookError::Tls { cert: options.tls_cert.clone(), key: options.tls_key.clone(), source };
    let files = read_pair(&options.tls_cert, &options.tls_key).await.map_err(tls_error)?;
    let config = RustlsConfig::from_pem(files.0.clone(), files.1.clone()).await.map_err(tls_error)?;
    let reloader = tokio::spawn(watch_certificate(config.clone(), options.clone(), files));
    tracing::info!(listen = %options.listen, "serving the admission webhook");
    let mut server = axum_server::bind_rustls(options.listen, config)
        .handle(handle)
        .first_request_timeout(options.header_read_timeout);
    // A client that sends its headers or body too slowly, or sits idle, is dropped rather than holding
    // a connection (and a file handle) forever. The API server gives a webhook at most 30 s anyway.
    let idle = options.header_read_timeout;
    server.http_builder().http1().timer(TokioTimer::new()).header_read_timeout(idle);
    server.http_builder().http2().timer(TokioTimer::new()).keep_alive_interval(Some(idle)).keep_alive_timeout(idle);
    let app = router(admission).layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT));
    let result = server
        .serve(app.into_make_service())
        .await
        .map_err(|source| WebhookError::Serve { addr: options.listen, source });
    reloader.abort();
    result
}

async fn read_pair(cert: &Path, key: &Path) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    Ok((tokio::fs::read(cert).await?, tokio::fs::read(key).await?))
}

/// Re-reads the certificate and key every `reload_interval` and swaps them in when either changed.
/// Comparing contents (not modification times) also catches the symlink swap a kubelet does when it
/// updates a mounted Secret.
async fn watch_certificate(config: RustlsConfig, options: ServeOptions, mut current: (Vec<u8>, Vec<u8>)) {
    let mut ticker = tokio::time::interval(options.reload_interval);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let files = match read_pair(&options.tls_cert, &options.tls_key).await {
            Ok(files) => files,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the TLS files; keeping the current certificate");
                continue;
            }
        };
        if files == current {
            continue;
        }
        match config.reload_from_pem(files.0.clone(), files.1.clone()).await {
            Ok(()) => {
                tracing::info!(cert = %options.tls_cert.display(), "reloaded the TLS certificate");
                current = files;
            }
            Err(err) => {
                tracing::warn!(error = %err, "the changed TLS files do not load; keeping the current certificate")
            }
        }
    }
}
