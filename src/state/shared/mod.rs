//! State shared by the replicas of one `serve --http` deployment, in Redis (or a
//! Redis-compatible server such as Valkey) at `PERPLEXITY_STATE_URL`. Without it nothing
//! here exists and every piece of state stays in the process and its SQLite store, as
//! for one process.
//!
//! Redis is the engine: no replication, gossip or consensus of ours. Each operation is one
//! round trip (a Lua script where it must be atomic), bounded by
//! `PERPLEXITY_STATE_TIMEOUT_MS`, so an outage costs a caller that long and no more.
//! What fails when the backend is unreachable is decided per item, next to the item (and
//! in SECURITY.md, "Scale-out"): billable calls fail closed.
//!
//! Every key sits under `PERPLEXITY_STATE_PREFIX`, names its record version (`…:v1:…`,
//! so a rolling upgrade can read the previous version's records), and carries a TTL.
//!
//! Touches: one TCP (or TLS) connection to the backend.

mod buckets;
mod budgets;
mod cache;
pub use buckets::BucketSpec;
mod health;
mod offload;
mod runs;
mod snapshots;
mod tasks;
pub use tasks::Adoptable;

pub use health::Health;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use secrecy::{ExposeSecret, SecretString};

/// How long one operation may take by default (`PERPLEXITY_STATE_TIMEOUT_MS`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
/// How long a replica's claim on a task lasts unless renewed (`PERPLEXITY_STATE_LEASE_MS`):
/// after a replica dies, its tasks wait this long before another adopts them.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);
/// The key prefix by default (`PERPLEXITY_STATE_PREFIX`).
pub const DEFAULT_PREFIX: &str = "perplexity-agent:";

/// Where the shared state lives.
#[derive(Clone)]
pub struct StateConfig {
    /// `redis://` or `rediss://` URL; may carry a user and password, so it is a secret.
    pub url: SecretString,
    /// `PERPLEXITY_STATE_PASSWORD`: overrides the URL's password.
    pub password: Option<SecretString>,
    pub prefix: String,
    pub timeout: Duration,
    pub lease: Duration,
    /// `PERPLEXITY_REPLICA_ID`: whose a task's lease is.
    pub replica: String,
    /// `PERPLEXITY_STATE_CA_FILE`: the PEM roots a `rediss://` server's certificate must
    /// chain to (else the system's).
    pub ca_file: Option<PathBuf>,
}

impl std::fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateConfig")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Checks a `PERPLEXITY_STATE_URL` without connecting: the scheme, a host. The message
/// never repeats the URL (it may hold a password).
pub fn check_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|_| {
        "is not a URL; write redis://[user:password@]host:port[/db] or rediss://… for TLS"
            .to_owned()
    })?;
    if !matches!(parsed.scheme(), "redis" | "rediss") {
        return Err(format!(
            "scheme {} is not supported; use redis:// or rediss:// (TLS)",
            parsed.scheme()
        ));
    }
    if parsed.host().is_none() {
        return Err("names no host".to_owned());
    }
    Ok(())
}

/// Why an operation on the shared state did not complete. Its text is ours: never the
/// URL, a password, or a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendError {
    /// No answer within the operation's deadline.
    Timeout,
    /// The server refused our credentials (`WRONGPASS`, `NOPERM`, `NOAUTH`).
    Auth,
    /// TLS failed: most often a certificate that does not chain to our roots.
    Tls,
    /// No connection (refused, reset).
    Unreachable,
    /// The server answered something we cannot use (a script error, a read-only replica).
    Answer(String),
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendError::Timeout => write!(f, "the state backend did not answer in time"),
            BackendError::Auth => write!(
                f,
                "the state backend refused our credentials (check the user and password in PERPLEXITY_STATE_URL or PERPLEXITY_STATE_PASSWORD, and the ACL user's permissions)"
            ),
            BackendError::Tls => write!(
                f,
                "TLS with the state backend failed (is its certificate for this host name? For a private CA, set PERPLEXITY_STATE_CA_FILE)"
            ),
            BackendError::Unreachable => write!(f, "the state backend is unreachable"),
            BackendError::Answer(what) => write!(f, "the state backend answered: {what}"),
        }
    }
}

impl BackendError {
    /// Whether the backend could not serve, rather than answered one command with an
    /// error about its key (`WRONGTYPE` on a key overwritten with another type, or a reply
    /// of a type we cannot read): that answer is the backend up, and `/readyz` stays ready.
    pub fn is_outage(&self) -> bool {
        !matches!(self, BackendError::Answer(code) if ANSWERED.contains(&code.as_str()))
    }
}

/// The errors that are one key's, not the backend's (see [`BackendError::is_outage`]).
const ANSWERED: [&str; 2] = ["WRONGTYPE", "UnexpectedReturnType"];

