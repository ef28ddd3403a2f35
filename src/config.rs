//! Environment and flags → one typed [`Config`]. Every default lives here.
//!
//! Touches: the process environment (read once at startup, except the API key, which
//! `perplexity::key` reads at call time and this module never sees).

use crate::guard::GuardConfig;
use crate::perplexity::config::{
    ApiConfig, DEFAULT_ATTEMPT_TIMEOUT, DEFAULT_CIRCUIT_COOLDOWN, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_RESPONSE_BYTES, PERPLEXITY_BASE, default_base,
};
use std::fmt;
use std::time::Duration;

use reqwest::Url;

use crate::tools::ToolSelection;

/// The wait budget when `PERPLEXITY_AGENT_WAIT_SECONDS` is unset or unusable: it leaves
/// 5 s of Claude Desktop's fixed 60 s tool-call timeout for the last round trip.
pub const DEFAULT_WAIT_SECONDS: u64 = 55;
/// Ceiling for the wait budget, so an extra zero cannot make a call hang for hours.
pub const MAX_WAIT_SECONDS: u64 = 1800;
/// CLI `ask` waits this long by default: a person at a terminal has no 60 s limit.
pub const DEFAULT_CLI_TIMEOUT_SECONDS: u64 = 300;
/// Tool calls handled at once on one connection; more get an `isError` "busy" result
/// instead of queueing behind the reader (which must stay free for cancellations).
pub const MAX_CALLS_IN_FLIGHT: usize = 64;

/// Everything the front ends need, resolved once at startup.
#[derive(Debug, Clone)]
pub struct Config {
    /// `W`: the wait budget in seconds (schema maximum of `wait_seconds`, deadline of calls).
    pub wait_seconds: u64,
    pub tools: ToolSelection,
    pub api: ApiConfig,
    pub guard: GuardConfig,
    pub fetch: crate::fetch::FetchConfig,
    /// The local store; `None` when no location is known (no `PERPLEXITY_STORE_PATH`,
    /// `XDG_DATA_HOME` or `HOME`): features that need it say so, nothing else changes.
    pub store: Option<crate::state::StoreConfig>,
    pub gateway: crate::gateway::GatewayConfig,
    /// `PERPLEXITY_SECRET_KEY`, which seals gateway secrets; a malformed key refuses to
    /// start (better than failing at the first secret).
    pub secret_key: Option<crate::gateway::SecretKey>,
    /// Downstream servers from the config file (`PERPLEXITY_CONFIG_PATH`, else
    /// `$XDG_CONFIG_HOME` or `~/.config`, then `perplexity-agent/config.toml`).
    pub file_servers: Vec<crate::gateway::ServerDef>,
    /// `PERPLEXITY_ALLOWED_CONNECTORS`: the connectors of the API key's Perplexity account
    /// that `responses_create` callers may use (none by default).
    pub connectors: Vec<String>,
    /// Budgets and the spend ledger's retention (`PERPLEXITY_BUDGET_*`,
    /// `PERPLEXITY_LEDGER_RETENTION_DAYS`).
    pub spend: crate::spend::SpendConfig,
    /// `PERPLEXITY_STATE_URL` and its companions: the state replicas share; `None` =
    /// everything in this process and its store.
    pub state: Option<crate::state::StateConfig>,
    /// `PERPLEXITY_UI` (on by default): the MCP App offered to clients that host Apps.
    pub ui: bool,
    /// `PERPLEXITY_CACHE` and `PERPLEXITY_CACHE_TTL_SECONDS`: whose research answers a
    /// call may be served from, and for how long.
    pub cache: crate::cache::CacheConfig,
}

/// A setting that cannot be used. The process refuses to start rather than guess,
/// because most of these settings bound where the key may go or how much we read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub variable: &'static str,
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.variable, self.problem)
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    fn new(variable: &'static str, problem: impl Into<String>) -> Self {
        let problem = problem.into();
        ConfigError { variable, problem }
    }

    /// For `map_err`: another module's words about a value of `variable`.
    fn of(variable: &'static str) -> impl FnOnce(String) -> Self {
        move |problem| ConfigError { variable, problem }
    }
}

