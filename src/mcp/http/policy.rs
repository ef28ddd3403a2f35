//! The HTTP transport's security policy, as one layer around the MCP endpoint ([`gate`]),
//! in stages (first to last): `Host` and `Origin`, the bearer token, admission (in-flight
//! cap, time limit), then the body (cap, shared budget, deadline). Everything before the token looks at
//! headers only, so a client without it never takes a slot or has a body byte read. An
//! auditor reads this file to know who can reach a tool over HTTP.

use std::borrow::Cow;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{
    AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, RETRY_AFTER,
    WWW_AUTHENTICATE,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use sha2::Digest;
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use url::Url;

use crate::call::Caller;
use crate::config::{HttpAuth, HttpConfig};
use crate::identity::Identity;
use crate::identity::clients::Clients;
use crate::identity::oauth::{self, TokenError, Verifier};
use crate::identity::rates::SubjectRates;
use crate::mcp::protocol::MAX_LINE_CHARS;

/// Loopback names every deployment accepts, on any port (a loopback reverse proxy in
/// front forwards its own port).
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];
/// The body cap: the stdio line cap, in bytes. MCP sends one JSON-RPC message per POST,
/// and the largest a tool accepts (a 16 Ki-character query, a `responses_create`
/// conversation) is far below it; the same number on both transports means a message
/// that works on one works on the other.
pub const MAX_BODY_BYTES: usize = MAX_LINE_CHARS;
/// Body bytes held at once by all requests together, from the first byte read until the
/// message is decoded: eight bodies at the cap. Past it, 503 — memory stays bounded
/// however many authenticated clients upload at once.
const BODY_BUDGET_BYTES: usize = 8 * MAX_BODY_BYTES;

pub struct Policy {
    auth: Arc<Authenticator>,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    slots: Arc<Semaphore>,
    body_budget: Arc<Semaphore>,
    request_timeout: Duration,
    read_timeout: Duration,
}

/// Who a bearer token belongs to, in the one way the server was configured with.
pub enum Authenticator {
    /// `PERPLEXITY_HTTP_AUTH_TOKEN`: its digest, and the `default` caller who holds it.
    Token { digest: [u8; 32], who: Identity },
    /// `PERPLEXITY_HTTP_CLIENTS_FILE`, reloaded as it changes.
    Clients(Arc<Clients>),
    /// OAuth 2.1 access tokens, and where their metadata document is.
    OAuth {
        verifier: Arc<Verifier>,
        metadata_url: String,
        /// Each subject's own bucket, when `PERPLEXITY_OAUTH_RATE_PER_MINUTE` is set.
        rates: Option<SubjectRates>,
    },
}

impl Authenticator {
    /// Built once at start-up: a clients file that cannot be read, or an OAuth setting
    /// that cannot work, stops the server with the reason (a start that serves nobody
    /// would look like an outage). `offered` (the server's tools, when known) is what
    /// each reload of a clients file checks the clients' tool lists against.
    pub fn new(
        auth: &HttpAuth,
        stop: &tokio_util::sync::CancellationToken,
        offered: Option<crate::identity::clients::Offered>,
    ) -> Result<Self, String> {
        Ok(match auth {
            HttpAuth::Token(digest) => Authenticator::Token {
                digest: *digest,
                who: Identity::unrestricted(Caller::single_token(digest)),
            },
            HttpAuth::Clients(path) => {
                let clients = Clients::open(path.clone())?;
                clients.watch(stop.clone(), offered);
                Authenticator::Clients(clients)
            }
            HttpAuth::OAuth(config) => Authenticator::OAuth {
                metadata_url: metadata_url(&config.audience)?,
                verifier: Arc::new(Verifier::new(config.clone())?),
                rates: config
                    .subject_rate
                    .map(|(per_minute, burst)| SubjectRates::new(per_minute, burst)),
            },
        })
    }

