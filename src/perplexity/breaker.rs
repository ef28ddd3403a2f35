//! The circuit breaker for the Perplexity host: after five consecutive outages, calls fail
//! fast for a cool-down instead of each spending its whole budget on a dead upstream (and
//! a prompt storm multiplying that into thousands of doomed requests).
//!
//! An *outage* is a transport failure or a retryable status (429/5xx) we gave up on. Any
//! other answer — a 4xx included — proves the host is up, so it closes the breaker. After
//! the cool-down exactly one request is let through as a probe; its success closes the
//! breaker, its failure re-opens it. Everything here takes `now` as an argument, so the
//! state machine is tested without waiting.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Consecutive outages that open the breaker.
pub const OPEN_AFTER: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed {
        outages: u32,
    },
    Open {
        until: Instant,
    },
    /// The one probe is in flight; everyone else still fails fast.
    HalfOpen,
}

#[derive(Debug)]
pub struct CircuitBreaker {
    state: Mutex<State>,
    cooldown: Duration,
}

/// How a request that was let through ended, as far as the breaker cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The host answered (any status that is not an outage).
    Answered,
    /// A transport failure or a retryable status we gave up on.
    Outage,
    /// Nothing was learnt about the host (e.g. no key, so no request was sent).
    Unknown,
}

/// Refusal while open: how long until a probe may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    pub retry_in: Duration,
}

/// A request the breaker let through. It must be settled with [`Permit::settle`];
/// dropping an unsettled probe (its call was cancelled) lets the next call probe.
#[must_use]
pub struct Permit<'a> {
    breaker: &'a CircuitBreaker,
    probe: bool,
    settled: bool,
}

impl CircuitBreaker {
    pub fn new(cooldown: Duration) -> Self {
        CircuitBreaker {
            state: Mutex::new(State::Closed { outages: 0 }),
            cooldown,
        }
    }

    pub fn admit(&self, now: Instant) -> Result<Permit<'_>, Open> {
        let mut state = self.lock();
        let probe = match *state {
            State::Closed { .. } => false,
            State::Open { until } if now >= until => {
                *state = State::HalfOpen;
                true
            }
            State::Open { until } => {
                return Err(Open {
                    retry_in: until - now,
                });
            }
            // The probe decides soon; its own deadline bounds how long.
            State::HalfOpen => {
                return Err(Open {
                    retry_in: Duration::from_secs(1),
                });
            }
        };
        Ok(Permit {
            breaker: self,
            probe,
            settled: false,
        })
    }

    /// `true` while calls are being refused (for `server_metrics`).
    pub fn is_open(&self, now: Instant) -> bool {
        match *self.lock() {
            State::Closed { .. } => false,
            State::Open { until } => now < until,
            State::HalfOpen => true,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a plain value: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Permit<'_> {
    pub fn settle(mut self, outcome: Outcome, now: Instant) {
        self.settled = true;
        let mut state = self.breaker.lock();
        *state = match (outcome, *state) {
            (Outcome::Answered, _) => State::Closed { outages: 0 },
            (Outcome::Outage, State::Closed { outages }) if !self.probe => {
                if outages + 1 >= OPEN_AFTER {
                    tracing::warn!(
                        cooldown = ?self.breaker.cooldown,
                        "Perplexity unreachable {OPEN_AFTER} times in a row: pausing requests"
                    );
                    State::Open {
                        until: now + self.breaker.cooldown,
                    }
                } else {
                    State::Closed {
                        outages: outages + 1,
                    }
                }
            }
            // A failed probe, or an outage reported while another request opened the
            // breaker: (re)start the cool-down.
            (Outcome::Outage, _) => State::Open {
                until: now + self.breaker.cooldown,
            },
            (Outcome::Unknown, State::HalfOpen) if self.probe => State::Open { until: now },
            (Outcome::Unknown, state) => state,
        };
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.probe && !self.settled {
            let mut state = self.breaker.lock();
            if *state == State::HalfOpen {
                *state = State::Open {
                    until: Instant::now(),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COOL: Duration = Duration::from_secs(30);

    fn outages(b: &CircuitBreaker, n: u32, now: Instant) {
        for _ in 0..n {
            b.admit(now).unwrap().settle(Outcome::Outage, now);
        }
    }

    #[test]
    fn opens_after_five_consecutive_outages_then_probes_once() {
        let b = CircuitBreaker::new(COOL);
        let t0 = Instant::now();
        outages(&b, 4, t0);
        assert!(!b.is_open(t0));
        outages(&b, 1, t0);
        assert!(b.is_open(t0));
        let refused = b.admit(t0 + Duration::from_secs(10)).err().unwrap();
        assert_eq!(refused.retry_in, Duration::from_secs(20));

        let later = t0 + COOL;
        let probe = b.admit(later).unwrap();
        assert!(b.admit(later).is_err(), "exactly one probe");
        probe.settle(Outcome::Outage, later);
        assert!(
            b.admit(later + Duration::from_secs(29)).is_err(),
            "re-opened"
        );

        let again = later + COOL;
        b.admit(again).unwrap().settle(Outcome::Answered, again);
        assert!(!b.is_open(again));
        outages(&b, 4, again);
        assert!(!b.is_open(again), "the count restarted");
    }

    #[test]
    fn answers_reset_the_count_and_unknowns_change_nothing() {
        let b = CircuitBreaker::new(COOL);
        let t = Instant::now();
        outages(&b, 4, t);
        b.admit(t).unwrap().settle(Outcome::Answered, t);
        outages(&b, 4, t);
        b.admit(t).unwrap().settle(Outcome::Unknown, t);
        assert!(!b.is_open(t));
        outages(&b, 1, t);
        assert!(b.is_open(t));
    }

    #[test]
    fn an_abandoned_probe_lets_the_next_call_probe() {
        let b = CircuitBreaker::new(COOL);
        let t = Instant::now();
        outages(&b, 5, t);
        drop(b.admit(t + COOL).unwrap());
        assert!(b.admit(t + COOL).is_ok());
    }
}
