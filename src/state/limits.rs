//! What the guard keeps per call: the rate buckets charged before a call runs, and the
//! full text of a cut result that `retrieve` reads later. The guard owns this process's
//! own buckets and cut results; the door says whether state kept them for every replica
//! instead, so the guard never learns which engine answered.

use std::time::Duration;

use super::shared::BucketSpec;
use super::{Engine, State, StateError};

impl State {
    /// Charges `cost` to `buckets` (the caller's own first, then the server's): under the
    /// shared engine to the replicas' buckets of these sizes, all or nothing; else through
    /// `here`, the process's own buckets, as the caller charges them. `Ok(Err(wait))`: one
    /// is short, and `wait` is when it could pay. An engine that does not answer is an
    /// error: the caller refuses the call (fails closed).
    pub async fn charge(
        &self,
        buckets: &[BucketSpec<'_>],
        cost: u32,
        here: impl FnOnce() -> Result<(), Duration>,
    ) -> Result<Result<(), Duration>, StateError> {
        match &self.engine {
            Engine::Shared(shared) => Ok(shared.charge(buckets, cost).await?),
            Engine::Local(_) => Ok(here()),
        }
    }

    /// Keeps a cut result's full text for `ttl` where every replica reads it. `false`:
    /// keep it in this process instead — always under the local engine, and when the
    /// shared backend does not answer (the key then works on this replica only).
    pub async fn keep_cut(&self, key: &str, owner: &str, text: &str, ttl: Duration) -> bool {
        let Engine::Shared(shared) = &self.engine else {
            return false;
        };
        match shared.put_offload(key, owner, text, ttl).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    "a cut result could not be shared ({e}); its retrieve_key works on this replica only"
                );
                false
            }
        }
    }

    /// A cut result's full text kept by [`State::keep_cut`], if it is `owner`'s; any
    /// error means: look in this process.
    pub async fn cut(&self, key: &str, owner: &str) -> Result<String, StateError> {
        match &self.engine {
            Engine::Shared(shared) => shared
                .offload(key, owner)
                .await?
                .ok_or(StateError::NotFound),
            Engine::Local(_) => Err(StateError::NotFound),
        }
    }
}
