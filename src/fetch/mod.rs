//! The SSRF-guarded page fetcher: **the only egress besides the Perplexity API.** An
//! auditor asking "where can a URL an agent names make us connect?" reads this folder.
//!
//! For the first URL and every redirect hop (`address.rs` decides on the *parsed* host):
//! http/https only, no userinfo; a name is resolved here, with a timeout, and the fetch
//! is refused if **any** address is not public; the connection then goes to exactly the
//! validated addresses (the name still goes out as `Host` and TLS SNI, so certificates
//! are checked against it), leaving no second lookup for DNS rebinding to exploit.
//! Redirects are followed by hand (≤ 5, each hop re-validated, never https → http);
//! environment proxies are ignored; only text-like content types are read, with the size
//! cap checked on `Content-Length` before reading and counted while streaming; compressed
//! bodies are never inflated. The text is extracted, capped and handed back for scanning
//! and spotlighting by the caller. No credentials, cookies or API key are ever sent.

pub mod address;
mod content;
mod render;
mod resolve;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, LOCATION};
use tokio::time::Instant;
use url::Url;

pub use address::{AllowPrivate, parse_allow_private};

/// The https URL a person most likely meant by a web address typed without a scheme
/// (`example.com/x`, `localhost:8080/x`); `None` for anything else — another scheme
/// (`ftp://…`, `mailto:…`), or text that is no host at all (`http://`, `not a url`) —
/// so that no front end suggests nonsense like `https://ftp://x.org/`.
pub fn https_guess(typed: &str) -> Option<String> {
    let typed = typed.trim().trim_start_matches('/');
    if typed.contains("://") {
        return None;
    }
    // `localhost:8080` parses as the scheme `localhost`: a port after the colon says
    // it is a host.
    let host_port = typed.split_once(':').is_some_and(|(_, after)| {
        let port: String = after.chars().take_while(char::is_ascii_digit).collect();
        !port.is_empty() && after[port.len()..].chars().next().is_none_or(|c| c == '/')
    });
    if url::Url::parse(typed).is_ok() && !host_port {
        return None;
    }
    let guess = format!("https://{typed}");
    url::Url::parse(&guess)
        .ok()
        .filter(|u| u.host_str().is_some_and(|h| !h.is_empty()) && u.username().is_empty())
        .map(|_| guess)
}
use address::{Target, check_addr, target_of};
pub use resolve::{Resolve, SystemResolver};

/// Redirect hops followed before giving up.
pub const MAX_REDIRECTS: usize = 5;
/// Name resolution gets at most this long.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
const USER_AGENT: &str = concat!(
    "perplexity-agent/",
    env!("CARGO_PKG_VERSION"),
    " (+https://github.com/perplexity-agent/perplexity-agent)"
);

#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// `PERPLEXITY_FETCH_ALLOW_PRIVATE`: lifts only the address check.
    pub allow_private: AllowPrivate,
    /// The whole fetch, redirects included.
    pub timeout: Duration,
    /// Body bytes read at most (`PERPLEXITY_FETCH_MAX_BYTES`).
    pub max_bytes: u64,
    /// Characters of extracted text kept.
    pub max_chars: usize,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            allow_private: AllowPrivate::None,
            timeout: Duration::from_secs(30),
            max_bytes: 5 * 1024 * 1024,
            max_chars: 80_000,
        }
    }
}

/// One fetched page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub requested_url: String,
    pub final_url: String,
    pub status: u16,
    pub content_type: Option<String>,
    pub title: Option<String>,
    pub text: String,
    /// The body or the text was cut at its cap.
    pub truncated: bool,
    pub fetched_bytes: u64,
}

/// How a refused address's message ends: worded for an agent, who cannot lift the check.
/// A front end whose user is the operator (the CLI) words it for them with
/// [`for_the_operator`], so the fetcher need not know who asked.
pub const OPERATOR_CAN_ALLOW: &str =
    "(the server's operator can allow it with PERPLEXITY_FETCH_ALLOW_PRIVATE)";

/// A refused address's message for the person who can lift the check: the setting's
/// value for this address, or for every address. `None` for any other message.
pub fn for_the_operator(message: &str) -> Option<String> {
    let head = message.strip_suffix(OPERATOR_CAN_ALLOW)?;
    // The message starts with the refused address (`127.0.0.1 is loopback; …`).
    let network = head
        .split_once(" is ")
        .and_then(|(ip, _)| ip.parse::<IpAddr>().ok())
        .map(|ip| format!("{ip}/{}", if ip.is_ipv4() { 32 } else { 128 }));
    let var = "PERPLEXITY_FETCH_ALLOW_PRIVATE";
    Some(match network {
        Some(network) => format!(
            "{head}(you can allow it with {var}={network}, or every address with {var}=true)"
        ),
        None => format!(
            "{head}(you can allow it with {var}=true, or for some networks with a comma list such as {var}=10.1.0.0/16)"
        ),
    })
}