impl Config {
    /// Reads the process environment. `tools_flag` (from `--tools`) overrides `PERPLEXITY_TOOLS`.
    pub fn from_env(tools_flag: Option<&str>) -> Result<Config, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok(), tools_flag)
    }

    /// The configuration with every variable that does not load left out (its default in
    /// its place), and what was wrong with each: for `doctor`, which reports the problems
    /// as its findings and checks everything else. `None` when leaving variables out
    /// does not help (a problem no variable names).
    pub fn skipping_broken(
        env: impl Fn(&str) -> Option<String>,
    ) -> (Option<Config>, Vec<ConfigError>) {
        let mut problems: Vec<ConfigError> = Vec::new();
        loop {
            let skipped = |name: &str| problems.iter().any(|p| p.variable == name);
            match Self::from_lookup(|name| env(name).filter(|_| !skipped(name)), None) {
                Ok(config) => return (Some(config), problems),
                Err(e) if skipped(e.variable) || problems.len() >= 64 => {
                    problems.push(e);
                    return (None, problems);
                }
                Err(e) => problems.push(e),
            }
        }
    }

    /// Same as [`Config::from_env`] with an injectable environment (unit tests).
    pub fn from_lookup(
        env: impl Fn(&str) -> Option<String>,
        tools_flag: Option<&str>,
    ) -> Result<Config, ConfigError> {
        let tools_raw = tools_flag
            .map(str::to_owned)
            .or_else(|| env("PERPLEXITY_TOOLS"));
        let variable = match tools_flag {
            Some(_) => "--tools",
            None => "PERPLEXITY_TOOLS",
        };
        let tools = ToolSelection::parse(tools_raw.as_deref().unwrap_or("default"))
            .map_err(ConfigError::of(variable))?;
        let store = store_config(&env)?;
        let gateway = gateway_config(&env, store.as_ref())?;
        let cache = cache_config(&env, tools.is_lifecycle_group())?;
        let int = |name, default, min, max| int_var(&env, name, default, min, max);
        Ok(Config {
            wait_seconds: wait_seconds_from(env("PERPLEXITY_AGENT_WAIT_SECONDS").as_deref()),
            tools,
            api: ApiConfig {
                base: api_base_from(env("PERPLEXITY_API_BASE").as_deref())?,
                attempt_timeout: Duration::from_secs(int(
                    "PERPLEXITY_TIMEOUT",
                    DEFAULT_ATTEMPT_TIMEOUT.as_secs(),
                    1,
                    300,
                )?),
                max_response_bytes: int(
                    "PERPLEXITY_MAX_RESPONSE_BYTES",
                    DEFAULT_MAX_RESPONSE_BYTES,
                    1024,
                    1 << 30,
                )?,
                max_attempts: int(
                    "PERPLEXITY_MAX_RETRIES",
                    u64::from(DEFAULT_MAX_ATTEMPTS),
                    1,
                    10,
                )? as u32,
                proxy: proxy_from(env("PERPLEXITY_PROXY").as_deref())?,
                circuit_cooldown: Duration::from_secs(int(
                    "PERPLEXITY_CIRCUIT_COOLDOWN_SECONDS",
                    DEFAULT_CIRCUIT_COOLDOWN.as_secs(),
                    1,
                    3600,
                )?),
                max_event_streams: int("PERPLEXITY_MAX_EVENT_STREAMS", 128, 0, 10_000)? as usize,
            },
            guard: GuardConfig {
                rate_per_minute: int("PERPLEXITY_RATE_PER_MINUTE", 60, 1, 1_000_000)? as u32,
                rate_burst: int("PERPLEXITY_RATE_BURST", 10, 1, 100_000)? as u32,
                audit_log_path: env("PERPLEXITY_AUDIT_LOG_PATH")
                    .map(|p| p.trim().to_owned())
                    .filter(|p| !p.is_empty()),
                max_output_chars: int("PERPLEXITY_MAX_OUTPUT_CHARS", 100_000, 1_000, 10_000_000)?
                    as usize,
                replica_id: replica_id(&env)?,
            },
            fetch: crate::fetch::FetchConfig {
                allow_private: crate::fetch::parse_allow_private(
                    env("PERPLEXITY_FETCH_ALLOW_PRIVATE")
                        .as_deref()
                        .unwrap_or(""),
                )
                .map_err(ConfigError::of("PERPLEXITY_FETCH_ALLOW_PRIVATE"))?,
                timeout: Duration::from_secs(int(
                    "PERPLEXITY_TIMEOUT",
                    DEFAULT_ATTEMPT_TIMEOUT.as_secs(),
                    1,
                    300,
                )?),
                max_bytes: int("PERPLEXITY_FETCH_MAX_BYTES", 5 * 1024 * 1024, 1024, 1 << 30)?,
                max_chars: 80_000,
            },
            connectors: connectors_from(env("PERPLEXITY_ALLOWED_CONNECTORS").as_deref())?,
            spend: spend_config(&env)?,
            state: state_config(&env)?,
            ui: on_off(&env, "PERPLEXITY_UI", true)?,
            cache,
            file_servers: match config_file(&env) {
                None => Vec::new(),
                Some(path) => crate::gateway::load_file(&path, &gateway, &|name: &str| env(name))
                    .map_err(ConfigError::of("PERPLEXITY_CONFIG_PATH"))?,
            },
            gateway,
            secret_key: match env(crate::gateway::SECRET_KEY_VARIABLE)
                .filter(|k| !k.trim().is_empty())
            {
                None => None,
                Some(k) => Some(crate::gateway::SecretKey::from_base64(&k).map_err(|e| {
                    ConfigError::new(crate::gateway::SECRET_KEY_VARIABLE, e.to_string())
                })?),
            },
            store,
        })
    }
}

/// `PERPLEXITY_STATE_URL` (unset or empty: no shared state), `PERPLEXITY_STATE_PASSWORD`,
/// `PERPLEXITY_STATE_PREFIX`, `PERPLEXITY_STATE_TIMEOUT_MS` and `PERPLEXITY_STATE_CA_FILE`.
fn state_config(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<crate::state::StateConfig>, ConfigError> {
    let Some(url) = env("PERPLEXITY_STATE_URL").filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let url = url.trim().to_owned();
    crate::state::check_url(&url).map_err(ConfigError::of("PERPLEXITY_STATE_URL"))?;
    let prefix = env("PERPLEXITY_STATE_PREFIX")
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| crate::state::DEFAULT_PREFIX.to_owned());
    label("PERPLEXITY_STATE_PREFIX", &prefix)?;
    let timeout = int_var(
        env,
        "PERPLEXITY_STATE_TIMEOUT_MS",
        crate::state::DEFAULT_TIMEOUT.as_millis() as u64,
        10,
        10_000,
    )?;
    let lease = int_var(
        env,
        "PERPLEXITY_STATE_LEASE_MS",
        crate::state::DEFAULT_LEASE.as_millis() as u64,
        1_000,
        300_000,
    )?;
    Ok(Some(crate::state::StateConfig {
        url: secrecy::SecretString::from(url),
        password: env("PERPLEXITY_STATE_PASSWORD")
            .filter(|p| !p.is_empty())
            .map(secrecy::SecretString::from),
        prefix,
        timeout: Duration::from_millis(timeout),
        lease: Duration::from_millis(lease),
        replica: replica_id(env)?,
        ca_file: env("PERPLEXITY_STATE_CA_FILE")
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from),
    }))
}

/// `PERPLEXITY_REPLICA_ID`, else this host's name and the process id (`web-1-4242`).
fn replica_id(env: &impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    match env("PERPLEXITY_REPLICA_ID").map(|v| v.trim().to_owned()) {
        Some(id) if !id.is_empty() => label("PERPLEXITY_REPLICA_ID", &id).map(|()| id),
        _ => Ok(format!("{}-{}", host_name(), std::process::id())),
    }
}

