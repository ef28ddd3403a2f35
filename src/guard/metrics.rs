//! In-process counters, fed by the guard (every call passes it) and read by the
//! `server_metrics` tool. Bounded: latencies are kept in a fixed ring per tool. Counts
//! only — no parameters, no texts, no secrets.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::call::Caller;

/// Latency samples kept per tool for the percentiles.
const LATENCY_WINDOW: usize = 1024;

#[derive(Default)]
struct ToolStats {
    calls: u64,
    errors: u64,
    rejected: u64,
    rate_limited: u64,
    abandoned: u64,
    latencies_ms: Vec<f64>,
    next: usize,
}

impl ToolStats {
    fn observe(&mut self, ms: f64) {
        if self.latencies_ms.len() < LATENCY_WINDOW {
            self.latencies_ms.push(ms);
        } else {
            self.latencies_ms[self.next] = ms;
            self.next = (self.next + 1) % LATENCY_WINDOW;
        }
    }
}

/// What the Perplexity client knows, for the snapshot.
#[derive(Debug, Clone, Copy, Default)]
pub struct Upstream {
    pub retries: u64,
    pub circuit_open: bool,
}

pub struct Metrics {
    started: Instant,
    tools: Mutex<BTreeMap<String, ToolStats>>,
    in_flight: Mutex<i64>,
    tasks: Mutex<TaskCounts>,
}

/// MCP tasks: running in this process, and how those that ended here ended.
#[derive(Default)]
struct TaskCounts {
    in_flight: i64,
    completed: u64,
    failed: u64,
    cancelled: u64,
}

pub enum Outcome {
    Ok,
    Error,
    Rejected,
    RateLimited,
    /// Refused by a spending budget after admission.
    OverBudget,
    /// Refused because the shared state backend did not answer the rate-limit charge.
    Unavailable,
    Abandoned,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            started: Instant::now(),
            tools: Mutex::default(),
            in_flight: Mutex::new(0),
            tasks: Mutex::default(),
        }
    }
}

impl Metrics {
    /// A task started (+1) or stopped (-1) running in this process.
    pub fn task_running(&self, delta: i64) {
        if let Ok(mut t) = self.tasks.lock() {
            t.in_flight += delta;
        }
    }

    /// A task reached a terminal status.
    pub fn task_settled(&self, status: &str) {
        if let Ok(mut t) = self.tasks.lock() {
            match status {
                "completed" => t.completed += 1,
                "failed" => t.failed += 1,
                "cancelled" => t.cancelled += 1,
                _ => {}
            }
        }
    }

    pub fn started_call(&self) {
        if let Ok(mut n) = self.in_flight.lock() {
            *n += 1;
        }
    }

