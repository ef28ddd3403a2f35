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

use std::net::SocketAddr;
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

/// Serves the product until SIGTERM/SIGINT; returns the exit code. `state` is the shared
/// state backend's configuration, if any (the start-up summary names where it is).
pub async fn serve(
    dispatcher: Arc<Dispatcher>,
    config: HttpConfig,
    wait_seconds: u64,
    state: Option<&crate::state::StateConfig>,
) -> i32 {
    let product = Arc::new(product::Product {
        dispatcher: dispatcher.clone(),
    });
    let about = About {
        budget: Some(dispatcher.tools().spend().budgets_said()),
        state: Some(state.map_or_else(|| "local".to_owned(), shared_state)),
        tools: Some(dispatcher.tools().clone()),
    };
    let code = serve_about(product, config, Duration::from_secs(wait_seconds), about).await;
    dispatcher.finish().await;
    code
}

/// Serves any [`Handler`] behind the same policy layers. `longest` is the longest a
/// legitimate request may take (the request time limit adds a minute to it).
pub async fn serve_with(handler: Arc<dyn Handler>, config: HttpConfig, longest: Duration) -> i32 {
    serve_about(handler, config, longest, About::default()).await
}

/// What the product knows of itself beyond [`HttpConfig`], for the start-up summary and
/// the clients' tool check; a handler served through [`serve_with`] (the conformance
/// fixture) has none of it, and its summary says only what the transport knows.
#[derive(Default)]
struct About {
    /// `PERPLEXITY_BUDGET_DAILY`/`_MONTHLY`; `None`: not said.
    budget: Option<String>,
    /// `local`, or where the shared backend is; `None`: not said.
    state: Option<String>,
    /// The tools the server offers; `None`: not known, so not checked.
    tools: Option<Arc<crate::tools::Tools>>,
}

/// The shared state backend as the summary shows it: its host and port, never the rest
/// of `PERPLEXITY_STATE_URL` (which may carry a user and a password).
fn shared_state(state: &crate::state::StateConfig) -> String {
    use secrecy::ExposeSecret;
    let Ok(url) = url::Url::parse(state.url.expose_secret()) else {
        return "shared (Redis)".to_owned();
    };
    let tls = if url.scheme() == "rediss" {
        " over TLS"
    } else {
        ""
    };
    match url.host_str() {
        // Redis's own default port, which `url` does not know for its scheme.
        Some(host) => format!(
            "shared (Redis{tls} at {}:{})",
            crate::text::inert_line(host),
            url.port().unwrap_or(6379)
        ),
        None => "shared (Redis)".to_owned(),
    }
}

/// A URL of the OAuth settings as the summary shows it: as written (`iss` and `aud` are
/// compared as text), but a password written into it is masked.
fn shown_url(raw: &str) -> String {
    if let Ok(mut url) = url::Url::parse(raw)
        && url.password().is_some()
        && url.set_password(Some("***")).is_ok()
    {
        return url.to_string();
    }
    crate::text::inert_line(raw)
}

/// The start-up summary, one line after the listening line: how callers authenticate,
/// the budgets, the state backend, the `Host` names accepted and whether metrics are on —
/// what an operator checks first. Never a token, a hash, a key or a password: the auth
/// mode is named, not its secret, and the state backend by host and port.
fn summary(config: &HttpConfig, auth: &policy::Authenticator, about: &About) -> String {
    let auth = match auth {
        policy::Authenticator::Token { .. } => {
            "single token (PERPLEXITY_HTTP_AUTH_TOKEN)".to_owned()
        }
        policy::Authenticator::Clients(clients) => format!(
            "named clients ({}, from {})",
            clients.current().len(),
            crate::text::inert_line(&clients.path().display().to_string())
        ),
        policy::Authenticator::OAuth { verifier, .. } => format!(
            "OAuth (issuer {}, audience {})",
            shown_url(&verifier.config().issuer),
            shown_url(&verifier.config().audience)
        ),
    };
    let mut parts = vec![format!("auth: {auth}")];
    if let Some(budgets) = &about.budget {
        parts.push(format!("budgets: {budgets}"));
    }
    if let Some(state) = &about.state {
        parts.push(format!("state: {state}"));
    }
    let hosts = std::iter::once("loopback".to_owned())
        .chain(
            config
                .allowed_hosts
                .iter()
                .map(|h| crate::text::inert_line(h)),
        )
        .collect::<Vec<_>>()
        .join(", ");
    parts.push(format!("hosts: {hosts}"));
    let metrics = if config.metrics.is_some() {
        "on"
    } else {
        "off"
    };
    parts.push(format!("metrics: {metrics}"));
    parts.join("; ")
}