/// A name that goes into keys and log records as it is: short, no spaces or controls.
fn label(variable: &'static str, value: &str) -> Result<(), ConfigError> {
    if value.len() > 128 || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ConfigError::new(
            variable,
            "must be at most 128 characters, without spaces or control characters",
        ));
    }
    Ok(())
}

/// This machine's host name (`localhost` when it has none we can read).
#[cfg(not(unix))]
fn host_name() -> String {
    std::env::var("COMPUTERNAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// This machine's host name (`localhost` when it has none we can read).
#[cfg(unix)]
fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let named = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) } == 0;
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    match std::str::from_utf8(&buffer[..end]) {
        Ok(name) if named && !name.is_empty() => name.to_owned(),
        _ => "localhost".to_owned(),
    }
}

/// `PERPLEXITY_BUDGET_DAILY`/`_MONTHLY` (amounts such as `5.00`; unset or empty = no
/// cap), `PERPLEXITY_BUDGET_TZ` (an IANA zone; UTC by default) and
/// `PERPLEXITY_LEDGER_RETENTION_DAYS`.
fn spend_config(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<crate::spend::SpendConfig, ConfigError> {
    let amount = |variable: &'static str| -> Result<Option<i64>, ConfigError> {
        match env(variable).filter(|v| !v.trim().is_empty()) {
            None => Ok(None),
            Some(v) => crate::spend::parse_amount(&v)
                .map(Some)
                .map_err(ConfigError::of(variable)),
        }
    };
    let zone = match env("PERPLEXITY_BUDGET_TZ").filter(|v| !v.trim().is_empty()) {
        None => crate::spend::BudgetZone::default(),
        Some(name) => crate::spend::BudgetZone::named(name.trim())
            .map_err(ConfigError::of("PERPLEXITY_BUDGET_TZ"))?,
    };
    Ok(crate::spend::SpendConfig {
        budget: crate::call::Budget {
            daily: amount("PERPLEXITY_BUDGET_DAILY")?,
            monthly: amount("PERPLEXITY_BUDGET_MONTHLY")?,
        },
        zone,
        retention_days: int_var(
            env,
            "PERPLEXITY_LEDGER_RETENTION_DAYS",
            u64::from(crate::spend::DEFAULT_RETENTION_DAYS),
            1,
            36_500,
        )? as u32,
    })
}

/// `PERPLEXITY_CACHE` (`off`, `caller`, `team`; `caller` by default, `off` for the
/// reference peer's drop-in unless set) and `PERPLEXITY_CACHE_TTL_SECONDS` (900 by
/// default, 1 to a day).
fn cache_config(
    env: &impl Fn(&str) -> Option<String>,
    drop_in: bool,
) -> Result<crate::cache::CacheConfig, ConfigError> {
    let scope = crate::cache::Scope::parse(env("PERPLEXITY_CACHE").as_deref(), drop_in)
        .map_err(ConfigError::of("PERPLEXITY_CACHE"))?;
    let ttl = int_var(
        env,
        "PERPLEXITY_CACHE_TTL_SECONDS",
        crate::cache::DEFAULT_TTL.as_secs(),
        1,
        crate::cache::MAX_TTL_SECONDS,
    )?;
    Ok(crate::cache::CacheConfig {
        scope,
        ttl: Duration::from_secs(ttl),
    })
}

/// The wait budget `W`, read from `PERPLEXITY_AGENT_WAIT_SECONDS`: unset, empty,
/// unparsable, zero or negative → 55; otherwise clamped to 1800. Accepts what Python's
/// `int()` accepts (`+30`, `1_000`) for drop-in compatibility with the reference peer.
pub fn wait_seconds_from(raw: Option<&str>) -> u64 {
    match raw.and_then(parse_python_int) {
        Some(n) if n > 0 => {
            u64::try_from(n.min(i128::from(MAX_WAIT_SECONDS))).unwrap_or(DEFAULT_WAIT_SECONDS)
        }
        _ => DEFAULT_WAIT_SECONDS,
    }
}

/// Python `int(str)` for base 10: surrounding whitespace, an optional sign, digits with
/// single underscores between them. Saturates instead of overflowing.
pub fn parse_python_int(raw: &str) -> Option<i128> {
    let s = raw.trim();
    let (negative, digits) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') {
        return None;
    }
    let mut value: i128 = 0;
    let mut previous_underscore = false;
    for c in digits.chars() {
        match c {
            '_' if !previous_underscore => previous_underscore = true,
            '0'..='9' => {
                previous_underscore = false;
                value = value
                    .saturating_mul(10)
                    .saturating_add(i128::from(c as u8 - b'0'));
            }
            _ => return None,
        }
    }
    Some(if negative { -value } else { value })
}

/// `PERPLEXITY_API_BASE` may only point at this machine over plain http (tests and
/// local fakes). Anything else is refused: the key must never go anywhere but
/// `https://api.perplexity.ai`, and an env var is exactly what an attacker who can
/// edit a client config would change.
pub fn api_base_from(raw: Option<&str>) -> Result<Url, ConfigError> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(default_base());
    };
    let refuse = |why: &str| ConfigError {
        variable: "PERPLEXITY_API_BASE",
        problem: format!(
            "{why}. Only http:// on a loopback address (127.0.0.0/8, ::1 or localhost) is accepted, \
             for tests and local fakes; unset it to use {PERPLEXITY_BASE}."
        ),
    };
    let url = Url::parse(raw).map_err(|_| refuse("not a valid URL"))?;
    if url.scheme() != "http" {
        return Err(refuse("the scheme must be http"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse("credentials in the URL are not allowed"));
    }
    if url.query().is_some() || url.fragment().is_some() || !matches!(url.path(), "" | "/") {
        return Err(refuse("a path, query or fragment is not allowed"));
    }
    if !crate::net::is_loopback_host(&url) {
        return Err(refuse("the host is not a loopback address"));
    }
    Ok(url)
}

fn proxy_from(raw: Option<&str>) -> Result<Option<Url>, ConfigError> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let url = Url::parse(raw)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| ConfigError {
            variable: "PERPLEXITY_PROXY",
            problem: "must be an http:// or https:// proxy URL".to_owned(),
        })?;
    Ok(Some(url))
}

