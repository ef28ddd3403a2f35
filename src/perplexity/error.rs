//! What can go wrong talking to Perplexity, and the exact texts users see for it.
//!
//! Texts are wire strings that clients and the reference peer's tests depend on; keep
//! them byte-for-byte. A network failure is reported by its kind only, never by the
//! transport's message, which could echo request headers.

use std::fmt;

use super::breaker::{OPEN_AFTER, Outcome};

/// Upstream error messages are echoed, but bounded.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkKind {
    Timeout,
    Connect,
    Tls,
    Io,
}

impl NetworkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkKind::Timeout => "timeout",
            NetworkKind::Connect => "connect",
            NetworkKind::Tls => "tls",
            NetworkKind::Io => "io",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// `PERPLEXITY_API_KEY` unset or blank. Front ends phrase the fix for their setting.
    MissingKey,
    /// The key holds bytes that cannot go into an HTTP header (e.g. a stray newline).
    UnsendableKey,
    /// The HTTP client could not be set up (e.g. no usable certificate store).
    ClientSetup,
    Redirect(u16),
    Status {
        code: u16,
        message: Option<String>,
    },
    Network(NetworkKind),
    TooLarge(u64),
    /// A 2xx body that is not a JSON object.
    InvalidJson(u16),
    AttemptsExhausted {
        last: Box<ApiError>,
        attempts: u32,
    },
    DeadlineExceeded(Box<ApiError>),
    /// The circuit breaker is open: no request was sent.
    CircuitOpen {
        retry_in_secs: u64,
    },
}

impl ApiError {
    /// For metrics: `None` when nothing was sent (no key, an open circuit), `Some(None)`
    /// when no answer came, else the answer's status.
    pub fn sent_status(&self) -> Option<Option<u16>> {
        match self {
            ApiError::MissingKey
            | ApiError::UnsendableKey
            | ApiError::ClientSetup
            | ApiError::CircuitOpen { .. } => None,
            ApiError::Redirect(code) | ApiError::InvalidJson(code) => Some(Some(*code)),
            ApiError::Status { code, .. } => Some(Some(*code)),
            ApiError::TooLarge(_) => Some(Some(200)),
            ApiError::Network(_) => Some(None),
            ApiError::AttemptsExhausted { last, .. } | ApiError::DeadlineExceeded(last) => {
                last.sent_status()
            }
        }
    }

    /// 429/500/502/503/504 and network failures are worth another attempt; nothing else
    /// (a redirect, an oversized or invalid body, a 4xx) would go differently next time.
    pub fn is_retryable(&self) -> bool {
        match self {
            ApiError::Status { code, .. } => matches!(code, 429 | 500 | 502 | 503 | 504),
            ApiError::Network(_) => true,
            _ => false,
        }
    }

    /// The HTTP status behind this error, looking through retry wrappers.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } | ApiError::Redirect(code) => Some(*code),
            ApiError::InvalidJson(code) => Some(*code),
            ApiError::AttemptsExhausted { last, .. } | ApiError::DeadlineExceeded(last) => {
                last.http_status()
            }
            _ => None,
        }
    }

    /// True when the problem is the key itself (missing, unsendable, or refused).
    pub fn is_key_problem(&self) -> bool {
        matches!(self, ApiError::MissingKey | ApiError::UnsendableKey)
            || matches!(self.http_status(), Some(401 | 403))
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::MissingKey => f.write_str(
                "PERPLEXITY_API_KEY is not set. Add it to the 'env' block of this server's entry in your MCP client configuration.",
            ),
            ApiError::UnsendableKey => f.write_str(
                "PERPLEXITY_API_KEY contains characters that cannot be sent in an HTTP header. Check it for stray quotes, spaces or line breaks.",
            ),
            ApiError::ClientSetup => f.write_str(
                "Could not set up the HTTPS client: no usable TLS certificate store was found on this machine (install the ca-certificates package).",
            ),
            ApiError::Redirect(code) => write!(
                f,
                "Perplexity returned an HTTP {code} redirect, which this server refuses to follow."
            ),
            ApiError::Status {
                message: Some(m), ..
            } => f.write_str(m),
            ApiError::Status {
                code,
                message: None,
            } => write!(f, "Perplexity returned HTTP {code}."),
            ApiError::Network(kind) => write!(f, "network error ({})", kind.as_str()),
            ApiError::TooLarge(limit) => {
                write!(f, "Perplexity response exceeded the {limit}-byte limit.")
            }
            ApiError::InvalidJson(code) => write!(
                f,
                "Perplexity returned a response that is not valid JSON (HTTP {code})."
            ),
            ApiError::AttemptsExhausted { last, attempts } => {
                write!(f, "{last} (after {attempts} attempts)")
            }
            ApiError::DeadlineExceeded(last) => write!(f, "{last} (deadline exceeded)"),
            ApiError::CircuitOpen { retry_in_secs } => write!(
                f,
                "Perplexity is unavailable: {OPEN_AFTER} requests in a row failed, so requests are paused. Try again in {retry_in_secs}s."
            ),
        }
    }
}

impl ApiError {
    /// What this failure says about the host, for the circuit breaker.
    pub(crate) fn breaker_outcome(&self) -> Outcome {
        match self {
            // Nothing was sent.
            ApiError::MissingKey
            | ApiError::UnsendableKey
            | ApiError::ClientSetup
            | ApiError::CircuitOpen { .. } => Outcome::Unknown,
            ApiError::AttemptsExhausted { last, .. } | ApiError::DeadlineExceeded(last) => {
                last.breaker_outcome()
            }
            e if e.is_retryable() => Outcome::Outage,
            // A 4xx, a redirect, an oversized or invalid body: the host is up.
            _ => Outcome::Answered,
        }
    }
}

impl std::error::Error for ApiError {}

/// Classifies a transport failure by kind only: its message could echo headers.
pub(crate) fn network_kind(error: reqwest::Error) -> ApiError {
    let kind = if error.is_timeout() {
        NetworkKind::Timeout
    } else if crate::net::is_tls(&error) {
        NetworkKind::Tls
    } else if error.is_connect() {
        NetworkKind::Connect
    } else {
        NetworkKind::Io
    };
    ApiError::Network(kind)
}
