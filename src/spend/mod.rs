//! Spend you can see and cap: the ledger of what each caller's calls cost (one row per
//! billable upstream request, in the store) and the budgets that stop new billable calls
//! once a day's or month's money is gone.
//!
//! - A budgeted call is admitted in one step by the state (`state/budgets.rs`): what was
//!   spent, plus what calls still running hold, plus this call's estimate, must fit. So
//!   30 concurrent calls with room for 10 admit 10 — a check and a later charge would
//!   admit all 30 (a runaway agent is exactly that burst). Under the shared engine the
//!   sums and holds are the replicas', so they share one budget.
//! - The hold is settled with the reported cost when the call ends; a run handed back
//!   unfinished keeps its hold until its cost is learned (or a day passes), so a budget
//!   is overshot by at most what the runs in flight cost above their estimates.
//! - A state that cannot be read refuses budgeted calls (fail closed: an unreadable
//!   budget must not mean unlimited spending); without a budget it only costs the row.
//! - A repeated report of one run (a second collect, a collect after a restart) is one
//!   row: the ledger, kept in the local store under either engine (`usage`), is keyed by
//!   run id.
//!
//! Touches: the state door.

pub mod money;
pub mod prices;
pub mod window;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::call::{Budget, Caller, FrontEnd};
use crate::clock::now_ms;
use crate::perplexity::meter::{Metered, MeteredKind};
use crate::state::local::{LedgerRow, StoreError, Tokens};
use crate::state::{Admission, BudgetCheck, SpentNow, State, Window};
use money::Micros;
pub use money::parse as parse_amount;
pub use window::BudgetZone;

/// `PERPLEXITY_LEDGER_RETENTION_DAYS` when unset.
pub const DEFAULT_RETENTION_DAYS: u32 = 400;
/// A run handed back unfinished is priced by its call's estimate for this long.
const PENDING_HOLD: Duration = Duration::from_secs(24 * 3600);
/// Unfinished runs' estimates kept at most (the oldest go first).
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

/// What a settled call cost and what its result should warn of.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    pub warning: Option<String>,
    /// `None`: the call was billed for nothing.
    pub cost: Option<Cost>,
}

/// What a call's billable requests cost, in micro-dollars of [`CURRENCY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    pub total: Micros,
    /// Some request reported no cost (or one not believed): priced by us.
    pub estimated: bool,
}

impl Cost {
    /// `structuredContent.cost`.
    pub fn as_json(&self) -> Value {
        json!({"total": money::as_f64(self.total), "currency": CURRENCY, "estimated": self.estimated})
    }

    /// `0.0123 USD` (`about …` when estimated), as a cost line says it.
    pub fn said(&self) -> String {
        let about = if self.estimated { "about " } else { "" };
        format!("{about}{} {CURRENCY}", money::format(self.total))
    }
}

/// Budget held by an admitted call until it is settled.
#[must_use = "settle the hold with what the call cost"]
pub struct Hold {
    /// The estimate: it prices the call's runs if they report no cost.
    estimate: Micros,
    /// Its name in the state's budget holds, when a budget applied.
    name: Option<String>,
}

