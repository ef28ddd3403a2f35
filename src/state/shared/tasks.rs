//! MCP task records in Redis, so a task made through one replica is read, polled, listed,
//! cancelled and finished through any other — and a task whose replica died is adopted
//! by exactly one of the others.
//!
//! Keys (under the prefix, version 1):
//! - `task:v1:rec:<id>`: the record, a hash, expiring with the task's ttl;
//! - `task:v1:of:<caller key>`: the caller's task ids by creation order (a sorted set,
//!   newest [`PER_CALLER`] kept, expiring with its newest task): `tasks/list`;
//! - `task:v1:working`: the ids of tasks not yet ended, by expiry (bounded at
//!   [`WORKING`]; ended tasks leave it in the script that ends them);
//! - `task:v1:lease:<id>`: the replica running the task, with the lease's expiry.
//!   Whoever holds it collects the run; a lapsed lease is taken (`SET NX`) by one replica
//!   only, so a task is never collected by two — and never by none once its lease lapses.
//! - `task:v1:seq`: the creation counter (one integer).
//!
//! A record is the caller's: every read names the caller and another caller's record
//! reads as none (checked here, after one round trip, never by listing). The record
//! keeps who the caller is (name, issuer, operator) so the replica that adopts a task
//! can collect it as that caller — that is state this process wrote; whoever can write
//! to the backend can already do anything the replicas can.
//!
//! Ends are published on `task:v1:ended` (empty payload: a wake-up, never the task id,
//! which is a capability) so `subscriptions/listen` on another replica re-reads at once.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

use super::{BackendError, Shared};
use crate::clock::now_ms;
use crate::state::local::{TaskRecord, TaskUpdate};

/// Task ids kept per caller for `tasks/list` (as the SQLite store keeps, in all).
const PER_CALLER: usize = 10_000;
/// Not-yet-ended tasks tracked at most (each replica runs at most 1,024).
const WORKING: usize = 100_000;
/// Orphans one replica adopts per sweep: the rest are left for the next sweep or replica.
const ADOPT_PER_SWEEP: usize = 64;

/// A task another replica left, with who its caller is.
pub struct Adoptable {
    pub record: TaskRecord,
    pub name: String,
    pub issuer: Option<String>,
    pub operator: bool,
}

/// KEYS: record, caller's index, working set, counter, lease. ARGV: id, expiry (unix ms),
/// ids kept per caller, replica, lease ms, cap of the working set, then field pairs.
const PUT: &str = r"
local seq = redis.call('INCR', KEYS[4])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'seq', seq, unpack(ARGV, 7))
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -(tonumber(ARGV[3]) + 1))
if redis.call('PEXPIRETIME', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIREAT', KEYS[2], ARGV[2])
end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(tonumber(ARGV[6]) + 1))
redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[5])
return seq
";

/// KEYS: record, working set. ARGV: caller, now (ms), id, channel, then field pairs.
/// Only a `working` task of this caller changes; an end leaves the working set and is
/// published. Returns 1 when the record changed.
const UPDATE: &str = r"
local v = redis.call('HMGET', KEYS[1], 'caller', 'status')
if v[1] ~= ARGV[1] or v[2] ~= 'working' then
  return 0
end
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[2], unpack(ARGV, 5))
if redis.call('HGET', KEYS[1], 'status') ~= 'working' then
  redis.call('ZREM', KEYS[2], ARGV[3])
  redis.call('PUBLISH', ARGV[4], '')
end
return 1
";

/// KEYS: record. ARGV: caller, run id, now (ms). The first run stays; returns the
/// status, nil when there is no such task of this caller.
const RECORD_RUN: &str = r"
local v = redis.call('HMGET', KEYS[1], 'caller', 'status', 'run_id')
if v[1] ~= ARGV[1] then
  return false
end
if not v[3] then
  redis.call('HSET', KEYS[1], 'run_id', ARGV[2], 'updated_ms', ARGV[3])
end
return v[2]
";

/// KEYS: leases. ARGV: replica, lease ms. Extends the leases still ours; 1 or 0 each.
const RENEW: &str = r"
local kept = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
    kept[i] = 1
  else
    kept[i] = 0
  end
end
return kept
";

/// KEYS: lease. ARGV: replica. Gives the lease up if it is still ours.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// KEYS: working set. ARGV: lease key prefix, replica, lease ms, most to claim.
/// Drops expired tasks from the set, then claims (`SET NX`) those nobody holds.
/// The lease keys are built here from the prefix: one Redis, not a cluster.
const SWEEP: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local claimed = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, 999)) do
  if #claimed >= tonumber(ARGV[4]) then
    break
  end
  if redis.call('SET', ARGV[1] .. id, ARGV[2], 'NX', 'PX', ARGV[3]) then
    claimed[#claimed + 1] = id
  end
end
return claimed
";

static PUT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(PUT));
static UPDATE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(UPDATE));
static RECORD_RUN_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(RECORD_RUN));
static RENEW_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(RENEW));
static RELEASE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(RELEASE));
static SWEEP_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(SWEEP));

