//! Prometheus metrics: one list of names, one helper per event, fed from wherever the
//! event happens (the guard, the Perplexity client, the spend ledger, the HTTP accept
//! loop) through the `metrics` facade and rendered by `GET /metrics` in the Prometheus
//! text format (`metrics-exporter-prometheus`, which `promtool check metrics` accepts).
//!
//! - Off unless `PERPLEXITY_METRICS=on`: without an installed recorder every helper is a
//!   no-op, so a server that does not export pays nothing.
//! - No label carries a secret, a query, a URL or an unbounded value: tools are the
//!   catalogue's and the operator's gateway's; callers are named clients (bounded by the
//!   clients file), `default` or `local`, and every OAuth subject is counted under one
//!   `oauth` label (a provider could mint subjects without end); upstream endpoints and
//!   status classes are fixed words.
//!
//! Touches: nothing outside the process.

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

const BUILD_INFO: &str = "perplexity_agent_build_info";
const CALLS: &str = "perplexity_agent_calls_total";
const CALLER_CALLS: &str = "perplexity_agent_caller_calls_total";
const REFUSALS: &str = "perplexity_agent_refusals_total";
const CALL_SECONDS: &str = "perplexity_agent_call_duration_seconds";
const UPSTREAM: &str = "perplexity_agent_upstream_requests_total";
const UPSTREAM_SECONDS: &str = "perplexity_agent_upstream_request_duration_seconds";
const RETRIES: &str = "perplexity_agent_upstream_retries_total";
const CIRCUIT: &str = "perplexity_agent_upstream_circuit_open";
const CALLS_IN_FLIGHT: &str = "perplexity_agent_calls_in_flight";
const TASKS_IN_FLIGHT: &str = "perplexity_agent_tasks_in_flight";
const RUNS_PENDING: &str = "perplexity_agent_runs_pending";
const CONNECTIONS: &str = "perplexity_agent_http_connections";
const SESSIONS: &str = "perplexity_agent_http_sessions";
const SPEND: &str = "perplexity_agent_spend_microdollars_total";
const STATE_UP: &str = "perplexity_agent_state_backend_up";
const CACHE_HITS: &str = "perplexity_agent_cache_hits_total";
const CACHE_MISSES: &str = "perplexity_agent_cache_misses_total";
const CACHE_SAVED: &str = "perplexity_agent_cache_saved_microdollars_total";

/// Seconds: a tools/list answers in microseconds, a research call takes minutes.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0,
];

static EXPORTER: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's recorder (once; later calls return the same handle).
pub fn install() -> Result<&'static PrometheusHandle, String> {
    if let Some(handle) = EXPORTER.get() {
        return Ok(handle);
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets(BUCKETS)
        .map_err(|e| format!("metrics: {e}"))?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|_| "metrics: a recorder is installed already".to_owned())?;
    describe();
    gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    Ok(EXPORTER.get_or_init(|| handle))
}

/// The exposition, or `None` when metrics are off.
pub fn render() -> Option<String> {
    let handle = EXPORTER.get()?;
    handle.run_upkeep();
    Some(handle.render())
}

fn describe() {
    describe_gauge!(
        BUILD_INFO,
        "Always 1; the version label says which build answers."
    );
    describe_counter!(
        CALLS,
        "Tool calls that ended, by tool, front end and outcome (ok, error, refused, abandoned)."
    );
    describe_counter!(
        CALLER_CALLS,
        "The calls of perplexity_agent_calls_total again, by caller (a named client, default, local or oauth) and outcome."
    );
    describe_counter!(
        REFUSALS,
        "Tool calls refused before any upstream request, by reason (validation, rate, busy, budget, scope, state)."
    );
    describe_histogram!(
        CALL_SECONDS,
        Unit::Seconds,
        "Time from admission to result, per tool."
    );
    describe_counter!(
        UPSTREAM,
        "Requests to Perplexity, by endpoint and status class (2xx, 4xx, 5xx, error for no answer)."
    );
    describe_histogram!(
        UPSTREAM_SECONDS,
        Unit::Seconds,
        "Time of one request to Perplexity (one attempt), per endpoint."
    );
    describe_counter!(RETRIES, "Requests to Perplexity that were retried.");
    describe_gauge!(
        CIRCUIT,
        "1 while the circuit breaker holds requests to Perplexity back."
    );
    describe_gauge!(CALLS_IN_FLIGHT, "Tool calls running now.");
    describe_gauge!(TASKS_IN_FLIGHT, "MCP tasks running in this process now.");
    describe_gauge!(
        RUNS_PENDING,
        "Research runs handed back unfinished (still running upstream) whose cost is not known yet."
    );
    describe_gauge!(CONNECTIONS, "Open HTTP connections.");
    describe_gauge!(SESSIONS, "Legacy (2025-11-25) HTTP sessions alive.");
    describe_gauge!(
        STATE_UP,
        "1 while the shared state backend (PERPLEXITY_STATE_URL) answers; 0 while billable calls are refused because it does not."
    );
    describe_counter!(
        SPEND,
        "What billable requests cost, in millionths of the API's currency (USD), by caller and tool: reported by Perplexity or estimated."
    );
    describe_counter!(
        CACHE_HITS,
        "Research calls answered from the cache (PERPLEXITY_CACHE), by tool: no upstream request, no cost."
    );
    describe_counter!(
        CACHE_MISSES,
        "Research calls the cache could have answered but did not (none kept, expired, or fresh asked), by tool."
    );
    describe_counter!(
        CACHE_SAVED,
        "What the cache's answers cost when they were made, in millionths of USD, by tool: what its hits did not spend again."
    );
}

