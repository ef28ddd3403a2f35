//! Spend you can see and cap: the ledger of what each caller's calls cost (one row per
//! billable upstream request, in the store) and the budgets that stop new billable calls
//! once a day's or month's money is gone.
//!
//! - A budgeted call is admitted in one step under one lock: what the ledger says was
//!   spent, plus what calls still running hold, plus this call's estimate, must fit. So
//!   30 concurrent calls with room for 10 admit 10 — a check and a later charge would
//!   admit all 30 (a runaway agent is exactly that burst).
//! - The hold is settled with the reported cost when the call ends; a run handed back
//!   unfinished keeps its hold until its cost is learned (or a day passes), so a budget
//!   is overshot by at most what the runs in flight cost above their estimates.
//! - Admissions check the ledger's sums for the current day and month, kept in memory
//!   and read again when another process commits to the store (`totals`), so spend made
//!   beside the server (the CLI) counts at once, and a restart loses nothing.
//! - A ledger that cannot be read refuses budgeted calls (fail closed: an unreadable
//!   ledger must not mean unlimited spending); without a budget it only costs the row.
//! - A repeated report of one run (a second collect, a collect after a restart) is one
//!   row: the ledger is keyed by run id.
//!
//! - With replicas (`PERPLEXITY_STATE_URL`) the sums and holds are the team's, in Redis
//!   (`state/shared/budgets.rs`): one script admits against them, so replicas share one budget;
//!   each replica's ledger still keeps the rows of the calls it served (`usage`).
//!
//! Touches: the store, and the shared state backend when there is one.

pub mod money;
pub mod prices;
pub mod window;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::call::{Budget, Caller, FrontEnd};
use crate::perplexity::meter::{Metered, MeteredKind};
use crate::state::local::{LedgerRow, SpentTotals, StoreError, StoreHandle, Tokens};
use crate::state::shared::{Admission, BudgetCheck, CallerSpend, Shared, SpentNow, Window};
use money::Micros;
pub use money::parse as parse_amount;
pub use window::BudgetZone;

/// `PERPLEXITY_LEDGER_RETENTION_DAYS` when unset.
pub const DEFAULT_RETENTION_DAYS: u32 = 400;
/// A run handed back unfinished stops holding budget after this long (runs expire).
const PENDING_HOLD: Duration = Duration::from_secs(24 * 3600);
/// Holds of unfinished runs kept at most (the oldest go first).
const MAX_PENDING: usize = 10_000;
/// The share of a budget at which results carry a warning.
const WARN_AT_PERCENT: i64 = 80;
/// The currency Perplexity bills in; rows keep what the API reported.
const CURRENCY: &str = "USD";

/// The server's budgets and how spend is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct SpendConfig {
    /// `PERPLEXITY_BUDGET_DAILY` / `_MONTHLY`: everyone's calls together.
    pub budget: Budget,
    /// `PERPLEXITY_BUDGET_TZ`.
    pub zone: BudgetZone,
    /// `PERPLEXITY_LEDGER_RETENTION_DAYS`.
    pub retention_days: u32,
}

impl Default for SpendConfig {
    fn default() -> Self {
        SpendConfig {
            budget: Budget::default(),
            zone: BudgetZone::default(),
            retention_days: DEFAULT_RETENTION_DAYS,
        }
    }
}

/// Who a billable call is for, as its ledger rows name it.
pub struct Billing<'a> {
    pub caller: &'a Caller,
    /// The caller's own budget (a named client's `budget_daily`/`budget_monthly`).
    pub own: Budget,
    pub front_end: FrontEnd,
    pub tool: &'a str,
}

/// Budget held by an admitted call until it is settled.
#[must_use = "settle the hold with what the call cost"]
pub struct Hold {
    id: u64,
    /// Its name in the shared state, when the replicas' budget holds it.
    shared: Option<String>,
}

struct Held {
    caller: String,
    micros: Micros,
    /// Set once the call ended with this run still going: settled by its collect.
    run: Option<String>,
    since: Instant,
}