/// Why a URL was not fetched. `kind` is a stable machine-readable label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchError {
    pub kind: &'static str,
    pub message: String,
}

impl FetchError {
    fn new(kind: &'static str, message: impl Into<String>) -> Self {
        FetchError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub struct Fetcher {
    config: FetchConfig,
    resolver: Arc<dyn Resolve>,
}

impl Fetcher {
    pub fn new(config: FetchConfig, resolver: Arc<dyn Resolve>) -> Self {
        Fetcher { config, resolver }
    }

    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Fetches `raw` and extracts its text, under one deadline for every hop.
    pub async fn fetch(&self, raw: &str) -> Result<Page, FetchError> {
        let deadline = Instant::now() + self.config.timeout;
        match tokio::time::timeout_at(deadline, self.fetch_hops(raw)).await {
            Ok(result) => result,
            Err(_) => Err(FetchError::new(
                "timeout",
                format!(
                    "the fetch took longer than {}s",
                    self.config.timeout.as_secs()
                ),
            )),
        }
    }

    async fn fetch_hops(&self, raw: &str) -> Result<Page, FetchError> {
        let mut url = Url::parse(raw.trim())
            .map_err(|e| FetchError::new("invalid_url", format!("not a valid URL ({e})")))?;
        let requested_url = url.to_string();
        let mut hops = 0;
        loop {
            let addrs = self.validate(&url).await?;
            let mut response = self.request(&url, &addrs).await?;
            let status = response.status();
            if status.is_redirection()
                && let Some(location) = response.headers().get(LOCATION)
            {
                hops += 1;
                if hops > MAX_REDIRECTS {
                    return Err(FetchError::new(
                        "too_many_redirects",
                        format!("more than {MAX_REDIRECTS} redirects"),
                    ));
                }
                let next = location
                    .to_str()
                    .ok()
                    .and_then(|l| url.join(l).ok())
                    .ok_or_else(|| {
                        FetchError::new("bad_redirect", "a redirect to an invalid location")
                    })?;
                if url.scheme() == "https" && next.scheme() == "http" {
                    return Err(FetchError::new(
                        "insecure_redirect",
                        format!("refused a redirect from https to plain http ({next})"),
                    ));
                }
                url = next;
                continue;
            }
            if status.as_u16() >= 400 {
                return Err(FetchError::new(
                    "http_status",
                    format!("the server answered HTTP {}", status.as_u16()),
                ));
            }
            if status.is_redirection() {
                return Err(FetchError::new(
                    "bad_redirect",
                    "a redirect without a location",
                ));
            }
            let headers = response.headers();
            if let Some(encoding) = headers.get(CONTENT_ENCODING)
                && !encoding.as_bytes().eq_ignore_ascii_case(b"identity")
            {
                // We asked for identity: inflating would let a small body become huge.
                return Err(FetchError::new(
                    "compressed",
                    "the server sent a compressed body, which is not accepted",
                ));
            }
            let content_type = headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            if !content::text_like(content_type.as_deref()) {
                return Err(FetchError::new(
                    "unsupported_content_type",
                    format!(
                        "{} is not a text content type; only web pages and text are fetched",
                        content_type.as_deref().unwrap_or("?")
                    ),
                ));
            }
            let max = self.config.max_bytes;
            if response.content_length().is_some_and(|len| len > max) {
                return Err(FetchError::new(
                    "too_large",
                    format!("the page is larger than the {max}-byte cap"),
                ));
            }
            let mut body = Vec::new();
            let mut cut = false;
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|_| FetchError::new("network", "the connection failed while reading"))?
            {
                let room = (max - body.len() as u64) as usize;
                let take = chunk.len().min(room);
                // Grow by doubling, but never past the cap: memory stays within it.
                if body.len() + take > body.capacity() {
                    let grow = body.capacity().max(64 * 1024).min(room);
                    body.reserve_exact(grow.max(take));
                }
                body.extend_from_slice(&chunk[..take]);
                if take < chunk.len() {
                    cut = true;
                    break;
                }
            }
            drop(response);
            // Parsing a page is CPU work: keep it off the async workers, which also
            // serve pings and other requests.
            let (body, extracted) = {
                let (page_url, max_chars, ctype) =
                    (url.to_string(), self.config.max_chars, content_type.clone());
                tokio::task::spawn_blocking(move || {
                    let extracted = content::extract(&body, ctype.as_deref(), &page_url, max_chars);
                    (body, extracted)
                })
                .await
                .map_err(|_| FetchError::new("not_text", "the page could not be processed"))?
            };
            let extracted = extracted.map_err(|e| FetchError::new("not_text", e))?;
            return Ok(Page {
                requested_url,
                final_url: url.to_string(),
                status: status.as_u16(),
                content_type,
                title: extracted.title,
                text: extracted.text,
                truncated: cut || extracted.truncated,
                fetched_bytes: body.len() as u64,
            });
        }
    }

    /// The addresses this hop may connect to: all of them public (or explicitly allowed).
    async fn validate(&self, url: &Url) -> Result<Vec<IpAddr>, FetchError> {
        let target = target_of(url).map_err(|e| FetchError::new("invalid_url", e))?;
        let allow = &self.config.allow_private;
        let addrs = match target {
            Target::Ip(ip) => vec![ip],
            Target::Name(name) => {
                let port = url.port_or_known_default().unwrap_or(80);
                let found =
                    tokio::time::timeout(RESOLVE_TIMEOUT, self.resolver.lookup(&name, port))
                        .await
                        .map_err(|_| FetchError::new("dns", format!("resolving {name} timed out")))?
                        .map_err(|_| {
                            FetchError::new("dns", format!("{name} could not be resolved"))
                        })?;
                if found.is_empty() {
                    return Err(FetchError::new("dns", format!("{name} has no addresses")));
                }
                found
            }
        };
        for ip in &addrs {
            check_addr(*ip, allow).map_err(|blocked| {
                FetchError::new("blocked_address", format!("{blocked} {OPERATOR_CAN_ALLOW}"))
            })?;
        }
        Ok(addrs)
    }

    /// One request, pinned to `addrs`. A fresh client per hop: its resolver knows only
    /// the validated addresses, so nothing can re-resolve the name behind our back.
    async fn request(&self, url: &Url, addrs: &[IpAddr]) -> Result<reqwest::Response, FetchError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = url.port_or_known_default().unwrap_or(80);
        // The shared policy (no redirects, retries or ambient proxy: HTTP(S)_PROXY would
        // send the request to a proxy that resolves the name itself, past every check
        // above), pinned to the addresses just checked.
        let mut builder = crate::net::client_builder()
            .user_agent(USER_AGENT)
            .connect_timeout(Duration::from_secs(10));
        if let Some(url::Host::Domain(name)) = url.host() {
            let pinned: Vec<SocketAddr> =
                addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
            builder = builder.resolve_to_addrs(name, &pinned);
        }
        if url.scheme() == "http" {
            // Plain http needs no certificate store.
            builder = builder.tls_certs_only(Vec::new());
        }
        let client = builder.build().map_err(|_| {
            FetchError::new(
                "client",
                "could not set up the HTTPS client (no usable certificate store)",
            )
        })?;
        client
            .get(url.clone())
            .header(
                ACCEPT,
                "text/html, application/xhtml+xml, text/*;q=0.9, application/json;q=0.8, */*;q=0.1",
            )
            .header(ACCEPT_ENCODING, "identity")
            .send()
            .await
            .map_err(|e| {
                let host = url.host_str().unwrap_or("?");
                // Verification is always on: an untrusted or mismatched certificate is a
                // refusal, never something to retry without checks.
                if let Some(tls) = crate::net::tls_error(&e) {
                    let what = crate::net::tls_failure_text(tls);
                    return FetchError::new("tls", format!("{host}: {what}"));
                }
                let what = if e.is_timeout() {
                    "timed out"
                } else if e.is_connect() {
                    "could not connect"
                } else {
                    "the request failed"
                };
                FetchError::new("network", format!("{host} ({what})"))
            })
    }
}

