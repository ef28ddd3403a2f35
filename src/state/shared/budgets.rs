//! The budgets' sums, for every replica: what was spent in the current day and month, and
//! what calls still running hold, so three replicas with room for 10 calls admit 10
//! between them, not 30 — and a day's spend is the team's, not one replica's.
//!
//! Keys (under the prefix, version 1):
//! - `spend:v1:day:<window start ms>` / `spend:v1:month:<…>`: hashes of micro-dollars
//!   spent, field `c:<caller key>` per caller and `all` for everyone. The window's start
//!   is in the name, so a new day is a new key; the old one expires ([`DAY_KEPT`],
//!   [`MONTH_KEPT`]).
//! - `spend:v1:rows:<month start>`: the billable requests already counted (a set of run
//!   ids), so a run collected through two replicas, or twice, is counted once — as the
//!   ledger's primary key does for one process.
//! - `spend:v1:holds` (hold id → `micros|caller`), `spend:v1:holds:expiry` (a sorted
//!   set by expiry) and `spend:v1:held` (sums per caller and `all`): what admitted calls
//!   hold until they are settled. A hold expires ([`CALL_HOLD`], or [`PENDING_HOLD`] for a
//!   run handed back unfinished, then named `run:<id>` so whichever replica collects the
//!   run releases it): a replica that dies leaves its holds for at most that long, which
//!   errs on refusing, never on spending.
//! - `spend:v1:names`: caller key → name, for `server_metrics`.
//!
//! Admission is one script, one round trip: sweep expired holds, compare spent + held +
//! estimate with each budget, hold the estimate — atomic in Redis, so no two replicas
//! can both take the last room. When Redis does not answer, a budgeted call is refused
//! (`spend` says so): an unreachable budget must not mean unlimited spending.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use super::{BackendError, Shared};
use crate::state::budgets::{
    Admission, BudgetCheck, CALL_HOLD, CallerSpend, PENDING_HOLD, SpentNow, Window,
};

/// A day's sums are kept this long (the day is over long before).
const DAY_KEPT: Duration = Duration::from_secs(3 * 24 * 3600);
/// A month's sums and its counted requests are kept this long.
const MONTH_KEPT: Duration = Duration::from_secs(33 * 24 * 3600);
/// Expired holds one admission sweeps at most (the rest go with the next ones).
const SWEEP: usize = 64;
/// How often spend that waits for no budget is added to the replicas' sums.
const UNSENT_EVERY: Duration = Duration::from_secs(1);

/// A batch's window and caller (key, name); its rows are (request key, micro-dollars).
type Batch = (Window, String, String);

/// Spend of calls no budget waits for, added to the replicas' sums once a second in one
/// script per caller and window, not one round trip per call. At most a second of it is
/// lost when the process dies (the replica's ledger still has every row); a batch Redis
/// does not take is dropped with a warning rather than kept growing.
#[derive(Default)]
pub struct Unsent {
    rows: Mutex<HashMap<Batch, Vec<(String, i64)>>>,
    flushing: AtomicBool,
}

/// Releases the hold `id` (its sums go down); shared by both scripts.
const RELEASE: &str = r"
local function release(holds, expiry, held, id)
  local v = redis.call('HGET', holds, id)
  if v then
    local bar = string.find(v, '|', 1, true)
    local micros = tonumber(string.sub(v, 1, bar - 1))
    local who = 'c:' .. string.sub(v, bar + 1)
    for _, field in ipairs({'all', who}) do
      if redis.call('HINCRBY', held, field, -micros) <= 0 then
        redis.call('HDEL', held, field)
      end
    end
    redis.call('HDEL', holds, id)
  end
  redis.call('ZREM', expiry, id)
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
";

/// KEYS: day, month, holds, holds' expiry, held. ARGV: caller key, estimate, hold id,
/// hold ms, sweep count, kept ms, then per check: `all`|`c`, `d`|`m`, limit.
/// Returns {0} when held, else {check number, spent, held}.
const RESERVE: &str = r"
local now = now_ms()
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))) do
  release(KEYS[3], KEYS[4], KEYS[5], id)
end
local mine = 'c:' .. ARGV[1]
local estimate = tonumber(ARGV[2])
local check = 0
for i = 7, #ARGV, 3 do
  check = check + 1
  local field = ARGV[i] == 'all' and 'all' or mine
  local sums = ARGV[i + 1] == 'd' and KEYS[1] or KEYS[2]
  local spent = tonumber(redis.call('HGET', sums, field) or '0')
  local held = math.max(tonumber(redis.call('HGET', KEYS[5], field) or '0'), 0)
  if spent + held + estimate > tonumber(ARGV[i + 2]) then
    return {check, spent, held}
  end
