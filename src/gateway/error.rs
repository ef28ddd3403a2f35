//! Why a downstream server could not be used, as a type: callers (`gateway test`, the
//! tool results of downstream calls, doctor, `gateway add`) tell failures apart by
//! variant, never by the text. The text (`Display`) is for people: one sentence, saying
//! what to do, never a header value or other secret and never a Rust type name.
//!
//! rmcp's errors are mapped here ([`from_init`], [`from_service`]) by walking their
//! source chains and downcasting to the concrete errors its transports carry, so a
//! 401 stays a 401 whatever rmcp wraps it in.

use std::fmt;
use std::io::ErrorKind;

use rmcp::service::{ClientInitializeError, ServiceError};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpError,
};

use super::secrets::SecretError;

/// Error texts from downstream libraries and servers, bounded.
pub fn short(text: &str) -> String {
    crate::text::cap_chars(text, 300)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayError {
    /// The definition breaks the policy in force now, or cannot be set up here (its
    /// working directory, its CA bundle, a header value). The text names the fix.
    Policy(String),
    /// A sealed secret of the definition cannot be opened (no key, wrong key, damaged).
    Secret(SecretError),
    /// The stdio command is not an executable file in any directory of
    /// `PERPLEXITY_GATEWAY_PATH` (the only place commands are looked up).
    NotOnPath { command: String, path: String },
    /// The program was found but could not be started (not permitted, not a program).
    Spawn { program: String, reason: ErrorKind },
    /// An HTTP server answered 401 or 403. `sent_credentials`: this definition has
    /// headers (so they were refused, rather than missing).
    Unauthorized { status: u16, sent_credentials: bool },
    /// An HTTP server answered another error status (404, 429, 5xx …).
    HttpStatus { status: u16 },
    /// The TLS handshake failed (an untrusted or wrong certificate, most often).
    Tls(String),
    /// No answer within `PERPLEXITY_GATEWAY_TIMEOUT_SECONDS`.
    Timeout { seconds: u64 },
    /// The server answered, but not as an MCP server does (during the handshake or the
    /// tool listing that completes a connection).
    Handshake(String),
    /// The server answered a request with an MCP error.
    Refused(String),
    /// The connection could not be made or was lost (network, a process that exited).
    Transport(String),
    /// `PERPLEXITY_GATEWAY_MAX_STDIO` downstream processes are running already.
    TooManyProcesses { max: usize },
    /// An earlier attempt failed and the pause before the next one is not over.
    Backoff {
        last: Box<GatewayError>,
        seconds: u64,
    },
}

impl GatewayError {
    /// A stable name for scripts (`gateway test --json`'s `error_kind`).
    pub fn kind(&self) -> &'static str {
        match self {
            GatewayError::Policy(_) => "policy",
            GatewayError::Secret(_) => "secret",
            GatewayError::NotOnPath { .. } => "not_on_path",
            GatewayError::Spawn { .. } => "spawn",
            GatewayError::Unauthorized { .. } => "unauthorized",
            GatewayError::HttpStatus { .. } => "http_status",
            GatewayError::Tls(_) => "tls",
            GatewayError::Timeout { .. } => "timeout",
            GatewayError::Handshake(_) => "handshake",
            GatewayError::Refused(_) => "refused",
            GatewayError::Transport(_) => "transport",
            GatewayError::TooManyProcesses { .. } => "too_many_processes",
            GatewayError::Backoff { last, .. } => last.kind(),
        }
    }

    /// The failure behind a backoff (the one worth reporting).
    pub fn root(&self) -> &GatewayError {
        match self {
            GatewayError::Backoff { last, .. } => last.root(),
            other => other,
        }
    }

    /// With the exact values of `secrets` taken out of every text a downstream could
    /// have written (a hostile server may echo our `Authorization` header back).
    pub fn scrubbed(self, secrets: &[String]) -> GatewayError {
        let scrub = |t: String| crate::guard::redact::scrub_text(&t, secrets);
        match self {
            GatewayError::Handshake(t) => GatewayError::Handshake(scrub(t)),
            GatewayError::Refused(t) => GatewayError::Refused(scrub(t)),
            GatewayError::Transport(t) => GatewayError::Transport(scrub(t)),
            GatewayError::Tls(t) => GatewayError::Tls(scrub(t)),
            other => other,
        }
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatewayError::Policy(text) => f.write_str(text),
            GatewayError::Secret(e) => write!(f, "{e}"),
            GatewayError::NotOnPath { command, path } => write!(
                f,
                "'{command}' was not found on PERPLEXITY_GATEWAY_PATH ({path}): install it in one of those directories, or set PERPLEXITY_GATEWAY_PATH to include the directory that holds it"
            ),
            GatewayError::Spawn { program, reason } => {
                let why = match reason {
                    ErrorKind::PermissionDenied => {
                        "permission denied: make it executable by this user"
                    }
                    ErrorKind::NotFound => "it is gone, or its interpreter is missing",
                    _ => "check that it is a program this machine can run",
                };
                write!(f, "cannot start {program} ({reason}): {why}")
            }
            GatewayError::Unauthorized {
                status,
                sent_credentials: false,
            } => write!(
                f,
                "the server answered {status} ({}): it wants a credential — add one with --header \"Authorization: @env:VAR\" (gateway add … --replace)",
                status_name(*status)
            ),
            GatewayError::Unauthorized {
                status,
                sent_credentials: true,
            } => write!(
                f,
                "the server answered {status} ({}): it refused this server's --header credential — check the token (expired? enough scope?) and set it again with --header \"Authorization: @env:VAR\" (gateway add … --replace)",
                status_name(*status)
            ),
            GatewayError::HttpStatus { status } => {
                let what = match status {
                    404 => "check the URL: it must be the server's MCP endpoint (often …/mcp)",
                    405 | 406 | 415 => "is this URL a Streamable HTTP MCP endpoint?",
                    429 => "it is limiting requests; try again later",
                    500..=599 => "the server is failing; try again later or ask its operator",
                    _ => "check the URL and the server",
                };
                write!(f, "the server answered HTTP {status}: {what}")
            }
            GatewayError::Tls(detail) => write!(
                f,
                "the TLS handshake failed ({detail}): if the server uses a private CA, pass --ca-bundle <PEM> for it"
            ),
            GatewayError::Timeout { seconds } => write!(
                f,
                "no answer within {seconds}s: check that it is an MCP server and is up (PERPLEXITY_GATEWAY_TIMEOUT_SECONDS sets the wait)"
            ),
            GatewayError::Handshake(detail) => write!(f, "the MCP handshake failed: {detail}"),
            GatewayError::Refused(message) => write!(f, "the server refused: {message}"),
            GatewayError::Transport(detail) => f.write_str(detail),
            GatewayError::TooManyProcesses { max } => write!(
                f,
                "{max} downstream processes are running already (PERPLEXITY_GATEWAY_MAX_STDIO)"
            ),
            GatewayError::Backoff { last, seconds } => {
                write!(f, "{last} (next attempt in {seconds}s)")
            }
        }
    }
}

