//! The one HTTP client for the Perplexity API: where the key goes, how long we wait,
//! how often we retry and how much we read.
//!
//! Security decisions enforced here (each is tested in `tests/e2e/client.rs`):
//! - The key is read per attempt and put into the `Authorization` header only, marked
//!   sensitive; never into a URL, body, log line or error text.
//! - Requests go only to `base` (Perplexity, or a loopback fake accepted by `config`);
//!   paths come from constants plus run ids that passed [`super::agent::valid_run_id`].
//! - Redirects are refused, never followed: a generic client would carry the
//!   `Authorization` header to wherever a 3xx points, even plain http.
//! - No ambient proxy (`HTTP(S)_PROXY` could silently reroute the key); only an explicit
//!   `PERPLEXITY_PROXY`, used as a CONNECT tunnel so TLS stays end to end.
//! - Bodies are capped while reading (Content-Length pre-check plus a running count);
//!   the overflow is decided before the retry decision, so it is never retried.
//! - A circuit breaker ([`super::breaker`]) fails calls fast, sending nothing, after five
//!   consecutive outages, so a dead upstream costs each call nothing rather than its budget.
//! - Our loop is the only retry: reqwest's own transport retries are off, so a create
//!   cannot be sent twice behind our back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, RETRY_AFTER, USER_AGENT,
};
use reqwest::{Method, Response, StatusCode, Url};
use secrecy::ExposeSecret;
use secrecy::zeroize::Zeroizing;
use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::breaker::{CircuitBreaker, Outcome};
use super::config::{ApiConfig, redacted_proxy};
use super::error::{ApiError, MAX_ERROR_MESSAGE_CHARS, NetworkKind, network_kind};
use super::key::{self, Scrubber};
use super::stream::EventStream;
use crate::text::cap_chars;

/// Every attempt gets at least this long, even past the deadline, so a call whose
/// budget is spent still makes one bounded request instead of none.
const MIN_ATTEMPT: Duration = Duration::from_secs(1);
/// Requests to Perplexity in flight at once; more wait their turn within their deadline.
const MAX_REQUESTS_IN_FLIGHT: usize = 64;
/// A numeric `Retry-After` is honoured up to this long (and never past the deadline).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

pub struct PerplexityClient {
    /// Built on the first request: loading the system certificate store costs a few
    /// milliseconds that `initialize` and `tools/list` should not pay, and a machine
    /// without one must still serve everything that needs no network.
    http: OnceLock<Result<reqwest::Client, ApiError>>,
    base: Url,
    config: ApiConfig,
    user_agent: HeaderValue,
    /// Retries made so far (for `server_metrics`).
    retries: AtomicU64,
    breaker: CircuitBreaker,
    /// Event streams held open at once. A stream costs a connection and its buffers for
    /// the whole wait; past this many, waits poll instead, so a thousand
    /// waiting calls do not hold a thousand upstream connections.
    streams: Arc<Semaphore>,
    /// Requests in flight at once (a followed event stream holds no slot once its
    /// response has started: `streams` bounds those).
    requests: Semaphore,
}

/// What a request expects back on success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    /// A JSON object.
    Object,
    /// Anything: the status is the answer (cancel).
    Nothing,
    /// An event stream, or a JSON object when the server ignores `stream: true`.
    EventStream,
}

pub(crate) struct Request<'a> {
    pub method: Method,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub body: Option<&'a [u8]>,
    pub expect: Expect,
    /// Sent without the key: for the endpoints that need none (`GET /v1/models`), so
    /// the key goes nowhere it is not required.
    pub anonymous: bool,
}

impl<'a> Request<'a> {
    pub fn new(method: Method, path: &'a str, expect: Expect) -> Self {
        Request {
            method,
            path,
            query: None,
            body: None,
            expect,
            anonymous: false,
        }
    }

    pub fn anonymous(mut self) -> Self {
        self.anonymous = true;
        self
    }

    pub fn query(mut self, query: &'a str) -> Self {
        self.query = Some(query);
        self
    }

