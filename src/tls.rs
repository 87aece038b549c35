//! The process-wide TLS crypto provider.

/// Makes `ring` the process's rustls crypto provider, once; HTTP clients built afterwards use it. Safe to
/// call from anywhere, any number of times: a provider installed earlier is kept.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Err only means another provider was installed first, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
