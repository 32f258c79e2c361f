//! Wake-ups across processes on one file: a short poll of `PRAGMA
//! data_version` on the writer connection.
//!
//! # What this module owns
//!
//! The watch a [`SqliteStore`](super::SqliteStore) starts for its first
//! wake-up subscriber, and the rule that turns another process's commit
//! into a wake-up of [`ANY_LANE`].
//!
//! # Why this mechanism
//!
//! SQLite changes a connection's `data_version` when *another* connection
//! commits to the file, never for the connection's own commits. Every write
//! of this store, and every caller's transaction taken from
//! [`SqliteStore::writer`](super::SqliteStore::writer), runs on the one
//! writer connection, so a change read there means exactly "another process
//! (or another store opened on the same file) committed". Reading it costs
//! no write, no lock and no I/O beyond the WAL index in shared memory, so
//! the watch can look every [`WATCH_INTERVAL_DEFAULT`]; a quiet file costs
//! nothing else. A commit that changed no page (an empty claim) leaves it
//! unchanged, so two idle workers on one file never wake each other.
//!
//! The alternatives it was chosen over: a socket beside the file needs
//! every writer (a CLI enqueue, a producer that never runs a worker) to
//! find and reach every listener, and leaves stale sockets behind a crash;
//! a file watch on the `-wal` file fires on this process's own writes too,
//! misses nothing only where the filesystem reports changes, and brings a
//! dependency. The counter needs neither a schema change nor a trigger on
//! the insert path.
//!
//! # What a wake-up says
//!
//! Only that something committed: the commit may have made work available
//! in any lane, or in the outbox, or in none (a heartbeat, a completion).
//! Listeners treat [`ANY_LANE`] as a wake-up of each lane they serve, so a
//! commit from elsewhere costs at most one claim per lane per watch
//! interval, and none while the file is quiet. The nonce is this process's
//! count, shared by its listeners; listeners in other processes draw their
//! own (`worker::spread` then designates at most one worker per process,
//! and the rest claim after the fallback).
//!
//! # Lifetime
//!
//! The watch task starts with the first [`Store::wakeups`](crate::Store::wakeups)
//! call (a worker or a relay; a producer never pays for it), reads its
//! baseline before that call returns (so no commit after the subscription is
//! missed), and ends when the last clone of the store is dropped or the
//! store is closed. It never waits for the writer: while the writer is busy
//! it skips a look, and the change is still there at the next one.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use sqlx::SqliteConnection;
use sqlx::sqlite::SqlitePool;
use tokio::task::AbortHandle;

use crate::wake::{ANY_LANE, WakeBus};
use drover_core::error::Result;

/// How often the watch looks for another process's commit, by default.
/// A pickup waits half of it on average; each look is one `PRAGMA` on the
/// idle writer.
pub const WATCH_INTERVAL_DEFAULT: Duration = Duration::from_millis(10);

/// The watch of one store (shared by its clones): started once, aborted
/// when the last clone drops.
#[derive(Debug)]
pub(super) struct Watch {
    every: Option<Duration>,
    task: Mutex<Option<AbortHandle>>,
}

impl Watch {
    /// A watch that looks every `every` once started; `None`: never (an
    /// in-memory database, which no other process can reach, or a store
    /// opened without it).
    pub(super) fn new(every: Option<Duration>) -> Self {
        Watch {
            every,
            task: Mutex::new(None),
        }
    }

    /// Starts the watch unless it runs (or is off): reads the baseline on
    /// the writer, then spawns the task that looks every interval.
    ///
    /// # Errors
    /// The writer cannot be reached for the baseline.
    pub(super) async fn start(&self, writer: &SqlitePool, bus: &WakeBus) -> Result<()> {
        let Some(every) = self.every else {
            return Ok(());
        };
        if self.running() {
            return Ok(());
        }
        let baseline = data_version(&mut *writer.acquire().await?).await?;
        let mut task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        // Two first subscribers may both have read a baseline: one task.
        if task.as_ref().is_none_or(AbortHandle::is_finished) {
            let looks = Looks::new(baseline);
            let handle = tokio::spawn(run(writer.clone(), bus.clone(), every, looks));
            *task = Some(handle.abort_handle());
        }
        Ok(())
    }

