//! Response snapshots for every replica: `snap:v1:resp:<response id>` holds the settled
//! response a `responses_*` call kept, so `responses_retrieve` through any replica reads
//! it without asking Perplexity again. The newest `keep` are kept (an index by time,
//! trimmed in the same script that adds one, deleting what it trims), each for at most
//! [`KEPT`]. Reading one is gated by the run's owner before it gets here (`owners.rs`).

use std::sync::LazyLock;
use std::time::Duration;

use super::{BackendError, Shared};

/// How long a snapshot is kept at most (as long as a run's owner binding).
const KEPT: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// KEYS: snapshot, index. ARGV: body, ttl ms, response id, how many to keep, the
/// snapshot key prefix (the trimmed ones are deleted by name: one Redis, not a cluster).
const PUT: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local t = redis.call('TIME')
redis.call('ZADD', KEYS[2], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[3])
local old = redis.call('ZRANGE', KEYS[2], 0, -(tonumber(ARGV[4]) + 1))
for _, id in ipairs(old) do
  redis.call('DEL', ARGV[5] .. id)
end
if #old > 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, #old - 1)
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return #old
";

static PUT_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(PUT));

impl Shared {
    /// Keeps a settled response (JSON text), replacing an earlier one of the same run.
    pub async fn put_snapshot(
        &self,
        response_id: &str,
        body: &str,
        keep: usize,
    ) -> Result<(), BackendError> {
        let mut invocation = PUT_SCRIPT.prepare_invoke();
        invocation
            .key(self.key("snap", 1, &format!("resp:{response_id}")))
            .key(self.key("snap", 1, "index"))
            .arg(body)
            .arg(KEPT.as_millis() as u64)
            .arg(response_id)
            .arg(keep.max(1))
            .arg(self.key("snap", 1, "resp:"));
        self.script::<i64>(&invocation).await.map(drop)
    }

    /// The snapshot of a response (JSON text), if one is kept.
    pub async fn snapshot(&self, response_id: &str) -> Result<Option<String>, BackendError> {
        self.get(self.key("snap", 1, &format!("resp:{response_id}")))
            .await
    }
}
