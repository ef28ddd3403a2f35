//! `/mcp`: one JSON-RPC message per POST, served in the era its headers and `_meta`
//! choose (the MCP specifications of 2025-11-25 and 2026-07-28, whose schemas are in
//! `tests/mcp-schema/`). Legacy requests live in sessions minted by `initialize`; modern
//! requests are stateless and must repeat in headers what their body says. What to
//! answer is the [`Handler`]'s business; this file only decides who may ask what, in
//! which era, and how the answer travels (JSON, or SSE when the handler streams).

use std::borrow::Cow;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::header::AsHeaderName;
use axum::http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::handler::{Handled, Handler, Incoming, Outbound};
use super::policy::{Admission, MAX_BODY_BYTES, plain};
use super::sessions::Sessions;
use crate::identity::Identity;
use crate::mcp::decode::decode;
use crate::mcp::dispatch::{Action, Envelope, envelope};
use crate::mcp::era::{Arrival, Era, decide, request_meta, validate_modern_meta};
use crate::mcp::method::Method;
use crate::mcp::protocol::{
    HANDSHAKE_VERSIONS, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, REPLY_TAIL, RpcError,
    SUPPORTED_VERSIONS, ScrubbedReply, code, error_frame, outbound,
};

// Names made once: a lookup by `&str` parses the name again on every request.
static SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
static VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
static METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
static NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");
const HEADER_MISMATCH: i64 = -32020;
const MISSING_CAPABILITY: i64 = -32021;
/// Frames of one streamed call waiting for its client.
const STREAM_BUFFER: usize = 64;

pub struct Endpoint {
    pub handler: Arc<dyn Handler>,
    /// How callers authenticate: for the 403 of a tool outside an OAuth token's scopes.
    pub auth: Arc<super::policy::Authenticator>,
    pub sessions: Arc<Sessions>,
    /// Cancelled when shutdown's drain period is over: the waits still going end, and
    /// their callers are told the run ids to collect later.
    pub stopping: CancellationToken,
}

pub async fn post(State(endpoint): State<Arc<Endpoint>>, request: Request) -> Response {
    // Boxed, so the request and its decoding are freed before the call waits instead of
    // staying part of its future.
    let (routed, slot) = Box::pin(prepare(&endpoint, request)).await;
    let (request, minted) = match routed {
        Routed::Answered(response) => return response,
        Routed::Call(request) => (request, None),
        Routed::Initialize(request) => {
            let minted = request.session.clone();
            (request, minted)
        }
    };
    let mut response = dispatch(&endpoint, request, slot).await;
    // The session exists while initialize is handled (a handler may keep state for it),
    // and is dropped again unless initialize succeeded.
    if let Some(created) = minted {
        match HeaderValue::from_str(&created) {
            Ok(value) if response.status() == StatusCode::OK => {
                response.headers_mut().insert(SESSION_HEADER.clone(), value);
            }
            _ => {
                endpoint.sessions.remove_minted(&created);
            }
        }
    }
    response
}

/// The message and its headers, read and routed; with the request's in-flight slot.
async fn prepare(endpoint: &Endpoint, request: Request) -> (Routed, Option<OwnedSemaphorePermit>) {
    let (mut parts, body) = request.into_parts();
    // The policy authenticated the request and said who it is; without that, nothing.
    let Some(admission) = parts.extensions.remove::<Admission>() else {
        let refused = plain(StatusCode::UNAUTHORIZED, "Missing or invalid bearer token.");
        return (Routed::Answered(refused), None);
    };
    let (slot, budget) = (admission.take_slot(), admission.take_share());
    let who = admission.who;
    // The policy has read the body already (within its cap): this only takes the bytes.
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        let refused = plain(
            StatusCode::BAD_REQUEST,
            "The request body could not be read.",
        );
        return (Routed::Answered(refused), slot);
    };
    // Header values are slices of hyper's 8 KiB read buffer, so holding them through the
    // call would hold that buffer too (hyper reads on into a fresh one): they go with
    // `parts`, before the call runs.
    (route(endpoint, &parts.headers, body, budget, who), slot)
}

/// What a POST turns out to be, decided from its headers and message alone.
enum Routed {
    /// Answered without the handler.
    Answered(Response),
    /// A request for the handler.
    Call(Incoming),
    /// A legacy `initialize`, in the session minted for it.
    Initialize(Incoming),
}

