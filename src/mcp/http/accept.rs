//! Connections: accepted under a cap, served by hyper's HTTP/1 with a header deadline and
//! a header size limit. `axum::serve` sets neither (no timer, hyper's 400 KiB buffer), so
//! a client that trickles headers would hold a connection and its memory for ever. Every
//! byte a client takes is stamped on the server's [`Progress`], so shutdown waits for a
//! slow reader and gives up only on a stuck one.

use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::drain::Progress;

/// hyper's read buffer, which bounds a request's headers: far above any MCP client's
/// (a bearer token and a few `Mcp-*` headers), and what a connection costs at most before
/// it has said who it is. Larger heads get 431.
pub(super) const MAX_HEAD_BYTES: usize = 32 * 1024;

#[derive(Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    /// Also ends idle keep-alive connections: hyper arms it whenever it waits for a head.
    pub header_timeout: Duration,
}

/// A connection whose writes stamp `progress` (reads pass through untouched).
struct Stamped {
    stream: TcpStream,
    progress: Arc<Progress>,
}

impl Stamped {
    /// A write that moved bytes is the client taking them.
    fn stamp(&self, written: Poll<std::io::Result<usize>>) -> Poll<std::io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = &written
            && *n > 0
        {
            self.progress.stamp();
        }
        written
    }
}

impl AsyncRead for Stamped {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.stamp(written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.stamp(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Serves `app` until `stop` is cancelled, then lets every connection finish its
/// responses (hyper's graceful shutdown) and returns once all are closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
    progress: Arc<Progress>,
) {
    // A connection holds its permit until it closes: at the cap, new connections wait
    // in the kernel's backlog instead of costing memory here.
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = stop.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(kind = ?e.kind(), "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let (stream, peer) = stream;
        let _ = stream.set_nodelay(true);
        // The peer address rides on the requests that read it: `/metrics` without a token
        // answers loopback peers only (a request it misses finds no peer and is refused).
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            app.clone(),
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                if request.uri().path() == "/metrics" {
                    request
                        .extensions_mut()
                        .insert(axum::extract::ConnectInfo(peer));
                }
                request
            },
        ));
        let stop = stop.clone();
        let header_timeout = limits.header_timeout;
        let stream = Stamped {
            stream,
            progress: progress.clone(),
        };
        tokio::spawn(async move {
            crate::telemetry::connection(1.0);
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_buf_size(MAX_HEAD_BYTES);
            let mut conn = pin!(builder.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                _ = conn.as_mut() => {}
                () = stop.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            crate::telemetry::connection(-1.0);
            drop(permit);
        });
    }
    drop(listener);
    // Every permit back means every connection has closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = permits.acquire_many(all).await;
}
