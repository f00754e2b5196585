//! The accept loop: Gantry's own, instead of `axum::serve`, for what a server facing
//! thousands of browsers needs that `axum::serve` does not give: a cap on open connections
//! (past it: 503 and close), a deadline for a request's headers (slow-loris), and a
//! deadline on writes that stay blocked (a client that stopped reading its live stream
//! holds no memory past it: its connection is dropped, and it resynchronises from a
//! snapshot when it comes back). With a certificate it serves HTTPS (rustls; the
//! handshake has the header deadline too). On shutdown it stops accepting and gives open
//! connections a few seconds to finish.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt;

use crate::metrics::Metrics;

/// What the loop enforces.
#[derive(Clone, Copy, Debug)]
pub struct ConnLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub write_timeout: Duration,
    /// Bytes of each accepted socket's send buffer.
    pub send_buffer: usize,
}

/// How long open connections get to finish after shutdown begins.
const DRAIN: Duration = Duration::from_secs(5);

/// A stream whose writes fail once one has stayed blocked for `timeout`.
pub struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    blocked: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub fn new(inner: S, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            blocked: None,
        }
    }

    /// `Pending` from the inner stream: start (or check) the deadline.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let sleep = self
            .blocked
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.pending(cx),
            done => {
                self.blocked = None;
                done
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.pending(cx),
            done => {
                self.blocked = None;
                done
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.pending(cx),
            done => {
                self.blocked = None;
                done
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The answer to a connection past the cap, written without reading its request.
fn refused() -> Vec<u8> {
    let body =
        "{\"error\":{\"status\":503,\"message\":\"too many connections: try again in a moment\"}}";
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n\
         Retry-After: 1\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n\
         Content-Security-Policy: default-src 'none'; frame-ancestors 'none'\r\n\
         X-Frame-Options: DENY\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn refuse(mut s: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = s.write_all(&refused()).await;
        let _ = s.shutdown().await;
    })
    .await;
}

/// Serves one connection's HTTP on `io` until it ends.
async fn serve_io<I>(
    http: &hyper::server::conn::http1::Builder,
    watcher: hyper_util::server::graceful::Watcher,
    io: I,
    app: Router,
    peer: std::net::SocketAddr,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    if let Err(e) = watcher
        .watch(http.serve_connection(TokioIo::new(io), svc))
        .await
    {
        // A client that went away, timed out or stopped reading: not news.
        tracing::debug!(peer = %peer, error = %e, "connection ended");
    }
}

/// Serves `app` on `listener` until `shutdown` turns true; HTTPS when `tls` is given.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    tls: Option<Arc<rustls::ServerConfig>>,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = async { drop(shutdown.wait_for(|stop| *stop).await) } => break,
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            metrics.connections_refused_total.fetch_add(1, Relaxed);
            tokio::spawn(refuse(stream));
            continue;
        };
        let _ = stream.set_nodelay(true);
        // Without it the kernel grows the buffer to megabytes for a client that reads
        // nothing (on loopback at once); with it, such a client blocks writes early and is
        // dropped at the write deadline.
        if let Err(e) = socket2::SockRef::from(&stream).set_send_buffer_size(limits.send_buffer) {
            tracing::debug!(error = %e, "cannot set a connection's send buffer");
        }
        let (app, http, metrics) = (app.clone(), http.clone(), Arc::clone(&metrics));
        let (tls, watcher) = (tls.clone(), graceful.watcher());
        tokio::spawn(async move {
            let _slot = slot;
            metrics.connections_open.fetch_add(1, Relaxed);
            let io = WriteDeadline::new(stream, limits.write_timeout);
            match tls {
                None => serve_io(&http, watcher, io, app, peer).await,
                Some(acceptor) => {
                    match tokio::time::timeout(limits.header_read_timeout, acceptor.accept(io))
                        .await
                    {
                        Ok(Ok(s)) => serve_io(&http, watcher, s, app, peer).await,
                        Ok(Err(e)) => {
                            tracing::debug!(peer = %peer, error = %e, "TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(peer = %peer, "TLS handshake timed out"),
                    }
                }
            }
            metrics.connections_open.fetch_sub(1, Relaxed);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("connections still open after the drain period were closed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_write_blocked_past_the_deadline_fails() {
        let (a, mut b) = tokio::io::duplex(64);
        let mut w = WriteDeadline::new(a, Duration::from_millis(100));
        // The reader takes nothing: the buffer fills, the write blocks, then fails.
        let started = std::time::Instant::now();
        let err = w.write_all(&[0u8; 4096]).await.expect_err("must time out");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(100));
        // A reader that keeps up is never cut off, however long it takes in all.
        let (a, mut b2) = tokio::io::duplex(64);
        let mut w = WriteDeadline::new(a, Duration::from_millis(100));
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0u8; 64];
            while got < 8192 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                got += b2.read(&mut buf).await.expect("read");
            }
            got
        });
        w.write_all(&[0u8; 8192])
            .await
            .expect("a slow but reading client");
        assert_eq!(reader.await.expect("join"), 8192);
        let mut buf = [0u8; 64];
        assert!(b.read(&mut buf).await.expect("read") > 0);
    }
}