impl std::error::Error for GatewayError {}

fn status_name(status: u16) -> &'static str {
    match status {
        401 => "unauthorized",
        403 => "forbidden",
        _ => "refused",
    }
}

/// What the connection code knows that rmcp's errors do not.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// The definition sends headers (HTTP), so a 401 means they were refused.
    pub sent_credentials: bool,
}

/// A failed handshake (`serve_with_lifecycle`).
pub fn from_init(e: &ClientInitializeError, cx: Context) -> GatewayError {
    match e {
        ClientInitializeError::TransportError { error, .. } => {
            from_transport(error.error.as_ref(), cx)
        }
        // Discover, then the legacy initialize: an authorization failure in either is
        // the one to report (the other attempt could not have done better).
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            let (d, f) = (from_init(discover, cx), from_init(fallback, cx));
            if matches!(d, GatewayError::Unauthorized { .. })
                && !matches!(f, GatewayError::Unauthorized { .. })
            {
                d
            } else {
                f
            }
        }
        ClientInitializeError::ConnectionClosed(_) => GatewayError::Handshake(
            "the server closed the connection before answering (is it an MCP server?)".into(),
        ),
        ClientInitializeError::JsonRpcError(data) => GatewayError::Handshake(format!(
            "the server answered the handshake with an error: {}",
            short(&data.message)
        )),
        ClientInitializeError::NoCompatibleProtocolVersion {
            server_supported, ..
        } => GatewayError::Handshake(format!(
            "no protocol version in common (the server offers {})",
            short(
                &server_supported
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        )),
        ClientInitializeError::Cancelled => {
            GatewayError::Transport("the connection was cancelled".into())
        }
        ClientInitializeError::ExpectedInitResponse(_)
        | ClientInitializeError::ExpectedInitResult(_)
        | ClientInitializeError::ConflictInitResponseId(..)
        | ClientInitializeError::UncorrelatedErrorResponse { .. } => GatewayError::Handshake(
            "the server answered something other than the handshake's result".into(),
        ),
        // Variants added by later rmcp versions: their text, bounded (it names no types).
        other => GatewayError::Handshake(short(&other.to_string())),
    }
}