#[cfg(test)]
mod tests {
    //! DNS rebinding, in process (the resolver is scripted): the connection goes to the
    //! address that was validated, never to what a second lookup would say.

    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Public-looking first (127.0.0.2, allowed by the test's override), then private.
    struct Flip(AtomicUsize);

    impl Resolve for Flip {
        fn lookup<'a>(&'a self, _host: &'a str, _port: u16) -> resolve::Lookup<'a> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            let ip = if n == 0 {
                [127, 0, 0, 2]
            } else {
                [127, 0, 0, 3]
            };
            Box::pin(async move { Ok(vec![IpAddr::from(ip)]) })
        }
    }

    struct Both;

    impl Resolve for Both {
        fn lookup<'a>(&'a self, _host: &'a str, _port: u16) -> resolve::Lookup<'a> {
            Box::pin(async {
                Ok(vec![
                    IpAddr::from([127, 0, 0, 2]),
                    IpAddr::from([127, 0, 0, 3]),
                ])
            })
        }
    }

    /// Serves one tiny page per connection on `ip`, counting connections.
    fn server(ip: &str, port: u16) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind((ip, port)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let count = hits.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                count.fetch_add(1, Ordering::SeqCst);
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let body = "<html><head><title>pinned</title></head><body><p>ok</p></body></html>";
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (port, hits)
    }

