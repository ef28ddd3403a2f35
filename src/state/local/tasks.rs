//! MCP task records: one row per task, bound to the caller that created it. A task's id
//! is the capability to read it, so it is 128 random bits, every read names the caller
//! too (another caller's id reads as unknown), and tasks are never listed across callers.
//! Retention is enforced in the same transaction as every insert: expired tasks go, and
//! at most [`MAX_TASKS`] are kept (oldest first out).

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, now_ms};

/// Tasks kept at most, whatever their ttl.
pub const MAX_TASKS: i64 = 10_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    pub id: String,
    pub caller: String,
    pub tool: String,
    /// The upstream run behind it, once known.
    pub run_id: Option<String>,
    /// `working`, `completed`, `failed` or `cancelled`.
    pub status: String,
    pub status_message: Option<String>,
    /// The final `CallToolResult` (completed) or JSON-RPC error (failed), as JSON text.
    pub result: Option<String>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub ttl_ms: i64,
}

impl TaskRecord {
    pub fn expired(&self, now_ms: i64) -> bool {
        self.created_ms.saturating_add(self.ttl_ms) <= now_ms
    }
}

/// A change to a task; fields left `None` keep their value.
#[derive(Debug, Default, Clone)]
pub struct TaskUpdate {
    pub run_id: Option<String>,
    pub status: Option<String>,
    pub status_message: Option<String>,
    pub result: Option<String>,
}

impl Store {
    pub fn put_task(&self, task: &TaskRecord) -> Result<(), StoreError> {
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                "DELETE FROM tasks WHERE created_ms + ttl_ms <= ?1",
                params![now_ms()],
            )?;
            tx.execute(
                "INSERT INTO tasks (id, caller, tool, run_id, status, status_message, result,
                                    created_ms, updated_ms, ttl_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    task.id,
                    task.caller,
                    task.tool,
                    task.run_id,
                    task.status,
                    task.status_message,
                    task.result,
                    task.created_ms,
                    task.updated_ms,
                    task.ttl_ms
                ],
            )?;
            tx.execute(
                "DELETE FROM tasks WHERE seq NOT IN (SELECT seq FROM tasks ORDER BY seq DESC LIMIT ?1)",
                params![MAX_TASKS],
            )?;
            tx.commit()
        })
    }

    /// The caller's task with this id; another caller's reads as none.
    pub fn task(&self, id: &str, caller: &str) -> Result<Option<TaskRecord>, StoreError> {
        self.with(|conn| {
            conn.query_row(
                &format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1 AND caller = ?2"),
                params![id, caller],
                record,
            )
            .optional()
        })
    }

    /// Applies `update` to the caller's task unless it is already terminal (a finished
    /// task never changes again: a late result cannot undo a cancellation). Returns
    /// whether a row changed.
    pub fn update_task(
        &self,
        id: &str,
        caller: &str,
        update: &TaskUpdate,
    ) -> Result<bool, StoreError> {
        self.with(|conn| {
            let changed = conn.execute(
                "UPDATE tasks SET run_id = COALESCE(?3, run_id), status = COALESCE(?4, status),
                        status_message = COALESCE(?5, status_message),
                        result = COALESCE(?6, result), updated_ms = ?7
                 WHERE id = ?1 AND caller = ?2 AND status = 'working'",
                params![
                    id,
                    caller,
                    update.run_id,
                    update.status,
                    update.status_message,
                    update.result,
                    now_ms()
                ],
            )?;
            Ok(changed > 0)
        })
    }

    /// Records the run behind the caller's task once it is known, whatever the task's
    /// state (a task cancelled while its create was on the wire still needs its run, to
    /// stop it). Returns the task's status, `None` if there is no such task.
    pub fn record_task_run(
        &self,
        id: &str,
        caller: &str,
        run_id: &str,
    ) -> Result<Option<String>, StoreError> {
        self.with(|conn| {
            conn.execute(
                "UPDATE tasks SET run_id = ?3, updated_ms = ?4
                 WHERE id = ?1 AND caller = ?2 AND run_id IS NULL",
                params![id, caller, run_id, now_ms()],
            )?;
            conn.query_row(
                "SELECT status FROM tasks WHERE id = ?1 AND caller = ?2",
                params![id, caller],
                |r| r.get(0),
            )
            .optional()
        })
    }

    /// The caller's tasks, newest first, at most `limit` (`perplexity-agent tasks`).
    pub fn tasks_of(&self, caller: &str, limit: usize) -> Result<Vec<TaskRecord>, StoreError> {
        Ok(self
            .tasks_page(caller, None, limit)?
            .into_iter()
            .map(|(_, record)| record)
            .collect())
    }

    /// A page of the caller's tasks, newest first, each with its position: those older
    /// than `before` (a position an earlier page ended on), at most `limit`. Positions
    /// only fall from page to page, so paging always ends, whatever position it is given.
    pub fn tasks_page(
        &self,
        caller: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, TaskRecord)>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare(&format!(
                "SELECT seq, {COLUMNS} FROM tasks WHERE caller = ?1 AND created_ms + ttl_ms > ?2
                 AND seq < ?3 ORDER BY seq DESC LIMIT ?4"
            ))?;
            let before = before.unwrap_or(i64::MAX);
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(params![caller, now_ms(), before, limit], |r| {
                Ok((r.get(0)?, record_at(r, 1)?))
            })?;
            rows.collect()
        })
    }
}

