//! `/mcp`: one JSON-RPC message per POST, served in the era its headers and `_meta`
//! choose (`mcp-protocol.md` §3.2, §10). Legacy requests live in sessions minted by
//! `initialize`; modern requests are stateless and must repeat in headers what their body
//! says. A tool call answers with JSON, or with an SSE stream when it asked for progress.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::policy::Slot;
use super::sessions::Sessions;
use crate::guard::FrontEnd;
use crate::mcp::dispatch::{Action, CallJob, Dispatcher, Envelope, envelope};
use crate::mcp::era::{Era, request_meta, validate_modern_meta};
use crate::mcp::progress::ProgressNotifier;
use crate::mcp::protocol::{
    META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, RpcError, SUPPORTED_VERSIONS, code,
    error_frame,
};
use crate::tools::{CallContext, ToolOutput};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
/// Versions whose clients do the handshake; any other `MCP-Protocol-Version` marks a
/// modern request.
const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Gone from modern HTTP (or never offered there): 404 + -32601.
const NOT_MODERN: [&str; 6] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
];
const HEADER_MISMATCH: i64 = -32020;
/// Frames of one streamed call waiting for its client.
const STREAM_BUFFER: usize = 64;

pub struct Endpoint {
    pub dispatcher: Arc<Dispatcher>,
    pub sessions: Sessions,
    /// Cancelled when shutdown's drain period is over: the waits still going end, and
    /// their callers are told the run ids to collect later.
    pub stopping: CancellationToken,
}

pub async fn post(
    State(endpoint): State<Arc<Endpoint>>,
    slot: Option<Extension<Slot>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            RpcError::new(code::PARSE_ERROR, "Parse error."),
        );
    };
    let session = header(&headers, SESSION_HEADER);
    // A response from the client (to a request we never send) is acknowledged like a
    // notification.
    if message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some())
    {
        return StatusCode::ACCEPTED.into_response();
    }
    let (id, method, params) = match envelope(message) {
        Envelope::Request { id, method, params } => (id, method, params),
        Envelope::Other(Action::Reply(frame)) => return json(StatusCode::BAD_REQUEST, frame),
        Envelope::Other(action) => {
            if let Some(session) = &session {
                if !endpoint.sessions.touch(session) {
                    return session_unknown(&Value::Null);
                }
                if let Action::Cancel(request) = action {
                    endpoint.sessions.cancel(session, &request.to_string());
                }
            }
            return StatusCode::ACCEPTED.into_response();
        }
    };
    let has_version_meta =
        request_meta(&params).is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION));
    let modern_header =
        header(&headers, VERSION_HEADER).is_some_and(|v| !HANDSHAKE_VERSIONS.contains(&v.as_str()));
    let slot = slot.and_then(|Extension(slot)| slot.take());
    if session.is_none() && (has_version_meta || modern_header) {
        modern(&endpoint, &headers, id, &method, params, slot).await
    } else if session.is_none() && method == "server/discover" {
        // The bare dual-era probe (no `_meta`, no modern header): answered as on stdio.
        reply(
            &endpoint,
            endpoint.dispatcher.answer(id, &method, params, Era::Modern),
            Era::Modern,
            None,
            slot,
        )
        .await
    } else {
        legacy(&endpoint, &headers, session, id, &method, params, slot).await
    }
}

/// The modern checks, in the order the conformance suite expects (§5.2, HTTP).
async fn modern(
    endpoint: &Arc<Endpoint>,
    headers: &HeaderMap,
    id: Value,
    method: &str,
    params: Map<String, Value>,
    slot: Option<OwnedSemaphorePermit>,
) -> Response {
    let bad = |e: RpcError| rpc_error(StatusCode::BAD_REQUEST, &id, e);
    let Some(version_header) = header(headers, VERSION_HEADER) else {
        return bad(mismatch(
            "MCP-Protocol-Version is required on 2026-07-28 requests",
        ));
    };
    let meta = request_meta(&params);
    let missing: Vec<&str> = [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES]
        .into_iter()
        .filter(|key| match (meta, *key) {
            (Some(m), META_CLIENT_CAPABILITIES) => !m.get(*key).is_some_and(Value::is_object),
            (Some(m), _) => !m.contains_key(*key),
            (None, _) => true,
        })
        .collect();
    if !missing.is_empty() {
        return bad(RpcError::new(
            code::INVALID_PARAMS,
            format!(
                "Malformed request: _meta must carry {} on every 2026-07-28 request.",
                missing.join(" and ")
            ),
        )
        .with_data(json!({ "missing": missing })));
    }
    let meta_version = meta.and_then(|m| m.get(META_PROTOCOL_VERSION));
    if meta_version.and_then(Value::as_str) != Some(version_header.as_str()) {
        return bad(mismatch("MCP-Protocol-Version differs from _meta"));
    }
    if !SUPPORTED_VERSIONS.contains(&version_header.as_str()) {
        // validate_modern_meta words the -32022 with its data.
        if let Err(e) = validate_modern_meta(method, &params) {
            return bad(e);
        }
    }
    if header(headers, METHOD_HEADER).as_deref() != Some(method) {
        return bad(mismatch("Mcp-Method"));
    }
    let named = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(field) = named {
        let expected = params.get(field).and_then(Value::as_str);
        if expected.is_none() || header(headers, NAME_HEADER).as_deref() != expected {
            return bad(mismatch("Mcp-Name"));
        }
    }
    if NOT_MODERN.contains(&method) {
        return rpc_error(
            StatusCode::NOT_FOUND,
            &id,
            RpcError::method_not_found(method),
        );
    }
    if let Err(e) = validate_modern_meta(method, &params) {
        return bad(e);
    }
    let action = endpoint.dispatcher.answer(id, method, params, Era::Modern);
    reply(endpoint, action, Era::Modern, None, slot).await
}

