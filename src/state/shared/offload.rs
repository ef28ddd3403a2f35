//! Cut results for `retrieve`, for every replica: `offload:v1:<retrieve_key>` is a hash of
//! the owner's caller key and the full text, expiring after the hour the key is promised
//! for. Another caller's key reads as none — the same answer as a key never minted.

use std::time::Duration;

use super::{BackendError, Shared};

impl Shared {
    /// Keeps a cut result's full text for `ttl`, in one round trip (`MULTI`).
    pub async fn put_offload(
        &self,
        key: &str,
        owner: &str,
        text: &str,
        ttl: Duration,
    ) -> Result<(), BackendError> {
        let record = self.key("offload", 1, key);
        self.put_fields(record, &[("owner", owner), ("text", text)], ttl)
            .await
    }

    /// The full text kept under `key`, if it is `owner`'s.
    pub async fn offload(&self, key: &str, owner: &str) -> Result<Option<String>, BackendError> {
        let record = self.key("offload", 1, key);
        let (kept_for, text): (Option<String>, Option<String>) =
            self.get_fields(record, &["owner", "text"]).await?;
        Ok(text.filter(|_| kept_for.as_deref() == Some(owner)))
    }
}
