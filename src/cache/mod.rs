//! Pay once for the same answer: a research call whose answer was made recently for the
//! same question is served that answer instead of a new billed run.
//!
//! - Whose answers a call may be served from is the operator's choice
//!   (`PERPLEXITY_CACHE`): only its own caller's (`caller`, the default), or any caller's
//!   on this server (`team`: a hit then tells a caller that someone asked the same thing
//!   recently, which is why it is not the default), or none (`off`).
//! - The key is a hash of the scope (the caller's key under `caller`), the tool and every
//!   argument that changes the answer, with the question's whitespace normalised; what
//!   only changes how long a call waits (`wait`, `wait_seconds`) or asks for a fresh
//!   answer (`fresh`) is left out. No question is ever a key in the state.
//! - An answer is kept for `PERPLEXITY_CACHE_TTL_SECONDS`, never longer than a twelfth of
//!   the `recency` window the call asked for (an hour's news is stale in five minutes).
//! - Only complete answers are kept: never an error, a cancelled or unfinished run, or a
//!   hand-back at the wait budget (the frame decides, `tools/pipeline.rs`).
//! - The cache fails open: a state that cannot answer is a miss, and the call goes
//!   upstream; budgets still fail closed.
//!
//! Touches: the state door.

mod flight;

pub use flight::{Flight, Flights, Follow, Lead};

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use sha2::Digest;

use crate::call::{Caller, ToolOutput};
use crate::clock::now_ms;
use crate::state::{Cached, State, StateError};

/// `PERPLEXITY_CACHE_TTL_SECONDS` when unset.
pub const DEFAULT_TTL: Duration = Duration::from_secs(900);
/// The longest `PERPLEXITY_CACHE_TTL_SECONDS` (a day).
pub const MAX_TTL_SECONDS: u64 = 86_400;
/// An answer larger than this is not kept (the store and the backend hold many).
const MAX_ANSWER_BYTES: usize = 2 * 1024 * 1024;

/// Arguments that never change the answer: how long to wait, and the bypass itself.
const NOT_THE_QUESTION: [&str; 3] = ["wait", "wait_seconds", "fresh"];

/// Whose answers a call may be served from (`PERPLEXITY_CACHE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Off,
    /// Only answers its own caller was given.
    Caller,
    /// Any caller's on this server (and its replicas).
    Team,
}

impl Scope {
    /// `off`, `caller` or `team`; unset or empty: `caller`, but `off` for the reference
    /// peer's drop-in (`lifecycle`), whose replies stay the peer's unless asked.
    pub fn parse(raw: Option<&str>, drop_in: bool) -> Result<Scope, String> {
        match raw.map(str::trim).filter(|v| !v.is_empty()) {
            None if drop_in => Ok(Scope::Off),
            None => Ok(Scope::Caller),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "off" => Ok(Scope::Off),
                "caller" => Ok(Scope::Caller),
                "team" => Ok(Scope::Team),
                _ => Err(format!("'{v}' is not one of: off, caller, team")),
            },
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Off => "off",
            Scope::Caller => "caller",
            Scope::Team => "team",
        }
    }
}

/// How the research cache is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    pub scope: Scope,
    pub ttl: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            scope: Scope::Caller,
            ttl: DEFAULT_TTL,
        }
    }
}

/// The cache a server's calls share: its configuration, the state it keeps answers in and
/// the runs in flight (so identical calls at once make one run).
pub struct Cache {
    config: CacheConfig,
    state: Arc<State>,
    flights: Flights,
    /// Since start: calls answered, calls not, and what the answers had cost (`server_metrics`).
    hits: AtomicU64,
    misses: AtomicU64,
    saved: AtomicI64,
}

/// An answer served from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// What the tool returned when the answer was made (`output` and, for a run, `run`).
    pub answer: Value,
    pub created_ms: i64,
}

impl Hit {
    /// An answer just handed over by the run in flight it waited for.
    pub fn now(answer: Value) -> Hit {
        Hit {
            answer,
            created_ms: now_ms(),
        }
    }

    /// The tool's output as it was made.
    pub fn output(&self) -> ToolOutput {
        let a = &self.answer;
        let mut output = ToolOutput::ok(a["text"].as_str().unwrap_or_default());
        output.structured = a.get("structured").filter(|v| !v.is_null()).cloned();
        output.view = a.get("view").filter(|v| !v.is_null()).cloned();
        output
    }

    /// The run behind the answer (its id and body), when a run made it.
    pub fn run(&self) -> Option<(String, Value)> {
        let run = self.answer.get("run")?;
        Some((run["id"].as_str()?.to_owned(), run.get("body")?.clone()))
    }

    /// What the answer cost when it was made (micro-dollars): what this hit saved.
    pub fn saved(&self) -> i64 {
        self.answer["cost"].as_i64().unwrap_or(0).max(0)
    }

    pub fn age_seconds(&self) -> i64 {
        (now_ms().saturating_sub(self.created_ms) / 1000).max(0)
    }