end
redis.call('HSET', KEYS[3], ARGV[3], ARGV[2] .. '|' .. ARGV[1])
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[4]), ARGV[3])
redis.call('HINCRBY', KEYS[5], 'all', estimate)
redis.call('HINCRBY', KEYS[5], mine, estimate)
for k = 3, 5 do
  redis.call('PEXPIRE', KEYS[k], ARGV[6])
end
return {0}
";

/// KEYS: day, month, counted, holds, holds' expiry, held, names. ARGV: caller key, name,
/// day ms, month ms, hold id or '', run handed back or '', pending ms, then per request:
/// its key and micros. A request not counted before adds to the sums; a run a call had
/// handed back releases its hold. Returns each request's newness (1/0), then the
/// caller's day and month and everyone's day and month.
const SETTLE: &str = r"
local now = now_ms()
local added = 0
local out = {}
for i = 8, #ARGV, 2 do
  local new = redis.call('SADD', KEYS[3], ARGV[i])
  if new == 1 then
    added = added + tonumber(ARGV[i + 1])
  end
  table.insert(out, new)
  release(KEYS[4], KEYS[5], KEYS[6], 'run:' .. ARGV[i])
end
local mine = 'c:' .. ARGV[1]
if #ARGV >= 8 then
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
if added > 0 then
  for k = 1, 2 do
    redis.call('HINCRBY', KEYS[k], mine, added)
    redis.call('HINCRBY', KEYS[k], 'all', added)
    redis.call('PEXPIRE', KEYS[k], ARGV[k + 2])
  end
  redis.call('HSET', KEYS[7], ARGV[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[7], ARGV[4])
end
if ARGV[5] ~= '' then
  local v = redis.call('HGET', KEYS[4], ARGV[5])
  if v and ARGV[6] ~= '' then
    redis.call('HDEL', KEYS[4], ARGV[5])
    redis.call('ZREM', KEYS[5], ARGV[5])
    redis.call('HSET', KEYS[4], 'run:' .. ARGV[6], v)
    redis.call('ZADD', KEYS[5], now + tonumber(ARGV[7]), 'run:' .. ARGV[6])
  else
    release(KEYS[4], KEYS[5], KEYS[6], ARGV[5])
  end
end
for k = 1, 2 do
  table.insert(out, tonumber(redis.call('HGET', KEYS[k], mine) or '0'))
end
for k = 1, 2 do
  table.insert(out, tonumber(redis.call('HGET', KEYS[k], 'all') or '0'))
end
return out
";

static RESERVE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(&format!("{RELEASE}{RESERVE}")));
static SETTLE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(&format!("{RELEASE}{SETTLE}")));

impl Shared {
    fn sums_keys(&self, window: Window) -> (String, String) {
        (
            self.key("spend", 1, &format!("day:{}", window.day_start_ms)),
            self.key("spend", 1, &format!("month:{}", window.month_start_ms)),
        )
    }

    fn hold_keys(&self) -> [String; 3] {
        [
            self.key("spend", 1, "holds"),
            self.key("spend", 1, "holds:expiry"),
            self.key("spend", 1, "held"),
        ]
    }

    /// Holds `estimate` for `caller` under `hold` if every check has room, in one round
    /// trip.
    pub async fn reserve_budget(
        &self,
        window: Window,
        caller: &str,
        estimate: i64,
        hold: &str,
        checks: &[BudgetCheck],
    ) -> Result<Admission, BackendError> {
        let (day, month) = self.sums_keys(window);
        let mut invocation = RESERVE_SCRIPT.prepare_invoke();
        invocation.key(day).key(month);
        for key in self.hold_keys() {
            invocation.key(key);
        }
        invocation
            .arg(caller)
            .arg(estimate.max(0))
            .arg(hold)
            .arg(CALL_HOLD.as_millis() as u64)
            .arg(SWEEP)
            .arg(PENDING_HOLD.as_millis() as u64 * 2);
        for check in checks {
            invocation
                .arg(if check.everyone { "all" } else { "c" })
                .arg(if check.monthly { "m" } else { "d" })
                .arg(check.limit);
        }
        let answer: Vec<i64> = self.script(&invocation).await?;
        Ok(match answer.as_slice() {
            [0] => Admission::Held,
            [check, spent, held] if *check >= 1 => Admission::Short {
                index: (*check - 1) as usize,
                spent: *spent,
                held: *held,
            },
            _ => return Err(BackendError::Answer("unexpected budget answer".to_owned())),
        })
    }