/// What a task read selects, in [`record`]'s order.
const COLUMNS: &str =
    "id, caller, tool, run_id, status, status_message, result, created_ms, updated_ms, ttl_ms";

/// A row selected as [`COLUMNS`].
fn record(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRecord> {
    record_at(r, 0)
}

/// [`COLUMNS`] starting at column `at`.
fn record_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<TaskRecord> {
    Ok(TaskRecord {
        id: r.get(at)?,
        caller: r.get(at + 1)?,
        tool: r.get(at + 2)?,
        run_id: r.get(at + 3)?,
        status: r.get(at + 4)?,
        status_message: r.get(at + 5)?,
        result: r.get(at + 6)?,
        created_ms: r.get(at + 7)?,
        updated_ms: r.get(at + 8)?,
        ttl_ms: r.get(at + 9)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, caller: &str) -> TaskRecord {
        TaskRecord {
            id: id.to_owned(),
            caller: caller.to_owned(),
            tool: "perplexity_agent".to_owned(),
            run_id: None,
            status: "working".to_owned(),
            status_message: None,
            result: None,
            created_ms: now_ms(),
            updated_ms: now_ms(),
            ttl_ms: 60_000,
        }
    }

    #[test]
    fn a_task_is_read_only_by_its_caller_and_never_changes_once_terminal() {
        let dir = super::super::tests::TempDir::new("tasks");
        let store = Store::open(dir.config(10)).unwrap();
        store.put_task(&record("task_a", "alice")).unwrap();
        assert!(store.task("task_a", "bob").unwrap().is_none());
        let done = TaskUpdate {
            status: Some("completed".into()),
            result: Some("{}".into()),
            run_id: Some("resp_1".into()),
            ..TaskUpdate::default()
        };
        assert!(!store.update_task("task_a", "bob", &done).unwrap());
        assert!(store.update_task("task_a", "alice", &done).unwrap());
        let late = TaskUpdate {
            status: Some("cancelled".into()),
            ..TaskUpdate::default()
        };
        assert!(!store.update_task("task_a", "alice", &late).unwrap());
        let read = store.task("task_a", "alice").unwrap().unwrap();
        assert_eq!(read.status, "completed");
        assert_eq!(read.run_id.as_deref(), Some("resp_1"));
        assert_eq!(store.tasks_of("alice", 10).unwrap().len(), 1);
        let (position, _) = store.tasks_page("alice", None, 1).unwrap()[0].clone();
        assert!(
            store
                .tasks_page("alice", Some(position), 10)
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .tasks_page("alice", Some(i64::MIN), 10)
                .unwrap()
                .is_empty()
        );
        assert!(store.tasks_of("bob", 10).unwrap().is_empty());
    }

    #[test]
    fn a_run_id_is_recorded_even_on_a_terminal_task_and_only_once() {
        let dir = super::super::tests::TempDir::new("tasks");
        let store = Store::open(dir.config(10)).unwrap();
        store.put_task(&record("task_c", "alice")).unwrap();
        let cancel = TaskUpdate {
            status: Some("cancelled".into()),
            ..TaskUpdate::default()
        };
        assert!(store.update_task("task_c", "alice", &cancel).unwrap());
        assert_eq!(
            store.record_task_run("task_c", "bob", "resp_x").unwrap(),
            None,
            "another caller's task does not exist"
        );
        assert_eq!(
            store
                .record_task_run("task_c", "alice", "resp_1")
                .unwrap()
                .as_deref(),
            Some("cancelled")
        );
        store.record_task_run("task_c", "alice", "resp_2").unwrap();
        let read = store.task("task_c", "alice").unwrap().unwrap();
        assert_eq!(
            read.run_id.as_deref(),
            Some("resp_1"),
            "the first run stays"
        );
    }

    #[test]
    fn expired_tasks_are_dropped_on_the_next_insert() {
        let dir = super::super::tests::TempDir::new("tasks");
        let store = Store::open(dir.config(10)).unwrap();
        let mut old = record("task_old", "alice");
        old.created_ms -= 120_000;
        store.put_task(&old).unwrap();
        assert!(
            store
                .task("task_old", "alice")
                .unwrap()
                .unwrap()
                .expired(now_ms())
        );
        store.put_task(&record("task_new", "alice")).unwrap();
        assert!(store.task("task_old", "alice").unwrap().is_none());
    }
}
