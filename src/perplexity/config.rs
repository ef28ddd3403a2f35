//! How we talk to the Perplexity API: this module's own configuration (`config.rs` reads
//! the environment and fills it in). The key is deliberately not here: read per call.

use std::time::Duration;

use url::Url;

/// The only host the API key may ever be sent to.
pub const PERPLEXITY_BASE: &str = "https://api.perplexity.ai";

pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 32 * 1024 * 1024;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
pub const DEFAULT_CIRCUIT_COOLDOWN: Duration = Duration::from_secs(30);

/// How we talk to the Perplexity API. The key is deliberately not here (read per call).
#[derive(Debug, Clone)]
pub struct ApiConfig {
    pub base: Url,
    pub attempt_timeout: Duration,
    pub max_response_bytes: u64,
    pub max_attempts: u32,
    /// Explicit proxy for the Perplexity API only; `HTTP(S)_PROXY` are never used.
    pub proxy: Option<Url>,
    /// How long the circuit breaker stays open before one probe
    /// (`PERPLEXITY_CIRCUIT_COOLDOWN_SECONDS`).
    pub circuit_cooldown: Duration,
    /// Event streams followed at once (`PERPLEXITY_MAX_EVENT_STREAMS`); more waits poll.
    pub max_event_streams: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            base: default_base(),
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            proxy: None,
            circuit_cooldown: DEFAULT_CIRCUIT_COOLDOWN,
            max_event_streams: 128,
        }
    }
}

pub fn default_base() -> Url {
    // A constant that parses; a failure here is a programming error caught by every test.
    Url::parse(PERPLEXITY_BASE).unwrap_or_else(|_| unreachable!("constant base URL parses"))
}

/// Strips credentials from a proxy URL so it can be logged.
pub fn redacted_proxy(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}
