//! The local engine's budgets: the ledger's sums for the current day and month and this
//! process's holds, the same operations the shared engine runs as scripts in Redis
//! (`shared/budgets.rs`), with the same hold names and lifetimes.
//!
//! - An admission is one step under one lock: the ledger's sums, plus what calls still
//!   running hold, plus the estimate, must fit. So 30 concurrent calls with room for 10
//!   admit 10 — a check and a later charge would admit all 30.
//! - The sums are kept in memory and read again only when the windows move or another
//!   process has committed to the store (`PRAGMA data_version`, one cheap read): summing
//!   a month of rows for every admission would cost in proportion to the month's calls,
//!   and spend made beside the server (the CLI) must count at once.
//! - A hold a call handed back with its run still going is renamed `run:<id>` and kept
//!   until a call reports that run (or [`PENDING_HOLD`] passes); at most [`MAX_PENDING`]
//!   are kept, the oldest going first, so memory stays bounded whatever runs are lost.

use std::collections::HashMap;
use std::time::Instant;

use super::{StoreError, StoreHandle};
use crate::state::budgets::{
    Admission, BudgetCheck, CALL_HOLD, CallerSpend, PENDING_HOLD, SpentNow, Window,
};

/// Holds of unfinished runs kept at most (the oldest go first).
const MAX_PENDING: usize = 10_000;

#[derive(Default)]
pub struct Budgets {
    /// The check against what is held and the new hold are one step under this lock; the
    /// ledger's sums are read before it (another call's settle moves its hold into them).
    holds: std::sync::Mutex<HashMap<String, Hold>>,
    sums: std::sync::Mutex<Option<Sums>>,
}

struct Hold {
    caller: String,
    micros: i64,
    until: Instant,
}

struct Sums {
    window: (i64, i64),
    /// `PRAGMA data_version` when they were read.
    version: i64,
    /// Caller key → (today, this month).
    callers: HashMap<String, (i64, i64)>,
}

impl Budgets {
    pub async fn reserve(
        &self,
        store: &StoreHandle,
        window: Window,
        caller: &str,
        estimate: i64,
        name: &str,
        checks: &[BudgetCheck],
    ) -> Result<Admission, StoreError> {
        let spent = self.spent(store, window, caller).await?;
        let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
        sweep(&mut holds);
        let (held_all, held_mine) = holds.values().fold((0i64, 0i64), |(all, mine), h| {
            let mine = match h.caller == caller {
                true => mine.saturating_add(h.micros),
                false => mine,
            };
            (all.saturating_add(h.micros), mine)
        });
        for (index, check) in checks.iter().enumerate() {
            let (spent, held) = match (check.everyone, check.monthly) {
                (true, false) => (spent.all_day, held_all),
                (true, true) => (spent.all_month, held_all),
                (false, false) => (spent.caller_day, held_mine),
                (false, true) => (spent.caller_month, held_mine),
            };
            // Sums of money saturate: a sum that wrapped around would admit everything.
            if spent.saturating_add(held).saturating_add(estimate) > check.limit {
                return Ok(Admission::Short { index, spent, held });
            }
        }
        holds.insert(
            name.to_owned(),
            Hold {
                caller: caller.to_owned(),
                micros: estimate.max(0),
                until: Instant::now() + CALL_HOLD,
            },
        );
        Ok(Admission::Held)
    }

    /// Counts the rows this process's ledger took as new, releases the holds of the runs
    /// they report, and ends `hold` (or keeps it as `run:<running>`).
    pub fn settle(
        &self,
        caller: &str,
        hold: Option<&str>,
        running: Option<&str>,
        rows: &[(String, i64, bool)],
    ) -> Vec<bool> {
        let written = rows
            .iter()
            .filter(|(_, _, new)| *new)
            .fold(0i64, |sum, (_, micros, _)| sum.saturating_add(*micros));
        if let Some(sums) = self.sums.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let c = sums.callers.entry(caller.to_owned()).or_default();
            // Never lowers a spend, whatever it is handed.
            c.0 = c.0.saturating_add(written.max(0));
            c.1 = c.1.saturating_add(written.max(0));
        }
        let mut holds = self.holds.lock().unwrap_or_else(|e| e.into_inner());
        for (request, _, _) in rows {
            holds.remove(&format!("run:{request}"));
        }
        if let (Some(held), Some(run)) = (hold.and_then(|name| holds.remove(name)), running) {
            let until = Instant::now() + PENDING_HOLD;
            holds.insert(format!("run:{run}"), Hold { until, ..held });
        }
        rows.iter().map(|(_, _, new)| *new).collect()
    }

    /// What `caller` and everyone spent in `window`, by the ledger.
    pub async fn spent(
        &self,
        store: &StoreHandle,
        window: Window,
        caller: &str,
    ) -> Result<SpentNow, StoreError> {
        let (day, month) = (window.day_start_ms, window.month_start_ms);
        let known = self
            .sums
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|s| s.window == (day, month))
            .map(|s| s.version);
        let read = store
            .with(move |s| {
                let version = s.data_version()?;
                if known == Some(version) {
                    return Ok((version, None));
                }
                Ok((version, Some(s.spent_in_windows(day, month)?)))
            })
            .await?;
        let mut sums = self.sums.lock().unwrap_or_else(|e| e.into_inner());
        if let (version, Some(rows)) = read {
            *sums = Some(Sums {
                window: (day, month),
                version,
                callers: rows
                    .into_iter()
                    .map(|c| (c.key, (c.day, c.month)))
                    .collect(),
            });
        }
        let Some(sums) = sums.as_ref() else {
            return Ok(SpentNow::default());
        };
        let mine = sums.callers.get(caller).copied().unwrap_or_default();
        let all =
            |of: fn(&(i64, i64)) -> i64| sums.callers.values().map(of).fold(0, i64::saturating_add);
        Ok(SpentNow {
            caller_day: mine.0,
            caller_month: mine.1,
            all_day: all(|c| c.0),
            all_month: all(|c| c.1),
        })
    }

    /// Every caller's spend in `window`, by the ledger.
    pub async fn spent_by_caller(
        store: &StoreHandle,
        window: Window,
    ) -> Result<Vec<CallerSpend>, StoreError> {
        let (day, month) = (window.day_start_ms, window.month_start_ms);
        store.with(move |s| s.spent_in_windows(day, month)).await
    }
}

/// Holds past their time go (a call's after [`CALL_HOLD`], a run's after
/// [`PENDING_HOLD`]); beyond [`MAX_PENDING`] runs' holds, the oldest.
fn sweep(holds: &mut HashMap<String, Hold>) {
    let now = Instant::now();
    holds.retain(|_, h| h.until > now);
    let pending = holds.keys().filter(|k| k.starts_with("run:")).count();
    if pending > MAX_PENDING {
        let mut oldest: Vec<(String, Instant)> = holds
            .iter()
            .filter(|(k, _)| k.starts_with("run:"))
            .map(|(k, h)| (k.clone(), h.until))
            .collect();
        oldest.sort_by_key(|(_, until)| *until);
        for (name, _) in oldest.into_iter().take(pending - MAX_PENDING) {
            holds.remove(&name);
        }
    }
}