    /// The OAuth verifier, for the metadata route.
    pub fn verifier(&self) -> Option<&Arc<Verifier>> {
        match self {
            Authenticator::OAuth { verifier, .. } => Some(verifier),
            _ => None,
        }
    }

    /// The 403 for a tool outside an OAuth token's scopes (RFC 6750 §3.1), naming the
    /// scope that grants it; `None` for a caller that may call it, or is not an OAuth
    /// subject (a named client is told in the JSON-RPC error instead).
    pub fn insufficient_scope(&self, who: &Identity, tool: &str) -> Option<Response> {
        let Authenticator::OAuth { metadata_url, .. } = self else {
            return None;
        };
        if who.access.permits(tool) {
            return None;
        }
        let scope = oauth::scope_for_tool(tool).unwrap_or("perplexity:research");
        refusal_logged(format_args!(
            "refused tool {tool} to {}: the access token lacks the scope {scope}",
            crate::text::inert_line(who.caller.name())
        ));
        let mut response = plain(
            StatusCode::FORBIDDEN,
            &format!("Tool {tool} needs the scope {scope}, which this access token does not have."),
        );
        if let Ok(value) = HeaderValue::from_str(&oauth::challenge(
            metadata_url,
            Some(("insufficient_scope", Some(scope))),
        )) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        Some(response)
    }
}

/// RFC 9728 §3.1: the metadata of `https://host/mcp` is at
/// `https://host/.well-known/oauth-protected-resource/mcp`.
fn metadata_url(audience: &str) -> Result<String, String> {
    let url = Url::parse(audience)
        .map_err(|_| format!("PERPLEXITY_OAUTH_AUDIENCE {audience:?} is not a URL"))?;
    let path = url.path().trim_end_matches('/');
    Ok(format!(
        "{}/.well-known/oauth-protected-resource{path}",
        url.origin().ascii_serialization()
    ))
}

impl Policy {
    /// `longest` bounds the longest legitimate request (a tool call that waits).
    pub fn new(config: &HttpConfig, auth: Arc<Authenticator>, longest: Duration) -> Self {
        Policy {
            auth,
            allowed_hosts: config.allowed_hosts.clone(),
            allowed_origins: config.allowed_origins.clone(),
            slots: Arc::new(Semaphore::new(config.max_in_flight)),
            body_budget: Arc::new(Semaphore::new(BODY_BUDGET_BYTES)),
            request_timeout: longest + Duration::from_secs(60),
            read_timeout: config.read_timeout,
        }
    }
}

/// What the policy hands the endpoint, as one request extension (one allocation, not one
/// per item): who asks, and the permits the request holds, each taken once — its
/// in-flight slot (moved into a streamed response body, so a long SSE answer holds it
/// until the stream ends) and its body's share of the budget (given back once decoded).
/// `Clone`, as extensions must be, so the permits sit behind a shared lock.
#[derive(Clone)]
pub struct Admission {
    pub who: Identity,
    permits: Arc<Mutex<Permits>>,
}

struct Permits {
    slot: Option<OwnedSemaphorePermit>,
    share: Option<OwnedSemaphorePermit>,
}

impl Admission {
    fn new(who: Identity, slot: OwnedSemaphorePermit, share: OwnedSemaphorePermit) -> Self {
        let permits = Permits {
            slot: Some(slot),
            share: Some(share),
        };
        Admission {
            who,
            permits: Arc::new(Mutex::new(permits)),
        }
    }

    /// The in-flight slot (`None` once taken).
    pub fn take_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.lock().ok().and_then(|mut p| p.slot.take())
    }

    /// The body's share of the budget (`None` once taken).
    pub fn take_share(&self) -> Option<OwnedSemaphorePermit> {
        self.permits.lock().ok().and_then(|mut p| p.share.take())
    }
}

