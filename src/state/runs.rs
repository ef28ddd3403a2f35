//! A research run's state: whose it is (its owner's caller key, the first binding stands,
//! and the callers it was handed to in flight) and the settled response kept for
//! `responses_retrieve` and continuations.

use serde_json::Value;

use super::{Engine, State, StateError};

/// Snapshots kept when no store location gives a retention.
const DEFAULT_KEEP: usize = 100;

impl State {
    /// Binds a run to the caller key that started it, unless it is bound already.
    pub async fn bind_run(&self, run_id: &str, caller: &str) -> Result<(), StateError> {
        let (run, key) = (run_id.to_owned(), caller.to_owned());
        self.either(
            |shared| shared.bind_run(run_id, caller),
            move |s| s.bind_run(&run, &key),
        )
        .await
    }

    /// The caller key a run is bound to; [`StateError::NotFound`] when it is bound to none.
    pub async fn run_owner(&self, run_id: &str) -> Result<String, StateError> {
        let run = run_id.to_owned();
        self.either(
            |shared| shared.run_owner(run_id),
            move |s| s.run_owner(&run),
        )
        .await?
        .ok_or(StateError::NotFound)
    }

    /// Hands a run to one more caller key, beside the one it is bound to: an identical
    /// call that joined the run in flight may then collect and stop it too.
    pub async fn share_run(&self, run_id: &str, caller: &str) -> Result<(), StateError> {
        let (run, key) = (run_id.to_owned(), caller.to_owned());
        self.either(
            |shared| shared.share_run(run_id, caller),
            move |s| s.share_run(&run, &key),
        )
        .await
    }

    /// Whether a run was handed to `caller` ([`State::share_run`]); bound runs are
    /// [`State::run_owner`]'s.
    pub async fn run_shared_with(&self, run_id: &str, caller: &str) -> Result<bool, StateError> {
        let (run, key) = (run_id.to_owned(), caller.to_owned());
        self.either(
            |shared| shared.run_shared_with(run_id, caller),
            move |s| s.run_shared_with(&run, &key),
        )
        .await
    }

    /// Keeps a settled response, replacing an earlier one of the same run; the oldest
    /// beyond the store's retention go in the same step.
    pub async fn put_snapshot(&self, response_id: &str, body: &Value) -> Result<(), StateError> {
        // Each engine takes the body in its own form: text for Redis, a value for SQLite.
        match &self.engine {
            Engine::Shared(shared) => {
                let keep = self
                    .store
                    .config()
                    .map_or(DEFAULT_KEEP, |c| c.snapshot_retention);
                Ok(shared
                    .put_snapshot(response_id, &body.to_string(), keep)
                    .await?)
            }
            Engine::Local(_) => {
                let (id, body) = (response_id.to_owned(), body.clone());
                self.store.with(move |s| s.put_snapshot(&id, &body)).await?;
                Ok(())
            }
        }
    }

    /// The kept body of a response; [`StateError::NotFound`] when none is kept (or what
    /// the shared engine keeps no longer reads as JSON).
    pub async fn snapshot(&self, response_id: &str) -> Result<Value, StateError> {
        let id = response_id.to_owned();
        self.either(
            |shared| async move {
                let text = shared.snapshot(response_id).await?;
                Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
            },
            move |s| Ok(s.snapshot_of_response(&id)?.map(|snap| snap.body)),
        )
        .await?
        .ok_or(StateError::NotFound)
    }
}