/// How a call ended, for [`call_ended`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Ok,
    Error,
    Refused(Refusal),
    Abandoned,
}

/// Why a call was refused before any upstream request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Validation,
    Rate,
    Busy,
    Budget,
    Scope,
    /// The shared state backend did not answer the rate-limit charge.
    State,
}

impl Refusal {
    fn as_str(self) -> &'static str {
        match self {
            Refusal::Validation => "validation",
            Refusal::Rate => "rate",
            Refusal::Busy => "busy",
            Refusal::Budget => "budget",
            Refusal::Scope => "scope",
            Refusal::State => "state",
        }
    }
}

/// The `caller` label of a caller named `name`: every OAuth subject is one `oauth`, since
/// an identity provider could mint subjects without end; the rest are a named client's
/// name (bounded by the clients file the operator writes), `default` or `local`.
pub fn caller_label(name: &str, oauth: bool) -> &str {
    if oauth { "oauth" } else { name }
}

/// A call ended (`took`: from admission, for those that were admitted). `caller` is a
/// [`caller_label`].
pub fn call_ended(
    tool: &str,
    front_end: &'static str,
    caller: &str,
    ending: Ending,
    took: Option<Duration>,
) {
    if EXPORTER.get().is_none() {
        return;
    }
    let outcome = match ending {
        Ending::Ok => "ok",
        Ending::Error => "error",
        Ending::Abandoned => "abandoned",
        Ending::Refused(why) => {
            refused(why);
            "refused"
        }
    };
    counter!(CALLS, "tool" => tool.to_owned(), "front_end" => front_end, "outcome" => outcome)
        .increment(1);
    // A counter of its own rather than a label on CALLS: the existing series keep their
    // labels, and callers times outcomes stays small where callers times tools would not.
    counter!(CALLER_CALLS, "caller" => caller.to_owned(), "outcome" => outcome).increment(1);
    if let Some(took) = took {
        histogram!(CALL_SECONDS, "tool" => tool.to_owned()).record(took.as_secs_f64());
    }
}

/// A refusal that never reached the guard (a busy connection, a token's scope).
pub fn refused(why: Refusal) {
    if EXPORTER.get().is_some() {
        counter!(REFUSALS, "reason" => why.as_str()).increment(1);
    }
}

/// One attempt at a request to Perplexity: `status` `None` when no answer came.
pub fn upstream(endpoint: &'static str, status: Option<u16>, took: Duration) {
    if EXPORTER.get().is_none() {
        return;
    }
    let class = match status {
        Some(200..=299) => "2xx",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(500..=599) => "5xx",
        Some(_) => "other",
        None => "error",
    };
    counter!(UPSTREAM, "endpoint" => endpoint, "status" => class).increment(1);
    histogram!(UPSTREAM_SECONDS, "endpoint" => endpoint).record(took.as_secs_f64());
}

pub fn retried() {
    if EXPORTER.get().is_some() {
        counter!(RETRIES).increment(1);
    }
}

/// The state read at scrape time.
pub fn gauges(circuit_open: bool, calls: i64, tasks: i64, runs_pending: usize) {
    gauge!(CIRCUIT).set(f64::from(u8::from(circuit_open)));
    gauge!(CALLS_IN_FLIGHT).set(calls as f64);
    gauge!(TASKS_IN_FLIGHT).set(tasks as f64);
    gauge!(RUNS_PENDING).set(runs_pending as f64);
}

/// Whether the shared state backend answered its last operation.
pub fn state_up(up: bool) {
    if EXPORTER.get().is_some() {
        gauge!(STATE_UP).set(f64::from(u8::from(up)));
    }
}

/// Legacy HTTP sessions alive, read at scrape time.
pub fn sessions(alive: usize) {
    gauge!(SESSIONS).set(alive as f64);
}

/// An HTTP connection opened (+1) or closed (-1).
pub fn connection(delta: f64) {
    if EXPORTER.get().is_some() {
        gauge!(CONNECTIONS).increment(delta);
    }
}

/// A billable request's cost, in millionths. `caller` is already a bounded label.
pub fn spent(caller: &str, tool: &str, micros: i64) {
    if EXPORTER.get().is_some() && micros > 0 {
        counter!(SPEND, "caller" => caller.to_owned(), "tool" => tool.to_owned())
            .increment(micros as u64);
    }
}

/// A research call the cache answered (`saved`: what its answer had cost).
pub fn cache_hit(tool: &str, saved: i64) {
    if EXPORTER.get().is_some() {
        counter!(CACHE_HITS, "tool" => tool.to_owned()).increment(1);
        if saved > 0 {
            counter!(CACHE_SAVED, "tool" => tool.to_owned()).increment(saved as u64);
        }
    }
}

/// A research call the cache could have answered and did not.
pub fn cache_miss(tool: &str) {
    if EXPORTER.get().is_some() {
        counter!(CACHE_MISSES, "tool" => tool.to_owned()).increment(1);
    }
}
