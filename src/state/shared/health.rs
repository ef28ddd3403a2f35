//! Whether the shared state backend answers, as the last operation found it: what
//! `/readyz` and `/metrics` report. Each change is logged once (not once per failed
//! call), so an outage is one warning and its end one line.

use std::sync::atomic::{AtomicBool, Ordering};

use super::BackendError;

#[derive(Default)]
pub struct Health {
    /// Not ready until the first operation answers.
    up: AtomicBool,
    /// Whether any operation has been seen (the first failure is an outage to log).
    seen: AtomicBool,
}

impl Health {
    /// Records how an operation went.
    pub fn saw(&self, error: Option<&BackendError>) {
        let was_up = self.up.swap(error.is_none(), Ordering::AcqRel);
        let first = !self.seen.swap(true, Ordering::AcqRel);
        match error {
            // At warn, as the outage was: its end belongs beside its start in the log.
            None if !was_up && !first => tracing::warn!("the state backend answers again"),
            Some(e) if was_up || first => tracing::warn!(
                "{e}: billable calls are refused until it answers (none is let through unmetered)"
            ),
            _ => {}
        }
        crate::telemetry::state_up(error.is_none());
    }

    /// Whether the last operation got an answer.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }
}
