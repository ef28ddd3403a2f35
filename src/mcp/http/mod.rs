//! Streamable HTTP transport (`serve --http`): `/mcp` for both protocol eras, an
//! unauthenticated `/healthz` that reports liveness only, and `/readyz` (the shared
//! state backend and the upstream circuit, for load balancers).
//!
//! Connections are capped and their heads bounded in size and time (`accept.rs`). Policy
//! is one layer around the endpoint (`policy.rs`), so no handler can forget it, staged so
//! that a client without the token costs nothing but its headers: `Host`/`Origin` (400,
//! 403) → bearer token (401) → admission (in-flight cap → 503, time limit) → body (413,
//! budget → 503, deadline → 408) → `endpoint.rs`. `/healthz` sits outside all of them.
//! On SIGTERM/SIGINT the listener closes, calls in flight get the drain period to
//! finish, then their waits end (never the upstream runs) and each caller is told which
//! run to collect later; every response is then written whole, however slowly its client
//! reads (only one that takes nothing for [`STUCK_PEER`] is given up on), and tasks and
//! promised side effects are settled before the process exits.
//!
//! With `PERPLEXITY_METRICS=on`, `/metrics` has a listener of its own
//! (`PERPLEXITY_METRICS_BIND`, loopback by default), where a loopback peer may scrape
//! without a token; on `/mcp`'s listener a scrape always needs `PERPLEXITY_METRICS_TOKEN`.
//!
//! Touches: the TCP listeners; the tools through the guard. No outbound network of its own.

mod accept;
mod endpoint;
mod handler;
mod policy;
mod product;
mod sessions;

pub use handler::{AskError, Handled, Handler, Incoming, Outbound, header_params_of};

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;

use super::dispatch::Dispatcher;
use crate::config::HttpConfig;
use crate::drain::{Progress, STUCK_PEER};
use endpoint::Endpoint;
use policy::Policy;

/// Serves the product until SIGTERM/SIGINT; returns the exit code.
pub async fn serve(dispatcher: Arc<Dispatcher>, config: HttpConfig, wait_seconds: u64) -> i32 {
    let product = Arc::new(product::Product {
        dispatcher: dispatcher.clone(),
    });
    let code = serve_with(product, config, Duration::from_secs(wait_seconds)).await;
    dispatcher.finish().await;
    code
}

/// Serves any [`Handler`] behind the same policy layers. `longest` is the longest a
/// legitimate request may take (the request time limit adds a minute to it).
pub async fn serve_with(handler: Arc<dyn Handler>, config: HttpConfig, longest: Duration) -> i32 {
    let listener = match tokio::net::TcpListener::bind(config.bind).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!(
                "perplexity-agent: cannot listen on {}: {}. Choose another --bind address or port.",
                config.bind,
                e.kind()
            );
            return 1;
        }
    };
    let address = listener.local_addr().unwrap_or(config.bind);
    if !config.bind.ip().is_loopback() {
        eprintln!(
            "perplexity-agent: warning: listening on {address}, reachable from other machines. This server speaks plain HTTP: put a TLS-terminating reverse proxy in front of it."
        );
    }
    let stop = CancellationToken::new();
    let auth = match policy::Authenticator::new(&config.auth, &stop) {
        Ok(auth) => Arc::new(auth),
        Err(problem) => {
            eprintln!("perplexity-agent: {problem}");
            return 4;
        }
    };
    eprintln!("perplexity-agent: MCP over HTTP on http://{address}/mcp");

    let endpoint = Arc::new(Endpoint {
        handler,
        auth: auth.clone(),
        sessions: Arc::new(sessions::Sessions::default()),
        stopping: CancellationToken::new(),
    });
    let metadata = auth.verifier().map(|v| Arc::new(v.metadata().to_string()));
    if config.metrics.is_some()
        && let Err(problem) = crate::telemetry::install()
    {
        eprintln!("perplexity-agent: {problem}");
        return 4;
    }
    let policy = Arc::new(Policy::new(&config, auth, longest));
    let mut app = router(endpoint.clone(), policy.clone(), metadata);
    // Readiness for load balancers, unauthenticated and without detail (which dependency
    // is down is the operator's to read in the log, `doctor` and /metrics). Not ready from
    // the moment a stop signal arrives, so no new caller is sent here while it drains.
    {
        let (endpoint, stop) = (endpoint.clone(), stop.clone());
        app = app.route(
            "/readyz",
            get(move |headers: axum::http::HeaderMap| {
                let ready = !stop.is_cancelled() && endpoint.handler.ready();
                async move {
                    policy::head_refused(&headers).unwrap_or_else(|| {
                        if ready {
                            "ready\n".into_response()
                        } else {
                            policy::plain(StatusCode::SERVICE_UNAVAILABLE, "not ready")
                        }
                    })
                }
            }),
        );
    }
    let limits = accept::Limits {
        max_connections: config.max_connections,
        header_timeout: config.read_timeout,
    };
    let progress = Arc::new(Progress::default());
    if let Some(access) = config.metrics.clone() {
        // The metrics listener is apart from /mcp's: a reverse proxy in front of /mcp
        // forwards from a loopback address too, so on /mcp's listener a loopback peer
        // proves nothing, and a scrape there needs the metrics token.
        let listener = match tokio::net::TcpListener::bind(access.bind).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!(
                    "perplexity-agent: cannot listen on PERPLEXITY_METRICS_BIND {}: {}. Choose another address or port.",
                    access.bind,
                    e.kind()
                );
                return 1;
            }
        };
        let at = listener.local_addr().unwrap_or(access.bind);
        let who = match (&access.token, at.ip().is_loopback()) {
            (Some(_), _) => "with PERPLEXITY_METRICS_TOKEN",
            (None, true) => "to loopback peers",
            (None, false) => {
                "to loopback peers only (set PERPLEXITY_METRICS_TOKEN to scrape from elsewhere)"
            }
        };
        eprintln!("perplexity-agent: metrics on http://{at}/metrics, {who}");
        let scrape_route = |access: crate::config::MetricsAccess| {
            let (endpoint, policy) = (endpoint.clone(), policy.clone());
            get(move |request: axum::extract::Request| {
                scrape(endpoint.clone(), policy.clone(), access.clone(), request)
            })
        };
        let metrics = Router::new().route("/metrics", scrape_route(access.clone()));
        tokio::spawn(accept::serve(
            listener,
            metrics,
            limits,
            stop.clone(),
            Arc::new(Progress::default()),
        ));
        if access.token.is_some() {
            app = app.route("/metrics", scrape_route(access));
        }
    }

    crate::signals::watch(stop.clone());
    let server = accept::serve(listener, app, limits, stop.clone(), progress.clone());
    tokio::pin!(server);
    // Until a signal, and through the drain period after it, the server runs as usual
    // (the listener is closed; connections finish what they have).
    let drained = async {
        stop.cancelled().await;
        tokio::time::sleep(config.drain).await;
    };
    tokio::select! {
        () = &mut server => return 0,
        () = drained => {}
    }
    // Waits end now, and every caller is answered (a call cut mid-create once Perplexity
    // names its run). The silence is counted from here: answers still being computed
    // are ours, and a client that reads is never cut off.
    endpoint.stopping.cancel();
    progress.stamp();
    tokio::select! {
        () = &mut server => {}
        () = progress.silent(STUCK_PEER) => {
            tracing::warn!(
                "exiting with connections open: their clients took nothing for {}s",
                STUCK_PEER.as_secs()
            );
        }
    }
    0
}