fn route(
    endpoint: &Endpoint,
    headers: &HeaderMap,
    body: Bytes,
    budget: Option<OwnedSemaphorePermit>,
    who: Identity,
) -> Routed {
    if let Some(refused) = repeated_mcp_header(headers) {
        return Routed::Answered(refused);
    }
    let message = match decode(&body) {
        Ok(message) => message,
        Err(undecodable) => {
            return Routed::Answered(json(StatusCode::BAD_REQUEST, undecodable.frame()));
        }
    };
    // The bytes and their share of the body budget are released before the call runs.
    drop(body);
    drop(budget);
    let session = header(headers, &SESSION_HEADER).map(Cow::into_owned);
    // A response from the client: to a request we asked in its session (else ignored).
    if message.is_response() {
        if let (Some(session), Some(id)) = (&session, &message.id)
            && endpoint.sessions.touch(session, who.caller.key())
        {
            let key = id.to_string();
            endpoint
                .sessions
                .deliver(session, &key, message.into_value());
        }
        return Routed::Answered(StatusCode::ACCEPTED.into_response());
    }
    let (id, method, mut params) = match envelope(message) {
        Envelope::Request { id, method, params } => (id, method, params),
        Envelope::Other(Action::Reply(frame)) => {
            return Routed::Answered(json(StatusCode::BAD_REQUEST, frame));
        }
        Envelope::Other(action) => {
            if let Some(session) = &session {
                if !endpoint.sessions.touch(session, who.caller.key()) {
                    return Routed::Answered(session_unknown(&Value::Null));
                }
                if let Action::Cancel(request) = action {
                    endpoint.sessions.cancel(session, &request.to_string());
                }
            }
            return Routed::Answered(StatusCode::ACCEPTED.into_response());
        }
    };
    // W3C Trace Context may come as the HTTP header; the call reads it where MCP puts it
    // (`_meta.traceparent`), and one in the body wins.
    if matches!(method.as_str(), "tools/call" | "resources/read")
        && let Some(traceparent) = header(headers, "traceparent")
    {
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.entry("traceparent")
                .or_insert(Value::String(traceparent.into_owned()));
        }
    }
    // A tool outside an OAuth token's scopes is refused at the HTTP layer, as RFC 6750
    // has it (403 insufficient_scope), before any of the call's work.
    let tool = match method.as_str() {
        "tools/call" => params.get("name").and_then(Value::as_str),
        "resources/read" => Some("perplexity_agent_result"),
        _ => None,
    };
    if let Some(refused) = tool.and_then(|tool| endpoint.auth.insufficient_scope(&who, tool)) {
        crate::telemetry::refused(crate::telemetry::Refusal::Scope);
        return Routed::Answered(refused);
    }
    let modern_header =
        header(headers, &VERSION_HEADER).is_some_and(|v| !HANDSHAKE_VERSIONS.contains(&&*v));
    let arrival = Arrival::Http {
        in_session: session.is_some(),
        modern_header,
    };
    let parsed = Method::parse(&method);
    let marked = request_meta(&params).is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION));
    match decide(parsed, &params, arrival) {
        // The bare dual-era probe (no `_meta`, no modern header): answered as on stdio.
        Era::Modern if !marked && !modern_header => modern_call(id, method, params, who),
        Era::Modern => modern(endpoint, headers, id, method, parsed, params, who),
        Era::Legacy => legacy(endpoint, headers, session, id, method, params, who),
    }
}

/// The modern checks, in the order the conformance suite expects (§5.2, HTTP).
fn modern(
    endpoint: &Endpoint,
    headers: &HeaderMap,
    id: Value,
    owned_method: String,
    parsed: Option<Method>,
    params: Map<String, Value>,
    who: Identity,
) -> Routed {
    let method = owned_method.as_str();
    let bad = |e: RpcError| Routed::Answered(rpc_error(StatusCode::BAD_REQUEST, &id, e));
    let Some(version_header) = header(headers, &VERSION_HEADER) else {
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
    if meta_version.and_then(Value::as_str) != Some(&*version_header) {
        return bad(mismatch("MCP-Protocol-Version differs from _meta"));
    }
    if !SUPPORTED_VERSIONS.contains(&&*version_header) {
        // validate_modern_meta words the -32022 with its data.
        if let Err(e) = validate_modern_meta(method, &params) {
            return bad(e);
        }
    }
    if let Some(e) = differs(headers, &METHOD_HEADER, "Mcp-Method", Some(method)) {
        return bad(e);
    }
    let named = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The extension routes by task (a load balancer can pin a task to a replica).
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    };
    if let Some(field) = named {
        let expected = params.get(field).and_then(Value::as_str);
        // A task request without Mcp-Name is let through: fastmcp-tasks 4.1.4, the
        // requester most clients use, never sends it (and the Python SDK's servers do
        // not ask for it). The header only helps routers; the body's taskId is what is
        // checked, against the caller. A present header must still match.
        let lenient = method.starts_with("tasks/") && header(headers, &NAME_HEADER).is_none();
        if !lenient && let Some(e) = differs(headers, &NAME_HEADER, "Mcp-Name", expected) {
            return bad(e);
        }
    }
    if method == "tools/call"
        && let Err(which) = check_param_headers(endpoint.handler.as_ref(), headers, &params)
    {
        return bad(RpcError::new(HEADER_MISMATCH, which));
    }
    if parsed.is_some_and(Method::gone_from_modern_http) {
        return Routed::Answered(rpc_error(
            StatusCode::NOT_FOUND,
            &id,
            RpcError::method_not_found(method),
        ));
    }
    if let Err(e) = validate_modern_meta(method, &params) {
        return bad(e);
    }
    modern_call(id, owned_method, params, who)
}

