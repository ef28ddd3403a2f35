//! The local store: one SQLite file (WAL) holding response snapshots and, for the
//! terminal workspace, spaces, tabs and history.
//!
//! - The directory is created 0700 and the file 0600 before SQLite opens it: snapshots
//!   hold research answers, which are the user's data. A symlink in the file's place is
//!   refused (it could point the store at another file).
//! - Snapshot ids are 128 random bits: the id is the capability to read a snapshot, so
//!   snapshots are never listed over MCP.
//! - Retention is enforced in the same transaction as every write, so the database never
//!   holds more than the configured number of snapshots (or tabs per space).
//! - A corrupt, locked or unwritable database is an error for the call that needs the
//!   store — never a crash, and tools that do not need the store keep working.
//!
//! Touches: the store file only. No network.

mod budgets;
mod cache;
mod gateway;
mod handle;
mod ledger;
mod schema;
mod tasks;

pub use budgets::Budgets;
pub use gateway::Saved;
pub use handle::StoreHandle;
pub use ledger::{LedgerRow, Tokens};
pub use tasks::{MAX_TASKS, TaskRecord, TaskUpdate};

/// Run bindings kept: a run older than the newest 100,000 is long expired upstream.
pub const MAX_RUN_OWNERS: i64 = 100_000;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension, params};
use serde_json::Value;

use crate::clock::now_ms;
use crate::random::secure_hex;

/// Where and how much to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// `PERPLEXITY_STORE_PATH`.
    pub path: PathBuf,
    /// Snapshots kept (newest first); older ones are deleted on write.
    pub snapshot_retention: usize,
    /// `PERPLEXITY_MAX_TABS_PER_SPACE`.
    pub max_tabs_per_space: usize,
    /// `PERPLEXITY_MAX_HISTORY_PER_SPACE`; `None` keeps everything.
    pub max_history_per_space: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The file or its directory cannot be created or opened.
    Open { path: PathBuf, reason: String },
    /// Not a database, or a damaged one.
    Corrupt { path: PathBuf },
    /// Another process holds the database longer than our busy timeout.
    Locked { path: PathBuf },
    /// Neither `PERPLEXITY_STORE_PATH` nor a home directory says where it goes.
    NotConfigured,
    /// Anything else SQLite reported (kind only).
    Sqlite { path: PathBuf, code: String },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Open { path, reason } => write!(
                f,
                "the local store {} cannot be opened ({reason}); set PERPLEXITY_STORE_PATH to a writable location",
                path.display()
            ),
            StoreError::Corrupt { path } => write!(
                f,
                "the local store {} is damaged or not a database; move it aside (a new one is created on the next start)",
                path.display()
            ),
            StoreError::Locked { path } => write!(
                f,
                "the local store {} is locked by another process; try again in a moment",
                path.display()
            ),
            StoreError::NotConfigured => f.write_str(
                "no location for the local store is known; set PERPLEXITY_STORE_PATH (or HOME)",
            ),
            StoreError::Sqlite { path, code } => {
                write!(f, "the local store {} failed ({code})", path.display())
            }
        }
    }
}

impl std::error::Error for StoreError {}

/// A stored response.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub id: String,
    pub response_id: String,
    pub created_ms: i64,
    pub body: Value,
}

/// A page open in a space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tab {
    pub url: String,
    pub title: String,
    pub updated_ms: i64,
}

pub struct Store {
    conn: Mutex<Connection>,
    config: StoreConfig,
}

