//! Where settled responses are kept for `responses_retrieve` and continuations: behind
//! the state door, so with replicas a response kept through one is read through any.
//! State may be unavailable; the caller then says the snapshot was not kept, and reads
//! Perplexity's copy instead.

use std::sync::Arc;

use serde_json::Value;

use crate::state::{State, StateError};

pub struct Snapshots {
    state: Arc<State>,
}

impl Snapshots {
    pub fn new(state: Arc<State>) -> Self {
        Snapshots { state }
    }

    /// The kept body of a response, if any; `Err`: why state could not be asked.
    pub async fn of_response(&self, id: &str) -> Result<Option<Value>, String> {
        match self.state.snapshot(id).await {
            Ok(body) => Ok(Some(body)),
            Err(StateError::NotFound) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Keeps a settled response, replacing an earlier one of the same run.
    pub async fn put(&self, id: &str, body: &Value) -> Result<(), String> {
        self.state
            .put_snapshot(id, body)
            .await
            .map_err(|e| e.to_string())
    }
}
