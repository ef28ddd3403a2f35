//! Fault injection: parsing fault JSON, matching faults to API routes, and building
//! the faulty responses (status, rate limit, redirect, bad JSON, oversized bodies,
//! dropped connections). `slow` is handled by the server (it sleeps, then handles
//! normally).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use super::clock::imf_fixdate;
use super::scenario::{boolean, ms, string, type_err, uint};

/// Upper bound of `retry_after_secs` (about 31 years), so date arithmetic cannot
/// overflow.
const MAX_RETRY_SECS: f64 = 1_000_000_000.0;

/// The API route a request was classified as (what a fault's `route` matches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Create,
    Get,
    Stream,
    Cancel,
    Search,
    Models,
    /// Any other path (only `any` faults match it).
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RouteFilter {
    Only(Route),
    Any,
}

#[derive(Debug, Clone)]
pub(crate) enum FaultKind {
    Status {
        status: StatusCode,
        body: Option<Body0>,
        headers: Vec<(HeaderName, HeaderValue)>,
    },
    Redirect {
        status: StatusCode,
        location: HeaderValue,
    },
    InvalidJson {
        status: StatusCode,
    },
    NonObjectJson {
        status: StatusCode,
    },
    Oversized {
        status: StatusCode,
        bytes: u64,
        chunked: bool,
    },
    RateLimit {
        status: StatusCode,
        form: RetryForm,
        secs: f64,
        should_retry: Option<bool>,
    },
    Slow {
        delay: Duration,
    },
    Drop,
}

/// How a `rate_limit` fault says when to retry (`retry_after_form`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryForm {
    /// `Retry-After: <integer seconds>`.
    Seconds,
    /// `Retry-After: <IMF-fixdate>`.
    HttpDate,
    /// `retry-after-ms: <integer ms>`.
    Ms,
    /// No retry header (only the `X-RateLimit-*` ones).
    None,
}

/// The body of a `status` fault.
#[derive(Debug, Clone)]
pub(crate) enum Body0 {
    Raw(String),
    Json(Value),
}

#[derive(Debug, Clone)]
pub(crate) struct Fault {
    route: RouteFilter,
    pub times: u64,
    pub kind: FaultKind,
}

const FAULT_FIELDS: &[&str] = &[
    "route",
    "kind",
    "times",
    "status",
    "body",
    "json",
    "headers",
    "location",
    "bytes",
    "chunked",
    "delay_ms",
    "retry_after_form",
    "retry_after_secs",
    "should_retry",
];