/// Settings of `serve --http`, read only when it is asked for.
#[derive(Clone)]
pub struct HttpConfig {
    pub bind: std::net::SocketAddr,
    /// How callers prove who they are: exactly one of the three ways.
    pub auth: HttpAuth,
    /// Extra `Host` names accepted besides the loopback ones (lowercase, no port).
    pub allowed_hosts: Vec<String>,
    /// Extra `Origin`s accepted besides loopback ones (`scheme://host[:port]`).
    pub allowed_origins: Vec<String>,
    /// Requests handled at once; more get 503 with `Retry-After`.
    pub max_in_flight: usize,
    /// After SIGTERM/SIGINT, how long in-flight calls may finish before their waits end.
    pub drain: Duration,
    /// Open connections at once, authenticated or not; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, or its body, or to send
    /// anything at all on an idle keep-alive connection.
    pub read_timeout: Duration,
    /// `GET /metrics` (`PERPLEXITY_METRICS=on`); `None`: there is no such route.
    pub metrics: Option<MetricsAccess>,
}

/// Who may scrape `/metrics`, and where.
#[derive(Clone)]
pub struct MetricsAccess {
    /// SHA-256 of `PERPLEXITY_METRICS_TOKEN`; `None`: loopback peers of the metrics
    /// listener only.
    pub token: Option<[u8; 32]>,
    /// `PERPLEXITY_METRICS_BIND`: the metrics listener's own address (loopback by
    /// default), apart from `/mcp`'s, so a reverse proxy in front of `/mcp` never
    /// forwards a scrape to it.
    pub bind: std::net::SocketAddr,
}

/// Where the metrics listener listens unless `PERPLEXITY_METRICS_BIND` says otherwise:
/// loopback, on the port Prometheus exporters conventionally take for OpenTelemetry.
pub const METRICS_BIND: &str = "127.0.0.1:9464";

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConfig")
            .field("bind", &self.bind)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .finish_non_exhaustive()
    }
}

/// The one way `serve --http` authenticates its callers (configuring two is an error
/// that names both: which one wins would be a guess).
#[derive(Clone)]
pub enum HttpAuth {
    /// SHA-256 of `PERPLEXITY_HTTP_AUTH_TOKEN`: only the digest is kept, and comparing
    /// digests is constant-time whatever the presented token's length. Its holder is
    /// the caller named `default`.
    Token([u8; 32]),
    /// `PERPLEXITY_HTTP_CLIENTS_FILE`: named clients, each with its own token's hash.
    Clients(std::path::PathBuf),
    /// `PERPLEXITY_OAUTH_ISSUER` and `PERPLEXITY_OAUTH_AUDIENCE`: OAuth 2.1 access tokens.
    OAuth(crate::identity::OAuthConfig),
}

/// Shortest accepted bearer token: 32 characters (e.g. `openssl rand -hex 32` gives 64).
pub const MIN_HTTP_TOKEN_CHARS: usize = 32;

/// `PERPLEXITY_HTTP_WORKERS`: the async runtime's worker threads for `serve --http`
/// (1–256, default 2). Apart from [`HttpConfig`] because the runtime is built before it
/// is read. One worker matches a one-process reference such as nginx's, and on a machine
/// shared with other busy processes keeps the tail from waiting on the scheduler.
pub fn http_workers(env: impl Fn(&str) -> Option<String>) -> Result<usize, ConfigError> {
    Ok(int_var(&env, "PERPLEXITY_HTTP_WORKERS", 2, 1, 256)? as usize)
}

impl HttpConfig {
    pub fn from_env(bind: &str, allow_remote: bool) -> Result<HttpConfig, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok(), bind, allow_remote)
    }

    pub fn from_lookup(
        env: impl Fn(&str) -> Option<String>,
        bind: &str,
        allow_remote: bool,
    ) -> Result<HttpConfig, ConfigError> {
        let bind: std::net::SocketAddr = bind.trim().parse().map_err(|_| ConfigError {
            variable: "--bind",
            problem: format!("{bind:?} is not an IP address and port, such as 127.0.0.1:8080"),
        })?;
        // Loopback unless the operator says otherwise, out loud.
        if !bind.ip().is_loopback() && !allow_remote {
            return Err(ConfigError {
                variable: "--bind",
                problem: format!(
                    "{bind} is reachable from other machines; pass --allow-remote to listen there (and terminate TLS in a reverse proxy in front)"
                ),
            });
        }
        let auth = http_auth(&env)?;
        let allowed_hosts = list(env("PERPLEXITY_HTTP_ALLOWED_HOSTS").as_deref())
            .map(allowed_host)
            .collect::<Result<_, _>>()?;
        let allowed_origins = list(env("PERPLEXITY_HTTP_ALLOWED_ORIGINS").as_deref())
            .map(|o| match Url::parse(o) {
                Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => {
                    Ok(url.origin().ascii_serialization())
                }
                _ => Err(ConfigError {
                    variable: "PERPLEXITY_HTTP_ALLOWED_ORIGINS",
                    problem: format!("{o:?} is not an origin such as https://app.example.com"),
                }),
            })
            .collect::<Result<_, _>>()?;
        let int = |name, default, min, max| int_var(&env, name, default, min, max);
        Ok(HttpConfig {
            bind,
            auth,
            allowed_hosts,
            allowed_origins,
            max_in_flight: int("PERPLEXITY_HTTP_MAX_IN_FLIGHT", 1024, 1, 65_536)? as usize,
            drain: Duration::from_secs(int("PERPLEXITY_HTTP_DRAIN_SECONDS", 10, 0, 600)?),
            max_connections: int("PERPLEXITY_HTTP_MAX_CONNECTIONS", 2048, 2, 65_536)? as usize,
            read_timeout: Duration::from_secs(int(
                "PERPLEXITY_HTTP_READ_TIMEOUT_SECONDS",
                30,
                1,
                3600,
            )?),
            metrics: metrics_access(&env)?,
        })
    }
}