/// The whole policy as one layer, its stages in order: a layer per stage would box a
/// future per stage, and every call that waits would hold them all (bench/NOTEBOOK.md, the
/// lean table).
pub async fn gate(State(policy): State<Arc<Policy>>, request: Request, next: Next) -> Response {
    // One time limit for the body and the endpoint together: a request that outlives any
    // legitimate wait is cut off.
    let deadline = Instant::now() + policy.request_timeout;
    let gated = async move {
        // Boxed, so the stages' state (the body read among it) is freed once they pass
        // instead of staying part of the future of a call that waits.
        let staged = Box::pin(stages(&policy, request)).await;
        match staged {
            Ok(request) => next.run(request).await,
            Err(refused) => refused,
        }
    };
    // One timer per request (a second one for the endpoint cost a timer-wheel entry).
    tokio::time::timeout_at(deadline, gated)
        .await
        .unwrap_or_else(|_| too_long())
}

/// Everything before the endpoint: a refusal, or the request with its slot and its body.
async fn stages(policy: &Policy, request: Request) -> Result<Request, Response> {
    if let Some(refused) = head_refused(request.headers()) {
        return Err(refused);
    }
    if let Some(refused) = check_host_and_origin(policy, &request) {
        return Err(refused);
    }
    let who = authenticate(policy, request.headers()).await?;
    let Some(slot) = admit(policy) else {
        return Err(saturated());
    };
    let (mut request, share) = read_body(policy, request).await?;
    request
        .extensions_mut()
        .insert(Admission::new(who, slot, share));
    Ok(request)
}

/// Every route's head at most 32 KiB, exactly: hyper bounds its read buffer by that size
/// per read, so a head may overshoot it by up to one read before hyper refuses; this
/// makes the documented limit the real one. Counted as sent, but for the request line
/// (a few bytes against the limit): each header line. Checked synchronously where each
/// route starts, so a request that waits holds no state of it.
pub fn head_refused(headers: &HeaderMap) -> Option<Response> {
    let head: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    (head > super::accept::MAX_HEAD_BYTES).then(|| {
        closing(plain(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "The request's headers are too large (at most 32 KiB).",
        ))
    })
}

fn too_long() -> Response {
    plain(StatusCode::GATEWAY_TIMEOUT, "The request took too long.")
}

/// Admission: a saturated server answers 503 at once (with `Retry-After`) instead of
/// queueing without bound. The request's slot, or `None` (then [`saturated`]).
fn admit(policy: &Policy) -> Option<OwnedSemaphorePermit> {
    policy.slots.clone().try_acquire_owned().ok()
}

fn saturated() -> Response {
    busy("The server is at its limit of requests in flight. Retry shortly.")
}

/// Reads the whole body (bounded in size, in time and against the shared budget) before
/// the endpoint sees it: a keep-alive client reuses the socket, and an unread body would
/// corrupt its next request.
async fn read_body(
    policy: &Policy,
    request: Request,
) -> Result<(Request, OwnedSemaphorePermit), Response> {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let declared = declared.map_or(0, |len| len as usize);
    let (parts, body) = request.into_parts();
    let budget = policy.body_budget.clone();
    let read = async move {
        // Reserved up front for a declared length; a chunked body reserves as it comes.
        let mut share = reserve(&budget, declared)?;
        // A body that came in one chunk (the usual case) is kept as it is; only one in
        // several is copied together.
        let mut first = Bytes::new();
        let mut joined: Option<Vec<u8>> = None;
        let mut chunks = body.into_data_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|_| BodyError::Broken)?;
            let total = joined.as_ref().map_or(first.len(), Vec::len) + chunk.len();
            if total > MAX_BODY_BYTES {
                return Err(BodyError::TooLarge);
            }
            if total > share.num_permits() {
                share.merge(reserve(&budget, total - share.num_permits())?);
            }
            match &mut joined {
                Some(bytes) => bytes.extend_from_slice(&chunk),
                None if first.is_empty() => first = chunk,
                None => {
                    let mut bytes = Vec::with_capacity(declared.max(total));
                    bytes.extend_from_slice(&first);
                    bytes.extend_from_slice(&chunk);
                    joined = Some(bytes);
                }
            }
        }
        Ok((joined.map_or(first, Bytes::from), share))
    };
    // Slow senders are cut: a body that trickles in holds its budget and its slot.
    match tokio::time::timeout(policy.read_timeout, read).await {
        Ok(Ok((bytes, share))) => Ok((Request::from_parts(parts, Body::from(bytes)), share)),
        Ok(Err(BodyError::TooLarge)) => Err(too_large()),
        Ok(Err(BodyError::OverBudget)) => Err(busy(
            "The server is reading as much request data as it allows at once. Retry shortly.",
        )),
        Ok(Err(BodyError::Broken)) => Err(closing(plain(
            StatusCode::BAD_REQUEST,
            "The request body could not be read.",
        ))),
        Err(_) => Err(closing(plain(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "The request body did not arrive within {} s.",
                policy.read_timeout.as_secs()
            ),
        ))),
    }
}

