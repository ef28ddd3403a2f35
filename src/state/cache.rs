//! Research answers kept to be served again (`cache/` decides what, whose and for how
//! long): under the local engine in the store, under the shared engine in the backend,
//! so a team's replicas share one cache. The cache fails open: an engine that does not
//! answer is a miss (the call goes upstream), never a refusal.

use std::time::Duration;

use super::{Engine, State, StateError};

/// An answer as it was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    pub body: String,
    /// When the answer was made (Unix milliseconds).
    pub created_ms: i64,
}

impl State {
    /// The answer kept under `key`; [`StateError::NotFound`] when none is (or it expired).
    pub async fn cached(&self, key: &str) -> Result<Cached, StateError> {
        let owned = key.to_owned();
        let found = self
            .either(|shared| shared.cached(key), move |s| s.cached(&owned))
            .await?;
        let (body, created_ms) = found.ok_or(StateError::NotFound)?;
        Ok(Cached { body, created_ms })
    }

    /// Keeps `answer` under `key` for `ttl`.
    pub async fn keep_cached(
        &self,
        key: &str,
        answer: &Cached,
        ttl: Duration,
    ) -> Result<(), StateError> {
        match &self.engine {
            Engine::Shared(shared) => Ok(shared
                .keep_cached(key, &answer.body, answer.created_ms, ttl)
                .await?),
            Engine::Local(_) => {
                let (key, answer) = (key.to_owned(), answer.clone());
                let expires = answer.created_ms.saturating_add(ttl.as_millis() as i64);
                self.store
                    .with(move |s| s.keep_cached(&key, &answer.body, answer.created_ms, expires))
                    .await?;
                Ok(())
            }
        }
    }
}