    /// A JSON body (sent with `Content-Type: application/json`).
    pub fn body(mut self, body: &'a [u8]) -> Self {
        self.body = Some(body);
        self
    }

    /// What the request is, as a metrics label (fixed words, never the path's run id).
    fn endpoint(&self) -> &'static str {
        match (&self.method, self.path) {
            (_, p) if p.ends_with("/cancel") => "cancel",
            (_, p) if p.ends_with("/search") => "search",
            (_, p) if p.ends_with("/models") => "models",
            (&Method::POST, _) => "create",
            _ => "retrieve",
        }
    }
}

pub(crate) enum Success {
    Object(Map<String, Value>),
    Nothing,
    /// A 2xx `text/event-stream` response whose body has not been read yet, its events
    /// passed through the scrubber.
    Stream(EventStream),
}

struct Failure {
    error: ApiError,
    hint: RetryHint,
}

impl From<ApiError> for Failure {
    fn from(error: ApiError) -> Self {
        Failure {
            error,
            hint: RetryHint::default(),
        }
    }
}

/// What an error response says about retrying, in the forms the official SDKs honour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RetryHint {
    /// `retry-after-ms`, else `Retry-After` as seconds (fractions allowed) or an HTTP-date.
    after: Option<Duration>,
    /// `x-should-retry: true|false` overrides the status code's verdict.
    should_retry: Option<bool>,
}

impl PerplexityClient {
    pub fn new(config: &ApiConfig) -> Result<Self, String> {
        if let Some(proxy) = &config.proxy {
            reqwest::Proxy::all(proxy.as_str())
                .map_err(|_| "PERPLEXITY_PROXY is not a usable proxy URL".to_owned())?;
            tracing::info!(
                proxy = %redacted_proxy(proxy),
                "using PERPLEXITY_PROXY for the Perplexity API"
            );
        }
        let user_agent =
            HeaderValue::from_static(concat!("perplexity-agent/", env!("CARGO_PKG_VERSION")));
        Ok(PerplexityClient {
            http: OnceLock::new(),
            base: config.base.clone(),
            config: config.clone(),
            user_agent,
            retries: AtomicU64::new(0),
            breaker: CircuitBreaker::new(config.circuit_cooldown),
            streams: Arc::new(Semaphore::new(config.max_event_streams)),
            requests: Semaphore::new(MAX_REQUESTS_IN_FLIGHT),
        })
    }

    fn http(&self) -> Result<&reqwest::Client, ApiError> {
        self.http
            .get_or_init(|| build_http(&self.config))
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn config(&self) -> &ApiConfig {
        &self.config
    }

    /// Retries made since start.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// A slot for one event stream, if any is free (else the caller polls).
    pub(crate) fn stream_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.streams.clone().try_acquire_owned().ok()
    }

    /// True while the circuit breaker refuses requests.
    pub fn circuit_open(&self) -> bool {
        self.breaker.is_open(Instant::now())
    }
}

/// The reqwest client: the shared egress policy (`net::client_builder`: no redirects,
/// no transport retries, no ambient proxy) plus only an explicit `PERPLEXITY_PROXY`.
fn build_http(config: &ApiConfig) -> Result<reqwest::Client, ApiError> {
    let mut builder = crate::net::client_builder()
        .pool_idle_timeout(Duration::from_secs(60))
        // Polling waits reuse a few connections; more idle ones would only cost memory.
        .pool_max_idle_per_host(32);
    builder = match config
        .proxy
        .as_ref()
        .map(|p| reqwest::Proxy::all(p.as_str()))
    {
        Some(Ok(proxy)) => builder.proxy(proxy),
        Some(Err(_)) => return Err(ApiError::ClientSetup),
        None => builder,
    };
    if config.base.scheme() == "http" {
        // A loopback test base never uses TLS: do not require a certificate store.
        builder = builder.tls_certs_only(Vec::new());
    }
    builder.build().map_err(|_| ApiError::ClientSetup)
}