async fn legacy(
    endpoint: &Arc<Endpoint>,
    headers: &HeaderMap,
    session: Option<String>,
    id: Value,
    method: &str,
    params: Map<String, Value>,
    slot: Option<OwnedSemaphorePermit>,
) -> Response {
    if method == "initialize" {
        let action = endpoint.dispatcher.answer(id, method, params, Era::Legacy);
        let mut response = reply(endpoint, action, Era::Legacy, None, slot).await;
        if response.status() == StatusCode::OK
            && let Ok(value) = HeaderValue::from_str(&endpoint.sessions.create())
        {
            response
                .headers_mut()
                .insert(HeaderName::from_static(SESSION_HEADER), value);
        }
        return response;
    }
    let Some(session) = session else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &id,
            RpcError::new(
                code::INVALID_REQUEST,
                "Bad request: no Mcp-Session-Id. Send initialize first, or send a 2026-07-28 request.",
            ),
        );
    };
    if !endpoint.sessions.touch(&session) {
        return session_unknown(&id);
    }
    if let Some(version) = header(headers, VERSION_HEADER)
        && !HANDSHAKE_VERSIONS.contains(&version.as_str())
    {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &id,
            RpcError::new(
                code::INVALID_REQUEST,
                format!(
                    "Bad request: unsupported MCP-Protocol-Version for this session. Supported: {}.",
                    HANDSHAKE_VERSIONS.join(", ")
                ),
            ),
        );
    }
    let action = endpoint.dispatcher.answer(id, method, params, Era::Legacy);
    reply(endpoint, action, Era::Legacy, Some(session), slot).await
}

/// Turns the dispatcher's answer into an HTTP response.
async fn reply(
    endpoint: &Arc<Endpoint>,
    action: Action,
    era: Era,
    session: Option<String>,
    slot: Option<OwnedSemaphorePermit>,
) -> Response {
    match action {
        Action::Reply(frame) => {
            let not_found = era == Era::Modern
                && frame["error"]["code"].as_i64() == Some(code::METHOD_NOT_FOUND);
            let status = if not_found {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::OK
            };
            json(status, frame)
        }
        Action::Call(job) => call(endpoint, job, session, slot).await,
        Action::Cancel(_) | Action::Nothing => StatusCode::ACCEPTED.into_response(),
    }
}