enum BodyError {
    TooLarge,
    OverBudget,
    Broken,
}

fn reserve(budget: &Arc<Semaphore>, bytes: usize) -> Result<OwnedSemaphorePermit, BodyError> {
    let bytes = u32::try_from(bytes).map_err(|_| BodyError::TooLarge)?;
    budget
        .clone()
        .try_acquire_many_owned(bytes)
        .map_err(|_| BodyError::OverBudget)
}

fn too_large() -> Response {
    closing(plain(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("The request body exceeds {MAX_BODY_BYTES} bytes."),
    ))
}

fn busy(message: &str) -> Response {
    let mut response = closing(plain(StatusCode::SERVICE_UNAVAILABLE, message));
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// For answers given before the body was read: the connection cannot be reused.
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// DNS-rebinding protection (an MCP MUST): a web page that makes a browser talk to
/// `localhost` under an attacker's host name, or from the attacker's origin, is refused
/// before the token is even looked at. Every claim of who the request is for must be
/// ours: the one `Host` header and, in absolute form, the request line's authority
/// (which RFC 9112 §3.2.2 makes the one that counts) — parsed strictly, so
/// `[::1].evil.com` or `localhost@evil.com` is not "loopback with a suffix". Returns the
/// refusal, if any.
fn check_host_and_origin(policy: &Policy, request: &Request) -> Option<Response> {
    let headers = request.headers();
    let mut hosts = headers.get_all(HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return Some(closing(plain(
            StatusCode::BAD_REQUEST,
            "Bad request: send exactly one Host header.",
        )));
    };
    let target = request.uri().authority().map(|a| a.as_str().as_bytes());
    let ours = |authority: &[u8]| {
        host_name(authority).is_some_and(|name| {
            LOOPBACK_NAMES.contains(&&*name) || policy.allowed_hosts.iter().any(|h| *h == name)
        })
    };
    if !ours(host.as_bytes()) || target.is_some_and(|t| !ours(t)) {
        return Some(closing(plain(StatusCode::FORBIDDEN, "Host not allowed.")));
    }
    // Every Origin value: a second header must not smuggle a foreign one past the first.
    if !headers
        .get_all(ORIGIN)
        .iter()
        .all(|origin| origin_allowed(origin, &policy.allowed_origins))
    {
        return Some(closing(plain(StatusCode::FORBIDDEN, "Origin not allowed.")));
    }
    None
}

/// Exactly one `Authorization: Bearer <token>`, whoever it names. Answered from the
/// headers alone, before admission: a client without a valid token holds no slot and
/// has no body byte read. The identity, or the refusal.
async fn authenticate(policy: &Policy, headers: &HeaderMap) -> Result<Identity, Response> {
    let token = bearer(headers);
    match &*policy.auth {
        // Digests are compared in constant time, so neither the token's bytes nor its
        // length leak through timing.
        Authenticator::Token { digest, who } => {
            if token.is_some_and(|t| digest_of(t).ct_eq(digest).into()) {
                return Ok(who.clone());
            }
        }
        // Looked up by digest: timing can at most reveal a prefix of a SHA-256 digest
        // that matched, never a byte of a token.
        Authenticator::Clients(clients) => {
            if let Some(who) = token.and_then(|t| clients.current().find(&digest_of(t))) {
                return Ok(who);
            }
        }
        Authenticator::OAuth {
            verifier,
            metadata_url,
            rates,
        } => {
            let Some(token) = token else {
                return Err(unauthorized(&oauth::challenge(metadata_url, None)));
            };
            // The token is judged here and goes nowhere else: never passed through.
            let token = std::str::from_utf8(token).unwrap_or_default();
            return match verifier.verify(token).await {
                Ok(verified) => {
                    let caller = Caller::subject(&verified.issuer, &verified.subject);
                    let mut access = oauth::access_for(&verified.scopes);
                    access.bucket = rates.as_ref().map(|r| r.bucket_of(&caller));
                    Ok(Identity {
                        caller,
                        access: Arc::new(access),
                    })
                }
                Err(TokenError::Invalid(why)) => {
                    refusal_logged(format_args!(
                        "refused an HTTP request with an invalid access token: {why}"
                    ));
                    Err(unauthorized(&oauth::challenge(
                        metadata_url,
                        Some(("invalid_token", None)),
                    )))
                }
                Err(TokenError::Unavailable(why)) => {
                    tracing::warn!("cannot check access tokens: {why}");
                    Err(busy(
                        "The server cannot check access tokens now (its identity provider's keys are unreachable). Retry shortly.",
                    ))
                }
            };
        }
    }
    refusal_logged(format_args!(
        "refused an HTTP request without a valid bearer token ({})",
        if token.is_some() {
            "the token presented is not one of this server's"
        } else {
            "none was presented"
        }
    ));
    Err(unauthorized("Bearer realm=\"perplexity-agent\""))
}

/// Who may read `GET /metrics`: the head bound and the Host/Origin rules of `/mcp` (a
/// page rebinding a name to loopback must not read the counters), then the metrics token
/// when one is set — constant-time, as the callers' tokens — else only a loopback peer
/// (the counters name callers and their spend: not for the network without a token).
pub fn metrics_refused(
    policy: &Policy,
    request: &Request,
    access: &crate::config::MetricsAccess,
) -> Option<Response> {
    if let Some(refused) = head_refused(request.headers()) {
        return Some(refused);
    }
    if let Some(refused) = check_host_and_origin(policy, request) {
        return Some(refused);
    }
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    scraper_refused(request.headers(), peer, access)
}

/// The token, or else the peer's address, of a scrape.
fn scraper_refused(
    headers: &HeaderMap,
    peer: Option<std::net::IpAddr>,
    access: &crate::config::MetricsAccess,
) -> Option<Response> {
    match &access.token {
        Some(expected) => {
            let presented = bearer(headers).map(digest_of);
            let ok = presented.is_some_and(|d| bool::from(d.ct_eq(expected)));
            (!ok).then(|| unauthorized("Bearer realm=\"metrics\""))
        }
        None => {
            // `::ffff:127.0.0.1` is loopback too (a dual-stack listener's IPv4 peer).
            let peer = peer.map(|ip| ip.to_canonical());
            (!peer.is_some_and(|ip| ip.is_loopback())).then(|| {
                closing(plain(
                    StatusCode::FORBIDDEN,
                    "Metrics are served to loopback peers only; set PERPLEXITY_METRICS_TOKEN to scrape from elsewhere.",
                ))
            })
        }
    }
}

fn unauthorized(challenge: &str) -> Response {
    let mut response = closing(plain(
        StatusCode::UNAUTHORIZED,
        "Missing or invalid bearer token.",
    ));
    if let Ok(value) = HeaderValue::from_str(challenge) {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}

fn digest_of(token: &[u8]) -> [u8; 32] {
    sha2::Sha256::digest(token).into()
}

/// The token of the one `Authorization: Bearer <token>` header; `None` for none, two,
/// or another scheme.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let value = value.as_bytes();
    // The scheme is case-insensitive (RFC 9110); the token is not.
    value
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
        .and_then(|_| value.get(7..))
        .filter(|token| !token.is_empty())
}

/// The host of an RFC 3986 authority without userinfo — `name[:port]` or
/// `[IPv6][:port]` — lowercased, IPv6 in canonical form; `None` for anything else.
fn host_name(authority: &[u8]) -> Option<Cow<'_, str>> {
    let authority = std::str::from_utf8(authority).ok()?;
    let (name, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let ip: Ipv6Addr = inside.parse().ok()?;
        let port = if after.is_empty() {
            None
        } else {
            Some(after.strip_prefix(':')?)
        };
        (Cow::Owned(format!("[{ip}]")), port)
    } else {
        let (name, port) = match authority.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        };
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !name_ok {
            return None;
        }
        // Borrowed unless it has capitals: checked on every request.
        let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(name.to_ascii_lowercase())
        } else {
            Cow::Borrowed(name)
        };
        (name, port)
    };
    let port_ok = port.is_none_or(|p| {
        (1..=5).contains(&p.len())
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| n <= 65_535)
    });
    port_ok.then_some(name)
}

