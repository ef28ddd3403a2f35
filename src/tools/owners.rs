//! Whose research run is whose. A named client or token subject may name only the runs
//! it started: `perplexity_agent_result`/`_cancel`, `responses_retrieve`, a run resource
//! and a `previous_response_id` of any other run — another caller's, or one that never
//! existed — get the same "not found", decided here without asking Perplexity (which
//! would answer any run the server's one API key can reach). Operators (the local user,
//! the single-token tenant) hold or share that key and are not limited.
//!
//! Bindings live in memory (the newest [`MEMORY`]) and behind the state door (the store's
//! `run_owners` table, or with replicas the shared backend, so a run started through one
//! replica is its caller's through every other) — written before the call's answer can
//! name the run, so they survive restarts. State that does not answer hides the run
//! (fails closed): "not found", never another caller's run.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::call::Caller;
use crate::drain::Obligations;
use crate::state::State;

/// Bindings held in memory; older ones are read from the store.
const MEMORY: usize = 10_000;

pub struct RunOwners {
    memory: Mutex<Recent>,
    state: Arc<State>,
    obligations: Obligations,
}

#[derive(Default)]
struct Recent {
    owner: HashMap<String, String>,
    order: VecDeque<String>,
}

impl RunOwners {
    pub fn new(state: Arc<State>, obligations: Obligations) -> Self {
        RunOwners {
            memory: Mutex::new(Recent::default()),
            state,
            obligations,
        }
    }

    /// Binds a run the caller just created. Only non-operators are bound: an operator
    /// sees every run anyway, and an unbound run is hidden from everyone else.
    pub fn bind(&self, run_id: &str, caller: &Caller) {
        if caller.is_operator() {
            return;
        }
        if let Ok(mut recent) = self.memory.lock() {
            if recent
                .owner
                .insert(run_id.to_owned(), caller.key().to_owned())
                .is_none()
            {
                recent.order.push_back(run_id.to_owned());
            }
            while recent.order.len() > MEMORY {
                if let Some(old) = recent.order.pop_front() {
                    recent.owner.remove(&old);
                }
            }
        }
        let (state, run, key) = (
            self.state.clone(),
            run_id.to_owned(),
            caller.key().to_owned(),
        );
        // A promise exit waits for: the binding must outlive this process, or the run
        // would be lost to its own caller after a restart.
        self.obligations.spawn(async move {
            if let Err(e) = state.bind_run(&run, &key).await {
                tracing::warn!("a research run's owner could not be stored ({e}); after a restart its caller will not find it");
            }
        });
    }

    /// Whether `caller` may name `run_id`.
    pub async fn visible(&self, run_id: &str, caller: &Caller) -> bool {
        if caller.is_operator() {
            return true;
        }
        let remembered = self
            .memory
            .lock()
            .ok()
            .and_then(|recent| recent.owner.get(run_id).cloned());
        // Not found and unavailable alike hide the run.
        let owner = match remembered {
            Some(owner) => Some(owner),
            None => self.state.run_owner(run_id).await.ok(),
        };
        owner.as_deref() == Some(caller.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::local::StoreHandle;

    #[tokio::test]
    async fn a_run_is_its_creators_and_operators_see_every_run() {
        let owners = RunOwners::new(
            Arc::new(State::local(Arc::new(StoreHandle::new(None)))),
            Obligations::default(),
        );
        let (alice, bob) = (Caller::client("alice", "t0"), Caller::client("bob", "t0"));
        owners.bind("resp_a", &alice);
        assert!(owners.visible("resp_a", &alice).await);
        assert!(
            !owners.visible("resp_a", &bob).await,
            "another client's run"
        );
        assert!(
            !owners.visible("resp_never", &alice).await,
            "a run nobody bound"
        );
        // The same name added again later is someone else.
        assert!(
            !owners
                .visible("resp_a", &Caller::client("alice", "t1"))
                .await
        );
        let local = Caller::local();
        assert!(owners.visible("resp_a", &local).await);
        owners.bind("resp_l", &local);
        assert!(
            !owners.visible("resp_l", &alice).await,
            "operators bind nothing"
        );
    }

    #[tokio::test]
    async fn bindings_outlive_the_process_in_the_store() {
        let dir =
            std::env::temp_dir().join(format!("pa-owners-{}", crate::random::secure_hex::<8>()));
        let config = crate::state::StoreConfig {
            path: dir.join("store.sqlite"),
            snapshot_retention: 10,
            max_tabs_per_space: 3,
            max_history_per_space: None,
        };
        let obligations = Obligations::default();
        let alice = Caller::subject("https://issuer.example", "alice");
        {
            let owners = RunOwners::new(
                Arc::new(State::local(Arc::new(StoreHandle::new(Some(
                    config.clone(),
                ))))),
                obligations.clone(),
            );
            owners.bind("resp_a", &alice);
            assert!(obligations.settle(std::time::Duration::from_secs(10)).await);
        }
        let fresh = RunOwners::new(
            Arc::new(State::local(Arc::new(StoreHandle::new(Some(config))))),
            Obligations::default(),
        );
        assert!(fresh.visible("resp_a", &alice).await);
        assert!(
            !fresh
                .visible("resp_a", &Caller::subject("https://other.example", "alice"))
                .await
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