/// A tool call through the guard. Validation and the rate limit answer at once; an
/// admitted call runs in its own task, so a client that goes away cannot cut its audit
/// record short. Modern: closing the response is the cancellation. Legacy: it is not;
/// `notifications/cancelled` in the session is.
async fn call(
    endpoint: &Arc<Endpoint>,
    job: CallJob,
    session: Option<String>,
    slot: Option<OwnedSemaphorePermit>,
) -> Response {
    let dispatcher = endpoint.dispatcher.clone();
    let tools = dispatcher.tools().clone();
    let admitted = match tools
        .validate(FrontEnd::McpHttp, &job.tool, &job.arguments)
        .and_then(|validated| tools.admit(validated))
    {
        Ok(admitted) => admitted,
        Err(refusal) => return json(StatusCode::OK, dispatcher.call_reply(&job, &refusal)),
    };
    let token = endpoint.stopping.child_token();
    let request_key = job.id.to_string();
    if let Some(session) = &session {
        endpoint
            .sessions
            .register(session, &request_key, token.clone());
    }
    let (frames, mut rx) = mpsc::channel::<Value>(STREAM_BUFFER);
    let streamed = job.progress_token.is_some();
    let ctx = CallContext {
        progress: job
            .progress_token
            .clone()
            .map(|t| ProgressNotifier::sink(t, frames.clone())),
        cancel: token.clone(),
        ..CallContext::default()
    };
    let cancel_on_close = (job.era == Era::Modern).then(|| token.clone().drop_guard());
    let endpoint_ = endpoint.clone();
    tokio::spawn(async move {
        let output = tools.run(admitted, &ctx).await;
        if let Some(session) = &session {
            endpoint_.sessions.unregister(session, &request_key);
        }
        let output = match output {
            Some(output) => Some(output),
            // Cut short by shutdown: say so, with the runs to collect later.
            None if endpoint_.stopping.is_cancelled() => Some(shutting_down(&ctx)),
            // The client cancelled: no reply, but the runs are named on stderr.
            None => {
                for id in ctx.run_ids.take() {
                    tracing::warn!(tool = %job.tool, response_id = %id, "stopped waiting for research run {id}; it may still be running");
                }
                None
            }
        };
        if let Some(output) = output {
            let _ = frames.send(dispatcher.call_reply(&job, &output)).await;
        }
    });
    if streamed {
        return stream(rx, cancel_on_close, slot);
    }
    let frame = rx.recv().await;
    if let Some(guard) = cancel_on_close {
        guard.disarm();
    }
    drop(slot);
    match frame {
        Some(frame) => json(StatusCode::OK, frame),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// The call's frames as SSE: progress notifications, then the response, then the end.
/// The stream owns the in-flight slot and, in the modern era, the cancel-on-close guard.
fn stream(
    rx: mpsc::Receiver<Value>,
    cancel_on_close: Option<DropGuard>,
    slot: Option<OwnedSemaphorePermit>,
) -> Response {
    let state = (rx, cancel_on_close, slot);
    let events = futures_util::stream::unfold(state, |(mut rx, guard, slot)| async move {
        let frame = rx.recv().await?;
        let event = Event::default().event("message").data(frame.to_string());
        Some((Ok::<_, Infallible>(event), (rx, guard, slot)))
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response();
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn shutting_down(ctx: &CallContext) -> ToolOutput {
    let ids = ctx.run_ids.take();
    let mut text = "The server is shutting down, so it stopped waiting.".to_owned();
    for id in ids {
        text.push_str(&format!(" Research run {id} may still be running: collect it later with perplexity_agent_result."));
    }
    ToolOutput::error(text)
}

/// GET: we offer no standalone server-to-client stream, in either era.
pub async fn get() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "POST, DELETE")]).into_response()
}

/// DELETE ends a legacy session (and the waits of its calls).
pub async fn delete(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap) -> Response {
    match header(&headers, SESSION_HEADER) {
        None => (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "POST")]).into_response(),
        Some(session) if endpoint.sessions.remove(&session) => {
            StatusCode::NO_CONTENT.into_response()
        }
        Some(_) => session_unknown(&Value::Null),
    }
}

fn session_unknown(id: &Value) -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        id,
        RpcError::new(
            code::INVALID_REQUEST,
            "Session not found (it ended or expired): send initialize again.",
        ),
    )
}

fn mismatch(what: &str) -> RpcError {
    RpcError::new(HEADER_MISMATCH, format!("Header mismatch: {what}."))
}

/// A header's value: trimmed, `=?base64?…?=` decoded, `None` when absent or not text.
fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    let value = headers.get(name)?.to_str().ok()?.trim();
    if let Some(encoded) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        return String::from_utf8(bytes).ok();
    }
    Some(value.to_owned())
}

fn json(status: StatusCode, frame: Value) -> Response {
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        Bytes::from(frame.to_string()),
    )
        .into_response()
}

fn rpc_error(status: StatusCode, id: &Value, error: RpcError) -> Response {
    json(status, error_frame(id, &error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_trimmed_and_decoded() {
        let mut h = HeaderMap::new();
        h.insert("mcp-name", HeaderValue::from_static("  echo  "));
        assert_eq!(header(&h, "mcp-name").as_deref(), Some("echo"));
        // "héllo" in base64.
        h.insert("mcp-name", HeaderValue::from_static("=?base64?aMOpbGxv?="));
        assert_eq!(header(&h, "mcp-name").as_deref(), Some("héllo"));
        h.insert("mcp-name", HeaderValue::from_static("=?base64?***?="));
        assert_eq!(header(&h, "mcp-name"), None);
        assert_eq!(header(&h, "mcp-method"), None);
    }
}