impl PerplexityClient {
    /// Sends `request` with retries, all inside `deadline`, unless the breaker is open.
    pub(crate) async fn send(
        &self,
        request: &Request<'_>,
        deadline: Instant,
    ) -> Result<Success, ApiError> {
        let permit = self
            .breaker
            .admit(Instant::now())
            .map_err(|open| ApiError::CircuitOpen {
                retry_in_secs: open.retry_in.as_secs_f64().ceil() as u64,
            })?;
        // Boxed: a request's state (reqwest's, the retries') is large, and unboxed every
        // wait that makes requests would be that much larger while it only sleeps.
        let result = Box::pin(self.send_with_retries(request, deadline)).await;
        let outcome = match &result {
            Ok(_) => Outcome::Answered,
            Err(e) => e.breaker_outcome(),
        };
        permit.settle(outcome, Instant::now());
        result
    }

    async fn send_with_retries(
        &self,
        request: &Request<'_>,
        deadline: Instant,
    ) -> Result<Success, ApiError> {
        let attempts = self.config.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let timeout = self.attempt_timeout(deadline);
            let started = Instant::now();
            let attempted = self.attempt(request, timeout).await;
            let sent = match &attempted {
                Ok(_) => Some(Some(200)),
                Err(failure) => failure.error.sent_status(),
            };
            if let Some(status) = sent {
                crate::telemetry::upstream(request.endpoint(), status, started.elapsed());
            }
            let failure = match attempted {
                Ok(success) => return Ok(success),
                Err(failure) => failure,
            };
            // The server's own word wins over the status code, as in the official SDKs
            // (but a request that never got an answer has no such word).
            let retryable = failure
                .hint
                .should_retry
                .unwrap_or_else(|| failure.error.is_retryable());
            if !retryable {
                return Err(failure.error);
            }
            if attempt >= attempts {
                return Err(ApiError::AttemptsExhausted {
                    last: Box::new(failure.error),
                    attempts,
                });
            }
            let pause = failure
                .hint
                .after
                .map(|d| d.min(MAX_RETRY_AFTER))
                .unwrap_or_else(|| backoff(attempt));
            // Never sleep past the deadline: give up now, with what we know.
            if Instant::now() + pause >= deadline {
                return Err(ApiError::DeadlineExceeded(Box::new(failure.error)));
            }
            tracing::debug!(attempt, ?pause, error = %failure.error, "retrying Perplexity request");
            if pause >= NOTICEABLE_PAUSE {
                let wait = RetryWait {
                    pause,
                    status: failure.error.http_status(),
                    next_attempt: attempt + 1,
                    attempts,
                };
                let _ = RETRY_WAITS.try_with(|tell| tell(&wait));
            }
            tokio::time::sleep(pause).await;
            self.retries.fetch_add(1, Ordering::Relaxed);
            crate::telemetry::retried();
            attempt += 1;
        }
    }

    /// `min(per-attempt timeout, max(1 s, time left))`.
    pub(crate) fn attempt_timeout(&self, deadline: Instant) -> Duration {
        deadline
            .saturating_duration_since(Instant::now())
            .max(MIN_ATTEMPT)
            .min(self.config.attempt_timeout)
    }

    async fn attempt(&self, request: &Request<'_>, timeout: Duration) -> Result<Success, Failure> {
        let (authorization, scrubber) = if request.anonymous {
            // Still scrub answers for the key when there is one (defence in depth).
            let key = key::read().unwrap_or_else(|_| secrecy::SecretString::from(String::new()));
            (None, Scrubber::new(&key))
        } else {
            let key = key::read()?;
            (Some(authorization_header(&key)?), Scrubber::new(&key))
        };
        let accept = match request.expect {
            Expect::EventStream => "text/event-stream",
            _ => "application/json",
        };
        let max = self.config.max_response_bytes;
        let exchange = async {
            // Queue for a connection slot (inside the attempt's timeout): a burst of a
            // thousand calls then opens dozens of connections, not a thousand. The request
            // is built once it has one, so a queued call holds no headers, URL or body.
            let _slot = self.requests.acquire().await;
            let mut url = self.base.clone();
            url.set_path(request.path);
            url.set_query(request.query);
            let mut builder = self
                .http()?
                .request(request.method.clone(), url)
                .header(USER_AGENT, self.user_agent.clone())
                .header(ACCEPT, accept);
            if let Some(authorization) = authorization {
                builder = builder.header(AUTHORIZATION, authorization);
            }
            // The call's trace (W3C Trace Context), so Perplexity's side of a run can be
            // found from the caller's trace id; it names ids only, never content.
            if let Some(traceparent) = super::trace::current() {
                builder = builder.header("traceparent", traceparent);
            }
            builder = match request.body {
                Some(body) => builder
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.to_vec()),
                // A bodiless POST still says `Content-Length: 0`.
                None if request.method == Method::POST => builder.header(CONTENT_LENGTH, "0"),
                None => builder,
            };
            let mut response = builder.send().await.map_err(network_error)?;
            let status = response.status();
            if status.is_redirection() {
                return Err(ApiError::Redirect(status.as_u16()).into());
            }
            if !status.is_success() {
                let hint = retry_hint(response.headers(), SystemTime::now());
                let body = scrubber.bytes(read_capped(&mut response, max).await?);
                return Err(Failure {
                    error: ApiError::Status {
                        code: status.as_u16(),
                        message: error_message(&body).map(|m| scrubber.text(m)),
                    },
                    hint,
                });
            }
            if request.expect == Expect::EventStream && is_event_stream(&response) {
                return Ok(Success::Stream(EventStream::new(response, max, scrubber)));
            }
            let body = scrubber.bytes(read_capped(&mut response, max).await?);
            if request.expect == Expect::Nothing {
                return Ok(Success::Nothing);
            }
            parse_object(&body, status)
                .map(|mut map| {
                    scrubber.map(&mut map);
                    Success::Object(map)
                })
                .map_err(Failure::from)
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(ApiError::Network(NetworkKind::Timeout).into()))
    }
}

