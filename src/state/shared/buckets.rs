//! The token buckets in Redis: the server's and each caller's own, charged together in one
//! round trip by a Lua script (atomic in Redis), so three replicas with a burst of 10
//! admit 10 calls between them, not 30.
//!
//! The script reads Redis's own clock (`TIME`), not ours: replicas whose clocks disagree
//! still refill one bucket at one rate. A bucket is a hash `{tokens, at}` that expires
//! once it would have refilled: a missing bucket is a full one, so every key is bounded
//! in time and an idle caller costs nothing.
//!
//! All or nothing: a call is charged to every bucket or to none, so a caller refused by
//! the server's bucket keeps its own tokens.
//!
//! When Redis does not answer, the charge fails and the guard refuses the call (fails
//! closed): an unreachable limiter must not mean unlimited spending.

use std::sync::LazyLock;
use std::time::Duration;

use super::{BackendError, Shared};

/// One bucket to charge: whose (`None`: the server's), its refill a minute and its size.
#[derive(Debug, Clone, Copy)]
pub struct BucketSpec<'a> {
    pub owner: Option<&'a str>,
    pub per_minute: u32,
    pub burst: u32,
}

/// KEYS: the buckets. ARGV[1]: the cost; then per bucket its refill a minute and its size.
/// Returns 0 when charged, else the milliseconds until every bucket could pay.
const CHARGE: &str = r"
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local cost = tonumber(ARGV[1])
local levels = {}
local wait = 0
for i, key in ipairs(KEYS) do
  local rate = math.max(tonumber(ARGV[2 * i]), 1) / 60000
  local size = math.max(tonumber(ARGV[2 * i + 1]), 1)
  local take = math.min(cost, size)
  local kept = redis.call('HMGET', key, 'tokens', 'at')
  local tokens = size
  if kept[1] and kept[2] then
    local since = math.max(now - tonumber(kept[2]), 0)
    tokens = math.min(size, tonumber(kept[1]) + since * rate)
  end
  levels[i] = tokens
  if tokens < take then
    wait = math.max(wait, math.ceil((take - tokens) / rate))
  end
end
if wait > 0 then
  return wait
end
for i, key in ipairs(KEYS) do
  local rate = math.max(tonumber(ARGV[2 * i]), 1) / 60000
  local size = math.max(tonumber(ARGV[2 * i + 1]), 1)
  local left = levels[i] - math.min(cost, size)
  redis.call('HSET', key, 'tokens', tostring(left), 'at', now)
  redis.call('PEXPIRE', key, math.ceil((size - left) / rate) + 1000)
end
return 0
";

/// Hashed once: each charge sends only the script's SHA-1.
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(CHARGE));

impl Shared {
    /// Charges `cost` tokens to every bucket of `buckets`, or to none: `Ok(Err(wait))` when
    /// one of them is short (how long until all could pay).
    pub async fn charge(
        &self,
        buckets: &[BucketSpec<'_>],
        cost: u32,
    ) -> Result<Result<(), Duration>, BackendError> {
        let mut invocation = SCRIPT.prepare_invoke();
        invocation.arg(cost.max(1));
        for bucket in buckets {
            let rest = match bucket.owner {
                None => "server".to_owned(),
                Some(owner) => format!("caller:{owner}"),
            };
            invocation
                .key(self.key("rate", 1, &rest))
                .arg(bucket.per_minute)
                .arg(bucket.burst);
        }
        let wait: u64 = self.script(&invocation).await?;
        Ok(match wait {
            0 => Ok(()),
            ms => Err(Duration::from_millis(ms)),
        })
    }
}