    fn running(&self) -> bool {
        let task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        task.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the task (the store is closing).
    pub(super) fn stop(&self) {
        let task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = task.as_ref() {
            t.abort();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last `data_version` read, and whether a new reading means another
/// connection committed.
#[derive(Debug)]
pub(super) struct Looks {
    last: i64,
}

impl Looks {
    /// From a first reading.
    pub(super) fn new(baseline: i64) -> Self {
        Looks { last: baseline }
    }

    /// Takes a reading: true when it differs from the last one (another
    /// connection committed since).
    pub(super) fn changed(&mut self, reading: i64) -> bool {
        std::mem::replace(&mut self.last, reading) != reading
    }
}

/// The writer connection's `data_version`.
pub(super) async fn data_version(conn: &mut SqliteConnection) -> Result<i64> {
    Ok(sqlx::query_scalar("PRAGMA data_version")
        .fetch_one(conn)
        .await?)
}

/// Looks every `every` until the writer pool closes: a changed
/// `data_version` sends one wake-up of [`ANY_LANE`].
async fn run(writer: SqlitePool, bus: WakeBus, every: Duration, mut looks: Looks) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        if writer.is_closed() {
            return;
        }
        // Never queue behind the store's writes: a busy writer means this
        // process is working, and the change waits for the next look.
        let Some(mut conn) = writer.try_acquire() else {
            continue;
        };
        match data_version(&mut conn).await {
            Ok(v) => {
                failing = false;
                if looks.changed(v) {
                    bus.counted(ANY_LANE);
                }
            }
            Err(e) => {
                // Once per outage: the poll still finds the work.
                if !failing {
                    tracing::warn!(target: "drover::sqlite", error = %e,
                        "cannot read data_version; wake-ups from other processes wait for the poll");
                }
                failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::{SqliteOptions, SqliteStore};
    use super::*;
    use crate::{ItemStore, Store};
    use drover_core::item::NewItem;

    async fn writer_version(s: &SqliteStore) -> i64 {
        data_version(&mut s.writer().acquire().await.unwrap())
            .await
            .unwrap()
    }

    /// The premise of the watch: the writer's own commits leave its
    /// `data_version` alone; another connection's commit changes it.
    #[tokio::test]
    async fn only_another_connections_commit_changes_the_writers_version() {
        let path = std::env::temp_dir().join(format!("drover-watch-{}.db", uuid::Uuid::new_v4()));
        let path = path.to_str().unwrap();
        let a = SqliteStore::open(path, SqliteOptions::default())
            .await
            .unwrap();
        a.migrate().await.unwrap();
        let b = SqliteStore::open(path, SqliteOptions::default())
            .await
            .unwrap();
        let v0 = writer_version(&a).await;
        a.item_insert(&NewItem::new("k", serde_json::json!({})))
            .await
            .unwrap();
        assert_eq!(writer_version(&a).await, v0, "its own commit");
        b.item_insert(&NewItem::new("k", serde_json::json!({})))
            .await
            .unwrap();
        assert_ne!(writer_version(&a).await, v0, "another connection's commit");
        a.close().await;
        b.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{suffix}"));
        }
    }

    /// A subscriber hears another connection's commit as a wake-up of every
    /// lane.
    #[tokio::test]
    async fn another_connections_commit_wakes_every_lane() {
        let path = std::env::temp_dir().join(format!("drover-watch-{}.db", uuid::Uuid::new_v4()));
        let path = path.to_str().unwrap();
        let a = SqliteStore::open(path, SqliteOptions::default())
            .await
            .unwrap();
        a.migrate().await.unwrap();
        let b = SqliteStore::open(path, SqliteOptions::default())
            .await
            .unwrap();
        let mut rx = a.wakeups().await.unwrap();
        b.item_insert(&NewItem::new("k", serde_json::json!({})))
            .await
            .unwrap();
        let w = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a wake-up within 10 s")
            .unwrap();
        assert!(w.is_any(), "{w:?}");
        assert!(w.nonce.is_some(), "counted, like the in-process ones");
        a.close().await;
        b.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{suffix}"));
        }
    }

    #[test]
    fn a_reading_wakes_only_when_it_differs_from_the_last() {
        let mut l = Looks::new(3);
        assert!(!l.changed(3));
        assert!(l.changed(4));
        assert!(!l.changed(4));
        assert!(l.changed(2), "any difference, not only a rise");
    }
}