impl From<redis::RedisError> for BackendError {
    fn from(e: redis::RedisError) -> Self {
        use redis::ErrorKind;
        // A pipeline's error is its first failed command's: that command's code speaks.
        let failed = e.clone().into_server_errors();
        let first = failed
            .as_ref()
            .and_then(|f| f.first())
            .map(|(_, e)| e.code());
        let code = e.code().or(first).unwrap_or_default();
        if matches!(e.kind(), ErrorKind::AuthenticationFailed)
            || matches!(code, "WRONGPASS" | "NOPERM" | "NOAUTH")
        {
            return BackendError::Auth;
        }
        if is_tls(&e) {
            return BackendError::Tls;
        }
        if e.is_timeout() {
            return BackendError::Timeout;
        }
        if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
            return BackendError::Unreachable;
        }
        // The server's error code only (`READONLY`, `ERR`…): its message could quote a
        // key or an argument.
        match code {
            "" => BackendError::Answer(format!("{:?}", e.kind())),
            code => BackendError::Answer(code.to_owned()),
        }
    }
}

/// Whether a rustls error is behind `e`: redis keeps an I/O error as an
/// `Arc<dyn Error>`, and tokio-rustls wraps rustls's error in that `io::Error`.
fn is_tls(e: &redis::RedisError) -> bool {
    type Shared = Arc<dyn std::error::Error + Send + Sync>;
    let rustls = |error: &(dyn std::error::Error + 'static)| {
        error.downcast_ref::<rustls::Error>().is_some()
            || error.downcast_ref::<std::io::Error>().is_some_and(|io| {
                io.get_ref()
                    .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
            })
    };
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = source {
        let inner: &(dyn std::error::Error + 'static) = match error.downcast_ref::<Shared>() {
            Some(shared) => shared.as_ref(),
            None => error,
        };
        if rustls(inner) {
            return true;
        }
        source = error.source();
    }
    false
}

/// The backend's client, not yet connected: ring as the TLS provider for `rediss://`,
/// whose certificate must chain to `roots` (PEM) when given, else to the system's roots;
/// `password` (`PERPLEXITY_STATE_PASSWORD`) replaces the URL's. No proxy, as for every
/// client of ours.
fn client(
    url: &str,
    password: Option<&str>,
    roots: Option<Vec<u8>>,
) -> redis::RedisResult<redis::Client> {
    use redis::IntoConnectionInfo;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut info = url.into_connection_info()?;
    if let Some(password) = password {
        let settings = info.redis_settings().clone().set_password(password);
        info = info.set_redis_settings(settings);
    }
    let tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
    match roots {
        Some(root_cert) if tls => redis::Client::build_with_tls(
            info,
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(root_cert),
            },
        ),
        _ => redis::Client::open(info),
    }
}

/// The shared state: one connection manager (it reconnects by itself), the key prefix and
/// the per-operation deadline.
pub struct Shared {
    conn: ConnectionManager,
    /// For the subscriber's own connection (a subscribed connection carries nothing else).
    client: redis::Client,
    replica: String,
    lease: Duration,
    prefix: String,
    timeout: Duration,
    health: Arc<Health>,
    /// Spend waiting to be added to the replicas' sums.
    unsent: budgets::Unsent,
}

