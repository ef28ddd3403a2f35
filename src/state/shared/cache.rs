//! The research cache for every replica: `cache:v1:<key>` is a hash of the answer and
//! when it was made, expiring with it, so a team's replicas answer from one cache. Its
//! size is bounded by the backend's own memory policy (and each answer's by the caller).

use std::time::Duration;

use super::{BackendError, Shared};

impl Shared {
    /// Keeps `body` under `key` for `ttl`, in one round trip (`MULTI`).
    pub async fn keep_cached(
        &self,
        key: &str,
        body: &str,
        created_ms: i64,
        ttl: Duration,
    ) -> Result<(), BackendError> {
        let record = self.key("cache", 1, key);
        let created = created_ms.to_string();
        self.put_fields(record, &[("body", body), ("created_ms", &created)], ttl)
            .await
    }

    /// The answer kept under `key` and when it was made.
    pub async fn cached(&self, key: &str) -> Result<Option<(String, i64)>, BackendError> {
        let record = self.key("cache", 1, key);
        let (body, created): (Option<String>, Option<i64>) =
            self.get_fields(record, &["body", "created_ms"]).await?;
        Ok(body.zip(created))
    }
}