impl Shared {
    fn task_key(&self, rest: &str) -> String {
        self.key("task", 1, rest)
    }

    fn ended_channel(&self) -> String {
        self.task_key("ended")
    }

    /// How long a lease lasts unless renewed.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// Stores a new task and takes its lease for this replica, in one round trip.
    pub async fn put_task(
        &self,
        task: &TaskRecord,
        name: &str,
        issuer: Option<&str>,
        operator: bool,
    ) -> Result<(), BackendError> {
        let expires = task.created_ms.saturating_add(task.ttl_ms);
        let mut invocation = PUT_SCRIPT.prepare_invoke();
        invocation
            .key(self.task_key(&format!("rec:{}", task.id)))
            .key(self.task_key(&format!("of:{}", task.caller)))
            .key(self.task_key("working"))
            .key(self.task_key("seq"))
            .key(self.task_key(&format!("lease:{}", task.id)))
            .arg(&task.id)
            .arg(expires)
            .arg(PER_CALLER)
            .arg(&self.replica)
            .arg(self.lease.as_millis() as u64)
            .arg(WORKING);
        let mut fields = vec![
            ("caller", task.caller.clone()),
            ("tool", task.tool.clone()),
            ("status", task.status.clone()),
            ("created_ms", task.created_ms.to_string()),
            ("updated_ms", task.updated_ms.to_string()),
            ("ttl_ms", task.ttl_ms.to_string()),
            ("who_name", name.to_owned()),
            ("who_operator", u8::from(operator).to_string()),
        ];
        let optional = [
            ("run_id", task.run_id.as_deref()),
            ("status_message", task.status_message.as_deref()),
            ("result", task.result.as_deref()),
            ("who_issuer", issuer),
        ];
        for (field, value) in optional {
            fields.extend(value.map(|value| (field, value.to_owned())));
        }
        for (field, value) in fields {
            invocation.arg(field).arg(value);
        }
        self.script::<i64>(&invocation).await.map(drop)
    }

    /// The caller's task with this id; another caller's, or none, reads as `None`.
    pub async fn task(&self, id: &str, caller: &str) -> Result<Option<TaskRecord>, BackendError> {
        Ok(self
            .raw_task(id)
            .await?
            .filter(|t| t.record.caller == caller)
            .map(|t| t.record))
    }

    async fn raw_task(&self, id: &str) -> Result<Option<Adoptable>, BackendError> {
        let key = self.task_key(&format!("rec:{id}"));
        let fields: HashMap<String, String> = self.cmd(redis::cmd("HGETALL").arg(key)).await?;
        Ok(parse(id, fields))
    }

    /// Applies `update` to the caller's task unless it has ended (it never changes again);
    /// an end is published to every replica. Whether the record changed.
    pub async fn update_task(
        &self,
        id: &str,
        caller: &str,
        update: &TaskUpdate,
    ) -> Result<bool, BackendError> {
        let mut invocation = UPDATE_SCRIPT.prepare_invoke();
        invocation
            .key(self.task_key(&format!("rec:{id}")))
            .key(self.task_key("working"))
            .arg(caller)
            .arg(now_ms())
            .arg(id)
            .arg(self.ended_channel());
        let fields = [
            ("run_id", &update.run_id),
            ("status", &update.status),
            ("status_message", &update.status_message),
            ("result", &update.result),
        ];
        for (field, value) in fields {
            if let Some(value) = value {
                invocation.arg(field).arg(value);
            }
        }
        let changed: i64 = self.script(&invocation).await?;
        Ok(changed == 1)
    }

    /// Records the run behind the caller's task (the first one stays); its status,
    /// `None` if there is no such task.
    pub async fn record_task_run(
        &self,
        id: &str,
        caller: &str,
        run_id: &str,
    ) -> Result<Option<String>, BackendError> {
        let mut invocation = RECORD_RUN_SCRIPT.prepare_invoke();
        invocation
            .key(self.task_key(&format!("rec:{id}")))
            .arg(caller)
            .arg(run_id)
            .arg(now_ms());
        self.script(&invocation).await
    }