    /// A call ended: counted here (`server_metrics`) and for Prometheus (`telemetry`,
    /// which also counts it by caller); `took` is set for calls that ran.
    pub fn ended(
        &self,
        tool: &str,
        (front_end, caller): (&'static str, &Caller),
        outcome: Outcome,
        took: Option<Duration>,
    ) {
        use crate::telemetry::{Ending, Refusal};
        let ending = match outcome {
            Outcome::Ok => Ending::Ok,
            Outcome::Error => Ending::Error,
            Outcome::Rejected => Ending::Refused(Refusal::Validation),
            Outcome::RateLimited => Ending::Refused(Refusal::Rate),
            Outcome::OverBudget => Ending::Refused(Refusal::Budget),
            Outcome::Unavailable => Ending::Refused(Refusal::State),
            Outcome::Abandoned => Ending::Abandoned,
        };
        crate::telemetry::call_ended(tool, front_end, caller_label(caller), ending, took);
        if took.is_some()
            && let Ok(mut n) = self.in_flight.lock()
        {
            *n -= 1;
        }
        let Ok(mut tools) = self.tools.lock() else {
            return;
        };
        let stats = tools.entry(tool.to_owned()).or_default();
        stats.calls += 1;
        match outcome {
            Outcome::Ok => {}
            // A budget's refusal is an error result, as server_metrics always counted it.
            Outcome::Error | Outcome::OverBudget | Outcome::Unavailable => stats.errors += 1,
            Outcome::Rejected => {
                stats.errors += 1;
                stats.rejected += 1;
            }
            Outcome::RateLimited => {
                stats.errors += 1;
                stats.rate_limited += 1;
            }
            Outcome::Abandoned => stats.abandoned += 1,
        }
        if let Some(took) = took {
            stats.observe(took.as_secs_f64() * 1000.0);
        }
    }

    /// The snapshot `server_metrics` returns; `upstream` comes from the client.
    pub fn snapshot(&self, upstream: Upstream) -> Value {
        let tools = self.tools.lock().map(|tools| {
            tools
                .iter()
                .map(|(name, s)| {
                    let mut sorted = s.latencies_ms.clone();
                    sorted.sort_by(f64::total_cmp);
                    (
                        name.clone(),
                        json!({
                            "calls": s.calls,
                            "errors": s.errors,
                            "validation_rejections": s.rejected,
                            "rate_limit_rejections": s.rate_limited,
                            "abandoned": s.abandoned,
                            "latency_ms": {
                                "p50": percentile(&sorted, 0.50),
                                "p95": percentile(&sorted, 0.95),
                                "p99": percentile(&sorted, 0.99),
                            },
                        }),
                    )
                })
                .collect::<serde_json::Map<String, Value>>()
        });
        json!({
            "uptime_seconds": self.started.elapsed().as_secs(),
            "calls_in_flight": self.in_flight.lock().map(|n| (*n).max(0)).unwrap_or(0),
            "upstream_retries": upstream.retries,
            "upstream_circuit_open": upstream.circuit_open,
            "tools": tools.unwrap_or_default(),
            "tasks": self.tasks.lock().map_or_else(|_| json!({}), |t| json!({
                "in_flight": t.in_flight.max(0),
                "completed": t.completed,
                "failed": t.failed,
                "cancelled": t.cancelled,
            })),
        })
    }
}

/// The caller's `caller` label for Prometheus: its name, but `oauth` for every OAuth
/// subject ([`crate::telemetry::caller_label`]), so the label stays bounded.
fn caller_label(caller: &Caller) -> &str {
    crate::telemetry::caller_label(caller.name(), caller.issuer().is_some())
}

/// Nearest-rank percentile of sorted samples, rounded to 0.1 ms; 0 without samples.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    (sorted[rank - 1] * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_label_is_a_clients_name_or_one_word() {
        assert_eq!(
            caller_label(&Caller::client("ci-bot", "2026-12-02T10:00:00Z")),
            "ci-bot"
        );
        assert_eq!(caller_label(&Caller::single_token(&[7; 32])), "default");
        assert_eq!(caller_label(&Caller::local()), "local");
        for subject in ["alice@example.com", "a-subject-nobody-listed"] {
            let caller = Caller::subject("https://id.example.com", subject);
            assert_eq!(caller_label(&caller), "oauth");
        }
    }

    #[test]
    fn counts_and_percentiles() {
        let m = Metrics::default();
        let local = Caller::local();
        for ms in 1..=100 {
            m.started_call();
            m.ended(
                "t",
                ("test", &local),
                Outcome::Ok,
                Some(Duration::from_millis(ms)),
            );
        }
        m.ended("t", ("test", &local), Outcome::RateLimited, None);
        m.ended("t", ("test", &local), Outcome::Rejected, None);
        let snap = m.snapshot(Upstream {
            retries: 7,
            circuit_open: false,
        });
        let t = &snap["tools"]["t"];
        assert_eq!(t["calls"], 102);
        assert_eq!(t["errors"], 2);
        assert_eq!(t["rate_limit_rejections"], 1);
        assert_eq!(t["latency_ms"]["p50"].as_f64(), Some(50.0));
        assert_eq!(t["latency_ms"]["p99"].as_f64(), Some(99.0));
        assert_eq!(snap["calls_in_flight"], 0);
        assert_eq!(snap["upstream_retries"], 7);
        // The window is bounded.
        for _ in 0..5000 {
            m.ended(
                "u",
                ("test", &local),
                Outcome::Ok,
                Some(Duration::from_millis(1)),
            );
        }
        assert!(m.tools.lock().unwrap()["u"].latencies_ms.len() <= LATENCY_WINDOW);
    }
}