    /// Counts the requests `rows` (key, micros) not counted before to `caller`, and ends
    /// `hold` (or keeps it for `running`, a run the call handed back), in one round trip.
    /// Returns which rows were new and the sums after.
    pub async fn settle_budget(
        &self,
        window: Window,
        caller: (&str, &str),
        hold: Option<&str>,
        running: Option<&str>,
        rows: &[(String, i64)],
    ) -> Result<(Vec<bool>, SpentNow), BackendError> {
        let (day, month) = self.sums_keys(window);
        let counted = self.key("spend", 1, &format!("rows:{}", window.month_start_ms));
        let mut invocation = SETTLE_SCRIPT.prepare_invoke();
        invocation.key(day).key(month).key(counted);
        for key in self.hold_keys() {
            invocation.key(key);
        }
        invocation
            .key(self.key("spend", 1, "names"))
            .arg(caller.0)
            .arg(caller.1)
            .arg(DAY_KEPT.as_millis() as u64)
            .arg(MONTH_KEPT.as_millis() as u64)
            .arg(hold.unwrap_or(""))
            .arg(running.unwrap_or(""))
            .arg(PENDING_HOLD.as_millis() as u64);
        for (key, micros) in rows {
            invocation.arg(key).arg(*micros);
        }
        let answer: Vec<i64> = self.script(&invocation).await?;
        let Some((new, sums)) = answer.split_at_checked(rows.len()) else {
            return Err(BackendError::Answer("unexpected settle answer".to_owned()));
        };
        let [caller_day, caller_month, all_day, all_month] = sums else {
            return Err(BackendError::Answer("unexpected settle answer".to_owned()));
        };
        Ok((
            new.iter().map(|n| *n == 1).collect(),
            SpentNow {
                caller_day: *caller_day,
                caller_month: *caller_month,
                all_day: *all_day,
                all_month: *all_month,
            },
        ))
    }

    /// What `caller` and everyone spent in `window`, in one round trip.
    pub async fn spent(&self, window: Window, caller: &str) -> Result<SpentNow, BackendError> {
        let (day, month) = self.sums_keys(window);
        let mine = format!("c:{caller}");
        let mut pipe = redis::pipe();
        pipe.hget(&day, &mine)
            .hget(&month, &mine)
            .hget(&day, "all")
            .hget(&month, "all");
        let (caller_day, caller_month, all_day, all_month): (
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
        ) = self.pipe(&pipe).await?;
        Ok(SpentNow {
            caller_day: caller_day.unwrap_or(0),
            caller_month: caller_month.unwrap_or(0),
            all_day: all_day.unwrap_or(0),
            all_month: all_month.unwrap_or(0),
        })
    }

    /// Every caller's spend in `window` (callers that spent this month), one round trip.
    pub async fn spent_by_caller(&self, window: Window) -> Result<Vec<CallerSpend>, BackendError> {
        let (day, month) = self.sums_keys(window);
        let mut pipe = redis::pipe();
        pipe.hgetall(&day)
            .hgetall(&month)
            .hgetall(self.key("spend", 1, "names"));
        type Sums = std::collections::HashMap<String, i64>;
        let (days, months, names): (Sums, Sums, std::collections::HashMap<String, String>) =
            self.pipe(&pipe).await?;
        let mut out: Vec<CallerSpend> = months
            .iter()
            .filter_map(|(field, month)| {
                let key = field.strip_prefix("c:")?;
                Some(CallerSpend {
                    key: key.to_owned(),
                    name: names.get(key).cloned().unwrap_or_else(|| key.to_owned()),
                    day: days.get(field).copied().unwrap_or(0),
                    month: *month,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Counts `rows` to `caller` within a second, in a batch with the others (see
    /// [`Unsent`]): for spend no budget waits for.
    pub fn settle_later(
        self: &Arc<Self>,
        window: Window,
        caller: (&str, &str),
        rows: Vec<(String, i64)>,
    ) {
        let key = (window, caller.0.to_owned(), caller.1.to_owned());
        let unsent = &self.unsent;
        unsent
            .rows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default()
            .extend(rows);
        if unsent.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        let shared = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(UNSENT_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let batch = std::mem::take(
                    &mut *shared.unsent.rows.lock().unwrap_or_else(|e| e.into_inner()),
                );
                for ((window, key, name), rows) in batch {
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