/// `Bearer <key>`, marked sensitive so it never shows in debug output. The formatted
/// copy is zeroized when dropped.
fn authorization_header(key: &secrecy::SecretString) -> Result<HeaderValue, ApiError> {
    let text = Zeroizing::new(format!("Bearer {}", key.expose_secret()));
    let mut value = HeaderValue::from_str(&text).map_err(|_| ApiError::UnsendableKey)?;
    value.set_sensitive(true);
    Ok(value)
}

/// A pause before a retry long enough that a person watching would think nothing moves.
const NOTICEABLE_PAUSE: Duration = Duration::from_secs(2);

/// A request waiting before its next attempt (a `Retry-After`, or the backoff).
#[derive(Debug, Clone, Copy)]
pub struct RetryWait {
    pub pause: Duration,
    /// The status that asked for the wait; `None` for a network failure.
    pub status: Option<u16>,
    pub next_attempt: u32,
    pub attempts: u32,
}

tokio::task_local! {
    /// Told of every noticeable wait before a retry, within the calls it is set around:
    /// the command line shows it, so a long `Retry-After` is not a silent spinner.
    /// Unset (every other front end), nobody is told.
    pub static RETRY_WAITS: std::sync::Arc<dyn Fn(&RetryWait) + Send + Sync>;
}

/// Before attempt n+1: `2^(n-1) + U[0,1)` seconds, i.e. [1, 2) s then [2, 3) s.
fn backoff(attempt: u32) -> Duration {
    let base = 2f64.powi(attempt.saturating_sub(1).min(16) as i32);
    Duration::from_secs_f64(base + unit_random())
}

fn unit_random() -> f64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// Reads `retry-after-ms`, `Retry-After` (seconds or an HTTP-date, relative to `now`)
/// and `x-should-retry`. Nonsense (negative, non-finite, unparsable) counts as absent.
fn retry_hint(headers: &reqwest::header::HeaderMap, now: SystemTime) -> RetryHint {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let seconds = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0 && *n < 1e9)
            .map(Duration::from_secs_f64)
    };
    let after = text("retry-after-ms")
        .and_then(seconds)
        .map(|d| d / 1000)
        .or_else(|| {
            let value = text(RETRY_AFTER.as_str())?;
            seconds(value).or_else(|| {
                let at = httpdate::parse_http_date(value).ok()?;
                Some(at.duration_since(now).unwrap_or(Duration::ZERO))
            })
        });
    RetryHint {
        after,
        should_retry: text("x-should-retry").and_then(|v| v.parse().ok()),
    }
}