/// How long a write waits for another writer before reporting the store locked.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl Store {
    pub fn open(config: StoreConfig) -> Result<Store, StoreError> {
        let path = config.path.clone();
        prepare_file(&path)?;
        let conn = Connection::open(&path).map_err(|e| classify(&path, &e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| classify(&path, &e))?;
        // Several processes may open one new store at once (two servers, the TUI). Turning
        // on WAL needs an exclusive lock, and SQLite answers BUSY at once — without its
        // busy handler — when another connection is mid-setup; so setup is retried within
        // the busy timeout rather than reported as a locked store.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match set_up(&conn).map_err(|e| classify(&path, &e)) {
                Ok(()) => break,
                Err(StoreError::Locked { .. }) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(Store {
            conn: Mutex::new(conn),
            config,
        })
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        // A panic while holding the lock leaves SQLite consistent (transactions roll back).
        let mut conn = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut conn).map_err(|e| classify(&self.config.path, &e))
    }

    /// Binds a run to the caller that started it (the first binding stands: a run has
    /// one owner), keeping the newest [`MAX_RUN_OWNERS`].
    pub fn bind_run(&self, run_id: &str, caller: &str) -> Result<(), StoreError> {
        self.add_run_caller("run_owners", run_id, caller)
    }

    /// Hands a run to one more caller, beside the one bound to it, keeping the newest
    /// [`MAX_RUN_OWNERS`] of these too.
    pub fn share_run(&self, run_id: &str, caller: &str) -> Result<(), StoreError> {
        self.add_run_caller("run_sharers", run_id, caller)
    }

    /// Adds a run's caller to `table` (`run_owners` or `run_sharers`, alike in shape)
    /// unless it is there, and drops the oldest beyond [`MAX_RUN_OWNERS`] in one step.
    fn add_run_caller(&self, table: &str, run_id: &str, caller: &str) -> Result<(), StoreError> {
        let add = format!(
            "INSERT OR IGNORE INTO {table} (run_id, caller, created_ms) VALUES (?1, ?2, ?3)"
        );
        let trim = format!("DELETE FROM {table} WHERE seq <= (SELECT MAX(seq) FROM {table}) - ?1");
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(&add, params![run_id, caller, now_ms()])?;
            tx.execute(&trim, params![MAX_RUN_OWNERS])?;
            tx.commit()
        })
    }

    /// The caller a run is bound to, if any.
    pub fn run_owner(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT caller FROM run_owners WHERE run_id = ?1",
                params![run_id],
                |r| r.get(0),
            )
            .optional()
        })
    }

    /// Whether a run was handed to `caller` (not whether it is bound to it).
    pub fn run_shared_with(&self, run_id: &str, caller: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM run_sharers WHERE run_id = ?1 AND caller = ?2)",
                params![run_id, caller],
                |r| r.get(0),
            )
        })
    }

    /// Stores a response, replacing an earlier snapshot of the same response; returns
    /// the new snapshot's id. Older snapshots beyond the retention are deleted in the
    /// same transaction.
    pub fn put_snapshot(&self, response_id: &str, body: &Value) -> Result<String, StoreError> {
        let id = format!("snap_{}", secure_hex::<16>());
        let text = body.to_string();
        let keep = self.config.snapshot_retention as i64;
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                "DELETE FROM snapshots WHERE response_id = ?1",
                params![response_id],
            )?;
            tx.execute(
                "INSERT INTO snapshots (id, response_id, created_ms, body) VALUES (?1, ?2, ?3, ?4)",
                params![id, response_id, now_ms(), text],
            )?;
            tx.execute(
                "DELETE FROM snapshots WHERE seq NOT IN (SELECT seq FROM snapshots ORDER BY seq DESC LIMIT ?1)",
                params![keep],
            )?;
            tx.commit()
        })?;
        Ok(id)
    }

    pub fn snapshot(&self, id: &str) -> Result<Option<Snapshot>, StoreError> {
        self.snapshot_where("id", id)
    }

    /// The snapshot of a response, by its response id.
    pub fn snapshot_of_response(&self, response_id: &str) -> Result<Option<Snapshot>, StoreError> {
        self.snapshot_where("response_id", response_id)
    }

    /// `column` is one of two fixed names, never caller input.
    fn snapshot_where(
        &self,
        column: &'static str,
        value: &str,
    ) -> Result<Option<Snapshot>, StoreError> {
        let sql =
            format!("SELECT id, response_id, created_ms, body FROM snapshots WHERE {column} = ?1");
        self.with(|conn| {
            conn.query_row(&sql, params![value], |row| {
                let body: String = row.get(3)?;
                Ok(Snapshot {
                    id: row.get(0)?,
                    response_id: row.get(1)?,
                    created_ms: row.get(2)?,
                    body: serde_json::from_str(&body).unwrap_or(Value::Null),
                })
            })
            .optional()
        })
    }

    pub fn snapshot_count(&self) -> Result<usize, StoreError> {
        self.with(|conn| {
            conn.query_row("SELECT COUNT(*) FROM snapshots", [], |r| r.get::<_, i64>(0))
        })
        .map(|n| n as usize)
    }

    /// Creates the space if needed; returns its id.
    pub fn space(&self, name: &str) -> Result<i64, StoreError> {
        self.with(|conn| {
            conn.execute(
                "INSERT INTO spaces (name, created_ms) VALUES (?1, ?2) ON CONFLICT(name) DO NOTHING",
                params![name, now_ms()],
            )?;
            conn.query_row("SELECT id FROM spaces WHERE name = ?1", params![name], |r| r.get(0))
        })
    }

    pub fn spaces(&self) -> Result<Vec<String>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare("SELECT name FROM spaces ORDER BY created_ms, id")?;
            stmt.query_map([], |r| r.get(0))?.collect()
        })
    }

    /// Opens (or refreshes) a tab: one per space and URL; the least recently updated
    /// tabs beyond the per-space limit are closed.
    pub fn open_tab(&self, space: i64, url: &str, title: &str) -> Result<(), StoreError> {
        let keep = self.config.max_tabs_per_space as i64;
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT INTO tabs (space_id, url, title, updated_ms, seq)
                 VALUES (?1, ?2, ?3, ?4, (SELECT COALESCE(MAX(seq), 0) + 1 FROM tabs))
                 ON CONFLICT(space_id, url) DO UPDATE SET title = excluded.title,
                     updated_ms = excluded.updated_ms, seq = excluded.seq",
                params![space, url, title, now_ms()],
            )?;
            tx.execute(
                "DELETE FROM tabs WHERE space_id = ?1 AND id NOT IN
                 (SELECT id FROM tabs WHERE space_id = ?1 ORDER BY seq DESC LIMIT ?2)",
                params![space, keep],
            )?;
            tx.commit()
        })
    }

    pub fn tabs(&self, space: i64) -> Result<Vec<Tab>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare(
                "SELECT url, title, updated_ms FROM tabs WHERE space_id = ?1 ORDER BY seq DESC",
            )?;
            stmt.query_map(params![space], |r| {
                Ok(Tab {
                    url: r.get(0)?,
                    title: r.get(1)?,
                    updated_ms: r.get(2)?,
                })
            })?
            .collect()
        })
    }

    pub fn close_tab(&self, space: i64, url: &str) -> Result<bool, StoreError> {
        self.with(|conn| {
            conn.execute(
                "DELETE FROM tabs WHERE space_id = ?1 AND url = ?2",
                params![space, url],
            )
            .map(|n| n > 0)
        })
    }

    /// Appends to a space's history (`kind`: question, answer, search, fetch, …).
    pub fn record(&self, space: i64, kind: &str, text: &str) -> Result<(), StoreError> {
        let keep = self.config.max_history_per_space.map(|n| n as i64);
        self.with(|conn| {
            let tx = conn.transaction()?;
            tx.execute(
                "INSERT INTO history (space_id, kind, text, created_ms) VALUES (?1, ?2, ?3, ?4)",
                params![space, kind, text, now_ms()],
            )?;
            if let Some(keep) = keep {
                tx.execute(
                    "DELETE FROM history WHERE space_id = ?1 AND id NOT IN
                     (SELECT id FROM history WHERE space_id = ?1 ORDER BY id DESC LIMIT ?2)",
                    params![space, keep],
                )?;
            }
            tx.commit()
        })
    }

    /// The newest `limit` history entries of a space, newest first.
    pub fn history(&self, space: i64, limit: usize) -> Result<Vec<(String, String)>, StoreError> {
        self.with(|conn| {
            let mut stmt = conn.prepare(
                "SELECT kind, text FROM history WHERE space_id = ?1 ORDER BY id DESC LIMIT ?2",
            )?;
            stmt.query_map(params![space, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect()
        })
    }
}

/// WAL (readers never block the writer) with NORMAL sync (durable across crashes of this
/// process; the OS may lose the last commit on power loss, acceptable here), then the
/// schema migrations.
fn set_up(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
    )?;
    schema::migrate(conn)
}