/// One warning for each named client whose tool list names tools this server does not
/// offer: its list only narrows the server's tools, so it could never call them, and the
/// operator would otherwise learn of it from a client's refused call. A start-up line, so
/// on stderr as the others; each reload says the same through the log (`identity::clients`).
fn warn_of_tools_not_offered(auth: &policy::Authenticator, about: &About) {
    let (policy::Authenticator::Clients(clients), Some(tools)) = (auth, &about.tools) else {
        return;
    };
    for warning in clients
        .current()
        .not_offered_warnings(|tool| tools.is_enabled(tool))
    {
        eprintln!("perplexity-agent: warning: {warning}");
    }
}

/// A listener on `at`, or `None` once it is said why not (`setting` names what chose the
/// address, `other` what to change).
async fn listen(at: SocketAddr, setting: &str, other: &str) -> Option<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(at)
        .await
        .inspect_err(|e| {
            eprintln!(
                "perplexity-agent: cannot listen on {setting}{at}: {}. Choose another {other}address or port.",
                e.kind()
            );
        })
        .ok()
}

/// [`serve_with`], saying at start what `about` knows besides the transport's settings.
async fn serve_about(
    handler: Arc<dyn Handler>,
    config: HttpConfig,
    longest: Duration,
    about: About,
) -> i32 {
    let Some(listener) = listen(config.bind, "", "--bind ").await else {
        return 1;
    };
    let address = listener.local_addr().unwrap_or(config.bind);
    if !config.bind.ip().is_loopback() {
        eprintln!(
            "perplexity-agent: warning: listening on {address}, reachable from other machines. This server speaks plain HTTP: put a TLS-terminating reverse proxy in front of it."
        );
    }
    let stop = CancellationToken::new();
    // The reload of a clients file checks the clients' tools against the server's, as
    // the start does, so it is handed them.
    let offered = about.tools.clone().map(|tools| {
        Arc::new(move |tool: &str| tools.is_enabled(tool)) as crate::identity::clients::Offered
    });
    let auth = match policy::Authenticator::new(&config.auth, &stop, offered) {
        Ok(auth) => Arc::new(auth),
        Err(problem) => {
            eprintln!("perplexity-agent: {problem}");
            return 4;
        }
    };
    // Scripts and tests find the address in this line: its words stay as they are.
    eprintln!("perplexity-agent: MCP over HTTP on http://{address}/mcp");
    eprintln!("perplexity-agent: {}", summary(&config, &auth, &about));

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
    let policy = Arc::new(Policy::new(&config, auth.clone(), longest));
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
        let Some(listener) = listen(access.bind, "PERPLEXITY_METRICS_BIND ", "").await else {
            return 1;
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

    // After every start-up line, and only once the server is sure to start.
    warn_of_tools_not_offered(&auth, &about);
    crate::signals::watch(stop.clone());
    let server = accept::serve(listener, app, limits, stop.clone(), progress.clone());
    tokio::pin!(server);
    // Until a signal, and through the drain period after it, the server runs as usual
    // (the listener is closed; connections finish what they have). The drain's start and
    // end are logged at warn though nothing is wrong: an operator stopping or rolling the
    // server must see them at the default filter (`warn,rmcp=off`). Through tracing, not
    // eprintln, as every event while serving is (the state backend's outage and recovery,
    // a clients file's reload): with the log's time, scrubbed, under PERPLEXITY_LOG.
    let began = std::sync::OnceLock::new();
    // Said once, by whichever notices the signal first: with no connection open, the
    // server may end before the drain's own future has run.
    let announce = || {
        *began.get_or_init(|| {
            tracing::warn!(
                "stop signal received: no new connections are taken, and calls in flight have {}s (PERPLEXITY_HTTP_DRAIN_SECONDS) to finish",
                config.drain.as_secs()
            );
            tokio::time::Instant::now()
        })
    };
    let drained = async {
        stop.cancelled().await;
        announce();
        tokio::time::sleep(config.drain).await;
    };
    tokio::select! {
        () = &mut server => {
            if stop.is_cancelled() {
                tracing::warn!(
                    "drained in {:.1}s: every connection has closed",
                    announce().elapsed().as_secs_f64()
                );
            }
            return 0;
        }
        () = drained => {}
    }
    tracing::warn!(
        "drain period over after {}s: the waits still in flight end now, each caller told which run to collect, and replies are written out before exit",
        config.drain.as_secs()
    );
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
