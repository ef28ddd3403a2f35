//! MCP task records, bound to their caller: the same operations under either engine, so
//! the task desk reads alike in one process and among replicas. Only the shared engine
//! leases tasks: in one process the desk's own table of live tasks says who runs what,
//! so locally every claim succeeds and there is nothing to renew or adopt.

use std::time::Duration;

use super::local::{TaskRecord, TaskUpdate};
use super::{Engine, State, StateError};
use crate::call::Caller;

impl State {
    /// A new task, leased to this replica when shared.
    pub async fn put_task(&self, record: &TaskRecord, caller: &Caller) -> Result<(), StateError> {
        let owned = record.clone();
        self.either(
            |shared| shared.put_task(record, caller.name(), caller.issuer(), caller.is_operator()),
            move |s| s.put_task(&owned),
        )
        .await
    }

    /// The caller's task; another caller's is [`StateError::NotFound`], as is none.
    pub async fn task(&self, id: &str, caller: &str) -> Result<TaskRecord, StateError> {
        let (task, key) = (id.to_owned(), caller.to_owned());
        self.either(
            |shared| shared.task(id, caller),
            move |s| s.task(&task, &key),
        )
        .await?
        .ok_or(StateError::NotFound)
    }

    /// Applies `update` unless the task has ended: [`StateError::Conflict`] then, as for
    /// a task that is not the caller's.
    pub async fn update_task(
        &self,
        id: &str,
        caller: &str,
        update: &TaskUpdate,
    ) -> Result<(), StateError> {
        let (task, key, change) = (id.to_owned(), caller.to_owned(), update.clone());
        let changed = self
            .either(
                |shared| shared.update_task(id, caller, update),
                move |s| s.update_task(&task, &key, &change),
            )
            .await?;
        changed.then_some(()).ok_or(StateError::Conflict)
    }

    /// Records the task's run (the first one stays); the task's status.
    pub async fn record_task_run(
        &self,
        id: &str,
        caller: &str,
        run: &str,
    ) -> Result<String, StateError> {
        let (task, key, run_id) = (id.to_owned(), caller.to_owned(), run.to_owned());
        self.either(
            |shared| shared.record_task_run(id, caller, run),
            move |s| s.record_task_run(&task, &key, &run_id),
        )
        .await?
        .ok_or(StateError::NotFound)
    }

    /// A page of the caller's tasks, newest first, each with its position; `before`
    /// continues from a position.
    pub async fn tasks_page(
        &self,
        caller: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, TaskRecord)>, StateError> {
        let key = caller.to_owned();
        self.either(
            |shared| shared.tasks_page(caller, before, limit),
            move |s| s.tasks_page(&key, before, limit),
        )
        .await
    }

    /// Whether this process may collect a `working` task nobody here runs: in one process
    /// always (an earlier one left it); among replicas only with the task's lease, which
    /// one replica at a time holds ([`StateError::Conflict`] otherwise). A backend that
    /// does not answer is a no too: better a task collected a little later than twice.
    pub async fn claim_task(&self, id: &str) -> Result<(), StateError> {
        let claimed = match &self.engine {
            Engine::Shared(shared) => shared.claim_task(id).await?,
            Engine::Local(_) => true,
        };
        claimed.then_some(()).ok_or(StateError::Conflict)
    }

    /// Gives up this replica's lease (its local wait ended); another may take it at once.
    pub async fn release_task(&self, id: &str) -> Result<(), StateError> {
        match &self.engine {
            Engine::Shared(shared) => Ok(shared.release_task(id).await?),
            Engine::Local(_) => Ok(()),
        }
    }

    /// How long a task's lease lasts unless renewed; `None`: tasks are not leased (one
    /// process), so there is nothing to renew, adopt or hear of.
    pub fn lease(&self) -> Option<Duration> {
        match &self.engine {
            Engine::Shared(shared) => Some(shared.lease()),
            Engine::Local(_) => None,
        }
    }

    /// Calls `woken` whenever a task ends on any replica (locally the desk sees its own).
    pub fn on_task_end(&self, woken: impl Fn() + Send + 'static) {
        if let Engine::Shared(shared) = &self.engine {
            shared.on_task_end(woken);
        }
    }

    /// Renews this replica's leases on `ids`; for each, whether it is still ours.
    pub async fn renew_tasks(&self, ids: &[String]) -> Result<Vec<bool>, StateError> {
        match &self.engine {
            Engine::Shared(shared) => Ok(shared.renew_tasks(ids).await?),
            Engine::Local(_) => Ok(vec![true; ids.len()]),
        }
    }

    /// The tasks of replicas that stopped renewing their leases, now leased to this one,
    /// each with the caller it is bound to.
    pub async fn adopt_orphans(&self) -> Result<Vec<(TaskRecord, Caller)>, StateError> {
        let Engine::Shared(shared) = &self.engine else {
            return Ok(Vec::new());
        };
        let orphans = shared.adopt_orphans().await?;
        Ok(orphans
            .into_iter()
            .map(|o| {
                let caller =
                    Caller::restored(o.record.caller.clone(), o.name, o.issuer, o.operator);
                (o.record, caller)
            })
            .collect())
    }
}