pub struct Spend {
    config: SpendConfig,
    store: Arc<StoreHandle>,
    /// Budgeted admissions, one at a time: the read of the ledger and the hold are one step.
    admission: tokio::sync::Mutex<()>,
    held: std::sync::Mutex<HashMap<u64, Held>>,
    next: AtomicU64,
    /// The ledger's write failures are logged once, not per call.
    warned: AtomicBool,
    /// The ledger's sums for the current windows (see `totals`).
    sums: std::sync::Mutex<Option<Sums>>,
    /// The replicas' shared sums and holds; `None`: this process's ledger alone.
    shared: Option<Arc<Shared>>,
    /// Spend not yet added to the replicas' sums (calls without a budget).
    unsent: Arc<Unsent>,
}

/// Costs of calls without a budget, added to the replicas' sums once a second in one
/// script per caller, not one round trip per call. At most a second of them is lost when
/// the process dies (the replica's ledger still has every row); a batch Redis does not
/// take is dropped with a warning rather than kept growing.
#[derive(Default)]
struct Unsent {
    rows: std::sync::Mutex<HashMap<CallerOf, Vec<(String, Micros)>>>,
    flushing: AtomicBool,
    /// The budgets' zone: which day and month a batch is added to.
    zone: BudgetZone,
}

/// A caller's key and name; the rows are (request key, micro-dollars).
type CallerOf = (String, String);

/// How often unsent spend is added to the replicas' sums.
const UNSENT_EVERY: Duration = Duration::from_secs(1);

impl Unsent {
    fn add(self: &Arc<Self>, shared: &Arc<Shared>, caller: &Caller, costs: Vec<(String, Micros)>) {
        let key = (caller.key().to_owned(), caller.name().to_owned());
        self.rows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default()
            .extend(costs);
        if self.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (unsent, shared) = (self.clone(), shared.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(UNSENT_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let batch =
                    std::mem::take(&mut *unsent.rows.lock().unwrap_or_else(|e| e.into_inner()));
                let window = window_of(&unsent.zone.windows(now_ms()));
                for ((key, name), rows) in batch {
                    if let Err(e) = shared
                        .settle_budget(window, (&key, &name), None, None, &rows)
                        .await
                    {
                        tracing::warn!(
                            "the replicas' spend could not be updated in the shared state ({e}); {} request(s) are missing from the shared sums",
                            rows.len()
                        );
                    }
                }
            }
        });
    }
}

struct Sums {
    day_start: i64,
    month_start: i64,
    /// `PRAGMA data_version` when they were read.
    version: i64,
    /// Caller key → (today, this month).
    callers: HashMap<String, (Micros, Micros)>,
}

/// One budget against what was spent.
struct Limit<'a> {
    /// `this server's daily budget`, `the daily budget of client 'ci'`.
    name: String,
    limit: Micros,
    spent: Micros,
    held: Micros,
    resets: &'a str,
    period: &'static str,
    /// Everyone's budget (the server's), else the caller's own.
    everyone: bool,
    /// The amounts may be told: a caller's own, or the server's to an operator. The
    /// server's budget is shared, and its amounts would tell a client what the others
    /// spend.
    disclose: bool,
}

impl Spend {
    pub fn new(config: SpendConfig, store: Arc<StoreHandle>) -> Self {
        let zone = config.zone.clone();
        Spend {
            config,
            store,
            admission: tokio::sync::Mutex::new(()),
            held: std::sync::Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            warned: AtomicBool::new(false),
            sums: std::sync::Mutex::new(None),
            shared: None,
            unsent: Arc::new(Unsent {
                zone,
                ..Unsent::default()
            }),
        }
    }

    /// Budgets shared by the replicas of one deployment, through `shared`.
    pub fn sharing(mut self, shared: Option<Arc<Shared>>) -> Spend {
        self.shared = shared;
        self
    }

    /// The server's budgets as the start-up summary says them (`5.00 a day`, `none`).
    pub fn budgets_said(&self) -> String {
        let budget = self.config.budget;
        match (budget.daily, budget.monthly) {
            (None, None) => "none".to_owned(),
            (Some(day), None) => format!("{} a day", money::format(day)),
            (None, Some(month)) => format!("{} a month", money::format(month)),
            (Some(day), Some(month)) => {
                format!(
                    "{} a day, {} a month",
                    money::format(day),
                    money::format(month)
                )
            }
        }
    }