    /// `structuredContent.cache` of a hit.
    pub fn marker(&self) -> Value {
        json!({
            "hit": true,
            "created_at": self.created_ms / 1000,
            "age_seconds": self.age_seconds(),
        })
    }
}

impl Cache {
    pub fn new(config: CacheConfig, state: Arc<State>) -> Cache {
        Cache {
            config,
            state,
            flights: Flights::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            saved: AtomicI64::new(0),
        }
    }

    pub fn config(&self) -> CacheConfig {
        self.config
    }

    /// The key a call of `tool` (one whose answers are kept: the registry says which)
    /// with `args` by `caller` is kept under; `None` when the cache is off or the call
    /// asked for a fresh answer.
    pub fn key(&self, caller: &Caller, tool: &str, args: &Map<String, Value>) -> Option<Key> {
        if self.config.scope == Scope::Off {
            return None;
        }
        if args.get("fresh").and_then(Value::as_bool) == Some(true) {
            return None;
        }
        let scope = match self.config.scope {
            Scope::Team => "team".to_owned(),
            _ => format!("caller:{}", caller.key()),
        };
        let ttl = ttl_for(self.config.ttl, args.get("recency").and_then(Value::as_str));
        Some(Key {
            hash: key_of(&scope, tool, args),
            ttl,
            scope: self.config.scope.as_str(),
        })
    }

    /// The answer kept under `key`, if any. Any failure of the state is a miss.
    pub async fn get(&self, key: &Key) -> Option<Hit> {
        match self.state.cached(&key.hash).await {
            Ok(Cached { body, created_ms }) => {
                let answer = serde_json::from_str(&body).ok()?;
                Some(Hit { answer, created_ms })
            }
            Err(StateError::NotFound) => None,
            Err(e) => {
                tracing::warn!(
                    "the research cache could not be read ({e}); the call goes upstream"
                );
                None
            }
        }
    }

    /// Keeps `answer` under `key` (a failure is logged: the next call pays again).
    pub async fn put(&self, key: &Key, answer: &Value) {
        let body = answer.to_string();
        if body.len() > MAX_ANSWER_BYTES {
            return;
        }
        let cached = Cached {
            body,
            created_ms: now_ms(),
        };
        if let Err(e) = self.state.keep_cached(&key.hash, &cached, key.ttl).await {
            tracing::warn!("an answer could not be kept in the research cache ({e})");
        }
    }

    /// A call of `tool` answered from the cache; `saved`: what its answer had cost.
    pub fn hit(&self, tool: &str, saved: i64) {
        self.hits.fetch_add(1, Ordering::Relaxed);
        self.saved.fetch_add(saved.max(0), Ordering::Relaxed);
        crate::telemetry::cache_hit(tool, saved);
    }

    /// A call of `tool` the cache could have answered and did not.
    pub fn miss(&self, tool: &str) {
        self.misses.fetch_add(1, Ordering::Relaxed);
        crate::telemetry::cache_miss(tool);
    }

    /// `server_metrics`' `cache`: the scope and this process's counts since it started.
    pub fn counters(&self) -> Value {
        json!({
            "scope": self.config.scope.as_str(),
            "hits": self.hits.load(Ordering::Relaxed),
            "misses": self.misses.load(Ordering::Relaxed),
            "saved": self.saved.load(Ordering::Relaxed) as f64 / 1_000_000.0,
        })
    }

    /// Joins the run in flight for `key`, or becomes it.
    pub fn fly(&self, key: &Key) -> Flight {
        self.flights.join(&key.hash)
    }

    /// Whether identical calls wait on the run `run_id` beside the one that started it.
    pub fn followed_run(&self, run_id: &str) -> bool {
        self.flights.followed_run(run_id)
    }

    /// Follows the run in flight for `key`, if any, without ever becoming it (for a call
    /// that asked for its run back at once).
    pub fn follow(&self, key: &Key) -> Option<Follow> {
        self.flights.follow(&key.hash)
    }
}

/// What is kept of a complete answer: the tool's output as it gave it, the run behind it
/// (so a hit renders as the run did) and what it cost.
pub fn answer(output: &ToolOutput, run: Option<(&str, &Value)>, cost_micros: i64) -> Value {
    json!({
        "text": output.text,
        "structured": output.structured,
        "view": output.view,
        "run": run.map(|(id, body)| json!({"id": id, "body": body})),
        "cost": cost_micros,
    })
}

/// Where an answer is kept, and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    hash: String,
    ttl: Duration,
    /// `caller` or `team`, for the audit record of a hit.
    pub scope: &'static str,
}

/// The TTL for a call asking for `recency`: the configured one, at most a twelfth of the
/// window.
pub fn ttl_for(configured: Duration, recency: Option<&str>) -> Duration {
    let window = match recency {
        Some("hour") => 3_600,
        Some("day") => 86_400,
        Some("week") => 7 * 86_400,
        Some("month") => 30 * 86_400,
        Some("year") => 365 * 86_400,
        _ => u64::MAX,
    };
    configured.min(Duration::from_secs(window / 12))
}

