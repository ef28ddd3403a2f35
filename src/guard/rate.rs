//! One token bucket per process, shared by every front end: a prompt storm from any
//! client drains the same budget. Refusal is immediate (never a queue, never a wait in
//! the read loop) and says when to retry. With replicas the state door charges buckets of
//! the same sizes instead (`State::charge`), one for all replicas.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A source of "now", injectable so tests can freeze and advance time.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

pub struct TokenBucket {
    /// As configured: what a shared backend's bucket of the same name is charged with.
    pub per_minute: u32,
    pub burst: u32,
    capacity: f64,
    /// Tokens per second.
    rate: f64,
    clock: Box<dyn Clock>,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens refilling `per_minute` tokens a minute, continuously.
    pub fn new(per_minute: u32, burst: u32, clock: Box<dyn Clock>) -> Self {
        let now = clock.now();
        TokenBucket {
            per_minute: per_minute.max(1),
            burst: burst.max(1),
            capacity: f64::from(burst.max(1)),
            rate: f64::from(per_minute.max(1)) / 60.0,
            clock,
            state: Mutex::new((f64::from(burst.max(1)), now)),
        }
    }

    /// Takes `n` tokens at once (a call that makes `n` requests), or none. A cost above
    /// the bucket size is charged as a full bucket, so it stays possible.
    pub fn try_take_n(&self, n: u32) -> Result<(), Duration> {
        let cost = f64::from(n.max(1)).min(self.capacity);
        let now = self.clock.now();
        let Ok(mut state) = self.state.lock() else {
            return Ok(());
        };
        let (tokens, last) = *state;
        let refilled = (tokens + now.saturating_duration_since(last).as_secs_f64() * self.rate)
            .min(self.capacity);
        if refilled >= cost {
            *state = (refilled - cost, now);
            Ok(())
        } else {
            *state = (refilled, now);
            Err(Duration::from_secs_f64((cost - refilled) / self.rate))
        }
    }
}

impl TokenBucket {
    /// Whole tokens available now (for status displays; takes nothing).
    pub fn available(&self) -> u32 {
        let now = self.clock.now();
        let Ok(state) = self.state.lock() else {
            return 0;
        };
        let (tokens, last) = *state;
        (tokens + now.saturating_duration_since(last).as_secs_f64() * self.rate)
            .min(self.capacity)
            .floor() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[derive(Clone)]
    struct Frozen(Arc<Mutex<Instant>>);

    impl Clock for Frozen {
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    #[test]
    fn burst_then_refill() {
        let clock = Frozen(Arc::new(Mutex::new(Instant::now())));
        let bucket = TokenBucket::new(60, 10, Box::new(clock.clone()));
        for _ in 0..10 {
            assert!(bucket.try_take_n(1).is_ok());
        }
        let wait = bucket.try_take_n(1).unwrap_err();
        assert!(wait <= Duration::from_secs(1) && wait > Duration::from_millis(900));
        assert_eq!(
            crate::call::Refusal::RateLimited { retry_after: wait }.message(),
            "Rate limit exceeded: try again in 1s."
        );
        *clock.0.lock().unwrap() += Duration::from_secs(1);
        assert!(bucket.try_take_n(1).is_ok());
        assert!(bucket.try_take_n(1).is_err());
        // Refill never exceeds the burst.
        *clock.0.lock().unwrap() += Duration::from_secs(3600);
        for _ in 0..10 {
            assert!(bucket.try_take_n(1).is_ok());
        }
        assert!(bucket.try_take_n(1).is_err());
    }
}
