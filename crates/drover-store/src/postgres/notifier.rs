//! Wake-ups sent after the commit (migration 0053).
//!
//! A transaction that `NOTIFY`s holds PostgreSQL's notify lock from its
//! commit's start to its end, WAL flush included, so enqueues that each
//! sent their wake-up from their own transaction committed one flush after
//! another. The store's own insert transactions set
//! [`WAKE_AFTER_COMMIT`], under which the `items` trigger sends nothing;
//! after the commit the lane is handed here, and one task per store sends
//! a `NOTIFY` per lane for every enqueue that committed meanwhile
//! (`wake_after_commit.sql`: its own transaction, not waiting for its
//! flush).
//!
//! Invariants: a lane handed here is sent at least once after it was
//! handed (the pending set is taken whole, after the task is signalled);
//! the pending set holds each lane once, so a database that does not
//! answer costs memory for the lanes, not for the enqueues; a send that
//! fails is logged and dropped (listeners in other processes poll, and
//! this process's workers were woken in process at the commit). The task
//! ends with the store.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::PgStore;

/// What the store's own insert transactions set (in their `BEGIN`'s round
/// trip) so the `items` trigger leaves the wake-up to the notifier.
pub(super) const WAKE_AFTER_COMMIT: &str = "SET LOCAL drover.wake_after_commit = 'on';";

const NOTIFY_LANES: &str = include_str!("../../sql/postgres/wake_after_commit.sql");

/// The lanes waiting for their wake-up, and the signal that there are some.
#[derive(Debug, Default)]
pub(super) struct Pending {
    lanes: Mutex<BTreeSet<String>>,
    ready: Notify,
    started: std::sync::OnceLock<()>,
}

impl PgStore {
    /// After an insert transaction that set [`WAKE_AFTER_COMMIT`]
    /// committed: wakes this process's workers for `lane` at once and has
    /// the notifier tell the other processes.
    pub(super) fn wake_after_commit(&self, lane: &str) {
        self.wake_local(lane);
        let pending = &self.notify_pending;
        pending
            .started
            .get_or_init(|| spawn(self, Arc::clone(pending)));
        pending
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(lane.to_owned());
        pending.ready.notify_one();
    }
}

/// Starts the notifier task of `store` (on its first wake-up: a store is
/// made outside the runtime as often as in it).
fn spawn(store: &PgStore, pending: Arc<Pending>) {
    let pool = store.pool.clone();
    let schema = store.schema.clone();
    let persistent = store.persistent;
    let shutdown = store.shutdown.clone();
    tokio::spawn(run(pool, schema, persistent, pending, shutdown));
}

async fn run(
    pool: PgPool,
    schema: String,
    persistent: bool,
    pending: Arc<Pending>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = pending.ready.notified() => {}
        }
        let lanes: Vec<String> =
            std::mem::take(&mut *pending.lanes.lock().unwrap_or_else(PoisonError::into_inner))
                .into_iter()
                .collect();
        if lanes.is_empty() {
            continue;
        }
        let sent = sqlx::query(NOTIFY_LANES)
            .persistent(persistent)
            .bind(&schema)
            .bind(&lanes)
            .execute(&pool)
            .await;
        if let Err(e) = sent {
            tracing::debug!(target: "drover::postgres", error = %e, lanes = lanes.len(),
                "wake-up after commit not sent: other processes' workers find the items at their poll");
        }
    }
}