/// SHA-256 of the scope, the tool and the canonical arguments.
fn key_of(scope: &str, tool: &str, args: &Map<String, Value>) -> String {
    let canonical = canonical(&Value::Object(
        args.iter()
            .filter(|(k, v)| !NOT_THE_QUESTION.contains(&k.as_str()) && !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ));
    let mut hash = sha2::Sha256::new();
    for part in [scope, tool, &canonical.to_string()] {
        hash.update(part.len().to_le_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The arguments in one form: keys sorted at every level, strings with their whitespace
/// runs made one space and trimmed (`"  What is  x?"` asks what `"What is x?"` asks).
fn canonical(value: &Value) -> Value {
    crate::text::sorted_json(value, &|s| {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn cache(scope: Scope) -> Cache {
        Cache::new(
            CacheConfig {
                scope,
                ttl: DEFAULT_TTL,
            },
            Arc::new(State::default()),
        )
    }

    #[test]
    fn the_key_is_the_question_not_how_it_waits_or_is_spaced() {
        let c = cache(Scope::Caller);
        let me = Caller::local();
        let key = |v| c.key(&me, "perplexity_agent", &args(v)).map(|k| k.hash);
        let base = key(json!({"query": "What is x?", "preset": "pro"}));
        assert!(base.is_some());
        assert_eq!(
            key(
                json!({"preset": "pro", "query": "  What   is\nx? ", "wait": false, "recency": null})
            ),
            base
        );
        assert_ne!(key(json!({"query": "What is y?", "preset": "pro"})), base);
        assert_ne!(key(json!({"query": "What is x?", "preset": "fast"})), base);
        assert_ne!(
            key(json!({"query": "What is x?", "preset": "pro", "domains": ["a.org"]})),
            base
        );
        assert_eq!(
            key(json!({"query": "What is x?", "preset": "pro", "fresh": true})),
            None
        );
        assert_eq!(
            cache(Scope::Off).key(&me, "perplexity_agent", &args(json!({"query": "q"}))),
            None
        );
    }

    #[test]
    fn callers_have_their_own_keys_unless_the_scope_is_the_team() {
        let (a, b) = (Caller::client("a", "1"), Caller::client("b", "1"));
        let q = args(json!({"query": "q"}));
        let own = cache(Scope::Caller);
        assert_ne!(
            own.key(&a, "perplexity_ask", &q),
            own.key(&b, "perplexity_ask", &q)
        );
        let team = cache(Scope::Team);
        assert_eq!(
            team.key(&a, "perplexity_ask", &q),
            team.key(&b, "perplexity_ask", &q)
        );
        assert_ne!(
            team.key(&a, "perplexity_ask", &q),
            own.key(&a, "perplexity_ask", &q)
        );
        assert_ne!(
            team.key(&a, "perplexity_ask", &q),
            team.key(&a, "finance_search", &q)
        );
    }

    /// The cache fails open: a shared engine that does not answer is a miss, and keeping
    /// an answer there is only logged.
    #[tokio::test]
    async fn an_engine_that_does_not_answer_is_a_miss() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let config = crate::state::StateConfig {
            url: format!("redis://127.0.0.1:{closed}").into(),
            password: None,
            prefix: crate::state::DEFAULT_PREFIX.to_owned(),
            timeout: Duration::from_millis(100),
            lease: crate::state::DEFAULT_LEASE,
            replica: "r".to_owned(),
            ca_file: None,
        };
        let state = Arc::new(State::open(None, Some(&config)).unwrap());
        let c = Cache::new(CacheConfig::default(), state);
        let key = c
            .key(
                &Caller::local(),
                "perplexity_ask",
                &args(json!({"query": "q"})),
            )
            .unwrap();
        c.put(&key, &json!({"text": "a"})).await;
        assert_eq!(c.get(&key).await, None);
    }

    #[test]
    fn recency_bounds_the_ttl() {
        assert_eq!(ttl_for(DEFAULT_TTL, Some("hour")), Duration::from_secs(300));
        assert_eq!(ttl_for(DEFAULT_TTL, Some("day")), DEFAULT_TTL);
        assert_eq!(ttl_for(DEFAULT_TTL, None), DEFAULT_TTL);
        assert_eq!(
            ttl_for(Duration::from_secs(86_400), Some("day")),
            Duration::from_secs(7_200)
        );
    }

    #[test]
    fn the_scope_defaults_to_the_caller_and_off_for_the_drop_in() {
        assert_eq!(Scope::parse(None, false), Ok(Scope::Caller));
        assert_eq!(Scope::parse(Some(" "), true), Ok(Scope::Off));
        assert_eq!(Scope::parse(Some("Team"), true), Ok(Scope::Team));
        assert!(
            Scope::parse(Some("everyone"), false)
                .unwrap_err()
                .contains("off, caller, team")
        );
    }
}
