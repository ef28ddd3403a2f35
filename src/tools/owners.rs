//! Whose research run is whose. A named client or token subject may name only the runs
//! it started: `perplexity_agent_result`/`_cancel`, `responses_retrieve`, a run resource
//! and a `previous_response_id` of any other run — another caller's, or one that never
//! existed — get the same "not found", decided here without asking Perplexity (which
//! would answer any run the server's one API key can reach). Operators (the local user,
//! the single-token tenant) hold or share that key and are not limited.
//!
//! A run can also be handed to another caller: a call that asked for its run back at once
//! (`wait: false`) while an identical call's run was in flight is given that run, and may
//! collect and stop it like its own (under the team's cache the two may be different
//! callers). Only a call that joined the flight is: nobody else sees the run.
//!
//! Bindings live in memory (the newest [`MEMORY`] runs) and behind the state door (the
//! store's `run_owners` and `run_sharers` tables, or with replicas the shared backend, so
//! a run started through one replica is its caller's through every other) — written before
//! the call's answer can name the run, so they survive restarts. State that does not
//! answer hides the run (fails closed): "not found", never another caller's run.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::call::Caller;
use crate::drain::Obligations;
use crate::state::State;

/// Runs whose bindings are held in memory; older ones are read from the store.
const MEMORY: usize = 10_000;

/// Who may name which run. One book for the server; a call that leads a flight gets a
/// handle of its own that also announces the runs it binds ([`RunOwners::announcing`]).
pub struct RunOwners {
    book: Arc<Book>,
    /// Told each run bound through this handle, once bound.
    announce: Option<Announce>,
}

/// Hears of each run a leading call binds (its flight).
type Announce = Arc<dyn Fn(&str) + Send + Sync>;

struct Book {
    memory: Mutex<Recent>,
    state: Arc<State>,
    obligations: Obligations,
}

#[derive(Default)]
struct Recent {
    /// Each run's callers: the one that started it, then those it was handed to. Both are
    /// written here by the process that ran the flight, so a run held here is complete.
    callers: HashMap<String, Vec<String>>,
    order: VecDeque<String>,
}

impl RunOwners {
    pub fn new(state: Arc<State>, obligations: Obligations) -> Self {
        RunOwners {
            book: Arc::new(Book {
                memory: Mutex::new(Recent::default()),
                state,
                obligations,
            }),
            announce: None,
        }
    }

    /// The same bindings, for a call whose created runs `announce` also hears of (a
    /// leading call's flight), after they are bound: a call handed the run can collect it.
    pub fn announcing(&self, announce: impl Fn(&str) + Send + Sync + 'static) -> RunOwners {
        RunOwners {
            book: self.book.clone(),
            announce: Some(Arc::new(announce)),
        }
    }

    /// Binds a run the caller just created. Only non-operators are bound: an operator
    /// sees every run anyway, and an unbound run is hidden from everyone else.
    pub fn bind(&self, run_id: &str, caller: &Caller) {
        self.bind_caller(run_id, caller);
        if let Some(announce) = &self.announce {
            announce(run_id);
        }
    }

    fn bind_caller(&self, run_id: &str, caller: &Caller) {
        if caller.is_operator() {
            return;
        }
        if let Ok(mut recent) = self.book.memory.lock() {
            if !recent.callers.contains_key(run_id) {
                recent
                    .callers
                    .insert(run_id.to_owned(), vec![caller.key().to_owned()]);
                recent.order.push_back(run_id.to_owned());
            }
            while recent.order.len() > MEMORY {
                if let Some(old) = recent.order.pop_front() {
                    recent.callers.remove(&old);
                }
            }
        }
        let (state, run, key) = (
            self.book.state.clone(),
            run_id.to_owned(),
            caller.key().to_owned(),
        );
        // A promise exit waits for: the binding must outlive this process, or the run
        // would be lost to its own caller after a restart.
        self.book.obligations.spawn(async move {
            if let Err(e) = state.bind_run(&run, &key).await {
                tracing::warn!("a research run's owner could not be stored ({e}); after a restart its caller will not find it");
            }
        });
    }

