//! What a call was billed for, as Perplexity told us: every run whose final state a
//! request learned (with its `usage`, when the API reported one) and every successful
//! search request. Set once around a call's work by the tools' pipeline, like the trace,
//! so the places that learn a run's end report it here and nothing in between carries it;
//! the spend ledger turns what was metered into its rows. Outside a call nothing is kept.

use std::future::Future;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One billable upstream request, or a run whose final state was learned.
#[derive(Debug, Clone, PartialEq)]
pub struct Metered {
    /// The run id, or the search request's id: what makes a repeated report the same row.
    pub key: String,
    pub kind: MeteredKind,
    /// The model the run used, when the API names it.
    pub model: Option<String>,
    /// `usage` as reported (absent for cancelled runs and for searches).
    pub usage: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeteredKind {
    /// An Agent API run that reached a final state.
    Run,
    /// One successful `POST /search` (up to five queries are one billing unit).
    Search,
}

/// What one call's requests metered (a run learned twice is kept once, the last copy).
#[derive(Default)]
pub struct Meter(Mutex<Vec<Metered>>);

impl Meter {
    pub fn take(&self) -> Vec<Metered> {
        self.0
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default()
    }

    fn add(&self, entry: Metered) {
        if let Ok(mut entries) = self.0.lock() {
            entries.retain(|e| e.key != entry.key);
            entries.push(entry);
        }
    }
}

tokio::task_local! {
    static METER: Arc<Meter>;
}

/// Runs `work` with its billable requests reported to `meter`. Not an `async fn`, for
/// the reason given at `trace::scope`.
pub fn scope<F: Future>(meter: Arc<Meter>, work: F) -> impl Future<Output = F::Output> {
    METER.scope(meter, work)
}

/// A run's final state was learned (polled, streamed, answered by a foreground create).
pub(crate) fn run_settled(raw: &Value) {
    let Some(id) = raw.get("id").and_then(Value::as_str) else {
        return;
    };
    let entry = Metered {
        key: id.to_owned(),
        kind: MeteredKind::Run,
        model: raw.get("model").and_then(Value::as_str).map(str::to_owned),
        usage: raw.get("usage").filter(|u| u.is_object()).cloned(),
    };
    let _ = METER.try_with(|meter| meter.add(entry));
}

/// A search request succeeded (billed per request, whatever it found). Keyed by an id of
/// ours, never the API's: a search is reported once, and an upstream repeating its ids
/// must not merge two billed requests into one row.
pub(crate) fn search_billed() {
    let entry = Metered {
        key: format!("search:{}", crate::random::secure_hex::<12>()),
        kind: MeteredKind::Search,
        model: None,
        usage: None,
    };
    let _ = METER.try_with(|meter| meter.add(entry));
}