impl Fault {
    /// Parses one fault object. Unknown fields are errors.
    pub(crate) fn from_json(v: &Value) -> Result<Fault, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| type_err("fault", "a JSON object", v))?;
        if let Some(k) = obj.keys().find(|k| !FAULT_FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "unknown fault field `{k}` (known: {})",
                FAULT_FIELDS.join(", ")
            ));
        }
        let get = |k: &str| obj.get(k).filter(|v| !v.is_null());
        let route = match get("route")
            .map(|v| string("route", v))
            .transpose()?
            .as_deref()
        {
            None | Some("any") => RouteFilter::Any,
            Some("create") => RouteFilter::Only(Route::Create),
            Some("get") => RouteFilter::Only(Route::Get),
            Some("stream") => RouteFilter::Only(Route::Stream),
            Some("cancel") => RouteFilter::Only(Route::Cancel),
            Some("search") => RouteFilter::Only(Route::Search),
            Some("models") => RouteFilter::Only(Route::Models),
            Some(other) => {
                return Err(format!(
                    "unknown fault route `{other}` (create, get, stream, cancel, search, models, any)"
                ));
            }
        };
        let times = match get("times") {
            None => 1,
            Some(v) => uint("times", v)?,
        };
        if times == 0 {
            return Err("`times` must be at least 1".to_owned());
        }
        let status = |default: u16| -> Result<StatusCode, String> {
            let n = match get("status") {
                None => u64::from(default),
                Some(v) => uint("status", v)?,
            };
            u16::try_from(n)
                .ok()
                .filter(|n| (100..=999).contains(n))
                .and_then(|n| StatusCode::from_u16(n).ok())
                .ok_or_else(|| format!("`status` must be an HTTP status (100-999), got {n}"))
        };
        let kind_name = get("kind")
            .map(|v| string("kind", v))
            .transpose()?
            .unwrap_or_else(|| "status".to_owned());
        let kind = match kind_name.as_str() {
            "status" => {
                let body = match (get("body"), get("json")) {
                    (Some(_), Some(_)) => return Err("give `body` or `json`, not both".to_owned()),
                    (Some(b), None) => Some(Body0::Raw(string("body", b)?)),
                    (None, Some(j)) => Some(Body0::Json(j.clone())),
                    (None, None) => None,
                };
                let mut headers = Vec::new();
                if let Some(h) = get("headers") {
                    let map = h
                        .as_object()
                        .ok_or_else(|| type_err("headers", "a JSON object", h))?;
                    for (name, value) in map {
                        let name = HeaderName::try_from(name.as_str())
                            .map_err(|_| format!("invalid header name `{name}`"))?;
                        // The framing headers are hyper's business; a wrong one would
                        // corrupt the connection.
                        if name == header::CONTENT_LENGTH || name == header::TRANSFER_ENCODING {
                            return Err(format!("header `{name}` cannot be set by a fault"));
                        }
                        let value = match value {
                            Value::String(s) => s.clone(),
                            Value::Number(n) => n.to_string(),
                            other => return Err(type_err("headers{}", "a string", other)),
                        };
                        let value = HeaderValue::try_from(value)
                            .map_err(|_| format!("invalid value for header `{name}`"))?;
                        headers.push((name, value));
                    }
                }
                FaultKind::Status {
                    status: status(500)?,
                    body,
                    headers,
                }
            }
            "redirect" => {
                let location = get("location")
                    .map(|v| string("location", v))
                    .transpose()?
                    .unwrap_or_else(|| "http://127.0.0.1:1/elsewhere".to_owned());
                FaultKind::Redirect {
                    status: status(302)?,
                    location: HeaderValue::try_from(location)
                        .map_err(|_| "invalid `location`".to_owned())?,
                }
            }
            "invalid_json" => FaultKind::InvalidJson {
                status: status(200)?,
            },
            "non_object_json" => FaultKind::NonObjectJson {
                status: status(200)?,
            },
            "oversized" => FaultKind::Oversized {
                status: status(200)?,
                bytes: uint(
                    "bytes",
                    get("bytes").ok_or("an `oversized` fault needs `bytes`")?,
                )?,
                chunked: get("chunked")
                    .map(|v| boolean("chunked", v))
                    .transpose()?
                    .unwrap_or(false),
            },
            "slow" => FaultKind::Slow {
                delay: Duration::from_millis(ms(
                    "delay_ms",
                    get("delay_ms").ok_or("a `slow` fault needs `delay_ms`")?,
                )?),
            },
            "rate_limit" => {
                let form = match get("retry_after_form")
                    .map(|v| string("retry_after_form", v))
                    .transpose()?
                    .as_deref()
                {
                    None | Some("seconds") => RetryForm::Seconds,
                    Some("http_date") => RetryForm::HttpDate,
                    Some("ms") => RetryForm::Ms,
                    Some("none") => RetryForm::None,
                    Some(other) => {
                        return Err(format!(
                            "unknown `retry_after_form` `{other}` (seconds, http_date, ms, none)"
                        ));
                    }
                };
                let secs = match get("retry_after_secs") {
                    None => 1.0,
                    Some(v) => v
                        .as_f64()
                        .filter(|s| s.is_finite() && (0.0..=MAX_RETRY_SECS).contains(s))
                        .ok_or_else(|| {
                            format!(
                                "`retry_after_secs` must be a number between 0 and {MAX_RETRY_SECS}"
                            )
                        })?,
                };
                FaultKind::RateLimit {
                    status: status(429)?,
                    form,
                    secs,
                    should_retry: get("should_retry")
                        .map(|v| boolean("should_retry", v))
                        .transpose()?,
                }
            }
            "drop" => FaultKind::Drop,
            other => {
                return Err(format!(
                    "unknown fault kind `{other}` (status, rate_limit, redirect, invalid_json, non_object_json, oversized, slow, drop)"
                ));
            }
        };
        Ok(Fault { route, times, kind })
    }

    pub(crate) fn matches(&self, route: Route) -> bool {
        match self.route {
            RouteFilter::Any => true,
            RouteFilter::Only(r) => r == route,
        }
    }
}