impl Shared {
    /// Builds the client without connecting (the first operation connects). Fails on a
    /// URL or CA file that cannot be used (the URL's form was checked with the config).
    pub fn open(config: &StateConfig) -> Result<Shared, String> {
        let roots = match &config.ca_file {
            None => None,
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                format!(
                    "PERPLEXITY_STATE_CA_FILE: cannot read {}: {}",
                    path.display(),
                    e.kind()
                )
            })?),
        };
        let client = client(
            config.url.expose_secret(),
            config.password.as_ref().map(|p| p.expose_secret()),
            roots,
        )
        .map_err(|_| "PERPLEXITY_STATE_URL cannot be used (check its host, port and, for rediss://, PERPLEXITY_STATE_CA_FILE)".to_owned())?;
        // The manager retries a lost connection in the background; each operation still
        // gives up at its own deadline, so a caller never waits for a reconnect.
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.timeout.max(Duration::from_millis(50))))
            .set_response_timeout(Some(config.timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let conn =
            ConnectionManager::new_lazy_with_config(client.clone(), manager).map_err(|e| {
                format!(
                    "PERPLEXITY_STATE_URL cannot be used: {}",
                    BackendError::from(e)
                )
            })?;
        Ok(Shared {
            conn,
            client,
            replica: config.replica.clone(),
            lease: config.lease,
            prefix: config.prefix.clone(),
            timeout: config.timeout,
            health: Arc::new(Health::default()),
            unsent: budgets::Unsent::default(),
        })
    }

    /// A key under the prefix: `{prefix}{kind}:v{version}:{rest}`.
    fn key(&self, kind: &str, version: u32, rest: &str) -> String {
        format!("{}{kind}:v{version}:{rest}", self.prefix)
    }

    /// Runs one operation inside the deadline, and tells the health record how it went.
    async fn run<T>(
        &self,
        op: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, BackendError> {
        let result = match tokio::time::timeout(self.timeout, op).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(BackendError::from(e)),
            Err(_) => Err(BackendError::Timeout),
        };
        self.health
            .saw(result.as_ref().err().filter(|e| e.is_outage()));
        result
    }

    /// A hash of `fields` at `record` that expires after `ttl`, written in one round trip
    /// (`MULTI`), so it is never there without its expiry.
    async fn put_fields(
        &self,
        record: String,
        fields: &[(&str, &str)],
        ttl: Duration,
    ) -> Result<(), BackendError> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset_multiple(&record, fields)
            .ignore()
            .pexpire(&record, ttl.as_millis() as i64)
            .ignore();
        self.pipe::<()>(&pipe).await
    }

    /// One command ([`Shared::run`]).
    async fn cmd<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T, BackendError> {
        let mut conn = self.conn.clone();
        self.run(cmd.query_async(&mut conn)).await
    }

    /// One batch of commands ([`Shared::run`]).
    async fn pipe<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, BackendError> {
        let mut conn = self.conn.clone();
        self.run(pipe.query_async(&mut conn)).await
    }

    /// One script ([`Shared::run`]): EVALSHA, then EVAL once if this server has not seen
    /// the script (after a restart or a flush), so the script travels only when it must.
    async fn script<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, BackendError> {
        let mut conn = self.conn.clone();
        self.run(invocation.invoke_async(&mut conn)).await
    }

    /// The `fields` of the hash at `record` (`HMGET`: each `None` when absent).
    async fn get_fields<T: redis::FromRedisValue>(
        &self,
        record: String,
        fields: &'static [&'static str],
    ) -> Result<T, BackendError> {
        self.cmd(redis::cmd("HMGET").arg(record).arg(fields)).await
    }

    /// One `GET`: the string at `key`, if any.
    async fn get(&self, key: String) -> Result<Option<String>, BackendError> {
        self.cmd(redis::cmd("GET").arg(key)).await
    }

    /// One `PING`.
    pub async fn ping(&self) -> Result<(), BackendError> {
        self.cmd::<String>(&redis::cmd("PING")).await.map(drop)
    }

    /// At start-up: the backend answers and accepts our credentials, within `within`
    /// (several tries: a Redis that is still starting is not an error yet).
    pub async fn connect(&self, within: Duration) -> Result<(), BackendError> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match self.ping().await {
                Ok(()) => return Ok(()),
                // Credentials do not get better by retrying.
                Err(e @ (BackendError::Auth | BackendError::Tls)) => return Err(e),
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Whether the backend answered its last operation (readiness, `doctor`, metrics).
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Pings every second for as long as the process serves, so an outage (and the
    /// recovery) is seen, logged and reported to `/readyz` even while no call comes in.
    pub fn watch(self: &Arc<Self>) {
        let shared = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let _ = shared.ping().await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_refused_is_the_backend_answering_not_an_outage() {
        assert!(!BackendError::Answer("WRONGTYPE".into()).is_outage());
        assert!(!BackendError::Answer("UnexpectedReturnType".into()).is_outage());
        for down in ["READONLY", "LOADING", "OOM", "Extension"] {
            assert!(BackendError::Answer(down.into()).is_outage(), "{down}");
        }
        assert!(BackendError::Timeout.is_outage() && BackendError::Unreachable.is_outage());
    }

    #[test]
    fn urls_are_checked_without_being_repeated() {
        assert!(check_url("redis://127.0.0.1:6379").is_ok());
        assert!(check_url("rediss://agent:pw@cache.internal:6380/2").is_ok());
        let wrong = check_url("http://user:hunter2@cache:6379").unwrap_err();
        assert!(
            wrong.contains("redis://") && !wrong.contains("hunter2"),
            "{wrong}"
        );
        let garbage = check_url("hunter2").unwrap_err();
        assert!(!garbage.contains("hunter2"), "{garbage}");
    }

    #[test]
    fn keys_are_prefixed_and_versioned() {
        let config = StateConfig {
            url: SecretString::from("redis://127.0.0.1:1"),
            password: None,
            prefix: "team-a:".to_owned(),
            timeout: DEFAULT_TIMEOUT,
            lease: DEFAULT_LEASE,
            replica: "r0".to_owned(),
            ca_file: None,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let shared = rt.block_on(async { Shared::open(&config) }).unwrap();
        assert_eq!(shared.key("rate", 1, "server"), "team-a:rate:v1:server");
    }
}
