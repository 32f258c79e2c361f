//! The WAL's checkpoints, taken off the writer.
//!
//! # What this module owns
//!
//! The task a file-backed [`SqliteStore`](super::SqliteStore) runs to copy
//! the WAL back into the database file, and the writer's own threshold
//! ([`WRITER_AUTOCHECKPOINT`]), kept only as a safety net.
//!
//! # Why
//!
//! By default SQLite checkpoints in the commit that grows the WAL past
//! 1,000 pages: that commit copies the pages and syncs the file before it
//! returns, several milliseconds on the single writer, so every thousandth
//! page or so a claim, a completion or an enqueue (and every write queued
//! behind it) waited for it. A `PASSIVE` checkpoint on a reader connection
//! does the same copy beside the writer: WAL mode lets the writer go on
//! appending while it runs, and it never waits for a reader or the writer
//! (what it cannot copy yet it leaves for the next). The WAL restarts from
//! its beginning once a checkpoint has copied all of it and no reader
//! still reads it, as before.
//!
//! # Invariants
//!
//! - Durability is unchanged: `synchronous` decides what a commit syncs,
//!   and a checkpoint syncs the WAL before it copies, whoever runs it.
//! - The WAL stays bounded without the task: the writer still checkpoints
//!   past [`WRITER_AUTOCHECKPOINT`] pages (a stalled task, or a process
//!   that never runs one, costs the old stall, ten times less often).
//! - The task ends when the last clone of its store is dropped or the
//!   store is closed.
//! - The task has a connection of its own, never one of the readers'. A
//!   connection keeps the schema it last read until a statement finds it
//!   stale, and sqlx-sqlite sizes a row by the column count it saw when it
//!   prepared the statement: a reader that had looked at the file before
//!   [`migrate`](super::SqliteStore::migrate) added a column would
//!   prepare `SELECT * FROM items` with the old count and panic reading
//!   the row SQLite re-prepared with the new one. A task started at open,
//!   before the migration, would otherwise leave exactly such a reader in
//!   the pool.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use tokio::task::AbortHandle;

/// How often the task checkpoints. A look at a WAL with nothing new to
/// copy costs one `PRAGMA` on an idle reader.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// The writer's own checkpoint threshold in pages (SQLite's
/// `wal_autocheckpoint`; its default is 1,000): only reached when the task
/// falls behind.
pub const WRITER_AUTOCHECKPOINT: u32 = 10_000;

/// The checkpoint task of one store (shared by its clones): aborted when
/// the last clone drops.
#[derive(Debug, Default)]
pub(super) struct Checkpointer {
    task: Mutex<Option<AbortHandle>>,
}

impl Checkpointer {
    /// Starts checkpointing every [`CHECKPOINT_EVERY`] through a
    /// connection of its own opened with `opts` (a reader's options).
    pub(super) fn start(opts: SqliteConnectOptions) -> Self {
        let handle = tokio::spawn(run(opts));
        Checkpointer {
            task: Mutex::new(Some(handle.abort_handle())),
        }
    }

    /// Stops the task (the store is closing).
    pub(super) fn stop(&self) {
        let task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = task.as_ref() {
            t.abort();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn run(opts: SqliteConnectOptions) {
    let mut every = tokio::time::interval(CHECKPOINT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut conn: Option<SqliteConnection> = None;
    loop {
        every.tick().await;
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match SqliteConnection::connect_with(&opts).await {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    tracing::debug!(target: "drover::sqlite", error = %e, "checkpoint connection failed; the next tick tries again");
                    continue;
                }
            },
        };
        // PASSIVE: copies what no reader still needs, waits for nobody.
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&mut *c)
            .await
        {
            tracing::debug!(target: "drover::sqlite", error = %e, "checkpoint failed; the next one tries again");
            // A fresh connection next time, in case this one is broken.
            conn = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};

    use super::*;

    fn db_len(path: &std::path::Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    #[tokio::test]
    async fn the_task_copies_the_wal_into_the_file_while_the_writer_does_not() {
        let path = std::env::temp_dir().join(format!("drover-ckpt-{}.db", uuid::Uuid::new_v4()));
        let base = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .expect("url")
            .create_if_missing(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                base.clone()
                    .journal_mode(SqliteJournalMode::Wal)
                    .pragma("wal_autocheckpoint", WRITER_AUTOCHECKPOINT.to_string()),
            )
            .await
            .expect("writer");
        sqlx::query("CREATE TABLE t (b BLOB)")
            .execute(&writer)
            .await
            .expect("create");
        // About 2,000 pages: past SQLite's default threshold (1,000),
        // under the writer's.
        for _ in 0..8 {
            sqlx::query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO t SELECT randomblob(1000) FROM n")
                .execute(&writer)
                .await
                .expect("insert");
        }
        let before = db_len(&path);
        assert!(
            before < 1_000_000,
            "the writer checkpointed on its own: file {before} bytes"
        );
        let task = Checkpointer::start(base.pragma("query_only", "ON"));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while db_len(&path) < 8_000_000 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the task left the file at {} bytes",
                db_len(&path)
            );
            tokio::time::sleep(CHECKPOINT_EVERY / 4).await;
        }
        task.stop();
        writer.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