/// Parses the body of `POST /_control/faults`: one fault object or an array of them.
pub(crate) fn parse_faults(v: &Value) -> Result<Vec<Fault>, String> {
    match v {
        Value::Array(items) => items.iter().map(Fault::from_json).collect(),
        other => Ok(vec![Fault::from_json(other)?]),
    }
}

fn with_status(mut resp: Response, status: StatusCode) -> Response {
    *resp.status_mut() = status;
    resp
}

fn set_header(resp: &mut Response, name: HeaderName, value: &'static str) {
    resp.headers_mut()
        .insert(name, HeaderValue::from_static(value));
}

/// A response whose body fails before its first byte: hyper then aborts the
/// connection without ever sending the (still buffered) response head.
pub(crate) fn drop_connection() -> Response {
    let stream = futures_util::stream::iter([Err::<Bytes, std::io::Error>(std::io::Error::other(
        "fault: drop",
    ))]);
    Response::new(Body::from_stream(stream))
}

/// The response of a fault (anything but `slow`, which has none).
pub(crate) fn respond(kind: &FaultKind) -> Response {
    match kind {
        FaultKind::Status {
            status,
            body,
            headers,
        } => {
            let mut resp = match body {
                Some(Body0::Raw(s)) => {
                    let mut r = Response::new(Body::from(s.clone()));
                    set_header(&mut r, header::CONTENT_TYPE, "text/plain; charset=utf-8");
                    r
                }
                Some(Body0::Json(j)) => json_body(j),
                // Live error responses may have no body at all (e.g. a bare 429).
                None => Response::new(Body::empty()),
            };
            *resp.status_mut() = *status;
            for (n, v) in headers {
                resp.headers_mut().insert(n.clone(), v.clone());
            }
            resp
        }
        FaultKind::RateLimit {
            status,
            form,
            secs,
            should_retry,
        } => rate_limited(*status, *form, *secs, *should_retry),
        FaultKind::Redirect { status, location } => {
            let mut resp = with_status(Response::new(Body::empty()), *status);
            resp.headers_mut()
                .insert(header::LOCATION, location.clone());
            resp
        }
        FaultKind::InvalidJson { status } => {
            let mut r = with_status(Response::new(Body::from("<html>oops")), *status);
            set_header(&mut r, header::CONTENT_TYPE, "application/json");
            r
        }
        FaultKind::NonObjectJson { status } => {
            let mut r = with_status(Response::new(Body::from("[1,2,3]")), *status);
            set_header(&mut r, header::CONTENT_TYPE, "application/json");
            r
        }
        FaultKind::Oversized {
            status,
            bytes,
            chunked,
        } => {
            let mut r = with_status(Response::new(oversized_body(*bytes)), *status);
            set_header(&mut r, header::CONTENT_TYPE, "application/json");
            if !chunked {
                r.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(*bytes));
            }
            r
        }
        // `slow` is handled by the caller; answering normally is the right fallback.
        FaultKind::Slow { .. } => with_status(Response::new(Body::empty()), StatusCode::OK),
        FaultKind::Drop => drop_connection(),
    }
}

/// A 429 as the API sends it (fixture 11's body, `X-RateLimit-*` headers) with the
/// retry hint in the asked form. Times are computed now, when the answer is built.
fn rate_limited(
    status: StatusCode,
    form: RetryForm,
    secs: f64,
    should_retry: Option<bool>,
) -> Response {
    let body = serde_json::json!({"error": {
        "message": "rate limit exceeded", "type": "request_rate_limit_exceeded",
        "code": status.as_u16()
    }});
    let mut r = json_body(&body);
    *r.status_mut() = status;
    // Whole seconds, rounded up, so that waiting until then is never too early.
    let reset = (crate::clock::since_epoch().as_secs_f64() + secs).ceil() as u64;
    let h = r.headers_mut();
    h.insert("x-ratelimit-limit", HeaderValue::from_static("50"));
    h.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
    h.insert("x-ratelimit-reset", HeaderValue::from(reset));
    match form {
        RetryForm::Seconds => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs.ceil() as u64));
        }
        RetryForm::HttpDate => {
            if let Ok(v) = HeaderValue::try_from(imf_fixdate(reset)) {
                h.insert(header::RETRY_AFTER, v);
            }
        }
        RetryForm::Ms => {
            h.insert(
                "retry-after-ms",
                HeaderValue::from((secs * 1000.0).ceil() as u64),
            );
        }
        RetryForm::None => {}
    }
    if let Some(b) = should_retry {
        h.insert(
            "x-should-retry",
            HeaderValue::from_static(if b { "true" } else { "false" }),
        );
    }
    r
}

