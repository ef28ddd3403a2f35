//! Where task records live: the SQLite store for one process, or the backend the
//! replicas share (`PERPLEXITY_STATE_URL`, `state/tasks.rs`) — the same operations, so
//! the desk reads alike in both. Only the shared book has leases: in one process the
//! desk's own table of live tasks says who runs what.

use std::sync::Arc;

use crate::call::Caller;
use crate::state::Shared;
use crate::store::{StoreHandle, TaskRecord, TaskUpdate};
use crate::tools::Tools;

pub(super) enum Book<'a> {
    Local(&'a Arc<StoreHandle>),
    Shared(&'a Arc<Shared>),
}

impl<'a> Book<'a> {
    pub(super) fn of(tools: &'a Tools) -> Self {
        match tools.guard().shared() {
            Some(shared) => Book::Shared(shared),
            None => Book::Local(tools.store()),
        }
    }

    /// A new task, leased to this replica when shared.
    pub(super) async fn put(&self, record: &TaskRecord, caller: &Caller) -> Result<(), String> {
        match self {
            Book::Shared(shared) => shared
                .put_task(record, caller.name(), caller.issuer(), caller.is_operator())
                .await
                .map_err(|e| e.to_string()),
            Book::Local(store) => {
                let record = record.clone();
                local(store.with(move |s| s.put_task(&record)).await)
            }
        }
    }

    /// The caller's task; another caller's reads as none.
    pub(super) async fn task(&self, id: &str, caller: &str) -> Result<Option<TaskRecord>, String> {
        match self {
            Book::Shared(shared) => shared.task(id, caller).await.map_err(|e| e.to_string()),
            Book::Local(store) => {
                let (id, caller) = (id.to_owned(), caller.to_owned());
                local(store.with(move |s| s.task(&id, &caller)).await)
            }
        }
    }

    /// Applies `update` unless the task has ended; whether it changed.
    pub(super) async fn update(
        &self,
        id: &str,
        caller: &str,
        update: &TaskUpdate,
    ) -> Result<bool, String> {
        match self {
            Book::Shared(shared) => shared
                .update_task(id, caller, update)
                .await
                .map_err(|e| e.to_string()),
            Book::Local(store) => {
                let (id, caller, update) = (id.to_owned(), caller.to_owned(), update.clone());
                local(
                    store
                        .with(move |s| s.update_task(&id, &caller, &update))
                        .await,
                )
            }
        }
    }

    /// Records the task's run (the first one stays); the task's status.
    pub(super) async fn record_run(
        &self,
        id: &str,
        caller: &str,
        run: &str,
    ) -> Result<Option<String>, String> {
        match self {
            Book::Shared(shared) => shared
                .record_task_run(id, caller, run)
                .await
                .map_err(|e| e.to_string()),
            Book::Local(store) => {
                let (id, caller, run) = (id.to_owned(), caller.to_owned(), run.to_owned());
                local(
                    store
                        .with(move |s| s.record_task_run(&id, &caller, &run))
                        .await,
                )
            }
        }
    }

    pub(super) async fn page(
        &self,
        caller: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, TaskRecord)>, String> {
        match self {
            Book::Shared(shared) => shared
                .tasks_page(caller, before, limit)
                .await
                .map_err(|e| e.to_string()),
            Book::Local(store) => {
                let caller = caller.to_owned();
                local(
                    store
                        .with(move |s| s.tasks_page(&caller, before, limit))
                        .await,
                )
            }
        }
    }

    /// Whether this process may collect a `working` task nobody here runs: in one
    /// process always (it was left by an earlier one); among replicas only with the
    /// task's lease, which one replica at a time holds. A backend that does not answer
    /// is a no: better a task collected a little later than twice.
    pub(super) async fn claim(&self, id: &str) -> bool {
        match self {
            Book::Shared(shared) => shared.claim_task(id).await.unwrap_or(false),
            Book::Local(_) => true,
        }
    }

    /// Gives up this replica's lease (its local wait ended); another may take it at once.
    pub(super) async fn release(&self, id: &str) {
        if let Book::Shared(shared) = self
            && let Err(e) = shared.release_task(id).await
        {
            tracing::debug!("a task's lease was not released ({e}); it lapses by itself");
        }
    }
}

fn local<T>(result: Result<T, crate::store::StoreError>) -> Result<T, String> {
    result.map_err(|e| e.to_string())
}
