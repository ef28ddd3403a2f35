//! Egress helpers shared by every module that connects out (`perplexity/`, `fetch/`,
//! `gateway/`): the one hardened HTTP client policy they all start from. Building an
//! HTTP client anywhere else is refused by clippy (`clippy.toml`). Imports nothing of
//! ours.

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

/// Whether a reqwest error was a TLS failure (certificate, handshake), however deep
/// hyper nested it: reported as `tls`, never as a message that could carry a URL.
pub fn is_tls(error: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<rustls::Error>() {
            return true;
        }
        // An io::Error's `source()` skips the error it wraps (hyper nests them): look
        // inside, however deep.
        let mut wrapped = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref());
        while let Some(inner) = wrapped {
            if inner.is::<rustls::Error>() {
                return true;
            }
            wrapped = inner
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref());
        }
        source = e.source();
    }
    false
}