/// `GET /metrics`: the Prometheus text exposition, to whoever `policy::metrics_refused`
/// lets through; the gauges only the handler knows are read now.
async fn scrape(
    endpoint: Arc<Endpoint>,
    policy: Arc<Policy>,
    access: crate::config::MetricsAccess,
    request: axum::extract::Request,
) -> axum::response::Response {
    if let Some(refused) = policy::metrics_refused(&policy, &request, &access) {
        return refused;
    }
    endpoint.handler.observe();
    crate::telemetry::sessions(endpoint.sessions.len());
    let text = crate::telemetry::render().unwrap_or_default();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

fn router(endpoint: Arc<Endpoint>, policy: Arc<Policy>, metadata: Option<Arc<String>>) -> Router {
    let mcp = Router::new()
        .route(
            "/mcp",
            post(endpoint::post)
                .get(endpoint::get)
                .delete(endpoint::delete),
        )
        .with_state(endpoint)
        // One layer for the whole policy (its stages in order: see policy.rs); the body
        // cap is its own, so axum's 2 MB default (the `Bytes` extractor's) is never used.
        .layer(from_fn_with_state(policy, policy::gate));
    let mut app = Router::new();
    // RFC 9728 protected-resource metadata, public by design (a client reads it to learn
    // where to get a token), at the root and in the path-suffixed form for `/mcp`.
    if let Some(metadata) = metadata {
        let document = move |headers: axum::http::HeaderMap| {
            let metadata = metadata.clone();
            async move {
                policy::head_refused(&headers).unwrap_or_else(|| {
                    (
                        [
                            (axum::http::header::CONTENT_TYPE, "application/json"),
                            (axum::http::header::CACHE_CONTROL, "max-age=3600"),
                        ],
                        metadata.as_str().to_owned(),
                    )
                        .into_response()
                })
            }
        };
        app = app
            .route(
                "/.well-known/oauth-protected-resource",
                get(document.clone()),
            )
            .route("/.well-known/oauth-protected-resource/mcp", get(document));
    }
    app
        // Liveness only, outside every limit but the head's: it answers however busy
        // `/mcp` is.
        .route(
            "/healthz",
            get(|headers: axum::http::HeaderMap| async move {
                policy::head_refused(&headers).unwrap_or_else(|| "ok\n".into_response())
            }),
        )
        .merge(mcp)
        .fallback(|headers: axum::http::HeaderMap| async move {
            policy::head_refused(&headers).unwrap_or_else(|| {
                policy::plain(
                    StatusCode::NOT_FOUND,
                    "Not found. The MCP endpoint is /mcp.",
                )
            })
        })
}