    pub fn config(&self) -> &SpendConfig {
        &self.config
    }

    fn applies(&self, own: &Budget) -> bool {
        self.config.budget.is_set() || own.is_set()
    }

    /// Admits a billable call that may cost `estimate`, or says which budget has no
    /// room. Without any budget nothing is read or waited for: the hold only remembers
    /// the estimate, which prices the call's runs if they report no cost.
    pub async fn reserve(&self, who: &Billing<'_>, estimate: Micros) -> Result<Hold, String> {
        if !self.applies(&who.own) {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            prune(&mut held);
            return Ok(self.hold(&mut held, who, estimate, None));
        }
        if let Some(shared) = &self.shared {
            return self.reserve_shared(shared, who, estimate).await;
        }
        let _one_at_a_time = self.admission.lock().await;
        let now = now_ms();
        let windows = self.config.zone.windows(now);
        let spent = self.ledger_totals(who.caller, &windows).await.map_err(|e| {
            format!(
                "A budget is set, and the spend ledger cannot be read, so no billable call is admitted: {e}"
            )
        })?;
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        prune(&mut held);
        let (held_all, held_mine) = held.values().fold((0, 0), |(all, mine), h| {
            let mine = if h.caller == who.caller.key() {
                Micros::saturating_add(mine, h.micros)
            } else {
                mine
            };
            (Micros::saturating_add(all, h.micros), mine)
        });
        for limit in self.limits(who, &spent, &windows, held_all, held_mine) {
            // Sums of money saturate: a sum that wrapped around would admit everything.
            if limit
                .spent
                .saturating_add(limit.held)
                .saturating_add(estimate)
                > limit.limit
            {
                return Err(limit.refusal(who.tool, estimate));
            }
        }
        Ok(self.hold(&mut held, who, estimate, None))
    }

    /// [`Spend::reserve`] against the replicas' sums: one script in Redis reads them and
    /// holds the estimate, so the last room is taken by one replica only. An unreachable
    /// backend refuses the call (fail closed, as an unreadable ledger does).
    async fn reserve_shared(
        &self,
        shared: &Shared,
        who: &Billing<'_>,
        estimate: Micros,
    ) -> Result<Hold, String> {
        let windows = self.config.zone.windows(now_ms());
        let limits = self.limits(who, &SpentTotals::default(), &windows, 0, 0);
        let checks: Vec<BudgetCheck> = limits
            .iter()
            .map(|l| BudgetCheck {
                everyone: l.everyone,
                monthly: l.period == "monthly",
                limit: l.limit,
            })
            .collect();
        // Unguessable and unique across replicas: the hold's name in the shared state.
        let name = crate::random::secure_hex::<12>();
        let admission = shared
            .reserve_budget(window_of(&windows), who.caller.key(), estimate, &name, &checks)
            .await
            .map_err(|e| {
                format!(
                    "A budget is set, and the shared state backend holding the replicas' spend cannot be reached, so no billable call is admitted: {e}. Try again shortly."
                )
            })?;
        match admission {
            Admission::Held => {
                let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
                prune(&mut held);
                Ok(self.hold(&mut held, who, estimate, Some(name)))
            }
            Admission::Short { index, spent, held } => {
                let mut limits = limits;
                let Some(limit) = limits.get_mut(index) else {
                    return Err("The shared budget answered something unexpected, so no billable call is admitted.".to_owned());
                };
                limit.spent = spent;
                limit.held = held;
                Err(limit.refusal(who.tool, estimate))
            }
        }
    }

    fn hold(
        &self,
        held: &mut HashMap<u64, Held>,
        who: &Billing<'_>,
        estimate: Micros,
        shared: Option<String>,
    ) -> Hold {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        held.insert(
            id,
            Held {
                caller: who.caller.key().to_owned(),
                micros: estimate,
                run: None,
                since: Instant::now(),
            },
        );
        Hold { id, shared }
    }