/// A modern request for the handler: it belongs to no session.
fn modern_call(id: Value, method: String, params: Map<String, Value>, who: Identity) -> Routed {
    Routed::Call(Incoming {
        id,
        method,
        params,
        era: Era::Modern,
        session: None,
        who,
        session_apps: false,
    })
}

fn legacy(
    endpoint: &Endpoint,
    headers: &HeaderMap,
    session: Option<String>,
    id: Value,
    owned_method: String,
    params: Map<String, Value>,
    who: Identity,
) -> Routed {
    let method = owned_method.as_str();
    if method == "initialize" {
        // A session is state kept for its caller: minting one takes a token of the
        // caller's own rate, so a loop of initializes is slowed like a loop of calls.
        if let Some(bucket) = &who.access.bucket
            && let Err(wait) = bucket.try_take_n(1)
        {
            crate::telemetry::refused(crate::telemetry::Refusal::Rate);
            let seconds = wait.as_secs() + 1;
            let mut response = rpc_error(
                StatusCode::TOO_MANY_REQUESTS,
                &id,
                RpcError::new(
                    code::INVALID_REQUEST,
                    format!(
                        "Too many new sessions: this caller's rate is spent. Retry in {seconds}s, or reuse the session you have."
                    ),
                ),
            );
            if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
                response
                    .headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, value);
            }
            return Routed::Answered(response);
        }
        let apps = crate::mcp::app::declared_at_initialize(&params);
        return Routed::Initialize(Incoming {
            id,
            method: owned_method,
            params,
            era: Era::Legacy,
            session: Some(endpoint.sessions.create(who.caller.key(), apps)),
            who,
            session_apps: apps,
        });
    }
    let bad = |message: &str| {
        let error = RpcError::new(code::INVALID_REQUEST, message);
        Routed::Answered(rpc_error(StatusCode::BAD_REQUEST, &id, error))
    };
    let Some(session) = session else {
        return bad(
            "Bad request: no Mcp-Session-Id. Send initialize first, or send a 2026-07-28 request.",
        );
    };
    if !endpoint.sessions.touch(&session, who.caller.key()) {
        return Routed::Answered(session_unknown(&id));
    }
    if let Some(version) = header(headers, &VERSION_HEADER)
        && !HANDSHAKE_VERSIONS.contains(&&*version)
    {
        return bad(&format!(
            "Bad request: unsupported MCP-Protocol-Version for this session. Supported: {}.",
            HANDSHAKE_VERSIONS.join(", ")
        ));
    }
    Routed::Call(Incoming {
        id,
        method: owned_method,
        params,
        era: Era::Legacy,
        session_apps: endpoint.sessions.hosts_app(&session),
        session: Some(session),
        who,
    })
}