pub struct Spend {
    config: SpendConfig,
    state: Arc<State>,
    /// Runs handed back unfinished → the estimate of the call that started them (and
    /// when), which prices them if they report no cost, whoever collects them.
    pending: std::sync::Mutex<HashMap<String, (Micros, Instant)>>,
    /// The ledger's write failures are logged once, not per call.
    warned: AtomicBool,
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
    pub fn new(config: SpendConfig, state: Arc<State>) -> Self {
        Spend {
            config,
            state,
            pending: std::sync::Mutex::new(HashMap::new()),
            warned: AtomicBool::new(false),
        }
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

    fn window(&self) -> (window::Windows, Window) {
        let windows = self.config.zone.windows(now_ms());
        let window = Window {
            day_start_ms: windows.day_start_ms,
            month_start_ms: windows.month_start_ms,
        };
        (windows, window)
    }

    /// Admits a billable call that may cost `estimate`, or says which budget has no
    /// room. Without any budget nothing is read or waited for: the hold only remembers
    /// the estimate, which prices the call's runs if they report no cost. With one, the
    /// state checks and holds in one step (across replicas under the shared engine); a
    /// state that cannot answer refuses the call.
    pub async fn reserve(&self, who: &Billing<'_>, estimate: Micros) -> Result<Hold, String> {
        if !self.applies(&who.own) {
            return Ok(Hold {
                estimate,
                name: None,
            });
        }
        let (windows, window) = self.window();
        let mut limits = self.limits(who, &SpentNow::default(), &windows, 0, 0);
        let checks: Vec<BudgetCheck> = limits
            .iter()
            .map(|l| BudgetCheck {
                everyone: l.everyone,
                monthly: l.period == "monthly",
                limit: l.limit,
            })
            .collect();
        // Unguessable and unique across replicas: the hold's name in the state.
        let name = crate::random::secure_hex::<12>();
        let admission = self
            .state
            .reserve_budget(window, who.caller.key(), estimate, &name, &checks)
            .await
            .map_err(|e| {
                format!(
                    "A budget is set, and {e}, so no billable call is admitted. Try again shortly."
                )
            })?;
        match admission {
            Admission::Held => Ok(Hold {
                estimate,
                name: Some(name),
            }),
            Admission::Short { index, spent, held } => {
                let Some(limit) = limits.get_mut(index) else {
                    return Err("The budget answered something unexpected, so no billable call is admitted.".to_owned());
                };
                limit.spent = spent;
                limit.held = held;
                Err(limit.refusal(who.tool, estimate))
            }
        }
    }

    /// Records what a call's requests were billed for and gives back its hold (kept for
    /// `running`, a run it handed back unfinished). `per_run` prices a run that reported
    /// no cost. Returns what the call cost and the warning a result carries once a budget
    /// is 80 % spent.
    pub async fn settle(
        &self,
        who: &Billing<'_>,
        hold: Option<Hold>,
        metered: Vec<Metered>,
        per_run: Micros,
        task_id: Option<&str>,
        running: Option<&str>,
    ) -> Settled {
        // A run handed back earlier is priced, if it reports no cost, by the estimate
        // of the call that started it (its preset), not of the call that collected it.
        let rows: Vec<LedgerRow> = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let rows = metered
                .into_iter()
                .map(|m| {
                    let per_run = pending.remove(&m.key).map_or(per_run, |(micros, _)| micros);
                    row(who, m, per_run, task_id)
                })
                .collect();
            if let (Some(run), Some(hold)) = (running, &hold) {
                prune(&mut pending);
                pending.insert(run.to_owned(), (hold.estimate, Instant::now()));
            }
            rows
        };
        let cost = (!rows.is_empty()).then(|| Cost {
            total: rows
                .iter()
                .map(|r| r.total_micros)
                .fold(0, Micros::saturating_add),
            estimated: rows.iter().any(|r| r.estimated),
        });
        let (windows, window) = self.window();
        let costs: Vec<(String, i64)> = rows
            .iter()
            .map(|r| (r.request.clone(), r.total_micros))
            .collect();
        let mut new: Option<Vec<bool>> = None;
        if !rows.is_empty() {
            let retention = self.config.retention_days;
            match self
                .state
                .store()
                .with(move |s| s.record_spend(&rows, retention))
                .await
            {
                Ok(fresh) => new = Some(fresh),
                // Without a ledger nothing here tells a repeated report from a new one:
                // every one counts (said in docs/http.md), unless the replicas' state does.
                Err(StoreError::NotConfigured) => new = Some(vec![true; costs.len()]),
                Err(e) => self.ledger_failed(&e),
            }
        }
        let counted: Vec<(String, i64, bool)> = match &new {
            Some(fresh) => costs
                .into_iter()
                .zip(fresh)
                .map(|((k, m), n)| (k, m, *n))
                .collect(),
            None => costs.into_iter().map(|(k, m)| (k, m, false)).collect(),
        };
        let caller = (who.caller.key(), who.caller.name());
        let name = hold.and_then(|h| h.name);
        let mut sums = None;
        if name.is_none() && !self.applies(&who.own) {
            // No budget of this caller's waits for the sums: they are added in the
            // background (read by `server_metrics`, and by budgets set for others or
            // later), so a billable call without a budget costs one round trip, its
            // admission.
            if !counted.is_empty() {
                self.state.settle_later(window, caller, &counted);
            }
        } else {
            match self
                .state
                .settle_budget(window, caller, name.as_deref(), running, &counted)
                .await
            {
                Ok((fresh, now)) => {
                    new = Some(fresh);
                    sums = Some(now);
                }
                // The hold lapses by itself; the spend is missing from the budget's sums
                // (the ledger has it). Logged: budgets undercount meanwhile.
                Err(e) => tracing::warn!(
                    "the budget's sums could not be updated ({e}); this call's cost is missing from them"
                ),
            }
        }
        if let Some(new) = new {
            // The metric counts each row once, as the ledger does (a second report of a
            // run is not new); OAuth subjects share one label (the caller label is
            // bounded).
            let label =
                crate::telemetry::caller_label(who.caller.name(), who.caller.issuer().is_some());
            for ((_, micros, _), _) in counted.iter().zip(new).filter(|(_, new)| *new) {
                crate::telemetry::spent(label, who.tool, *micros);
            }
        }
        let warning = match self.applies(&who.own) {
            true => self.warning(who, sums, window, &windows).await,
            false => None,
        };
        Settled { warning, cost }
    }

