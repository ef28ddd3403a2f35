//! The Streamable HTTP transport: `POST /mcp` with JSON responses, session ids,
//! header recording (`GET /_headers`), and the `--redirect-to` / `--require-header`
//! behaviours.

use std::collections::{BTreeMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::io::Write;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::protocol::{Incoming, Server, classify};

pub const SESSION_HEADER: &str = "mcp-session-id";

/// HTTP-only options.
#[derive(Debug, Clone)]
pub struct HttpOpts {
    pub bind: IpAddr,
    pub port: u16,
    pub redirect_to: Option<HeaderValue>,
    pub require_header: Option<(HeaderName, HeaderValue)>,
}

struct App {
    server: Arc<Server>,
    opts: HttpOpts,
    sessions: Mutex<HashSet<String>>,
    recorded: Mutex<Vec<Value>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn new_session_id() -> String {
    // RandomState is randomly keyed per process (and per instance), which is plenty
    // for a test server's session ids.
    let a = RandomState::new().hash_one(std::process::id());
    let b = RandomState::new().hash_one(std::time::SystemTime::now());
    format!("{a:016x}{b:016x}")
}

/// Binds, prints `listening on http://ADDR` (flushed) and serves until an I/O error.
pub async fn run(server: Arc<Server>, opts: HttpOpts) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind((opts.bind, opts.port)).await?;
    let addr = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on http://{addr}")?;
        stdout.flush()?;
    }
    let app = Arc::new(App {
        server,
        opts,
        sessions: Mutex::new(HashSet::new()),
        recorded: Mutex::new(Vec::new()),
    });
    let router = Router::new()
        .route("/mcp", post(post_mcp).get(get_mcp).delete(delete_mcp))
        .route("/_headers", get(get_headers))
        .with_state(app);
    axum::serve(listener, router).await
}

fn record(app: &App, headers: &HeaderMap) {
    let mut obj: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        obj.entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    lock(&app.recorded).push(json!(obj));
}

fn json_body(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

async fn post_mcp(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    record(&app, &headers);
    if let Some(location) = &app.opts.redirect_to {
        return (
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, location.clone())],
        )
            .into_response();
    }
    if let Some((name, value)) = &app.opts.require_header {
        let mut values = headers.get_all(name).iter();
        let ok = values.next() == Some(value) && values.next().is_none();
        if !ok {
            return json_body(
                StatusCode::UNAUTHORIZED,
                &json!({"error": format!("missing or wrong {name} header")}),
            );
        }
    }
    let session = headers
        .get(SESSION_HEADER)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if let Some(s) = &session
        && !lock(&app.sessions).contains(s)
    {
        return json_body(
            StatusCode::NOT_FOUND,
            &json!({"error": "unknown or terminated session"}),
        );
    }
    let session_key = session.unwrap_or_default();
    match classify(body.trim_ascii()) {
        Incoming::Invalid(err) => json_body(StatusCode::BAD_REQUEST, &err),
        Incoming::Response => accepted(),
        Incoming::Notification { method, params } => {
            app.server
                .handle_notification(&session_key, &method, params.as_ref());
            accepted()
        }
        Incoming::Request { id, method, params } => {
            let new_session = (method == "initialize").then(new_session_id);
            let ticket = app
                .server
                .begin(&session_key, &id, &method, params.as_ref());
            let (token, ordinal) = (ticket.token, ticket.ordinal);
            let srv = Arc::clone(&app.server);
            let task = tokio::spawn(async move {
                let reply = srv.handle_request(ordinal, id, &method, params).await;
                drop(ticket);
                reply
            });
            app.server.set_abort(token, task.abort_handle());
            let reply = match task.await {
                Ok(reply) => reply,
                // Cancelled by notifications/cancelled: no JSON-RPC reply.
                Err(e) if e.is_cancelled() => return accepted(),
                Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            };
            let mut response = if app.server.cfg.invalid_frames {
                let body = format!(
                    "data: this is not json\n\ndata: [1,2,3]\n\nevent: message\ndata: {}\n\n",
                    reply.msg
                );
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "text/event-stream")],
                    Body::from(body),
                )
                    .into_response()
            } else {
                json_body(StatusCode::OK, &reply.msg)
            };
            if let Some(s) = new_session {
                if let Ok(v) = HeaderValue::from_str(&s) {
                    response.headers_mut().insert(SESSION_HEADER, v);
                }
                lock(&app.sessions).insert(s);
            }
            if reply.exit_after {
                tokio::spawn(async {
                    // Give the response time to reach the client.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    std::process::exit(0);
                });
            }
            response
        }
    }
}

async fn get_mcp() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "POST, DELETE")],
    )
        .into_response()
}

async fn delete_mcp(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Some(s) = headers.get(SESSION_HEADER) {
        lock(&app.sessions).remove(String::from_utf8_lossy(s.as_bytes()).as_ref());
    }
    StatusCode::OK.into_response()
}

async fn get_headers(State(app): State<Arc<App>>) -> Response {
    let recorded = lock(&app.recorded).clone();
    json_body(StatusCode::OK, &Value::Array(recorded))
}