/// A failed request after the handshake (`tools/list`, `tools/call`).
pub fn from_service(e: &ServiceError, cx: Context) -> GatewayError {
    match e {
        ServiceError::McpError(data) => GatewayError::Refused(short(&data.message)),
        ServiceError::TransportSend(error) => from_transport(error.error.as_ref(), cx),
        ServiceError::TransportClosed => {
            GatewayError::Transport("the connection to the server closed".into())
        }
        ServiceError::Timeout { timeout } => GatewayError::Timeout {
            seconds: timeout.as_secs(),
        },
        ServiceError::UnexpectedResponse => {
            GatewayError::Handshake("the server answered with the wrong kind of result".into())
        }
        other => GatewayError::Transport(short(&other.to_string())),
    }
}

/// A transport's error: the first cause in its chain that we recognise. rmcp's own
/// wrapper (`DynamicTransportError`) is skipped: its text is Rust type names.
fn from_transport(error: &(dyn std::error::Error + 'static), cx: Context) -> GatewayError {
    let unauthorized = |status| GatewayError::Unauthorized {
        status,
        sent_credentials: cx.sent_credentials,
    };
    let mut current = Some(error);
    while let Some(e) = current {
        if e.is::<AuthRequiredError>() {
            return unauthorized(401);
        }
        if e.is::<InsufficientScopeError>() {
            return unauthorized(403);
        }
        if let Some(s) = e.downcast_ref::<HttpStatusError>() {
            return GatewayError::HttpStatus { status: s.status };
        }
        if let Some(http) = e.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
            return match http {
                StreamableHttpError::AuthRequired(_) => unauthorized(401),
                StreamableHttpError::InsufficientScope(_) => unauthorized(403),
                StreamableHttpError::HttpStatus(s) => GatewayError::HttpStatus { status: s.status },
                StreamableHttpError::Client(e) => from_reqwest(e),
                StreamableHttpError::Io(e) => from_io(e),
                // An error status without a WWW-Authenticate challenge: rmcp 3.11 keeps
                // only the text `HTTP <code> <reason>: <body>` (the body is dropped here:
                // it is the server's and could echo our headers).
                StreamableHttpError::UnexpectedServerResponse(text) => match leading_status(text) {
                    Some(status @ (401 | 403)) => unauthorized(status),
                    Some(status) => GatewayError::HttpStatus { status },
                    None => GatewayError::Handshake(format!("unexpected answer: {}", short(text))),
                },
                // Past the cap on one answer (`connection.rs`): said as what it is, not
                // as a broken handshake.
                StreamableHttpError::ResponseBodyTooLarge { max_size } => {
                    GatewayError::Transport(format!(
                        "the server's answer is larger than {} MiB, the most one downstream answer may be",
                        max_size / (1024 * 1024)
                    ))
                }
                StreamableHttpError::UnexpectedContentType(ct) => GatewayError::Handshake(format!(
                    "the server answered with content type {} (not JSON or an event stream): is this URL its MCP endpoint?",
                    short(ct.as_deref().unwrap_or("none"))
                )),
                // After the handshake, whatever else goes wrong is the transport's.
                _ => GatewayError::Transport(format!(
                    "the server's answer could not be read ({})",
                    short(&http.to_string())
                )),
            };
        }
        if let Some(e) = e.downcast_ref::<reqwest::Error>() {
            return from_reqwest(e);
        }
        if let Some(e) = e.downcast_ref::<std::io::Error>() {
            return from_io(e);
        }
        current = e.source();
    }
    GatewayError::Transport(short(&error.to_string()))
}

/// `HTTP 401 Unauthorized: …` → 401.
fn leading_status(text: &str) -> Option<u16> {
    let code = text.strip_prefix("HTTP ")?.get(..3)?;
    code.parse().ok().filter(|c| (400..600).contains(c))
}