    /// Hands a run of another call's to `caller` (it joined that call's flight). Written
    /// through before it returns, as the caller is told of the run next; `false` when it
    /// could be kept nowhere, and the caller must then not be told of the run.
    pub async fn share(&self, run_id: &str, caller: &Caller) -> bool {
        if caller.is_operator() {
            return true;
        }
        // Only beside a binding held here: a run held in memory lists all its callers.
        let mut listed = false;
        let remembered = self.book.memory.lock().is_ok_and(|mut recent| {
            recent.callers.get_mut(run_id).is_some_and(|callers| {
                listed = callers.iter().any(|k| k == caller.key());
                if !listed {
                    callers.push(caller.key().to_owned());
                }
                true
            })
        });
        // Its own run (the same caller's identical call), or handed to it already: kept.
        if listed {
            return true;
        }
        match self.book.state.share_run(run_id, caller.key()).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    "a research run handed to another caller could not be stored ({e}); after a restart that caller will not find it"
                );
                remembered
            }
        }
    }

    /// Whether `caller` may name `run_id`.
    pub async fn visible(&self, run_id: &str, caller: &Caller) -> bool {
        if caller.is_operator() {
            return true;
        }
        let remembered = self.book.memory.lock().ok().and_then(|recent| {
            recent
                .callers
                .get(run_id)
                .map(|callers| callers.iter().any(|k| k == caller.key()))
        });
        if let Some(remembered) = remembered {
            return remembered;
        }
        // Not found and unavailable alike hide the run.
        let state = &self.book.state;
        state.run_owner(run_id).await.ok().as_deref() == Some(caller.key())
            || state
                .run_shared_with(run_id, caller.key())
                .await
                .unwrap_or(false)
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

    #[tokio::test]
    async fn a_run_handed_to_a_caller_is_theirs_too_and_nobody_elses() {
        let dir =
            std::env::temp_dir().join(format!("pa-sharers-{}", crate::random::secure_hex::<8>()));
        let config = crate::state::StoreConfig {
            path: dir.join("store.sqlite"),
            snapshot_retention: 10,
            max_tabs_per_space: 3,
            max_history_per_space: None,
        };
        let store = || {
            Arc::new(State::local(Arc::new(StoreHandle::new(Some(
                config.clone(),
            )))))
        };
        let obligations = Obligations::default();
        let (carol, dave, erin) = (
            Caller::client("carol", "t0"),
            Caller::client("dave", "t0"),
            Caller::client("erin", "t0"),
        );
        let owners = RunOwners::new(store(), obligations.clone());
        let heard = Arc::new(Mutex::new(Vec::new()));
        let leading = owners.announcing({
            let heard = heard.clone();
            move |id| heard.lock().unwrap().push(id.to_owned())
        });
        leading.bind("resp_c", &carol);
        // Announced once bound, for operators too (whose runs are bound to nobody).
        leading.bind("resp_l", &Caller::local());
        assert_eq!(*heard.lock().unwrap(), ["resp_c", "resp_l"]);
        owners.bind("resp_x", &carol);
        assert_eq!(heard.lock().unwrap().len(), 2, "only the leading call's");

        assert!(owners.share("resp_c", &dave).await);
        assert!(owners.share("resp_c", &dave).await, "twice is once");
        assert!(owners.share("resp_l", &dave).await);
        for (run, caller, seen) in [
            ("resp_c", &carol, true),
            ("resp_c", &dave, true),
            ("resp_c", &erin, false),
            ("resp_l", &dave, true),
            ("resp_l", &erin, false),
            ("resp_x", &dave, false),
        ] {
            assert_eq!(owners.visible(run, caller).await, seen, "{run}");
        }
        // The same after a restart: read from the store.
        assert!(obligations.settle(std::time::Duration::from_secs(10)).await);
        let fresh = RunOwners::new(store(), Obligations::default());
        for (run, caller, seen) in [
            ("resp_c", &carol, true),
            ("resp_c", &dave, true),
            ("resp_c", &erin, false),
            ("resp_l", &dave, true),
            ("resp_x", &dave, false),
        ] {
            assert_eq!(
                fresh.visible(run, caller).await,
                seen,
                "{run} after a restart"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
