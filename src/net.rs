//! Egress helpers shared by every module that connects out (`perplexity/`, `fetch/`,
//! `gateway/`): the one hardened HTTP client policy they all start from. Building an
//! HTTP client anywhere else is refused by clippy (`clippy.toml`). The shared state
//! engine builds its Redis client beside the rest of its Redis code (`state/shared/`),
//! with the same rules. Imports nothing of ours.

/// The policy every outbound HTTP client starts from:
/// - ring as the TLS provider (installing it twice is harmless);
/// - no redirects: a generic client copies credentials to wherever a 3xx points, and a
///   redirect could lead the fetcher past its address check;
/// - no transport retries: each caller retries inside its own deadline, or not at all;
/// - no ambient proxy: `HTTP(S)_PROXY` would route requests (and keys) past our checks —
///   a caller that needs a proxy sets it explicitly;
/// - no `Referer`, HTTP/1.1 only.
pub fn client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    #[allow(clippy::disallowed_methods)] // The one sanctioned place.
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .no_proxy()
        .referer(false)
        .http1_only()
}

/// Whether a URL's host is this machine's loopback (`localhost`, 127.0.0.0/8, `::1`): the
/// one place that decides where cleartext http is allowed (the API base for tests, an
/// OAuth issuer on this machine).
pub fn is_loopback_host(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether a reqwest error was a TLS failure (certificate, handshake), however deep
/// hyper nested it: reported as `tls`, never as a message that could carry a URL.
pub fn is_tls(error: &reqwest::Error) -> bool {
    tls_error(error).is_some()
}

/// The TLS failure inside a reqwest error, however deep hyper nested it.
pub fn tls_error(error: &reqwest::Error) -> Option<&rustls::Error> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        // An io::Error's `source()` skips the error it wraps (hyper nests them): look
        // inside, however deep.
        let mut wrapped = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref());
        while let Some(inner) = wrapped {
            if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                return Some(tls);
            }
            wrapped = inner
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref());
        }
        source = e.source();
    }
    None
}

/// What a TLS failure means for a person: the certificate, a server that does not speak
/// TLS at all (plain http on that port), or the handshake otherwise.
pub fn tls_failure_text(error: &rustls::Error) -> &'static str {
    match error {
        rustls::Error::InvalidCertificate(_) => {
            "the TLS certificate could not be verified for this name"
        }
        rustls::Error::InvalidMessage(_) => {
            "the server did not answer in TLS (does it speak plain http on this port?)"
        }
        _ => "the TLS handshake failed",
    }
}

/// `perplexity-agent healthcheck`: one `GET /healthz` to this machine's own server, over a
/// plain socket (no TLS, no client pool, no runtime: a container runs it every few
/// seconds). Loopback only, refused otherwise: the probe carries no token and answers
/// only "up or not", so it has no business reaching another machine.
pub fn probe_health(
    addr: std::net::SocketAddr,
    timeout: std::time::Duration,
) -> Result<(), String> {
    use std::io::{Read, Write};
    if !addr.ip().is_loopback() {
        return Err(format!(
            "{addr} is not a loopback address; healthcheck probes this machine's own server only"
        ));
    }
    let url = format!("http://{addr}/healthz");
    let failed = |what: &str, e: std::io::Error| format!("{url}: {what} ({})", e.kind());
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| failed("nothing answers there", e))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| failed("the socket cannot be set up", e))?;
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: perplexity-agent-healthcheck\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| failed("the request could not be sent", e))?;
    // The answer is a few dozen bytes; a peer that sends more is not our server.
    let mut answer = Vec::with_capacity(512);
    stream
        .take(4096)
        .read_to_end(&mut answer)
        .map_err(|e| failed("no complete answer", e))?;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.lines().next().unwrap_or_default();
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    if status.split_whitespace().nth(1) == Some("200") && body.trim() == "ok" {
        Ok(())
    } else {
        let status = status.chars().take(80).collect::<String>();
        Err(format!(
            "{url} answered {status:?}, not 200 \"ok\": is that this server?"
        ))
    }
}