/// Hands the request to the handler and turns its answer into an HTTP response. Work
/// that runs later gets a cancel token: a modern client closing its response cancels it;
/// in a legacy session, `notifications/cancelled` (or DELETE) does; shutdown always does.
async fn dispatch(
    endpoint: &Arc<Endpoint>,
    request: Incoming,
    slot: Option<OwnedSemaphorePermit>,
) -> Response {
    if let Some(reply) = endpoint.handler.answer_now(&request) {
        return (
            StatusCode::OK,
            [(CONTENT_TYPE, "application/json")],
            axum::body::Body::new(Pieces::of(reply)),
        )
            .into_response();
    }
    let era = request.era;
    let session = request.session.clone();
    let key = request.id.to_string();
    // Only a stream carries frames before the reply; a JSON answer is the reply alone,
    // which a oneshot carries in one small slot (even a one-slot mpsc allocates a whole
    // block of them).
    let streamed = endpoint
        .handler
        .streams(&request)
        .then(|| mpsc::channel::<Value>(STREAM_BUFFER));
    let token = endpoint.stopping.child_token();
    let out = Outbound {
        frames: streamed.as_ref().map(|(frames, _)| frames.clone()),
        session: session.clone().map(|s| (endpoint.sessions.clone(), s)),
        cancel: token.clone(),
        stopping: endpoint.stopping.clone(),
    };
    let work = match endpoint.handler.clone().handle(request, out) {
        Handled::Now(Some(frame)) => return json(status_of(era, &frame), frame),
        Handled::Now(None) => return StatusCode::ACCEPTED.into_response(),
        Handled::Later(work) => work,
    };
    if let Some(session) = &session {
        endpoint.sessions.register(session, &key, token.clone());
    }
    let (reply_to, answer) = match streamed {
        Some((frames, rx)) => (ReplyTo::Stream(frames), Answer::Stream(rx)),
        None => {
            let (tx, rx) = oneshot::channel();
            (ReplyTo::Json(tx), Answer::Json(rx))
        }
    };
    let sessions = endpoint.sessions.clone();
    tokio::spawn(async move {
        let reply = work.await;
        if let Some(session) = &session {
            sessions.unregister(session, &key);
        }
        match (reply, reply_to) {
            (Some(frame), ReplyTo::Stream(frames)) => {
                let _ = frames.send(frame).await;
            }
            (Some(frame), ReplyTo::Json(tx)) => {
                let _ = tx.send(frame);
            }
            (None, _) => {}
        }
    });
    let cancel_on_close = (era == Era::Modern).then(|| token.drop_guard());
    let rx = match answer {
        Answer::Stream(rx) => return stream(rx, cancel_on_close, slot),
        Answer::Json(rx) => rx,
    };
    let frame = rx.await.ok();
    if let Some(guard) = cancel_on_close {
        guard.disarm();
    }
    drop(slot);
    match frame {
        Some(frame) => json(status_of(era, &frame), frame),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// Where the work's reply goes: onto the request's SSE stream, or into its JSON body.
enum ReplyTo {
    Stream(mpsc::Sender<Value>),
    Json(oneshot::Sender<Value>),
}

/// The other end of [`ReplyTo`].
enum Answer {
    Stream(mpsc::Receiver<Value>),
    Json(oneshot::Receiver<Value>),
}

/// HTTP status of a JSON reply: in the modern era an unknown method is 404 and a missing
/// client capability 400; everything else (tool errors included) is 200.
fn status_of(era: Era, frame: &Value) -> StatusCode {
    match (era, frame["error"]["code"].as_i64()) {
        (Era::Modern, Some(code::METHOD_NOT_FOUND)) => StatusCode::NOT_FOUND,
        (Era::Modern, Some(MISSING_CAPABILITY)) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// The request's frames as SSE: what the handler sent, then the reply, then the end.
/// The stream owns the in-flight slot and, in the modern era, the cancel-on-close guard.
fn stream(
    rx: mpsc::Receiver<Value>,
    cancel_on_close: Option<DropGuard>,
    slot: Option<OwnedSemaphorePermit>,
) -> Response {
    let state = (rx, cancel_on_close, slot);
    let events = futures_util::stream::unfold(state, |(mut rx, guard, slot)| async move {
        let frame = rx.recv().await?;
        let event = Event::default()
            .event("message")
            .data(outbound(&frame.to_string()));
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

/// GET: we offer no standalone server-to-client stream, in either era.
pub async fn get() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "POST, DELETE")]).into_response()
}

/// DELETE ends a legacy session (and the waits of its calls).
pub async fn delete(State(endpoint): State<Arc<Endpoint>>, request: Request) -> Response {
    let headers = request.headers();
    if let Some(refused) = repeated_mcp_header(headers) {
        return refused;
    }
    let owner = request
        .extensions()
        .get::<Admission>()
        .map(|admitted| admitted.who.caller.key().to_owned());
    match (header(headers, &SESSION_HEADER), owner) {
        (None, _) => (StatusCode::METHOD_NOT_ALLOWED, [(ALLOW, "POST")]).into_response(),
        (Some(session), Some(owner)) if endpoint.sessions.remove(&session, &owner) => {
            StatusCode::NO_CONTENT.into_response()
        }
        (Some(_), _) => session_unknown(&Value::Null),
    }
}

/// An `Mcp-*` header sent twice is refused, as `Host` and `Authorization` are: a proxy
/// may route on one copy while we read the other (a real session id then a bogus one
/// was answered from the first, the other order 404).
fn repeated_mcp_header(headers: &HeaderMap) -> Option<Response> {
    let repeated = headers
        .keys()
        .filter(|name| name.as_str().starts_with("mcp-"))
        .find(|name| headers.get_all(*name).iter().count() > 1)?;
    Some(plain(
        StatusCode::BAD_REQUEST,
        &format!(
            "Bad request: send the {} header at most once.",
            repeated.as_str()
        ),
    ))
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

/// Every `x-mcp-header` argument of the called tool against its `Mcp-Param-*` header:
/// an argument that is present needs the header, with the same value (strings as they
/// are, numbers and booleans as JSON text); an undecodable header never matches.
fn check_param_headers(
    handler: &dyn Handler,
    headers: &HeaderMap,
    params: &Map<String, Value>,
) -> Result<(), String> {
    let Some(tool) = params.get("name").and_then(Value::as_str) else {
        return Ok(());
    };
    let arguments = params.get("arguments").and_then(Value::as_object);
    for (header_name, argument) in handler.header_params(tool) {
        let name = format!("mcp-param-{}", header_name.to_ascii_lowercase());
        let expected = match arguments.and_then(|a| a.get(&argument)) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        match header(headers, &name) {
            None => return Err(format!("Header missing: Mcp-Param-{header_name}.")),
            Some(v) if v != expected => {
                return Err(format!("Header mismatch: Mcp-Param-{header_name}."));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// A header that must repeat a body field: `None` when it does, else the -32001 that says
/// whether it was missing or different (a client author fixes those differently).
fn differs(
    headers: &HeaderMap,
    name: impl AsHeaderName,
    shown: &str,
    expected: Option<&str>,
) -> Option<RpcError> {
    match header(headers, name) {
        None => Some(RpcError::new(
            HEADER_MISMATCH,
            format!("Header missing: {shown}."),
        )),
        Some(v) if Some(&*v) != expected => Some(mismatch(shown)),
        Some(_) => None,
    }
}

fn mismatch(what: &str) -> RpcError {
    RpcError::new(HEADER_MISMATCH, format!("Header mismatch: {what}."))
}

/// A reply's pieces as a body of known length (so it keeps its `Content-Length`): hyper
/// queues them and writes them with the head in one `writev`, and the shared result is
/// sent from where it is cached rather than copied into each response.
struct Pieces {
    pieces: [Bytes; 3],
    next: usize,
}

impl Pieces {
    fn of(reply: ScrubbedReply) -> Self {
        let (head, result) = reply.into_pieces();
        let (result, tail) = match result {
            Some(result) => (Bytes::from_owner(Shared(result)), REPLY_TAIL),
            None => (Bytes::new(), ""),
        };
        Pieces {
            pieces: [
                Bytes::from(head),
                result,
                Bytes::from_static(tail.as_bytes()),
            ],
            next: 0,
        }
    }
}

/// The cached result, lent to `Bytes` for as long as hyper writes it.
struct Shared(Arc<crate::mcp::protocol::Scrubbed>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self.0.as_ref().as_ref()
    }
}

impl hyper::body::Body for Pieces {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        while let Some(piece) = this.pieces.get_mut(this.next) {
            this.next += 1;
            if !piece.is_empty() {
                return std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(std::mem::take(
                    piece,
                )))));
            }
        }
        std::task::Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.iter().skip(self.next).all(Bytes::is_empty)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        let left = self
            .pieces
            .iter()
            .skip(self.next)
            .map(Bytes::len)
            .sum::<usize>();
        hyper::body::SizeHint::with_exact(left as u64)
    }
}

/// A header's value: trimmed, `=?base64?…?=` decoded, `None` when absent or not text.
fn header<'h>(headers: &'h HeaderMap, name: impl AsHeaderName) -> Option<Cow<'h, str>> {
    let value = headers.get(name)?.to_str().ok()?.trim();
    if let Some(encoded) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        return String::from_utf8(bytes).ok().map(Cow::Owned);
    }
    Some(Cow::Borrowed(value))
}

fn json(status: StatusCode, frame: Value) -> Response {
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        Bytes::from(outbound(&frame.to_string()).into_owned()),
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
