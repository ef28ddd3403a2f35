//! Whether the shared state backend answers, as the last operation found it: what
//! `/readyz`, `doctor` and `/metrics` report. Each change is logged once (not once per
//! failed call), so an outage is one warning and its end one line.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::StateError;

#[derive(Default)]
pub struct Health {
    /// Not ready until the first operation answers.
    up: AtomicBool,
    /// `None` before the first operation; else the last failure, if it failed.
    last: Mutex<Option<Option<StateError>>>,
}

impl Health {
    /// Records how an operation went.
    pub fn saw(&self, error: Option<&StateError>) {
        self.up.store(error.is_none(), Ordering::Release);
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let before = last.replace(error.cloned());
        match (before, error) {
            // At warn, as the outage was: its end belongs beside its start in the log.
            (Some(Some(_)), None) => tracing::warn!("the state backend answers again"),
            (None | Some(None), Some(e)) => tracing::warn!(
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

    /// The last failure, if the last operation failed.
    pub fn problem(&self) -> Option<StateError> {
        self.last
            .lock()
            .ok()
            .and_then(|last| last.clone().flatten())
    }
}