/// A switch: `on`/`true`/`1` or `off`/`false`/`0`; unset or blank is `default`.
fn on_off(
    env: &impl Fn(&str) -> Option<String>,
    variable: &'static str,
    default: bool,
) -> Result<bool, ConfigError> {
    match env(variable)
        .map(|v| v.trim().to_ascii_lowercase())
        .as_deref()
    {
        None | Some("") => Ok(default),
        Some("off" | "false" | "0") => Ok(false),
        Some("on" | "true" | "1") => Ok(true),
        Some(other) => Err(ConfigError {
            variable,
            problem: format!("{other:?} is neither on nor off"),
        }),
    }
}

/// `PERPLEXITY_METRICS` (`on`/`off`, default off) and `PERPLEXITY_METRICS_TOKEN`.
fn metrics_access(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<MetricsAccess>, ConfigError> {
    let on = on_off(env, "PERPLEXITY_METRICS", false)?;
    let token = env("PERPLEXITY_METRICS_TOKEN")
        .filter(|t| !t.trim().is_empty())
        .map(secrecy::SecretString::from);
    let written = env("PERPLEXITY_METRICS_BIND").filter(|b| !b.trim().is_empty());
    if !on {
        for (variable, set) in [
            ("PERPLEXITY_METRICS_TOKEN", token.is_some()),
            ("PERPLEXITY_METRICS_BIND", written.is_some()),
        ] {
            if set {
                return Err(ConfigError {
                    variable,
                    problem: "is set but PERPLEXITY_METRICS is not on: set PERPLEXITY_METRICS=on to serve /metrics".to_owned(),
                });
            }
        }
        return Ok(None);
    }
    let bind_text = written.unwrap_or_else(|| METRICS_BIND.to_owned());
    let bind: std::net::SocketAddr = bind_text.trim().parse().map_err(|_| ConfigError {
        variable: "PERPLEXITY_METRICS_BIND",
        problem: format!("{bind_text:?} is not an IP address and port, such as {METRICS_BIND}"),
    })?;
    let token = token
        .map(|token| token_digest("PERPLEXITY_METRICS_TOKEN", &token))
        .transpose()?;
    Ok(Some(MetricsAccess { token, bind }))
}

fn list(raw: Option<&str>) -> impl Iterator<Item = &str> {
    raw.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// `PERPLEXITY_STORE_PATH`, else `$XDG_DATA_HOME` or `~/.local/share`, then
/// `perplexity-agent/store.sqlite`; with the retention settings.
fn store_config(
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<crate::state::StoreConfig>, ConfigError> {
    let nonblank = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let path = nonblank("PERPLEXITY_STORE_PATH")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            nonblank("XDG_DATA_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| nonblank("HOME").map(|h| std::path::Path::new(&h).join(".local/share")))
                .map(|base| base.join("perplexity-agent").join("store.sqlite"))
        });
    let snapshot_retention =
        int_var(env, "PERPLEXITY_SNAPSHOT_RETENTION", 100, 1, 100_000)? as usize;
    let max_tabs_per_space = int_var(env, "PERPLEXITY_MAX_TABS_PER_SPACE", 50, 1, 10_000)? as usize;
    let max_history_per_space =
        match env("PERPLEXITY_MAX_HISTORY_PER_SPACE").filter(|v| !v.trim().is_empty()) {
            None => None,
            Some(raw) => Some(bounded_int(
                "PERPLEXITY_MAX_HISTORY_PER_SPACE",
                Some(&raw),
                0,
                1,
                10_000_000,
            )? as usize),
        };
    Ok(path.map(|path| crate::state::StoreConfig {
        path,
        snapshot_retention,
        max_tabs_per_space,
        max_history_per_space,
    }))
}

/// The config file: `PERPLEXITY_CONFIG_PATH`, else the XDG location.
fn config_file(env: &impl Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    let nonblank = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    nonblank("PERPLEXITY_CONFIG_PATH")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            nonblank("XDG_CONFIG_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| nonblank("HOME").map(|h| std::path::Path::new(&h).join(".config")))
                .map(|base| base.join("perplexity-agent").join("config.toml"))
        })
}

/// The gateway's policy and limits (`PERPLEXITY_GATEWAY_*`).
fn gateway_config(
    env: &impl Fn(&str) -> Option<String>,
    store: Option<&crate::state::StoreConfig>,
) -> Result<crate::gateway::GatewayConfig, ConfigError> {
    let int = |name, default, min, max| int_var(env, name, default, min, max);
    let enabled = match env("PERPLEXITY_GATEWAY").map(|v| v.trim().to_ascii_lowercase()) {
        None => true,
        Some(v) if v.is_empty() || ["on", "true", "1", "yes"].contains(&v.as_str()) => true,
        Some(v) if ["off", "false", "0", "no"].contains(&v.as_str()) => false,
        Some(_) => {
            return Err(ConfigError::new("PERPLEXITY_GATEWAY", "must be on or off"));
        }
    };
    let allowed_roots = list(env("PERPLEXITY_GATEWAY_ALLOWED_ROOTS").as_deref())
        .map(std::path::PathBuf::from)
        .collect::<Vec<_>>();
    if allowed_roots.iter().any(|r| !r.is_absolute()) {
        return Err(ConfigError {
            variable: "PERPLEXITY_GATEWAY_ALLOWED_ROOTS",
            problem: "every root must be an absolute path".to_owned(),
        });
    }
    let path = env("PERPLEXITY_GATEWAY_PATH")
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_owned());
    if path.split(':').any(|d| !d.starts_with('/')) {
        return Err(ConfigError {
            variable: "PERPLEXITY_GATEWAY_PATH",
            problem: "every entry must be an absolute directory".to_owned(),
        });
    }
    Ok(crate::gateway::GatewayConfig {
        enabled,
        allowed_commands: list(env("PERPLEXITY_GATEWAY_ALLOWED_COMMANDS").as_deref())
            .map(str::to_owned)
            .collect(),
        allowed_roots,
        path,
        max_servers: int("PERPLEXITY_GATEWAY_MAX_SERVERS", 5, 1, 100)? as usize,
        max_stdio: int("PERPLEXITY_GATEWAY_MAX_STDIO", 20, 1, 1000)? as usize,
        concurrency: int("PERPLEXITY_GATEWAY_CONCURRENCY", 4, 1, 64)? as usize,
        timeout: Duration::from_secs(int("PERPLEXITY_GATEWAY_TIMEOUT_SECONDS", 30, 1, 600)?),
        idle: Duration::from_secs(int("PERPLEXITY_GATEWAY_IDLE_SECONDS", 900, 5, 86_400)?),
        max_description: int("PERPLEXITY_GATEWAY_MAX_DESCRIPTION", 1024, 64, 16_384)? as usize,
        max_tools: int("PERPLEXITY_GATEWAY_MAX_TOOLS", 200, 1, 10_000)? as usize,
        max_list_bytes: int(
            "PERPLEXITY_GATEWAY_MAX_LIST_BYTES",
            1 << 20,
            64 << 10,
            8 << 20,
        )? as usize,
        max_result_bytes: int("PERPLEXITY_GATEWAY_MAX_RESULT_BYTES", 65_536, 1024, 8 << 20)?
            as usize,
        data_dir: store.and_then(|s| s.path.parent().map(std::path::Path::to_path_buf)),
        functions: list(env("PERPLEXITY_GATEWAY_FUNCTIONS").as_deref())
            .map(str::to_owned)
            .collect(),
    })
}

