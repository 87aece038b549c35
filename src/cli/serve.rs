//! The HTTP server start-up the facade (`api`, `local`) and the controller's health endpoints share, and
//! the shutdown signal every serving role stops on.
//!
//! The webhook serves TLS with a certificate that reloads, from inside the `webhook` role (whose tests
//! drive it with their own handle), so it shares only [`shutdown_signal`] and [`stop_gracefully`].

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum_server::Handle;

/// How long a client may take to send a request's headers, or sit idle between requests.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long requests under way (long polls, event streams) get to finish on shutdown.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Binds a TCP listener on `listen`. Errors: the address cannot be bound ("cannot listen on ...").
pub fn bind(listen: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    std::net::TcpListener::bind(listen).map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets requests under way finish for
/// [`SHUTDOWN_GRACE`]. Clients that send no request, send headers too slowly or sit idle are dropped after
/// [`HEADER_READ_TIMEOUT`], so they cannot hold connections forever; at most `max_connections` are held
/// at once ([`super::connections`]). Errors: the listener fails.
pub async fn serve(
    listener: std::net::TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    max_connections: usize,
) -> std::io::Result<()> {
    let handle = Handle::new();
    tokio::spawn(stop_gracefully(handle.clone(), shutdown, SHUTDOWN_GRACE));
    listener.set_nonblocking(true)?;
    // A connection that sends no request at all is closed too: hyper's header timeout starts only with
    // the first byte.
    let mut server = axum_server::from_tcp(listener)?
        .handle(handle)
        .first_request_timeout(HEADER_READ_TIMEOUT)
        .acceptor(super::connections::CappedAcceptor::new(max_connections));
    let timer = hyper_util::rt::TokioTimer::new;
    server.http_builder().http1().timer(timer()).header_read_timeout(HEADER_READ_TIMEOUT);
    server
        .http_builder()
        .http2()
        .timer(timer())
        .keep_alive_interval(Some(HEADER_READ_TIMEOUT))
        .keep_alive_timeout(HEADER_READ_TIMEOUT);
    // The peer's address reaches the handlers (login failures are counted per client).
    server.serve(app.into_make_service_with_connect_info::<SocketAddr>()).await
}

/// Waits for `shutdown`, then tells the server behind `handle` to stop accepting and to let open requests
/// finish for up to `grace`.
pub async fn stop_gracefully(handle: Handle<SocketAddr>, shutdown: impl Future<Output = ()>, grace: Duration) {
    shutdown.await;
    handle.graceful_shutdown(Some(grace));
}

/// Resolves on SIGTERM (what a kubelet sends) or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down");
}
