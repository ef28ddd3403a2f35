//! The HTTP transport's security policy, as layers around the MCP endpoint (outermost
//! first): admission (in-flight cap, time limit), the body cap, `Host` and `Origin`
//! checks, then the bearer token. An auditor reads this file to know who can reach a
//! tool over HTTP.

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
use sha2::Digest;
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use url::Url;

use crate::config::HttpConfig;
use crate::mcp::protocol::MAX_LINE_CHARS;

/// Loopback names every deployment accepts, on any port (a loopback reverse proxy in
/// front forwards its own port).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];
/// The body cap: the stdio line cap, in bytes.
pub const MAX_BODY_BYTES: usize = MAX_LINE_CHARS;

pub struct Policy {
    token_digest: [u8; 32],
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    slots: Arc<Semaphore>,
    request_timeout: Duration,
}

impl Policy {
    /// `longest` bounds the longest legitimate request (a tool call that waits).
    pub fn new(config: &HttpConfig, longest: Duration) -> Self {
        Policy {
            token_digest: config.token_digest,
            allowed_hosts: config.allowed_hosts.clone(),
            allowed_origins: config.allowed_origins.clone(),
            slots: Arc::new(Semaphore::new(config.max_in_flight)),
            request_timeout: longest + Duration::from_secs(60),
        }
    }
}

/// The in-flight slot of one request. The endpoint moves it into a streamed response
/// body, so a long SSE answer keeps holding its slot until the stream ends.
#[derive(Clone)]
pub struct Slot(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl Slot {
    pub fn take(&self) -> Option<OwnedSemaphorePermit> {
        self.0.lock().ok().and_then(|mut p| p.take())
    }
}

/// Admission: a saturated server answers 503 at once (with `Retry-After`) instead of
/// queueing without bound; a request that outlives any legitimate wait is cut off.
pub async fn admit(
    State(policy): State<Arc<Policy>>,
    mut request: Request,
    next: Next,
) -> Response {
    let Ok(permit) = policy.slots.clone().try_acquire_owned() else {
        let mut response = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "The server is at its limit of requests in flight. Retry shortly.",
        );
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        // The body was not read: do not let the client reuse this connection.
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        return response;
    };
    request
        .extensions_mut()
        .insert(Slot(Arc::new(Mutex::new(Some(permit)))));
    match tokio::time::timeout(policy.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => plain(StatusCode::GATEWAY_TIMEOUT, "The request took too long."),
    }
}

/// Reads the whole body (bounded) before any other check: a keep-alive client reuses the
/// socket, and an unread body would corrupt its next request.
pub async fn read_body(request: Request, next: Next) -> Response {
    let too_large = || {
        let mut response = plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("The request body exceeds {MAX_BODY_BYTES} bytes."),
        );
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
        response
    };
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(_) => too_large(),
    }
}

/// DNS-rebinding protection (an MCP MUST): a web page that makes a browser talk to
/// `localhost` under an attacker's host name, or from the attacker's origin, is refused
/// before the token is even looked at.
pub async fn check_host_and_origin(
    State(policy): State<Arc<Policy>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if !host_allowed(headers, &policy.allowed_hosts) {
        return plain(StatusCode::FORBIDDEN, "Host not allowed.");
    }
    if let Some(origin) = headers.get(ORIGIN)
        && !origin_allowed(origin, &policy.allowed_origins)
    {
        return plain(StatusCode::FORBIDDEN, "Origin not allowed.");
    }
    next.run(request).await
}

/// Exactly one `Authorization: Bearer <token>`. Digests are compared in constant time,
/// so neither the token's bytes nor its length leak through timing.
pub async fn authenticate(
    State(policy): State<Arc<Policy>>,
    request: Request,
    next: Next,
) -> Response {
    if bearer_matches(request.headers(), &policy.token_digest) {
        return next.run(request).await;
    }
    tracing::info!("refused an HTTP request without a valid bearer token");
    let mut response = plain(StatusCode::UNAUTHORIZED, "Missing or invalid bearer token.");
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"perplexity-agent\""),
    );
    response
}

fn bearer_matches(headers: &HeaderMap, expected: &[u8; 32]) -> bool {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let value = value.as_bytes();
    // The scheme is case-insensitive (RFC 9110); the token is not.
    let Some(token) = value
        .get(..7)
        .filter(|scheme| scheme.eq_ignore_ascii_case(b"bearer "))
        .and_then(|_| value.get(7..))
    else {
        return false;
    };
    let presented: [u8; 32] = sha2::Sha256::digest(token).into();
    presented.ct_eq(expected).into()
}

fn host_allowed(headers: &HeaderMap, extra: &[String]) -> bool {
    let Some(host) = headers.get(HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = strip_port(host.trim()).to_ascii_lowercase();
    LOOPBACK_HOSTS.contains(&name.as_str()) || extra.contains(&name)
}

/// `example.com:8080` → `example.com`; `[::1]:8080` → `[::1]`.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

fn origin_allowed(origin: &HeaderValue, extra: &[String]) -> bool {
    let Some(url) = origin.to_str().ok().and_then(|o| Url::parse(o).ok()) else {
        // Includes `Origin: null` (sandboxed frames, file: pages).
        return false;
    };
    if !matches!(url.scheme(), "http" | "https") {
        return false;
    }
    let loopback = url
        .host_str()
        .is_some_and(|h| LOOPBACK_HOSTS.contains(&h) || h.eq_ignore_ascii_case("localhost"));
    loopback || extra.contains(&url.origin().ascii_serialization())
}

pub fn plain(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
        Bytes::from(format!("{message}\n")),
    )
        .into_response()
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
    fn bearer() {
        let token = "a".repeat(40);
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let ok = |v: &str| bearer_matches(&headers(&[("authorization", v)]), &digest);
        assert!(ok(&format!("Bearer {token}")));
        assert!(ok(&format!("bearer {token}")));
        assert!(!ok(&format!("Bearer {token} ")));
        assert!(!ok(&format!("Bearer  {token}")));
        assert!(!ok(&format!("Basic {token}")));
        assert!(!ok(&token));
        assert!(!ok("Bearer "));
        assert!(!bearer_matches(&headers(&[]), &digest));
        let twice = headers(&[
            ("authorization", &format!("Bearer {token}")),
            ("authorization", &format!("Bearer {token}")),
        ]);
        assert!(!bearer_matches(&twice, &digest), "exactly one header");
    }

    #[test]
    fn hosts_and_origins() {
        let extra = vec!["mcp.example.com".to_owned()];
        let host = |h: &str| host_allowed(&headers(&[("host", h)]), &extra);
        for h in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:1",
            "[::1]:8080",
            "[::1]",
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
        ] {
            assert!(!host(h), "{h}");
        }
        assert!(!host_allowed(&headers(&[]), &extra));

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
        ] {
            assert!(!origin(o), "{o}");
        }
    }
}