    /// Records a call the research cache answered: a ledger row of cost 0 with what the
    /// answer had cost (`saved`), so `usage` can say what the cache saved. Nothing is
    /// held or added to any budget.
    pub async fn record_hit(&self, who: &Billing<'_>, saved: Micros, task_id: Option<&str>) {
        let row = LedgerRow {
            total_micros: 0,
            estimated: false,
            cache_hit: true,
            saved_micros: saved.max(0),
            // Unique: a hit is not a request that could be reported twice.
            ..base_row(
                who,
                format!("cache:{}", crate::random::secure_hex::<12>()),
                None,
                task_id,
            )
        };
        let retention = self.config.retention_days;
        match self
            .state
            .store()
            .with(move |s| s.record_spend(&[row], retention))
            .await
        {
            Ok(_) | Err(StoreError::NotConfigured) => {}
            Err(e) => self.ledger_failed(&e),
        }
    }

    /// The ledger's write failures are logged once, not per call.
    fn ledger_failed(&self, e: &StoreError) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "the spend ledger could not be written ({e}); spend is not being recorded"
            );
        }
    }

    /// The warning a result carries once one of `who`'s budgets is 80 % spent.
    async fn warning(
        &self,
        who: &Billing<'_>,
        sums: Option<SpentNow>,
        window: Window,
        windows: &window::Windows,
    ) -> Option<String> {
        let spent = match sums {
            Some(sums) => sums,
            None => self.state.spent(window, who.caller.key()).await.ok()?,
        };
        self.limits(who, &spent, windows, 0, 0)
            .into_iter()
            .filter(|l| {
                l.limit > 0
                    && l.spent.saturating_mul(100) >= l.limit.saturating_mul(WARN_AT_PERCENT)
            })
            .max_by_key(|l| l.spent.saturating_mul(100) / l.limit.max(1))
            .map(|l| l.warning())
    }

    fn limits<'w>(
        &self,
        who: &Billing<'_>,
        spent: &SpentNow,
        windows: &'w window::Windows,
        held_all: Micros,
        held_mine: Micros,
    ) -> Vec<Limit<'w>> {
        let mine = format!("the {{}} budget of {}", describe(who.caller));
        let server = "this server's {} budget".to_owned();
        let mut out = Vec::new();
        let operator = who.caller.is_operator();
        // A budget's daily limit, then its monthly one.
        let mut add =
            |name: &str, budget: Budget, (day, month): (Micros, Micros), held, disclose| {
                let periods = [
                    (budget.daily, day, "daily", &windows.day_resets),
                    (budget.monthly, month, "monthly", &windows.month_resets),
                ];
                for (limit, spent, period, resets) in periods {
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
                }
            };
        let own = (spent.caller_day, spent.caller_month);
        add(&mine, who.own, own, held_mine, true);
        let all = (spent.all_day, spent.all_month);
        add(&server, self.config.budget, all, held_all, operator);
        out
    }

    /// Spend today and this month, per caller: every caller for an operator, only its
    /// own for anyone else (another caller's spend is another caller's state).
    pub async fn summary(&self, caller: &Caller) -> Result<Value, String> {
        let (_, window) = self.window();
        let spent = self
            .state
            .spent_by_caller(window)
            .await
            .map_err(|e| e.to_string())?;
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
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// What `caller` spent today (the terminal workspace's status line).
    pub async fn today(&self, caller: &Caller) -> Result<Micros, String> {
        let (_, window) = self.window();
        let spent = self.state.spent(window, caller.key()).await;
        Ok(spent.map_err(|e| e.to_string())?.caller_day)
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Group {
    pub key: String,
    pub requests: u64,
    /// Of those, priced by us (the API reported no cost).
    pub estimated: u64,
    pub total: Micros,
    /// Calls the research cache answered (not requests: nothing was sent), and what their
    /// answers had cost.
    pub cache_hits: u64,
    pub saved: Micros,
}

impl Spend {
    /// The ledger since `since_ms`, grouped (days in the budget zone), in first-seen order
    /// for days and largest first otherwise.
    pub async fn usage(&self, since_ms: i64, by: Grouping) -> Result<Vec<Group>, StoreError> {
        let rows = self
            .state
            .store()
            .with(move |s| s.ledger_since(since_ms))
            .await?;
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
                        ..Group::default()
                    });
                    groups.len() - 1
                }
            };
            let g = &mut groups[at];
            if r.cache_hit {
                g.cache_hits += 1;
                g.saved = g.saved.saturating_add(r.saved_micros);
                continue;
            }
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