    /// Records what a call's requests were billed for and gives back its hold (kept for
    /// `running`, a run it handed back unfinished). `per_run` prices a run that reported
    /// no cost. Returns the warning a result carries once a budget is 80 % spent.
    pub async fn settle(
        &self,
        who: &Billing<'_>,
        hold: Option<Hold>,
        metered: Vec<Metered>,
        per_run: Micros,
        task_id: Option<&str>,
        running: Option<&str>,
    ) -> Option<String> {
        let settled: Vec<String> = metered.iter().map(|m| m.key.clone()).collect();
        // A run handed back earlier is priced, if it reports no cost, by the estimate
        // of the call that started it (its preset), not of the call that collected it.
        let started_at: HashMap<String, Micros> = {
            let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            held.values()
                .filter_map(|h| Some((h.run.clone()?, h.micros)))
                .filter(|(run, _)| settled.contains(run))
                .collect()
        };
        let rows: Vec<LedgerRow> = metered
            .into_iter()
            .map(|m| {
                let per_run = started_at.get(&m.key).copied().unwrap_or(per_run);
                row(who, m, per_run, task_id)
            })
            .collect();
        let windows = self.config.zone.windows(now_ms());
        let shared_hold = hold.as_ref().and_then(|h| h.shared.clone());
        // The metric counts each row once, as the ledger does (a second report of a run
        // is not new); OAuth subjects share one label (the caller label is bounded).
        let label =
            crate::telemetry::caller_label(who.caller.name(), who.caller.issuer().is_some())
                .to_owned();
        let costs: Vec<(String, i64)> = rows
            .iter()
            .map(|r| (r.request.clone(), r.total_micros))
            .collect();
        let mut new: Option<Vec<bool>> = None;
        if !rows.is_empty() {
            let retention = self.config.retention_days;
            match self
                .store
                .with(move |s| s.record_spend(&rows, retention))
                .await
            {
                Ok(fresh) => new = Some(fresh),
                // Without a ledger nothing here tells a repeated report from a new one:
                // every one counts (said in docs/http.md), unless the replicas' state does.
                Err(StoreError::NotConfigured) => new = Some(vec![true; costs.len()]),
                Err(e) => {
                    if !self.warned.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "the spend ledger could not be written ({e}); spend is not being recorded"
                        );
                    }
                }
            }
        }
        // The replicas' sums: the rows no replica counted yet, and the hold given back.
        let mut shared_sums = None;
        let budgeted = self.applies(&who.own) || shared_hold.is_some();
        if let Some(shared) = self
            .shared
            .as_ref()
            .filter(|_| !costs.is_empty() && !budgeted)
        {
            // No budget of this caller's waits for the sums: they go to Redis in one batch
            // a second (read by `server_metrics`, and by budgets set for others or later),
            // so a billable call without a budget costs one round trip, its admission.
            self.unsent.add(shared, who.caller, costs.clone());
        } else if let Some(shared) = self
            .shared
            .as_ref()
            .filter(|_| !costs.is_empty() || shared_hold.is_some())
        {
            match shared
                .settle_budget(
                    window_of(&windows),
                    (who.caller.key(), who.caller.name()),
                    shared_hold.as_deref(),
                    running,
                    &costs,
                )
                .await
            {
                Ok((fresh, sums)) => {
                    new = Some(fresh);
                    shared_sums = Some(sums);
                }
                // The hold lapses by itself; the spend is missing from the shared sums
                // (the replica's ledger has it). Logged: budgets undercount meanwhile.
                Err(e) => tracing::warn!(
                    "the replicas' spend could not be updated in the shared state ({e}); this call's cost is missing from the shared budget sums"
                ),
            }
        }
        if let Some(new) = new {
            let mut written = 0;
            for ((_, micros), _) in costs.iter().zip(new).filter(|(_, new)| *new) {
                crate::telemetry::spent(&label, who.tool, *micros);
                written = Micros::saturating_add(written, *micros);
            }
            self.remember(who.caller.key(), written);
        }
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            // A run this call learned the end of was held by the call that started it.
            held.retain(|_, h| {
                h.run
                    .as_deref()
                    .is_none_or(|r| !settled.iter().any(|s| s == r))
            });
            if let Some(Hold { id, .. }) = hold {
                match running {
                    Some(run) => {
                        if let Some(h) = held.get_mut(&id) {
                            h.run = Some(run.to_owned());
                        }
                    }
                    None => {
                        held.remove(&id);
                    }
                }
            }
        }
        if !self.applies(&who.own) {
            return None;
        }
        let spent = match shared_sums {
            Some(sums) => totals_of(sums),
            None => self.totals(who.caller, &windows).await.ok()?,
        };
        self.limits(who, &spent, &windows, 0, 0)
            .into_iter()
            .filter(|l| {
                l.limit > 0
                    && l.spent.saturating_mul(100) >= l.limit.saturating_mul(WARN_AT_PERCENT)
            })
            .max_by_key(|l| l.spent.saturating_mul(100) / l.limit.max(1))
            .map(|l| l.warning())
    }

    /// What the ledger says was spent in `windows`. Summing a month of rows for every
    /// admission costs in proportion to the month's calls, so the sums are kept here and
    /// read again only when the windows move or another process has committed to the
    /// store (`PRAGMA data_version`, one cheap read); this process's own rows are added
    /// as they are written (`remember`).
    async fn ledger_totals(
        &self,
        caller: &Caller,
        windows: &window::Windows,
    ) -> Result<SpentTotals, StoreError> {
        let (day, month) = (windows.day_start_ms, windows.month_start_ms);
        let known = self
            .sums
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|s| (s.day_start, s.month_start) == (day, month))
            .map(|s| s.version);
        let read = self
            .store
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
                day_start: day,
                month_start: month,
                version,
                callers: rows
                    .into_iter()
                    .map(|c| (c.caller, (c.day, c.month)))
                    .collect(),
            });
        }
        let Some(sums) = sums.as_ref() else {
            return Ok(SpentTotals::default());
        };
        let mine = sums.callers.get(caller.key()).copied().unwrap_or_default();
        Ok(SpentTotals {
            all_day: sums
                .callers
                .values()
                .map(|c| c.0)
                .fold(0, Micros::saturating_add),
            all_month: sums
                .callers
                .values()
                .map(|c| c.1)
                .fold(0, Micros::saturating_add),
            caller_day: mine.0,
            caller_month: mine.1,
        })
    }

    /// What was spent in `windows`: the replicas' sums when they share them, else the
    /// ledger's.
    async fn totals(
        &self,
        caller: &Caller,
        windows: &window::Windows,
    ) -> Result<SpentTotals, String> {
        match &self.shared {
            Some(shared) => shared
                .spent(window_of(windows), caller.key())
                .await
                .map(totals_of)
                .map_err(|e| e.to_string()),
            None => self
                .ledger_totals(caller, windows)
                .await
                .map_err(|e| e.to_string()),
        }
    }

    /// Adds rows this process wrote to the kept sums (their windows contain now).
    fn remember(&self, caller: &str, written: i64) {
        if let Some(sums) = self.sums.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            let c = sums.callers.entry(caller.to_owned()).or_default();
            // Never lowers a spend, whatever it is handed.
            c.0 = c.0.saturating_add(written.max(0));
            c.1 = c.1.saturating_add(written.max(0));
        }
    }

    fn limits<'w>(
        &self,
        who: &Billing<'_>,
        spent: &SpentTotals,
        windows: &'w window::Windows,
        held_all: Micros,
        held_mine: Micros,
    ) -> Vec<Limit<'w>> {
        let mine = format!("the {{}} budget of {}", describe(who.caller));
        let server = "this server's {} budget".to_owned();
        let mut out = Vec::new();
        let operator = who.caller.is_operator();
        let mut add = |name: &str, limit: Option<Micros>, spent, held, period, resets, disclose| {
            if let Some(limit) = limit {
                out.push(Limit {
                    name: name.replace("{}", period),
                    limit,
                    spent,
                    held,
                    resets,
                    period,
                    everyone: name == server,
                    disclose,
                });
            }
        };
        let (day, month) = (&windows.day_resets, &windows.month_resets);
        add(
            &mine,
            who.own.daily,
            spent.caller_day,
            held_mine,
            "daily",
            day,
            true,
        );
        add(
            &mine,
            who.own.monthly,
            spent.caller_month,
            held_mine,
            "monthly",
            month,
            true,
        );
        let global = self.config.budget;
        add(
            &server,
            global.daily,
            spent.all_day,
            held_all,
            "daily",
            day,
            operator,
        );
        add(
            &server,
            global.monthly,
            spent.all_month,
            held_all,
            "monthly",
            month,
            operator,
        );
        out
    }

    /// Spend today and this month, per caller: every caller for an operator, only its
    /// own for anyone else (another caller's spend is another caller's state).
    pub async fn summary(&self, caller: &Caller) -> Result<Value, String> {
        let windows = self.config.zone.windows(now_ms());
        let spent: Vec<CallerSpend> = match &self.shared {
            Some(shared) => shared
                .spent_by_caller(window_of(&windows))
                .await
                .map_err(|e| e.to_string())?,
            None => {
                let (day, month) = (windows.day_start_ms, windows.month_start_ms);
                self.store
                    .with(move |s| s.spent_in_windows(day, month))
                    .await
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .map(|c| CallerSpend {
                        key: c.caller,
                        name: c.name,
                        day: c.day,
                        month: c.month,
                    })
                    .collect()
            }
        };
        let visible = |key: &str| caller.is_operator() || key == caller.key();
        let callers: Vec<Value> = spent
            .iter()
            .filter(|c| visible(&c.key))
            .map(|c| {
                json!({"caller": c.name, "today": money::as_f64(c.day), "this_month": money::as_f64(c.month)})
            })
            .collect();
        let mut out = json!({
            "currency": CURRENCY,
            "time_zone": self.config.zone.name(),
            "callers": callers,
        });
        if caller.is_operator() {
            let sum = |of: fn(&_) -> Micros| spent.iter().map(of).fold(0, Micros::saturating_add);
            out["today"] = json!(money::as_f64(sum(|c| c.day)));
            out["this_month"] = json!(money::as_f64(sum(|c| c.month)));
            out["budget_daily"] = json!(self.config.budget.daily.map(money::as_f64));
            out["budget_monthly"] = json!(self.config.budget.monthly.map(money::as_f64));
        }
        Ok(out)
    }

    /// Research runs handed back unfinished whose cost is not known yet (the `/metrics`
    /// gauge of runs in flight upstream).
    pub fn runs_pending(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.values().filter(|h| h.run.is_some()).count()
    }

    /// What `caller` spent today (the terminal workspace's status line).
    pub async fn today(&self, caller: &Caller) -> Result<Micros, String> {
        let windows = self.config.zone.windows(now_ms());
        Ok(self.totals(caller, &windows).await?.caller_day)
    }
}

