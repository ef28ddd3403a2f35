//! The spend ledger's rows: one per billable upstream request, written when its cost is
//! learned, summed for budgets and read back by `usage`. Amounts are integer millionths
//! of the currency (a sum of floats drifts; a budget check must not).

use rusqlite::params;

use super::{Store, StoreError, now_ms};
use crate::state::CallerSpend;

/// One billable request, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    /// The run id or search request id: a second report of it changes nothing.
    pub request: String,
    pub at_ms: i64,
    /// The caller's derived key (what budgets and isolation use) and its display name.
    pub caller: String,
    pub caller_name: String,
    pub front_end: String,
    pub tool: String,
    pub task_id: Option<String>,
    pub model: Option<String>,
    pub tokens: Tokens,
    /// The cost components as reported (JSON), when any were.
    pub costs: Option<String>,
    pub total_micros: i64,
    pub currency: String,
    /// Not reported by the API: priced by us (prices.rs).
    pub estimated: bool,
    /// A call the research cache answered: `total_micros` is 0 and `saved_micros` what
    /// the answer had cost.
    pub cache_hit: bool,
    pub saved_micros: i64,
}

/// The counts a request reported (each absent when it did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    pub input: Option<i64>,
    pub output: Option<i64>,
    pub reasoning: Option<i64>,
    pub citation: Option<i64>,
    pub search_queries: Option<i64>,
}

const DAY_MS: i64 = 86_400_000;

impl Store {
    /// Writes the rows a call learned; returns, for each, whether it was new (a run
    /// collected twice, or again after a restart, is recorded once). Rows older than
    /// `retention_days` go in the same transaction.
    pub fn record_spend(
        &self,
        rows: &[LedgerRow],
        retention_days: u32,
    ) -> Result<Vec<bool>, StoreError> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            let mut new = Vec::with_capacity(rows.len());
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO ledger (request, at_ms, caller, caller_name, front_end, tool,
                         task_id, model, input_tokens, output_tokens, reasoning_tokens,
                         citation_tokens, search_queries, costs, total_micros, currency, estimated,
                         cache_hit, saved_micros)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
                         ?18, ?19)
                     ON CONFLICT(request) DO NOTHING",
                )?;
                for r in rows {
                    let n = insert.execute(params![
                        r.request,
                        r.at_ms,
                        r.caller,
                        r.caller_name,
                        r.front_end,
                        r.tool,
                        r.task_id,
                        r.model,
                        r.tokens.input,
                        r.tokens.output,
                        r.tokens.reasoning,
                        r.tokens.citation,
                        r.tokens.search_queries,
                        r.costs,
                        r.total_micros,
                        r.currency,
                        r.estimated,
                        r.cache_hit,
                        r.saved_micros,
                    ])?;
                    new.push(n == 1);
                }
            }
            tx.execute(
                "DELETE FROM ledger WHERE at_ms < ?1",
                params![now_ms() - i64::from(retention_days) * DAY_MS],
            )?;
            tx.commit()?;
            Ok(new)
        })
    }

    /// Changes whenever another connection (another process on this store) commits; our
    /// own commits leave it as it was (SQLite's `PRAGMA data_version`).
    pub fn data_version(&self) -> Result<i64, StoreError> {
        self.with(|conn| conn.query_row("PRAGMA data_version", [], |r| r.get(0)))
    }

    /// Spent since `day_start_ms` and since `month_start_ms`, per caller, in one pass over
    /// the month's rows: (key, name, day, month), the month's largest first.
    pub fn spent_in_windows(
        &self,
        day_start_ms: i64,
        month_start_ms: i64,
    ) -> Result<Vec<CallerSpend>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT caller, MAX(caller_name),
                     SUM(CASE WHEN at_ms >= ?1 THEN total_micros ELSE 0 END), SUM(total_micros)
                 FROM ledger WHERE at_ms >= ?2 GROUP BY caller ORDER BY 4 DESC, 2",
            )?;
            stmt.query_map(params![day_start_ms, month_start_ms], |r| {
                Ok(CallerSpend {
                    key: r.get(0)?,
                    name: r.get(1)?,
                    day: r.get(2)?,
                    month: r.get(3)?,
                })
            })?
            .collect()
        })
    }

    /// Every row since `since_ms`, oldest first (for `usage`).
    pub fn ledger_since(&self, since_ms: i64) -> Result<Vec<LedgerRow>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare(
                "SELECT request, at_ms, caller, caller_name, front_end, tool, task_id, model,
                     input_tokens, output_tokens, reasoning_tokens, citation_tokens,
                     search_queries, costs, total_micros, currency, estimated, cache_hit,
                     saved_micros
                 FROM ledger WHERE at_ms >= ?1 ORDER BY at_ms, seq",
            )?;
            stmt.query_map(params![since_ms], |r| {
                Ok(LedgerRow {
                    request: r.get(0)?,
                    at_ms: r.get(1)?,
                    caller: r.get(2)?,
                    caller_name: r.get(3)?,
                    front_end: r.get(4)?,
                    tool: r.get(5)?,
                    task_id: r.get(6)?,
                    model: r.get(7)?,
                    tokens: Tokens {
                        input: r.get(8)?,
                        output: r.get(9)?,
                        reasoning: r.get(10)?,
                        citation: r.get(11)?,
                        search_queries: r.get(12)?,
                    },
                    costs: r.get(13)?,
                    total_micros: r.get(14)?,
                    currency: r.get(15)?,
                    estimated: r.get(16)?,
                    cache_hit: r.get(17)?,
                    saved_micros: r.get(18)?,
                })
            })?
            .collect()
        })
    }
}
