//! Whose research run is whose, for every replica: `run:v1:owner:<run id>` holds the
//! caller key of the named client or token subject that started the run (the first
//! binding stands), so a run started through one replica is its caller's — and only its
//! caller's — through all of them. `run:v1:sharers:<run id>` is the set of the other
//! callers the run was handed to (an identical call that joined it in flight, under the
//! team's cache). Each binding expires after [`KEPT`]: Perplexity does not keep runs
//! longer.

use std::time::Duration;

use super::{BackendError, Shared};

/// How long a binding is kept.
const KEPT: Duration = Duration::from_secs(30 * 24 * 60 * 60);

impl Shared {
    /// Binds a run to the caller that started it, unless it is bound already.
    pub async fn bind_run(&self, run_id: &str, caller: &str) -> Result<(), BackendError> {
        let key = self.key("run", 1, &format!("owner:{run_id}"));
        self.cmd::<Option<String>>(
            redis::cmd("SET")
                .arg(key)
                .arg(caller)
                .arg("NX")
                .arg("EX")
                .arg(KEPT.as_secs()),
        )
        .await
        .map(drop)
    }

    /// The caller a run is bound to, if any.
    pub async fn run_owner(&self, run_id: &str) -> Result<Option<String>, BackendError> {
        self.get(self.key("run", 1, &format!("owner:{run_id}")))
            .await
    }

    /// Hands a run to one more caller, beside the one that started it.
    pub async fn share_run(&self, run_id: &str, caller: &str) -> Result<(), BackendError> {
        let key = self.key("run", 1, &format!("sharers:{run_id}"));
        let mut pipe = redis::pipe();
        // One round trip (`MULTI`): the set is never there without its expiry.
        pipe.atomic()
            .sadd(&key, caller)
            .ignore()
            .expire(&key, KEPT.as_secs() as i64)
            .ignore();
        self.pipe(&pipe).await
    }

    /// Whether a run was handed to `caller` (not whether it started it).
    pub async fn run_shared_with(&self, run_id: &str, caller: &str) -> Result<bool, BackendError> {
        let key = self.key("run", 1, &format!("sharers:{run_id}"));
        self.cmd(redis::cmd("SISMEMBER").arg(key).arg(caller)).await
    }
}
