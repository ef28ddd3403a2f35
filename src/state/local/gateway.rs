//! The gateway's server definitions: one row per slug, the definition as JSON whose
//! secret fields were sealed before they got here (this file never sees plaintext).

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, now_ms};

/// What saving a definition did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    Added,
    Replaced,
    /// A new server beyond the configured maximum: nothing written.
    TooMany,
}

impl Store {
    /// Adds or replaces a definition; a new one only while fewer than `max` exist
    /// (counted in the same transaction, so two writers cannot both slip past it).
    pub fn put_gateway_server(
        &self,
        slug: &str,
        definition: &str,
        max: usize,
    ) -> Result<Saved, StoreError> {
        self.with(|conn| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let exists: bool = tx
                .query_row(
                    "SELECT 1 FROM gateway_servers WHERE slug = ?1",
                    params![slug],
                    |_| Ok(true),
                )
                .optional()?
                .unwrap_or(false);
            if !exists {
                let count: i64 =
                    tx.query_row("SELECT COUNT(*) FROM gateway_servers", [], |r| r.get(0))?;
                if count as usize >= max {
                    return Ok(Saved::TooMany);
                }
            }
            tx.execute(
                "INSERT INTO gateway_servers (slug, definition, updated_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT(slug) DO UPDATE SET definition = excluded.definition, updated_ms = excluded.updated_ms",
                params![slug, definition, now_ms()],
            )?;
            tx.commit()?;
            Ok(if exists { Saved::Replaced } else { Saved::Added })
        })
    }

    pub fn gateway_server(&self, slug: &str) -> Result<Option<String>, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT definition FROM gateway_servers WHERE slug = ?1",
                params![slug],
                |r| r.get(0),
            )
            .optional()
        })
    }

    /// All definitions, by slug.
    pub fn gateway_servers(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.with(|conn| {
            let mut stmt =
                conn.prepare("SELECT slug, definition FROM gateway_servers ORDER BY slug")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
    }

    pub fn remove_gateway_server(&self, slug: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute("DELETE FROM gateway_servers WHERE slug = ?1", params![slug])
                .map(|n| n > 0)
        })
    }
}