/// `variable` of `env` as a whole number in `min..=max`; unset or blank is `default`.
fn int_var(
    env: &impl Fn(&str) -> Option<String>,
    variable: &'static str,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    bounded_int(variable, env(variable).as_deref(), default, min, max)
}

fn bounded_int(
    variable: &'static str,
    raw: Option<&str>,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(default);
    };
    raw.parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| ConfigError {
            variable,
            problem: format!("must be a whole number from {min} to {max}"),
        })
}

/// A comma list of connector ids (as `responses_create` bounds them). A connector reads
/// whatever the account it is configured on can reach (a drive, a mailbox), so on a
/// shared server it is the operator, not a caller, who says which are usable.
fn connectors_from(raw: Option<&str>) -> Result<Vec<String>, ConfigError> {
    let mut ids = Vec::new();
    for id in raw
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        if !crate::tools::is_connector_id(id) {
            return Err(ConfigError {
                variable: "PERPLEXITY_ALLOWED_CONNECTORS",
                problem: format!(
                    "{id:?} is not a connector id (1 to 128 letters, digits and . _ : -); give a comma list of ids"
                ),
            });
        }
        ids.push(id.to_owned());
    }
    Ok(ids)
}

/// One `PERPLEXITY_HTTP_ALLOWED_HOSTS` entry, as the `Host` check compares it: a host name
/// (lower-cased) or a bracketed IPv6 address (in its one spelling). A port, a scheme or a
/// path is refused here, since the check compares names only and such an entry would
/// never match, silently.
fn allowed_host(entry: &str) -> Result<String, ConfigError> {
    let refuse = |why: &str| ConfigError {
        variable: "PERPLEXITY_HTTP_ALLOWED_HOSTS",
        problem: format!(
            "{entry:?} {why}; list host names only, such as mcp.example.com (any port of an allowed name is accepted)"
        ),
    };
    if let Some(inside) = entry.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return inside
            .parse::<std::net::Ipv6Addr>()
            .map(|ip| format!("[{ip}]"))
            .map_err(|_| refuse("is not an IPv6 address in brackets"));
    }
    if entry.contains("://") {
        return Err(refuse("is a URL"));
    }
    if entry.contains(':') {
        return Err(refuse(
            "has a port (or is an IPv6 address without brackets)",
        ));
    }
    if entry.is_empty()
        || !entry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    {
        return Err(refuse("is not a host name"));
    }
    Ok(entry.to_ascii_lowercase())
}

/// Exactly one of the single token, the clients file and OAuth; none is an error too.
fn http_auth(env: &impl Fn(&str) -> Option<String>) -> Result<HttpAuth, ConfigError> {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let token = set("PERPLEXITY_HTTP_AUTH_TOKEN").map(secrecy::SecretString::from);
    let clients = set("PERPLEXITY_HTTP_CLIENTS_FILE");
    let issuer = set("PERPLEXITY_OAUTH_ISSUER");
    let audience = set("PERPLEXITY_OAUTH_AUDIENCE");
    let oauth =
        issuer.is_some() || audience.is_some() || set("PERPLEXITY_OAUTH_JWKS_URL").is_some();
    let chosen: Vec<&str> = [
        (token.is_some(), "PERPLEXITY_HTTP_AUTH_TOKEN"),
        (clients.is_some(), "PERPLEXITY_HTTP_CLIENTS_FILE"),
        (oauth, "PERPLEXITY_OAUTH_ISSUER"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect();
    if chosen.len() > 1 {
        return Err(ConfigError {
            variable: chosen[0],
            problem: format!(
                "conflicts with {}: --http takes one way to authenticate callers (a single token, named clients, or OAuth); unset all but one",
                chosen[1..].join(" and ")
            ),
        });
    }
    if let Some(path) = clients {
        return Ok(HttpAuth::Clients(std::path::PathBuf::from(path.trim())));
    }
    if oauth {
        return oauth_config(env, issuer, audience).map(HttpAuth::OAuth);
    }
    let Some(token) = token else {
        return Err(ConfigError {
            variable: "PERPLEXITY_HTTP_AUTH_TOKEN",
            problem: format!(
                "is required for --http: every request must carry it as a bearer token. Generate one with `openssl rand -hex 32` (at least {MIN_HTTP_TOKEN_CHARS} characters); or name clients with PERPLEXITY_HTTP_CLIENTS_FILE, or take OAuth tokens with PERPLEXITY_OAUTH_ISSUER"
            ),
        });
    };
    token_digest("PERPLEXITY_HTTP_AUTH_TOKEN", &token).map(HttpAuth::Token)
}

/// A bearer token of ours (`PERPLEXITY_HTTP_AUTH_TOKEN`, `PERPLEXITY_METRICS_TOKEN`):
/// long enough, sendable in a header, and kept only as its SHA-256.
fn token_digest(
    variable: &'static str,
    token: &secrecy::SecretString,
) -> Result<[u8; 32], ConfigError> {
    let token = secrecy::ExposeSecret::expose_secret(token);
    if token.chars().count() < MIN_HTTP_TOKEN_CHARS {
        return Err(ConfigError {
            variable,
            problem: format!("must be at least {MIN_HTTP_TOKEN_CHARS} characters long"),
        });
    }
    // A token a client cannot send in a header would lock everyone out.
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ConfigError {
            variable,
            problem: "must be printable ASCII without spaces".to_owned(),
        });
    }
    Ok(<sha2::Sha256 as sha2::Digest>::digest(token.as_bytes()).into())
}

