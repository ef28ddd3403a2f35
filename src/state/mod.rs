//! Every piece of state a call makes or reads, behind one door ([`State`]) with two
//! engines, chosen once by the composition root from configuration:
//!
//! - local (`local/`): this process and its SQLite store, the default;
//! - shared (`shared/`): Redis at `PERPLEXITY_STATE_URL`, for the replicas of one
//!   deployment, so what one replica keeps every other reads.
//!
//! Consumers ask the door and never learn which engine answered; what each operation does
//! when its engine does not answer is decided here, once, and said in [`StateError`].
//! The store also holds what only one machine has — the TUI's spaces, tabs and history,
//! the spend ledger, gateway definitions — which stays local whichever engine serves the
//! rest ([`State::store`]).
//!
//! Touches: the store file; with the shared engine, one connection to its backend.

mod budgets;
mod cache;
mod limits;
pub mod local;
mod runs;
pub mod shared;
mod tasks;

pub use budgets::{Admission, BudgetCheck, CallerSpend, SpentNow, Window};
pub use cache::Cached;
pub use local::{StoreConfig, TaskRecord, TaskUpdate};
pub use shared::{
    BucketSpec, DEFAULT_LEASE, DEFAULT_PREFIX, DEFAULT_TIMEOUT, StateConfig, check_url,
};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use local::{Store, StoreError, StoreHandle};
use shared::{BackendError, Shared};

/// Why the door did not do what was asked. Callers tell these apart; the text of
/// [`StateError::Unavailable`] is the engine's own, in our words (never a URL or a record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateError {
    /// Nothing is kept under that name — or it is another caller's, which reads the same,
    /// so a caller cannot tell that someone else's exists.
    NotFound,
    /// The engine did not answer or failed. Whatever is billable or owned fails closed.
    Unavailable(String),
    /// The record is there but not in a state that allows this (a task already ended,
    /// a lease another replica holds).
    Conflict,
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::NotFound => f.write_str("not found"),
            StateError::Unavailable(why) => f.write_str(why),
            StateError::Conflict => f.write_str("changed by someone else first"),
        }
    }
}

impl std::error::Error for StateError {}

impl From<StoreError> for StateError {
    fn from(e: StoreError) -> Self {
        StateError::Unavailable(e.to_string())
    }
}

impl From<BackendError> for StateError {
    fn from(e: BackendError) -> Self {
        StateError::Unavailable(e.to_string())
    }
}

/// The door to state. Cheap to share (`Arc`); every consumer holds the same one.
pub struct State {
    /// The local store: the local engine's file, and what stays local under either engine.
    store: Arc<StoreHandle>,
    engine: Engine,
}

enum Engine {
    /// Its budgets' holds and sums live here; everything else is in the store.
    Local(local::Budgets),
    Shared(Arc<Shared>),
}

/// The local engine without a store file: what a guard or tools built without the
/// composition root (tests, benches) use.
impl Default for State {
    fn default() -> Self {
        State::local(Arc::new(StoreHandle::new(None)))
    }
}

impl State {
    /// The engine configuration asks for: shared when a backend is configured, else local.
    /// Fails on a backend URL or CA file that cannot be used (nothing is connected yet).
    pub fn open(store: Option<StoreConfig>, shared: Option<&StateConfig>) -> Result<State, String> {
        let engine = match shared {
            None => Engine::Local(local::Budgets::default()),
            Some(config) => Engine::Shared(Arc::new(Shared::open(config)?)),
        };
        Ok(State {
            store: Arc::new(StoreHandle::new(store)),
            engine,
        })
    }

    /// The local engine over `store` (tests, tools that never share).
    pub fn local(store: Arc<StoreHandle>) -> State {
        State {
            store,
            engine: Engine::Local(local::Budgets::default()),
        }
    }

    /// The local store, for what stays on this machine under either engine (the ledger,
    /// the TUI's spaces, gateway definitions).
    pub fn store(&self) -> &Arc<StoreHandle> {
        &self.store
    }

    /// At start-up (and for `doctor`): the engine answers and accepts our credentials
    /// within `within`. Nothing to do locally: the store is opened by the first call that
    /// needs it, so a broken one fails only those calls.
    pub async fn connect(&self, within: Duration) -> Result<(), StateError> {
        match &self.engine {
            Engine::Shared(shared) => Ok(shared.connect(within).await?),
            Engine::Local(_) => Ok(()),
        }
    }

    /// For as long as the process serves: an outage of the engine (and its end) is seen,
    /// logged and reported to `/readyz` even while no call comes in.
    pub fn watch(&self) {
        if let Engine::Shared(shared) = &self.engine {
            shared.watch();
        }
    }

    /// One operation under whichever engine is in use: `shared` with the backend, else
    /// `local` on the store's blocking pool (SQLite blocks, the runtime's workers must
    /// not). Either engine's failure is [`StateError::Unavailable`].
    async fn either<'a, T, F>(
        &'a self,
        shared: impl FnOnce(&'a Shared) -> F,
        local: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StateError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, BackendError>>,
    {
        match &self.engine {
            Engine::Shared(backend) => Ok(shared(backend).await?),
            Engine::Local(_) => Ok(self.store.with(local).await?),
        }
    }

    /// Whether the engine answered its last operation, when that can change (`/readyz`,
    /// `/metrics`): `None` for the local engine, which has no outage to report.
    pub fn up(&self) -> Option<bool> {
        match &self.engine {
            Engine::Local(_) => None,
            Engine::Shared(shared) => Some(shared.health().is_up()),
        }
    }
}
