//! Connections: accepted under a cap, served by hyper's HTTP/1 with a header deadline and
//! a header size limit. `axum::serve` sets neither (no timer, hyper's 400 KiB buffer), so
//! a client that trickles headers would hold a connection and its memory for ever.

use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// hyper's read buffer, which bounds a request's headers: far above any MCP client's
/// (a bearer token and a few `Mcp-*` headers), and what a connection costs at most before
/// it has said who it is. Larger heads get 431.
const MAX_HEAD_BYTES: usize = 32 * 1024;

pub struct Limits {
    pub max_connections: usize,
    /// Also ends idle keep-alive connections: hyper arms it whenever it waits for a head.
    pub header_timeout: Duration,
}

/// Serves `app` until `stop` is cancelled, then lets every connection finish its
/// responses (hyper's graceful shutdown) and returns once all are closed.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, stop: CancellationToken) {
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
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(kind = ?e.kind(), "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let stop = stop.clone();
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
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
            drop(permit);
        });
    }
    drop(listener);
    // Every permit back means every connection has closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = permits.acquire_many(all).await;
}