    /// A page of the caller's tasks, newest first, each with its position (see
    /// `Store::tasks_page`); ended and expired records are left out by their own expiry.
    pub async fn tasks_page(
        &self,
        caller: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, TaskRecord)>, BackendError> {
        let index = self.task_key(&format!("of:{caller}"));
        let max = before.map_or("+inf".to_owned(), |b| format!("({b}"));
        let ids: Vec<(String, i64)> = self
            .cmd(
                redis::cmd("ZREVRANGEBYSCORE")
                    .arg(index)
                    .arg(max)
                    .arg("-inf")
                    .arg("WITHSCORES")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit),
            )
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for (id, _) in &ids {
            pipe.hgetall(self.task_key(&format!("rec:{id}")));
        }
        let rows: Vec<HashMap<String, String>> = self.pipe(&pipe).await?;
        let now = now_ms();
        Ok(ids
            .into_iter()
            .zip(rows)
            .filter_map(|((id, seq), fields)| Some((seq, parse(&id, fields)?.record)))
            .filter(|(_, r)| r.caller == caller && !r.expired(now))
            .collect())
    }

    /// Takes the lease of a task nobody holds; false if a replica (maybe this one) does.
    pub async fn claim_task(&self, id: &str) -> Result<bool, BackendError> {
        let key = self.task_key(&format!("lease:{id}"));
        let ms = self.lease.as_millis() as u64;
        let set: Option<String> = self
            .cmd(
                redis::cmd("SET")
                    .arg(key)
                    .arg(&self.replica)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms),
            )
            .await?;
        Ok(set.is_some())
    }

    /// Extends the leases of the tasks this replica runs, in one round trip; for each,
    /// whether it is still ours (one that lapsed and was taken is another replica's now).
    pub async fn renew_tasks(&self, ids: &[String]) -> Result<Vec<bool>, BackendError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut invocation = RENEW_SCRIPT.prepare_invoke();
        for id in ids {
            invocation.key(self.task_key(&format!("lease:{id}")));
        }
        invocation
            .arg(&self.replica)
            .arg(self.lease.as_millis() as u64);
        let kept: Vec<i64> = self.script(&invocation).await?;
        Ok(kept.into_iter().map(|k| k == 1).collect())
    }

    /// Gives up this replica's lease on a task (it ended here, or this replica stops and
    /// leaves it to another at once rather than after the lease).
    pub async fn release_task(&self, id: &str) -> Result<(), BackendError> {
        let mut invocation = RELEASE_SCRIPT.prepare_invoke();
        invocation
            .key(self.task_key(&format!("lease:{id}")))
            .arg(&self.replica);
        self.script::<i64>(&invocation).await.map(drop)
    }

    /// Claims tasks whose replica is gone (their lease lapsed) and reads them: this
    /// replica collects each from here on. A claimed id whose record is gone is dropped.
    pub async fn adopt_orphans(&self) -> Result<Vec<Adoptable>, BackendError> {
        let mut invocation = SWEEP_SCRIPT.prepare_invoke();
        invocation
            .key(self.task_key("working"))
            .arg(self.task_key("lease:"))
            .arg(&self.replica)
            .arg(self.lease.as_millis() as u64)
            .arg(ADOPT_PER_SWEEP);
        let claimed: Vec<String> = self.script(&invocation).await?;
        let mut adopted = Vec::with_capacity(claimed.len());
        for id in claimed {
            match self.raw_task(&id).await? {
                Some(task) if task.record.status == "working" => adopted.push(task),
                _ => self.release_task(&id).await?,
            }
        }
        Ok(adopted)
    }

    /// Calls `woken` whenever a task ends on any replica, for as long as the process
    /// runs; a lost subscription is made again (and `woken` called, since ends may
    /// have been missed meanwhile).
    pub fn on_task_end(&self, woken: impl Fn() + Send + 'static) {
        let (client, channel, timeout) = (self.client.clone(), self.ended_channel(), self.timeout);
        tokio::spawn(async move {
            use futures_util::StreamExt;
            loop {
                let subscribed = async {
                    let mut pubsub = client.get_async_pubsub().await?;
                    pubsub.subscribe(&channel).await?;
                    redis::RedisResult::Ok(pubsub)
                };
                // Bounded like every operation: a backend that does not answer is retried.
                if let Ok(Ok(pubsub)) = tokio::time::timeout(timeout * 4, subscribed).await {
                    woken();
                    let mut messages = pubsub.into_on_message();
                    while messages.next().await.is_some() {
                        woken();
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
}

/// A record's hash as read; `None` when it is gone or not one of ours.
fn parse(id: &str, mut f: HashMap<String, String>) -> Option<Adoptable> {
    let number = |f: &HashMap<String, String>, k: &str| f.get(k)?.parse::<i64>().ok();
    let record = TaskRecord {
        id: id.to_owned(),
        created_ms: number(&f, "created_ms")?,
        updated_ms: number(&f, "updated_ms")?,
        ttl_ms: number(&f, "ttl_ms")?,
        caller: f.remove("caller")?,
        tool: f.remove("tool")?,
        status: f.remove("status")?,
        run_id: f.remove("run_id"),
        status_message: f.remove("status_message"),
        result: f.remove("result"),
    };
    Some(Adoptable {
        record,
        name: f.remove("who_name").unwrap_or_default(),
        issuer: f.remove("who_issuer"),
        operator: f.get("who_operator").is_some_and(|o| o == "1"),
    })
}