/// The OAuth settings: an issuer and an audience, both absolute URLs; https unless the
/// host is loopback (a token's keys fetched in the clear could be swapped on the way).
fn oauth_config(
    env: &impl Fn(&str) -> Option<String>,
    issuer: Option<String>,
    audience: Option<String>,
) -> Result<crate::identity::OAuthConfig, ConfigError> {
    let url = |variable: &'static str, raw: Option<String>| -> Result<Url, ConfigError> {
        let raw = raw.ok_or_else(|| ConfigError::new(variable, "is required with OAuth (PERPLEXITY_OAUTH_ISSUER and PERPLEXITY_OAUTH_AUDIENCE go together)"))?;
        let parsed = Url::parse(raw.trim()).ok().filter(|u| u.host().is_some());
        match parsed {
            Some(u)
                if u.scheme() == "https"
                    || (u.scheme() == "http" && crate::net::is_loopback_host(&u)) =>
            {
                Ok(u)
            }
            _ => Err(ConfigError {
                variable,
                problem: format!("{raw:?} is not an https:// URL (http:// only on loopback)"),
            }),
        }
    };
    // Compared as written: `iss` and `aud` are exact strings, and a parsed URL gains a
    // trailing slash a token does not have.
    let issuer = url("PERPLEXITY_OAUTH_ISSUER", issuer.clone())
        .map(|_| issuer.unwrap_or_default().trim().to_owned())?;
    let audience = url("PERPLEXITY_OAUTH_AUDIENCE", audience.clone())
        .map(|_| audience.unwrap_or_default().trim().to_owned())?;
    let jwks_url = match env("PERPLEXITY_OAUTH_JWKS_URL").filter(|v| !v.trim().is_empty()) {
        Some(raw) => Some(url("PERPLEXITY_OAUTH_JWKS_URL", Some(raw))?),
        None => None,
    };
    // Each subject's own rate: opt-in, since the server's rate already caps them all;
    // a burst alone would be a rate nobody asked for.
    let per_minute = env("PERPLEXITY_OAUTH_RATE_PER_MINUTE");
    let burst = env("PERPLEXITY_OAUTH_RATE_BURST");
    let present = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.trim().is_empty());
    let subject_rate = match (present(&per_minute), present(&burst)) {
        (false, false) => None,
        (false, true) => {
            return Err(ConfigError::new(
                "PERPLEXITY_OAUTH_RATE_BURST",
                "needs PERPLEXITY_OAUTH_RATE_PER_MINUTE (each subject's rate) beside it",
            ));
        }
        (true, _) => {
            let max = u64::from(crate::identity::MAX_RATE);
            let per_minute = bounded_int(
                "PERPLEXITY_OAUTH_RATE_PER_MINUTE",
                per_minute.as_deref(),
                1,
                1,
                max,
            )? as u32;
            let burst = bounded_int(
                "PERPLEXITY_OAUTH_RATE_BURST",
                burst.as_deref(),
                u64::from(per_minute.min(10)),
                1,
                max,
            )? as u32;
            Some((per_minute, burst))
        }
    };
    Ok(crate::identity::OAuthConfig {
        issuer,
        audience,
        jwks_url,
        subject_rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oauth_subject_rate_needs_its_per_minute() {
        let with = |extra: &[(&str, &str)]| {
            let mut vars = vec![
                ("PERPLEXITY_OAUTH_ISSUER", "https://id.example"),
                ("PERPLEXITY_OAUTH_AUDIENCE", "https://mcp.example/mcp"),
            ];
            vars.extend_from_slice(extra);
            let vars: Vec<(String, String)> = vars
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            http_auth(&|name: &str| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
        };
        let rate = |auth: Result<HttpAuth, ConfigError>| match auth {
            Ok(HttpAuth::OAuth(config)) => Ok(config.subject_rate),
            Ok(_) => panic!("not OAuth"),
            Err(e) => Err(e.variable),
        };
        assert_eq!(rate(with(&[])), Ok(None));
        assert_eq!(
            rate(with(&[("PERPLEXITY_OAUTH_RATE_PER_MINUTE", "30")])),
            Ok(Some((30, 10)))
        );
        assert_eq!(
            rate(with(&[("PERPLEXITY_OAUTH_RATE_PER_MINUTE", "3")])),
            Ok(Some((3, 3)))
        );
        assert_eq!(
            rate(with(&[
                ("PERPLEXITY_OAUTH_RATE_PER_MINUTE", "30"),
                ("PERPLEXITY_OAUTH_RATE_BURST", "50")
            ])),
            Ok(Some((30, 50)))
        );
        assert_eq!(
            rate(with(&[("PERPLEXITY_OAUTH_RATE_BURST", "5")])),
            Err("PERPLEXITY_OAUTH_RATE_BURST")
        );
        assert_eq!(
            rate(with(&[("PERPLEXITY_OAUTH_RATE_PER_MINUTE", "0")])),
            Err("PERPLEXITY_OAUTH_RATE_PER_MINUTE")
        );
    }

    #[test]
    fn wait_budget_rules() {
        assert_eq!(wait_seconds_from(None), 55);
        assert_eq!(wait_seconds_from(Some("")), 55);
        assert_eq!(wait_seconds_from(Some("soon")), 55);
        assert_eq!(wait_seconds_from(Some("30.5")), 55);
        assert_eq!(wait_seconds_from(Some("0")), 55);
        assert_eq!(wait_seconds_from(Some("-5")), 55);
        assert_eq!(wait_seconds_from(Some(" 120 ")), 120);
        assert_eq!(wait_seconds_from(Some("+30")), 30);
        assert_eq!(wait_seconds_from(Some("1_000")), 1000);
        assert_eq!(wait_seconds_from(Some("1__0")), 55);
        assert_eq!(wait_seconds_from(Some("_10")), 55);
        assert_eq!(wait_seconds_from(Some("99999")), 1800);
        assert_eq!(
            wait_seconds_from(Some("999999999999999999999999999999999999999999")),
            1800
        );
    }

    #[test]
    fn api_base_only_loopback_http() {
        assert_eq!(
            api_base_from(None).unwrap().as_str(),
            "https://api.perplexity.ai/"
        );
        for ok in [
            "http://127.0.0.1:8080",
            "http://127.9.9.9",
            "http://[::1]:1/",
            "http://localhost:3000",
        ] {
            assert!(api_base_from(Some(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "https://127.0.0.1",
            "http://10.0.0.1",
            "http://evil.example",
            "http://localhost.evil.example",
            "https://api.perplexity.ai",
            "http://user:pw@127.0.0.1",
            "http://127.0.0.1/v1",
            "ftp://127.0.0.1",
            "127.0.0.1:80",
        ] {
            assert!(api_base_from(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn bounded_settings() {
        let cfg = Config::from_lookup(|_| None, None).unwrap();
        assert_eq!(cfg.api.max_attempts, 3);
        assert_eq!(cfg.api.max_response_bytes, 33_554_432);
        assert_eq!(cfg.api.attempt_timeout, Duration::from_secs(30));
        let bad = Config::from_lookup(
            |k| (k == "PERPLEXITY_MAX_RETRIES").then(|| "0".to_owned()),
            None,
        );
        assert_eq!(bad.unwrap_err().variable, "PERPLEXITY_MAX_RETRIES");
    }

    #[test]
    fn http_workers_are_two_unless_set_within_bounds() {
        let set = |value: &'static str| move |_: &str| Some(value.to_owned());
        assert_eq!(http_workers(|_| None).unwrap(), 2);
        assert_eq!(http_workers(set("1")).unwrap(), 1);
        assert_eq!(http_workers(set(" 8 ")).unwrap(), 8);
        for bad in ["0", "257", "two", "-1"] {
            let e = http_workers(set(bad)).unwrap_err();
            assert_eq!(e.variable, "PERPLEXITY_HTTP_WORKERS", "{bad}");
            assert!(e.to_string().contains("1 to 256"), "{e}");
        }
    }

    #[test]
    fn http_needs_a_long_token_and_loopback_unless_told() {
        let token = "t".repeat(32);
        let env = |name: &str| (name == "PERPLEXITY_HTTP_AUTH_TOKEN").then(|| token.clone());
        let cfg = HttpConfig::from_lookup(env, "127.0.0.1:8080", false).unwrap();
        assert_eq!(cfg.max_in_flight, 1024);
        assert!(!format!("{cfg:?}").contains(&token));
        let err = |e: ConfigError| e.variable;
        assert_eq!(
            err(HttpConfig::from_lookup(|_| None, "127.0.0.1:8080", false).unwrap_err()),
            "PERPLEXITY_HTTP_AUTH_TOKEN"
        );
        let short = |_: &str| Some("x".repeat(31));
        assert_eq!(
            err(HttpConfig::from_lookup(short, "127.0.0.1:8080", false).unwrap_err()),
            "PERPLEXITY_HTTP_AUTH_TOKEN"
        );
        assert_eq!(
            err(HttpConfig::from_lookup(env, "0.0.0.0:8080", false).unwrap_err()),
            "--bind"
        );
        assert!(HttpConfig::from_lookup(env, "0.0.0.0:8080", true).is_ok());
        assert!(HttpConfig::from_lookup(env, "[::1]:0", false).is_ok());
        let origins = |name: &str| match name {
            "PERPLEXITY_HTTP_AUTH_TOKEN" => Some("t".repeat(40)),
            "PERPLEXITY_HTTP_ALLOWED_ORIGINS" => {
                Some("https://App.Example.com, http://x.org:81".into())
            }
            _ => None,
        };
        let cfg = HttpConfig::from_lookup(origins, "127.0.0.1:1", false).unwrap();
        assert_eq!(
            cfg.allowed_origins,
            ["https://app.example.com", "http://x.org:81"]
        );
    }

    #[test]
    fn store_location_and_retention() {
        let cfg = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Config::from_lookup(
                |name| {
                    pairs
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                },
                None,
            )
        };
        let c = cfg(&[("HOME", "/home/u")]).unwrap().store.unwrap();
        assert_eq!(
            c.path,
            std::path::Path::new("/home/u/.local/share/perplexity-agent/store.sqlite")
        );
        assert_eq!(
            (
                c.snapshot_retention,
                c.max_tabs_per_space,
                c.max_history_per_space
            ),
            (100, 50, None)
        );
        let c = cfg(&[("HOME", "/h"), ("XDG_DATA_HOME", "/x")])
            .unwrap()
            .store
            .unwrap();
        assert_eq!(
            c.path,
            std::path::Path::new("/x/perplexity-agent/store.sqlite")
        );
        let c = cfg(&[
            ("PERPLEXITY_STORE_PATH", "/s.db"),
            ("PERPLEXITY_MAX_HISTORY_PER_SPACE", "7"),
        ])
        .unwrap()
        .store
        .unwrap();
        assert_eq!(
            (c.path.to_str(), c.max_history_per_space),
            (Some("/s.db"), Some(7))
        );
        assert!(cfg(&[]).unwrap().store.is_none());
        assert_eq!(
            cfg(&[("HOME", "/h"), ("PERPLEXITY_SNAPSHOT_RETENTION", "0")])
                .unwrap_err()
                .variable,
            "PERPLEXITY_SNAPSHOT_RETENTION"
        );
    }
}
