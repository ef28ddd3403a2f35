//! The store as the tools use it: opened on first use, off the async runtime. A store
//! that cannot be opened (damaged, locked, unwritable, no location) is an error for the
//! call that needs it and is tried again by the next one — never a failed start, so
//! every tool that does not need the store keeps working, and a repaired file is picked
//! up without a restart.

use std::sync::Arc;

use tokio::sync::Mutex;

use super::{Store, StoreConfig, StoreError};

pub struct StoreHandle {
    config: Option<StoreConfig>,
    opened: Mutex<Option<Arc<Store>>>,
}

impl StoreHandle {
    pub fn new(config: Option<StoreConfig>) -> Self {
        StoreHandle {
            config,
            opened: Mutex::new(None),
        }
    }

    /// What the store was configured with (`None`: no store location).
    pub fn config(&self) -> Option<&StoreConfig> {
        self.config.as_ref()
    }

    /// The open store, opening it now if needed.
    pub async fn get(&self) -> Result<Arc<Store>, StoreError> {
        let mut opened = self.opened.lock().await;
        if let Some(store) = &*opened {
            return Ok(store.clone());
        }
        let config = self.config.clone().ok_or(StoreError::NotConfigured)?;
        let store = tokio::task::spawn_blocking(move || Store::open(config))
            .await
            .map_err(|_| StoreError::Sqlite {
                path: self
                    .config
                    .as_ref()
                    .map(|c| c.path.clone())
                    .unwrap_or_default(),
                code: "interrupted".to_owned(),
            })??;
        let store = Arc::new(store);
        *opened = Some(store.clone());
        Ok(store)
    }

    /// Runs `f` on the blocking pool (SQLite blocks: a busy database waits up to its
    /// busy timeout, which must not stall the runtime's workers).
    pub async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.get().await?;
        let path = store.config().path.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .unwrap_or(Err(StoreError::Sqlite {
                path,
                code: "interrupted".to_owned(),
            }))
    }
}
