//! A cap on the connections a server holds open at once: each accepted connection holds a permit for as
//! long as it lives; a connection beyond the cap is closed at once, so a flood of idle connections cannot
//! starve the ones that send requests (with `first_request_timeout`, idle ones do not last either).

use std::future::{Ready, ready};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most connections a facade holds open at once (`--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4096;

/// An acceptor of axum-server that admits at most `limit` connections at once.
#[derive(Clone, Debug)]
pub struct CappedAcceptor {
    permits: Arc<Semaphore>,
}

impl CappedAcceptor {
    /// Admits at most `limit` connections at once.
    pub fn new(limit: usize) -> Self {
        Self { permits: Arc::new(Semaphore::new(limit)) }
    }
}

impl<S> axum_server::accept::Accept<tokio::net::TcpStream, S> for CappedAcceptor {
    type Stream = Counted<tokio::net::TcpStream>;
    type Service = S;
    type Future = Ready<io::Result<(Counted<tokio::net::TcpStream>, S)>>;

    /// Admits the connection under the cap, with `TCP_NODELAY`: an event stream writes one small event
    /// at a time, which Nagle's algorithm would hold back until the client acknowledged the last one
    /// (40 ms on Linux).
    fn accept(&self, stream: tokio::net::TcpStream, service: S) -> Self::Future {
        ready(match self.permits.clone().try_acquire_owned() {
            Ok(permit) => stream.set_nodelay(true).map(|()| (Counted { inner: stream, _permit: permit }, service)),
            Err(_) => Err(io::Error::other("too many connections: closed")),
        })
    }
}

/// A connection holding its place under the cap until it is dropped.
#[derive(Debug)]
pub struct Counted<I> {
    inner: I,
    _permit: OwnedSemaphorePermit,
}

impl<I: AsyncRead + Unpin> AsyncRead for Counted<I> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Counted<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
