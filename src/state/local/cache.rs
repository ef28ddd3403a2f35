//! The research cache in the store: one row per answer, found by its key (a hash, so no
//! question is a key), expiring at its time and bounded in entries and bytes, the oldest
//! going first.

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, now_ms};

/// Answers kept at most.
pub const MAX_ENTRIES: i64 = 1_000;
/// Bytes of answers kept at most.
pub const MAX_BYTES: i64 = 32 * 1024 * 1024;

impl Store {
    /// The answer kept under `key` and when it was made, unless it has expired.
    pub fn cached(&self, key: &str) -> Result<Option<(String, i64)>, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT body, created_ms FROM cache WHERE key = ?1 AND expires_ms > ?2",
                params![key, now_ms()],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
    }

    /// Keeps `body` under `key` until `expires_ms`, replacing an earlier answer; expired
    /// answers and the oldest beyond the bounds go in the same transaction.
    pub fn keep_cached(
        &self,
        key: &str,
        body: &str,
        created_ms: i64,
        expires_ms: i64,
    ) -> Result<(), StoreError> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute("DELETE FROM cache WHERE key = ?1 OR expires_ms <= ?2", params![key, now_ms()])?;
            tx.execute(
                "INSERT INTO cache (key, body, bytes, created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![key, body, body.len() as i64, created_ms, expires_ms],
            )?;
            // The newest rows that fit both bounds stay.
            tx.execute(
                "DELETE FROM cache WHERE seq NOT IN (
                     SELECT seq FROM (
                         SELECT seq, SUM(bytes) OVER (ORDER BY seq DESC) AS kept
                         FROM cache ORDER BY seq DESC LIMIT ?1)
                     WHERE kept <= ?2)",
                params![MAX_ENTRIES, MAX_BYTES],
            )?;
            tx.commit()
        })
    }
}
