//! Where settled responses are kept for `responses_retrieve` and continuations: the
//! local store for one process, the shared backend for replicas (`state/snapshots.rs`),
//! so a response kept through one replica is read through any. Either may be
//! unavailable; the caller then says the snapshot was not kept, and reads Perplexity's
//! copy instead.

use std::sync::Arc;

use serde_json::Value;

use crate::state::Shared;
use crate::store::StoreHandle;

/// Snapshots kept when no store location gives a retention.
const DEFAULT_KEEP: usize = 100;

pub struct Snapshots {
    store: Arc<StoreHandle>,
    shared: Option<Arc<Shared>>,
}

impl Snapshots {
    pub fn new(store: Arc<StoreHandle>, shared: Option<Arc<Shared>>) -> Self {
        Snapshots { store, shared }
    }

    /// The kept body of a response, if any.
    pub async fn of_response(&self, id: &str) -> Result<Option<Value>, String> {
        if let Some(shared) = &self.shared {
            let text = shared.snapshot(id).await.map_err(|e| e.to_string())?;
            return Ok(text.and_then(|t| serde_json::from_str(&t).ok()));
        }
        let id = id.to_owned();
        self.store
            .with(move |s| s.snapshot_of_response(&id))
            .await
            .map(|snap| snap.map(|s| s.body))
            .map_err(|e| e.to_string())
    }

    /// Keeps a settled response, replacing an earlier one of the same run.
    pub async fn put(&self, id: &str, body: &Value) -> Result<(), String> {
        if let Some(shared) = &self.shared {
            let keep = self
                .store
                .config()
                .map_or(DEFAULT_KEEP, |c| c.snapshot_retention);
            return shared
                .put_snapshot(id, &body.to_string(), keep)
                .await
                .map_err(|e| e.to_string());
        }
        let (id, body) = (id.to_owned(), body.clone());
        self.store
            .with(move |s| s.put_snapshot(&id, &body))
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}