/// How `usage` groups the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    Caller,
    Tool,
    Day,
    Model,
}

/// One line of `usage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub key: String,
    pub requests: u64,
    /// Of those, priced by us (the API reported no cost).
    pub estimated: u64,
    pub total: Micros,
}

impl Spend {
    /// The ledger since `since_ms`, grouped (days in the budget zone), in first-seen order
    /// for days and largest first otherwise.
    pub async fn usage(&self, since_ms: i64, by: Grouping) -> Result<Vec<Group>, StoreError> {
        let rows = self.store.with(move |s| s.ledger_since(since_ms)).await?;
        let mut groups: Vec<Group> = Vec::new();
        for r in rows {
            let key = match by {
                Grouping::Caller => r.caller_name.clone(),
                Grouping::Tool => r.tool.clone(),
                Grouping::Day => self.config.zone.day_of(r.at_ms),
                Grouping::Model => {
                    r.model
                        .clone()
                        .unwrap_or_else(|| match r.request.starts_with("search:") {
                            true => "(search api)".to_owned(),
                            false => "(not reported)".to_owned(),
                        })
                }
            };
            let at = match groups.iter().position(|g| g.key == key) {
                Some(at) => at,
                None => {
                    groups.push(Group {
                        key,
                        requests: 0,
                        estimated: 0,
                        total: 0,
                    });
                    groups.len() - 1
                }
            };
            let g = &mut groups[at];
            g.requests += 1;
            g.estimated += u64::from(r.estimated);
            g.total = g.total.saturating_add(r.total_micros);
        }
        if by != Grouping::Day {
            groups.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.key.cmp(&b.key)));
        }
        Ok(groups)
    }
}

