//! Schema migrations, versioned in code: `PRAGMA user_version` says which have run; each
//! runs once, in order, in its own transaction. Never edit a released migration: add one.

use rusqlite::Connection;

const MIGRATIONS: [&str; 8] = [
    // 1: snapshots; spaces, tabs and history for the terminal workspace.
    "CREATE TABLE snapshots (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         id TEXT NOT NULL UNIQUE,
         response_id TEXT NOT NULL,
         created_ms INTEGER NOT NULL,
         body TEXT NOT NULL);
     CREATE TABLE spaces (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         name TEXT NOT NULL UNIQUE,
         created_ms INTEGER NOT NULL);
     CREATE TABLE tabs (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         space_id INTEGER NOT NULL REFERENCES spaces(id) ON DELETE CASCADE,
         url TEXT NOT NULL,
         title TEXT NOT NULL,
         updated_ms INTEGER NOT NULL,
         seq INTEGER NOT NULL DEFAULT 0,
         UNIQUE (space_id, url));
     CREATE INDEX tabs_by_space ON tabs (space_id, seq);
     CREATE TABLE history (
         id INTEGER PRIMARY KEY AUTOINCREMENT,
         space_id INTEGER NOT NULL REFERENCES spaces(id) ON DELETE CASCADE,
         kind TEXT NOT NULL,
         text TEXT NOT NULL,
         created_ms INTEGER NOT NULL);
     CREATE INDEX history_by_space ON history (space_id, id);",
    // 2: one snapshot per response (the newest), found by its response id.
    "DELETE FROM snapshots WHERE seq NOT IN (SELECT MAX(seq) FROM snapshots GROUP BY response_id);
     CREATE UNIQUE INDEX snapshots_by_response ON snapshots (response_id);",
    // 3: downstream MCP servers of the gateway (definitions as JSON, secrets sealed).
    "CREATE TABLE gateway_servers (
         slug TEXT PRIMARY KEY,
         definition TEXT NOT NULL,
         updated_ms INTEGER NOT NULL);",
    // 4: MCP tasks: who asked, which run backs it, and its result once it has one.
    "CREATE TABLE tasks (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         id TEXT NOT NULL UNIQUE,
         caller TEXT NOT NULL,
         tool TEXT NOT NULL,
         run_id TEXT,
         status TEXT NOT NULL,
         status_message TEXT,
         result TEXT,
         created_ms INTEGER NOT NULL,
         updated_ms INTEGER NOT NULL,
         ttl_ms INTEGER NOT NULL);",
    // 5: which caller started each research run (named clients and token subjects), so
    // another caller's run id reads as one that never existed, across restarts.
    "CREATE TABLE run_owners (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         run_id TEXT NOT NULL UNIQUE,
         caller TEXT NOT NULL,
         created_ms INTEGER NOT NULL);",
    // 6: the spend ledger: one row per billable upstream request (a run's final state,
    // a search request), keyed by what makes a repeated report the same row.
    "CREATE TABLE ledger (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         request TEXT NOT NULL UNIQUE,
         at_ms INTEGER NOT NULL,
         caller TEXT NOT NULL,
         caller_name TEXT NOT NULL,
         front_end TEXT NOT NULL,
         tool TEXT NOT NULL,
         task_id TEXT,
         model TEXT,
         input_tokens INTEGER,
         output_tokens INTEGER,
         reasoning_tokens INTEGER,
         citation_tokens INTEGER,
         search_queries INTEGER,
         costs TEXT,
         total_micros INTEGER NOT NULL,
         currency TEXT NOT NULL,
         estimated INTEGER NOT NULL);
     CREATE INDEX ledger_by_time ON ledger (at_ms, total_micros);
     CREATE INDEX ledger_by_caller ON ledger (caller, at_ms, total_micros);",
    // 7: the research cache (answers by a hash of their scope, tool and arguments), and
    // the ledger's rows for calls it answered: cost 0, and what the run would have cost.
    "CREATE TABLE cache (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         key TEXT NOT NULL UNIQUE,
         body TEXT NOT NULL,
         bytes INTEGER NOT NULL,
         created_ms INTEGER NOT NULL,
         expires_ms INTEGER NOT NULL);
     ALTER TABLE ledger ADD COLUMN cache_hit INTEGER NOT NULL DEFAULT 0;
     ALTER TABLE ledger ADD COLUMN saved_micros INTEGER NOT NULL DEFAULT 0;",
    // 8: the other callers a research run was handed to (an identical call that joined
    // it in flight under the team's cache), beside the one in run_owners that started it.
    "CREATE TABLE run_sharers (
         seq INTEGER PRIMARY KEY AUTOINCREMENT,
         run_id TEXT NOT NULL,
         caller TEXT NOT NULL,
         created_ms INTEGER NOT NULL,
         UNIQUE (run_id, caller));",
];

/// Several processes may open one store at once (two MCP servers, the TUI): the version
/// is read inside an IMMEDIATE transaction (the write lock, waited for up to the busy
/// timeout), so exactly one of them runs each migration and the others see it done.
pub fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)?;
    let done: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(done.max(0) as usize) {
        tx.execute_batch(sql)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
    }
    tx.commit()
}

/// The schema version this build writes.
#[cfg(test)]
pub const VERSION: usize = MIGRATIONS.len();