fn json_body(v: &Value) -> Response {
    let mut r = Response::new(Body::from(v.to_string()));
    set_header(&mut r, header::CONTENT_TYPE, "application/json");
    r
}

const CHUNK: usize = 64 * 1024;

/// Exactly `n` bytes of `{"padding":"xxxx…"}`, streamed in 64 KiB chunks without ever
/// holding the whole body in memory. Shorter than the wrapper, it is its prefix.
pub(crate) fn oversized_body(n: u64) -> Body {
    const HEAD: &[u8] = b"{\"padding\":\"";
    const TAIL: &[u8] = b"\"}";
    let byte_at = move |i: u64| -> u8 {
        let wrapped = n >= (HEAD.len() + TAIL.len()) as u64;
        if i < HEAD.len() as u64 {
            HEAD[i as usize]
        } else if wrapped && i >= n - TAIL.len() as u64 {
            TAIL[(i - (n - TAIL.len() as u64)) as usize]
        } else {
            b'x'
        }
    };
    let stream = futures_util::stream::unfold(0u64, move |pos| async move {
        if pos >= n {
            return None;
        }
        let len = (n - pos).min(CHUNK as u64);
        let chunk: Vec<u8> = (pos..pos + len).map(byte_at).collect();
        Some((Ok::<Bytes, std::io::Error>(Bytes::from(chunk)), pos + len))
    });
    Body::from_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_defaults() {
        let f = Fault::from_json(&json!({"route": "get", "status": 503, "times": 2})).unwrap();
        assert_eq!(f.times, 2);
        assert!(f.matches(Route::Get));
        assert!(!f.matches(Route::Stream));
        assert!(matches!(f.kind, FaultKind::Status { status, .. } if status == 503));
        let f = Fault::from_json(&json!({"kind": "redirect"})).unwrap();
        assert!(f.matches(Route::Unknown));
        assert!(matches!(f.kind, FaultKind::Redirect { status, .. } if status == 302));
        let f = Fault::from_json(&json!({"kind": "rate_limit", "route": "models"})).unwrap();
        assert!(f.matches(Route::Models) && !f.matches(Route::Search));
        assert!(matches!(
            f.kind,
            FaultKind::RateLimit { status, form: RetryForm::Seconds, secs, should_retry: None }
                if status == 429 && secs == 1.0
        ));
        let f = Fault::from_json(&json!({
            "kind": "rate_limit", "status": 503, "retry_after_form": "ms",
            "retry_after_secs": 0.25, "should_retry": false
        }))
        .unwrap();
        assert!(matches!(
            f.kind,
            FaultKind::RateLimit { status, form: RetryForm::Ms, secs, should_retry: Some(false) }
                if status == 503 && secs == 0.25
        ));
    }

    #[test]
    fn parse_errors() {
        for bad in [
            json!(1),
            json!({"kind": "explode"}),
            json!({"route": "post"}),
            json!({"times": 0}),
            json!({"status": 42}),
            json!({"kind": "oversized"}),
            json!({"kind": "slow"}),
            json!({"headers": {"Content-Length": "3"}}),
            json!({"headers": {"bad name": "x"}}),
            json!({"stauts": 500}),
            json!({"kind": "rate_limit", "retry_after_form": "minutes"}),
            json!({"kind": "rate_limit", "retry_after_secs": -1}),
            json!({"kind": "rate_limit", "retry_after_secs": "1"}),
            json!({"kind": "rate_limit", "retry_after_secs": 1e12}),
            json!({"kind": "rate_limit", "should_retry": "yes"}),
        ] {
            assert!(Fault::from_json(&bad).is_err(), "{bad} should be rejected");
        }
    }
}