/// An `Origin` is a serialized origin and nothing more (no path, no userinfo: a browser
/// never sends them), from loopback or from the configured list.
fn origin_allowed(origin: &HeaderValue, extra: &[String]) -> bool {
    let Some(text) = origin.to_str().ok() else {
        return false;
    };
    let Some(url) = Url::parse(text).ok() else {
        // Includes `Origin: null` (sandboxed frames, file: pages).
        return false;
    };
    let serialized = url.origin().ascii_serialization();
    if !matches!(url.scheme(), "http" | "https") || serialized != text {
        return false;
    }
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name == "localhost",
        Some(url::Host::Ipv4(ip)) => ip == Ipv4Addr::LOCALHOST,
        Some(url::Host::Ipv6(ip)) => ip == Ipv6Addr::LOCALHOST,
        None => false,
    };
    loopback || extra.contains(&serialized)
}

pub fn plain(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
        Bytes::from(format!("{message}\n")),
    )
        .into_response()
}

/// Refusal lines written a minute at most; the rest are counted and said in one line.
const REFUSALS_PER_MINUTE: u32 = 20;

/// Why a request was refused, for the operator debugging a client or an identity
/// provider: at the default level (the reason is what they need: wrong audience, issuer,
/// expiry, kid, scope), never the token, and rate-limited so a flood of bad requests
/// cannot fill a disk.
fn refusal_logged(why: std::fmt::Arguments<'_>) {
    struct Window {
        started: std::time::Instant,
        written: u32,
        held_back: u64,
    }
    static WINDOW: std::sync::Mutex<Option<Window>> = std::sync::Mutex::new(None);
    let mut window = WINDOW.lock().unwrap_or_else(|e| e.into_inner());
    let now = std::time::Instant::now();
    let w = window.get_or_insert(Window {
        started: now,
        written: 0,
        held_back: 0,
    });
    if now.duration_since(w.started) >= Duration::from_secs(60) {
        if w.held_back > 0 {
            tracing::warn!(
                "{} more refused requests in the last minute were not logged one by one",
                w.held_back
            );
        }
        *w = Window {
            started: now,
            written: 0,
            held_back: 0,
        };
    }
    if w.written < REFUSALS_PER_MINUTE {
        w.written += 1;
        tracing::warn!("{why}");
    } else {
        w.held_back += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    #[test]
    fn bearer_tokens() {
        let token = "a".repeat(40);
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let matches = |h: &HeaderMap| bearer(h).is_some_and(|t| digest_of(t) == digest);
        let ok = |v: &str| matches(&headers(&[("authorization", v)]));
        assert!(ok(&format!("Bearer {token}")));
        assert!(ok(&format!("bearer {token}")));
        assert!(!ok(&format!("Bearer {token} ")));
        assert!(!ok(&format!("Bearer  {token}")));
        assert!(!ok(&format!("Basic {token}")));
        assert!(!ok(&token));
        assert!(!ok("Bearer "));
        assert!(!matches(&headers(&[])));
        let twice = headers(&[
            ("authorization", &format!("Bearer {token}")),
            ("authorization", &format!("Bearer {token}")),
        ]);
        assert!(!matches(&twice), "exactly one header");
    }

    #[test]
    fn scrapers_need_the_metrics_token_or_a_loopback_address() {
        use crate::config::MetricsAccess;
        let bind = crate::config::METRICS_BIND.parse().unwrap();
        let open = MetricsAccess { token: None, bind };
        let refused = |h: &HeaderMap, peer: Option<&str>, a: &MetricsAccess| {
            scraper_refused(h, peer.map(|p| p.parse().unwrap()), a).map(|r| r.status())
        };
        let none = HeaderMap::new();
        for ok in ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"] {
            assert_eq!(refused(&none, Some(ok), &open), None, "{ok}");
        }
        for far in ["10.0.0.1", "192.168.1.5", "::ffff:10.0.0.1", "fe80::1"] {
            assert_eq!(
                refused(&none, Some(far), &open),
                Some(StatusCode::FORBIDDEN),
                "{far}"
            );
        }
        assert_eq!(refused(&none, None, &open), Some(StatusCode::FORBIDDEN));
        let token = "m".repeat(40);
        let guarded = MetricsAccess {
            token: Some(digest_of(token.as_bytes())),
            bind,
        };
        let right = headers(&[("authorization", &format!("Bearer {token}"))]);
        let wrong = headers(&[("authorization", "Bearer mmmm")]);
        // With a token, the address does not matter either way.
        assert_eq!(refused(&right, Some("10.0.0.1"), &guarded), None);
        assert_eq!(
            refused(&wrong, Some("127.0.0.1"), &guarded),
            Some(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            refused(&none, Some("127.0.0.1"), &guarded),
            Some(StatusCode::UNAUTHORIZED)
        );
    }

    #[test]
    fn hosts_and_origins() {
        let extra = ["mcp.example.com".to_owned()];
        let host = |h: &str| {
            host_name(h.as_bytes())
                .is_some_and(|n| LOOPBACK_NAMES.contains(&&*n) || extra.iter().any(|e| *e == n))
        };
        for h in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:8080",
            "[::1]",
            "[0:0:0:0:0:0:0:1]:80",
            "MCP.example.com:443",
        ] {
            assert!(host(h), "{h}");
        }
        for h in [
            "evil.com",
            "127.0.0.1.evil.com",
            "localhost.evil.com:80",
            "[::2]:80",
            "10.0.0.1",
            "[::1].evil.com",
            "[::1]evil.com",
            "[::1]@evil.com",
            "localhost@evil.com",
            "evil.com@localhost",
            "localhost:80:80",
            "localhost:99999",
            "localhost:8080x",
            "localhost, evil.com",
            "[::1",
            "",
        ] {
            assert!(!host(h), "{h}");
        }

        let origins = vec!["https://app.example.com".to_owned()];
        let origin = |o: &str| origin_allowed(&HeaderValue::from_str(o).unwrap(), &origins);
        for o in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:6274",
            "https://app.example.com",
        ] {
            assert!(origin(o), "{o}");
        }
        for o in [
            "null",
            "http://evil.com",
            "https://app.example.com:8443",
            "http://app.example.com",
            "file://localhost",
            "http://localhost.evil.com",
            "http://evil.com@localhost",
            "http://localhost/path",
            "http://localhost:3000/",
        ] {
            assert!(!origin(o), "{o}");
        }
    }
}