    fn fetcher(resolver: Arc<dyn Resolve>) -> Fetcher {
        let allow = address::parse_allow_private("127.0.0.2/32").unwrap();
        Fetcher::new(
            FetchConfig {
                allow_private: allow,
                timeout: Duration::from_secs(5),
                ..FetchConfig::default()
            },
            resolver,
        )
    }

    #[tokio::test]
    async fn the_connection_goes_to_the_validated_address() {
        let (port, good) = server("127.0.0.2", 0);
        let (_, bad) = server("127.0.0.3", port);
        let flip = Arc::new(Flip(AtomicUsize::new(0)));
        let page = fetcher(flip.clone())
            .fetch(&format!("http://rebind.test:{port}/"))
            .await
            .unwrap();
        assert_eq!(page.title.as_deref(), Some("pinned"));
        assert_eq!(good.load(Ordering::SeqCst), 1);
        assert_eq!(
            bad.load(Ordering::SeqCst),
            0,
            "a second lookup was followed"
        );
        assert_eq!(flip.0.load(Ordering::SeqCst), 1, "resolved exactly once");
    }

    /// Pins 127.0.0.2 for any name.
    struct Loopback2;

    impl Resolve for Loopback2 {
        fn lookup<'a>(&'a self, _host: &'a str, _port: u16) -> resolve::Lookup<'a> {
            Box::pin(async { Ok(vec![IpAddr::from([127, 0, 0, 2])]) })
        }
    }

    #[tokio::test]
    async fn https_sends_the_name_as_sni_and_verifies_the_certificate() {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let _ = rustls::crypto::ring::default_provider().install_default();
        // A throwaway self-signed certificate for the name: not trusted by the client.
        let cert = rcgen::generate_simple_self_signed(vec!["pinned.test".to_owned()]).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
        let config = Arc::new(
            rustls::ServerConfig::builder()
                .with_no_client_auth()
                .with_single_cert(vec![CertificateDer::from(cert.cert.der().to_vec())], key)
                .unwrap(),
        );
        let listener = TcpListener::bind(("127.0.0.2", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let sni = Arc::new(std::sync::Mutex::new(None::<String>));
        let seen = sni.clone();
        std::thread::spawn(move || {
            if let Ok((mut tcp, _)) = listener.accept() {
                let mut conn = rustls::ServerConnection::new(config).unwrap();
                // Read the ClientHello, answer with our certificate, let the client judge it.
                for _ in 0..20 {
                    if conn.read_tls(&mut tcp).unwrap_or(0) == 0
                        || conn.process_new_packets().is_err()
                    {
                        break;
                    }
                    if let Some(name) = conn.server_name() {
                        *seen.lock().unwrap() = Some(name.to_owned());
                    }
                    let _ = conn.write_tls(&mut tcp);
                }
            }
        });
        let err = fetcher(Arc::new(Loopback2))
            .fetch(&format!("https://pinned.test:{port}/"))
            .await
            .unwrap_err();
        assert_eq!(err.kind, "tls", "{err:?}");
        assert_eq!(
            sni.lock().unwrap().as_deref(),
            Some("pinned.test"),
            "SNI is the name, not the pinned IP"
        );
    }

    #[tokio::test]
    async fn one_private_address_among_public_ones_refuses_the_fetch() {
        let (port, good) = server("127.0.0.2", 0);
        let err = fetcher(Arc::new(Both))
            .fetch(&format!("http://mixed.test:{port}/"))
            .await
            .unwrap_err();
        assert_eq!(err.kind, "blocked_address");
        assert!(
            err.message.starts_with("127.0.0.3 is loopback"),
            "{}",
            err.message
        );
        assert_eq!(
            for_the_operator(&err.message).as_deref(),
            Some(
                "127.0.0.3 is loopback; fetching it is not allowed (you can allow it with PERPLEXITY_FETCH_ALLOW_PRIVATE=127.0.0.3/32, or every address with PERPLEXITY_FETCH_ALLOW_PRIVATE=true)"
            )
        );
        assert_eq!(for_the_operator("127.0.0.3 could not be resolved"), None);
        assert_eq!(good.load(Ordering::SeqCst), 0);
    }
}