/// reqwest's own text names the URL; ours names the cause (the innermost error).
fn from_reqwest(e: &reqwest::Error) -> GatewayError {
    if let Some(tls) = tls_cause(e) {
        return GatewayError::Tls(short(&tls.to_string()));
    }
    if e.is_timeout() {
        return GatewayError::Transport("the request to the server timed out".into());
    }
    let cause = short(&innermost(e));
    if e.is_connect() {
        return GatewayError::Transport(format!(
            "cannot connect to the server ({cause}): check the URL and that the server is up"
        ));
    }
    GatewayError::Transport(format!("the request to the server failed ({cause})"))
}

fn from_io(e: &std::io::Error) -> GatewayError {
    match e.kind() {
        ErrorKind::BrokenPipe | ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset => {
            GatewayError::Transport(
                "the server closed the connection (did its process exit? gateway test shows its stderr)".into(),
            )
        }
        kind => GatewayError::Transport(format!("the connection to the server failed ({kind})")),
    }
}

/// A rustls error in the chain. An io::Error hides its payload from `source()`, and
/// the TLS connector nests one io::Error in another, so payloads are opened too.
fn tls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut current = Some(e);
    while let Some(e) = current {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        current = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::streamable_http_client::StreamableHttpError;

    fn cx(sent_credentials: bool) -> Context {
        Context { sent_credentials }
    }

    fn http(e: StreamableHttpError<reqwest::Error>) -> GatewayError {
        from_transport(&e, cx(false))
    }

    #[test]
    fn http_statuses_keep_their_meaning() {
        assert_eq!(
            http(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                "Bearer realm=\"x\"".into()
            ))),
            GatewayError::Unauthorized {
                status: 401,
                sent_credentials: false
            }
        );
        assert_eq!(
            http(StreamableHttpError::InsufficientScope(
                InsufficientScopeError::new("Bearer error=\"insufficient_scope\"".into(), None)
            )),
            GatewayError::Unauthorized {
                status: 403,
                sent_credentials: false
            }
        );
        // Without a challenge rmcp keeps only its text; the body never reaches ours.
        let unchallenged = StreamableHttpError::<reqwest::Error>::UnexpectedServerResponse(
            "HTTP 401 Unauthorized: {\"echo\":\"Bearer s3cr3t\"}".into(),
        );
        let e = from_transport(&unchallenged, cx(true));
        assert_eq!(
            e,
            GatewayError::Unauthorized {
                status: 401,
                sent_credentials: true
            }
        );
        assert!(!e.to_string().contains("s3cr3t"));
        assert_eq!(
            http(StreamableHttpError::UnexpectedServerResponse(
                "HTTP 404 Not Found: nope".into()
            )),
            GatewayError::HttpStatus { status: 404 }
        );
        assert_eq!(
            http(StreamableHttpError::HttpStatus(HttpStatusError::new(
                503, None
            ))),
            GatewayError::HttpStatus { status: 503 }
        );
    }

    #[test]
    fn texts_say_what_to_do_and_name_no_types() {
        let e = GatewayError::Unauthorized {
            status: 401,
            sent_credentials: false,
        };
        let text = e.to_string();
        assert!(
            text.contains("401") && text.contains("--header \"Authorization: @env:VAR\""),
            "{text}"
        );
        let io = std::io::Error::new(ErrorKind::BrokenPipe, "Broken pipe");
        for e in [
            from_transport(&io, cx(false)),
            from_init(
                &ClientInitializeError::ConnectionClosed("x".into()),
                cx(false),
            ),
        ] {
            let text = e.to_string();
            assert!(
                !text.contains("rmcp::") && !text.contains("Transport ["),
                "{text}"
            );
        }
        let backoff = GatewayError::Backoff {
            last: Box::new(GatewayError::Timeout { seconds: 3 }),
            seconds: 2,
        };
        assert_eq!(backoff.kind(), "timeout");
        assert!(backoff.to_string().ends_with("(next attempt in 2s)"));
        let scrubbed = GatewayError::Handshake("it said token-abcdefgh".into())
            .scrubbed(&["token-abcdefgh".into()]);
        assert!(!scrubbed.to_string().contains("token-abcdefgh"));
    }
}
