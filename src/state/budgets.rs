//! The budgets' sums and holds: what was spent in the current day and month, and what
//! admitted calls still hold, so an admission is one step against both and the last room
//! is taken once. The shared engine keeps them for every replica (one script each way,
//! `shared/budgets.rs`); the local engine keeps the ledger's sums and this process's holds
//! (`local/budgets.rs`). The ledger's rows stay in the local store under either engine.
//!
//! An engine that cannot answer an admission is an error: the caller refuses budgeted
//! calls (an unreadable budget must not mean unlimited spending).

use std::time::Duration;

use super::{Engine, State, StateError};

/// A call's hold lapses after this if no replica settles it (the replica died): longer
/// than any call waits (the wait budget's ceiling is 30 minutes).
pub const CALL_HOLD: Duration = Duration::from_secs(2 * 3600);
/// A run handed back unfinished holds its estimate this long unless collected.
pub const PENDING_HOLD: Duration = Duration::from_secs(24 * 3600);

/// One budget to check: everyone's or the caller's, a day's or a month's, its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetCheck {
    pub everyone: bool,
    pub monthly: bool,
    pub limit: i64,
}

/// What an admission found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The estimate is held.
    Held,
    /// `checks[index]` has no room: what was spent and is held against it.
    Short { index: usize, spent: i64, held: i64 },
}

/// Spent in the current windows: the caller's and everyone's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpentNow {
    pub caller_day: i64,
    pub caller_month: i64,
    pub all_day: i64,
    pub all_month: i64,
}

/// One caller's spend in the current windows, for `server_metrics` and `usage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerSpend {
    pub key: String,
    pub name: String,
    pub day: i64,
    pub month: i64,
}

/// The current day's and month's windows, by their starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    pub day_start_ms: i64,
    pub month_start_ms: i64,
}

impl State {
    /// Holds `estimate` for `caller` under `hold` (an unguessable name) if every check has
    /// room; else which check is short, with what is spent and held against it.
    pub async fn reserve_budget(
        &self,
        window: Window,
        caller: &str,
        estimate: i64,
        hold: &str,
        checks: &[BudgetCheck],
    ) -> Result<Admission, StateError> {
        // The error names what could not be read, for the refusal the caller words.
        match &self.engine {
            Engine::Shared(shared) => shared
                .reserve_budget(window, caller, estimate, hold, checks)
                .await
                .map_err(|e| StateError::Unavailable(format!("the shared state backend holding the replicas' spend cannot be reached ({e})"))),
            Engine::Local(budgets) => budgets
                .reserve(&self.store, window, caller, estimate, hold, checks)
                .await
                .map_err(|e| StateError::Unavailable(format!("the spend ledger cannot be read ({e})"))),
        }
    }

    /// Counts a call's billable requests `rows` (key, micro-dollars, new to this process's
    /// ledger) to `caller` (key, name) and ends `hold`, or keeps it for `running`, a run
    /// the call handed back unfinished (released when a call reports that run). Returns
    /// which rows were counted for the first time and the sums after. Under the shared
    /// engine a request counts once across the replicas; locally, once in the ledger.
    pub async fn settle_budget(
        &self,
        window: Window,
        caller: (&str, &str),
        hold: Option<&str>,
        running: Option<&str>,
        rows: &[(String, i64, bool)],
    ) -> Result<(Vec<bool>, SpentNow), StateError> {
        match &self.engine {
            Engine::Shared(shared) => {
                let rows: Vec<(String, i64)> =
                    rows.iter().map(|(k, m, _)| (k.clone(), *m)).collect();
                Ok(shared
                    .settle_budget(window, caller, hold, running, &rows)
                    .await?)
            }
            Engine::Local(budgets) => {
                let new = budgets.settle(caller.0, hold, running, rows);
                let sums = budgets.spent(&self.store, window, caller.0).await?;
                Ok((new, sums))
            }
        }
    }

    /// [`State::settle_budget`] for spend no budget waits for (no hold, no sums wanted):
    /// the shared engine adds it within a second, in one batch with the others.
    pub fn settle_later(&self, window: Window, caller: (&str, &str), rows: &[(String, i64, bool)]) {
        match &self.engine {
            Engine::Shared(shared) => {
                let rows = rows.iter().map(|(k, m, _)| (k.clone(), *m)).collect();
                shared.settle_later(window, caller, rows);
            }
            Engine::Local(budgets) => {
                budgets.settle(caller.0, None, None, rows);
            }
        }
    }

    /// What `caller` and everyone spent in `window`.
    pub async fn spent(&self, window: Window, caller: &str) -> Result<SpentNow, StateError> {
        match &self.engine {
            Engine::Shared(shared) => Ok(shared.spent(window, caller).await?),
            Engine::Local(budgets) => Ok(budgets.spent(&self.store, window, caller).await?),
        }
    }

    /// Every caller's spend in `window`.
    pub async fn spent_by_caller(&self, window: Window) -> Result<Vec<CallerSpend>, StateError> {
        match &self.engine {
            Engine::Shared(shared) => Ok(shared.spent_by_caller(window).await?),
            Engine::Local(_) => {
                Ok(super::local::Budgets::spent_by_caller(&self.store, window).await?)
            }
        }
    }
}