/// The directory 0700 and the file 0600, both created by us, never through a symlink;
/// an existing file another user could have changed (`files::trusted`) is refused, as are
/// its WAL and shared-memory files: the store holds sealed secrets and the spending
/// ledger, and SQLite reads a WAL's pages as the database's own.
fn prepare_file(path: &Path) -> Result<(), StoreError> {
    let fail = |reason: String| StoreError::Open {
        path: path.to_owned(),
        reason,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::files::private_dir(dir)
            .map_err(|e| fail(format!("creating its directory: {}", e.kind())))?;
    }
    if crate::files::is_link(path) {
        return Err(fail("it is a symbolic link".to_owned()));
    }
    let file = crate::files::open_private_append(path).map_err(|e| fail(e.kind().to_string()))?;
    let meta = file.metadata().map_err(|e| fail(e.kind().to_string()))?;
    crate::files::trusted(path, &meta, "it").map_err(fail)?;
    for (suffix, name) in [("-wal", "write-ahead log"), ("-shm", "shared-memory file")] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        let side = PathBuf::from(side);
        match std::fs::metadata(&side) {
            Ok(meta) => {
                let what = format!("its {name} {}", side.display());
                crate::files::trusted(&side, &meta, &what).map_err(fail)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(format!("{}: {}", side.display(), e.kind()))),
        }
    }
    Ok(())
}

fn classify(path: &Path, error: &rusqlite::Error) -> StoreError {
    let path = path.to_owned();
    match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt { path },
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked { path },
        Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly | ErrorCode::PermissionDenied) => {
            StoreError::Open {
                path,
                reason: "not writable".to_owned(),
            }
        }
        Some(code) => StoreError::Sqlite {
            path,
            code: format!("{code:?}"),
        },
        None => StoreError::Sqlite {
            path,
            code: "unexpected".to_owned(),
        },
    }
}

#[cfg(test)]
mod tests;
