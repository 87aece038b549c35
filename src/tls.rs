//! The process-wide TLS crypto provider.

/// A TLS client configuration that trusts the platform's roots, as reqwest's own does, made once and
/// cloned (cheaply) for every client: reading and parsing the system's certificates is what building an
/// HTTP client costs, and a run builds one (a profile under load found it most of a run's CPU). Give it
/// to `reqwest::ClientBuilder::tls_backend_preconfigured`. Errors: the platform's roots cannot be read.
pub fn platform_client_config() -> Result<rustls::ClientConfig, String> {
    use rustls_platform_verifier::BuilderVerifierExt;
    static CONFIG: std::sync::OnceLock<Result<rustls::ClientConfig, String>> = std::sync::OnceLock::new();
    CONFIG
        .get_or_init(|| {
            install_crypto_provider();
            rustls::ClientConfig::builder()
                .with_platform_verifier()
                .map(|builder| builder.with_no_client_auth())
                .map_err(|e| format!("the platform's root certificates cannot be read: {e}"))
        })
        .clone()
}

/// Makes `ring` the process's rustls crypto provider, once; HTTP clients built afterwards use it. Safe to
/// call from anywhere, any number of times: a provider installed earlier is kept.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only means another provider was installed first, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