pub(crate) fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

/// Reads the whole body, refusing more than `max` bytes (exactly `max` is fine).
async fn read_capped(response: &mut Response, max: u64) -> Result<Vec<u8>, ApiError> {
    if response.content_length().is_some_and(|len| len > max) {
        return Err(ApiError::TooLarge(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(network_kind)? {
        if body.len() as u64 + chunk.len() as u64 > max {
            return Err(ApiError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn parse_object(body: &[u8], status: StatusCode) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(ApiError::InvalidJson(status.as_u16())),
    }
}

/// `error.message` of an error body, when it is a non-empty string (capped).
/// `error.code` is never read: it is an integer live and a string in the OpenAPI.
fn error_message(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    if let Some(message) = value
        .get("error")
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
    {
        return (!message.is_empty()).then(|| cap_chars(message, MAX_ERROR_MESSAGE_CHARS));
    }
    // The Search API's validation errors (422): {"detail":[{"loc":[…],"msg":…}]}.
    let first = value.get("detail")?.as_array()?.first()?;
    let msg = first.get("msg")?.as_str()?;
    let loc: Vec<String> = first
        .get("loc")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let text = if loc.is_empty() {
        msg.to_owned()
    } else {
        format!("{}: {msg}", loc.join("."))
    };
    Some(cap_chars(&text, MAX_ERROR_MESSAGE_CHARS))
}

fn network_error(error: reqwest::Error) -> Failure {
    network_kind(error).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_hints_in_every_official_form() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_785_100_000);
        let hint = |pairs: &[(&'static str, &str)]| {
            let mut headers = reqwest::header::HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            retry_hint(&headers, now)
        };
        assert_eq!(
            hint(&[("retry-after", "3")]).after,
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            hint(&[("retry-after", "1.5")]).after,
            Some(Duration::from_millis(1500))
        );
        // retry-after-ms is the more precise one and wins.
        assert_eq!(
            hint(&[("retry-after-ms", "250"), ("retry-after", "9")]).after,
            Some(Duration::from_millis(250))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(
            hint(&[("retry-after", &date)]).after,
            Some(Duration::from_secs(7))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(hint(&[("retry-after", &past)]).after, Some(Duration::ZERO));
        assert_eq!(hint(&[("retry-after", "-1")]).after, None);
        assert_eq!(hint(&[("retry-after", "soon")]).after, None);
        assert_eq!(
            hint(&[("x-should-retry", "false")]).should_retry,
            Some(false)
        );
        assert_eq!(hint(&[("x-should-retry", "true")]).should_retry, Some(true));
        assert_eq!(hint(&[("x-should-retry", "maybe")]).should_retry, None);
    }

    #[test]
    fn backoff_schedule() {
        for _ in 0..100 {
            let first = backoff(1).as_secs_f64();
            let second = backoff(2).as_secs_f64();
            assert!((1.0..2.0).contains(&first), "{first}");
            assert!((2.0..3.0).contains(&second), "{second}");
        }
    }

    #[test]
    fn error_messages_are_capped_and_typed() {
        assert_eq!(
            error_message(br#"{"error":{"message":"Invalid API key","code":401}}"#).as_deref(),
            Some("Invalid API key")
        );
        assert_eq!(error_message(br#"{"error":{"message":""}}"#), None);
        assert_eq!(error_message(br#"{"error":{"message":5}}"#), None);
        assert_eq!(error_message(b"<html>"), None);
        let long = format!(r#"{{"error":{{"message":"{}"}}}}"#, "x".repeat(900));
        assert_eq!(error_message(long.as_bytes()).unwrap().chars().count(), 500);
    }
}