impl Limit<'_> {
    fn refusal(&self, tool: &str, estimate: Micros) -> String {
        if !self.disclose {
            return format!(
                "Refused before any request to Perplexity: {} has no room for this {tool} call. It resets at {}. Calls that only read results (perplexity_agent_result, responses_retrieve, retrieve) and fetch_url still work.",
                capitalised(&self.name),
                self.resets,
            );
        }
        let held = if self.held > 0 {
            format!(
                ", and {} {CURRENCY} is held by calls still running",
                money::format(self.held)
            )
        } else {
            String::new()
        };
        let when = if self.period == "daily" {
            "today"
        } else {
            "this month"
        };
        format!(
            "Refused before any request to Perplexity: {} ({} {CURRENCY}) has no room for this {tool} call (about {} {CURRENCY}). Spent {when}: {} {CURRENCY}{held}. It resets at {}. Calls that only read results (perplexity_agent_result, responses_retrieve, retrieve) and fetch_url still work.",
            capitalised(&self.name),
            money::format(self.limit),
            money::format(estimate),
            money::format(self.spent),
            self.resets,
        )
    }

    fn warning(&self) -> String {
        if !self.disclose {
            return format!(
                "Budget: {}% of {} is spent; it resets at {}.",
                self.spent * 100 / self.limit.max(1),
                self.name,
                self.resets
            );
        }
        format!(
            "Budget: {}% of {} is spent ({} of {} {CURRENCY}); it resets at {}.",
            self.spent * 100 / self.limit.max(1),
            self.name,
            money::format(self.spent),
            money::format(self.limit),
            self.resets,
        )
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

/// How a refusal names the caller whose budget it is.
fn describe(caller: &Caller) -> String {
    match caller.issuer() {
        Some(_) => format!("token subject '{}'", caller.name()),
        None => format!("client '{}'", caller.name()),
    }
}

fn row(who: &Billing<'_>, m: Metered, per_run: Micros, task_id: Option<&str>) -> LedgerRow {
    let base = LedgerRow {
        request: m.key,
        at_ms: now_ms(),
        caller: who.caller.key().to_owned(),
        caller_name: who.caller.name().to_owned(),
        front_end: who.front_end.as_str().to_owned(),
        tool: who.tool.to_owned(),
        task_id: task_id.map(str::to_owned),
        model: m.model.clone(),
        tokens: Tokens::default(),
        costs: None,
        total_micros: prices::SEARCH_REQUEST,
        currency: CURRENCY.to_owned(),
        estimated: true,
    };
    match m.kind {
        MeteredKind::Search => LedgerRow {
            tokens: Tokens {
                search_queries: Some(1),
                ..Tokens::default()
            },
            ..base
        },
        MeteredKind::Run => {
            let cost = prices::run_cost(m.usage.as_ref(), m.model.as_deref(), per_run);
            LedgerRow {
                tokens: cost.tokens,
                costs: cost.costs.map(|c| c.to_string()),
                // The ledger never lowers a spend (prices.rs bounds a run's cost too).
                total_micros: cost.total.max(0),
                currency: cost.currency,
                estimated: cost.estimated,
                ..base
            }
        }
    }
}

/// Unfinished runs stop holding budget after a day; at most [`MAX_PENDING`] are kept.
fn prune(held: &mut HashMap<u64, Held>) {
    held.retain(|_, h| h.run.is_none() || h.since.elapsed() < PENDING_HOLD);
    let pending = held.values().filter(|h| h.run.is_some()).count();
    if pending > MAX_PENDING {
        let mut oldest: Vec<(u64, Instant)> = held
            .iter()
            .filter(|(_, h)| h.run.is_some())
            .map(|(id, h)| (*id, h.since))
            .collect();
        oldest.sort_by_key(|(_, since)| *since);
        for (id, _) in oldest.into_iter().take(pending - MAX_PENDING) {
            held.remove(&id);
        }
    }
}

fn window_of(windows: &window::Windows) -> Window {
    Window {
        day_start_ms: windows.day_start_ms,
        month_start_ms: windows.month_start_ms,
    }
}

fn totals_of(sums: SpentNow) -> SpentTotals {
    SpentTotals {
        all_day: sums.all_day,
        all_month: sums.all_month,
        caller_day: sums.caller_day,
        caller_month: sums.caller_month,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