/// A row of `who`'s for `request`, priced as one search request until its kind says more.
fn base_row(
    who: &Billing<'_>,
    request: String,
    model: Option<String>,
    task_id: Option<&str>,
) -> LedgerRow {
    LedgerRow {
        request,
        at_ms: now_ms(),
        caller: who.caller.key().to_owned(),
        caller_name: who.caller.name().to_owned(),
        front_end: who.front_end.as_str().to_owned(),
        tool: who.tool.to_owned(),
        task_id: task_id.map(str::to_owned),
        model,
        tokens: Tokens::default(),
        costs: None,
        total_micros: prices::SEARCH_REQUEST,
        currency: CURRENCY.to_owned(),
        estimated: true,
        cache_hit: false,
        saved_micros: 0,
    }
}

fn row(who: &Billing<'_>, m: Metered, per_run: Micros, task_id: Option<&str>) -> LedgerRow {
    let base = base_row(who, m.key, m.model.clone(), task_id);
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

/// Runs handed back unfinished are forgotten after a day (runs expire); at most
/// [`MAX_PENDING`] are kept, the oldest going first.
fn prune(pending: &mut HashMap<String, (Micros, Instant)>) {
    pending.retain(|_, (_, since)| since.elapsed() < PENDING_HOLD);
    if pending.len() >= MAX_PENDING {
        let mut oldest: Vec<(String, Instant)> = pending
            .iter()
            .map(|(run, (_, since))| (run.clone(), *since))
            .collect();
        oldest.sort_by_key(|(_, since)| *since);
        for (run, _) in oldest.into_iter().take(pending.len() + 1 - MAX_PENDING) {
            pending.remove(&run);
        }
    }
}
