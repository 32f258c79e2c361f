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
//! The wake-up's nonce (which worker of a lane claims at once,
//! docs/design.md) is this store's: its own workers get it in process at
//! the commit, every other process hears the same one in the `NOTIFY`, and
//! this process's listener drops the `NOTIFY` of a nonce it sent (its
//! workers claimed already; hearing it again would cost each an empty
//! claim).
//!
//! Invariants: a lane handed here is sent at least once after it was
//! handed (the pending set is taken whole, after the task is signalled),
//! with the nonce of its latest enqueue; the pending set holds each lane
//! once, so a database that does not answer costs memory for the lanes,
//! not for the enqueues; a send that fails is logged and dropped
//! (listeners in other processes poll, and this process's workers were
//! woken in process at the commit). The task ends with the store.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::PgStore;

/// What the store's own insert transactions set (in their `BEGIN`'s round
/// trip) so the `items` trigger leaves the wake-up to the notifier.
pub(super) const WAKE_AFTER_COMMIT: &str = "SET LOCAL drover.wake_after_commit = 'on';";

const NOTIFY_LANES: &str = include_str!("../../sql/postgres/wake_after_commit.sql");

/// How many of the nonces it sent a store remembers, to drop their
/// `NOTIFY` when its own listener hears it (far more than are in flight
/// between a commit and its `NOTIFY`'s arrival).
const SENT_KEPT: usize = 1_024;

/// The lanes waiting for their wake-up (each with the nonce of its latest
/// enqueue), the signal that there are some, and the nonces sent lately.
#[derive(Debug, Default)]
pub(super) struct Pending {
    state: Mutex<State>,
    ready: Notify,
    /// The notifier task, started on the first wake-up and again if it
    /// ended with its runtime (a store outliving the runtime it began in).
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// What one enqueue's wake-up writes, under one lock.
#[derive(Debug, Default)]
struct State {
    /// Each lane waiting for its `NOTIFY`, with its latest nonce.
    lanes: BTreeMap<String, u64>,
    /// The nonces sent lately, oldest first.
    sent: VecDeque<u64>,
}

impl Pending {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Pending {
    /// Whether `nonce` is one this store's notifier sends (the listener
    /// drops such a `NOTIFY`: the workers of this process were woken with
    /// it at the commit).
    pub(super) fn is_own(&self, nonce: Option<u64>) -> bool {
        nonce.is_some_and(|n| self.state().sent.contains(&n))
    }
}

impl PgStore {
    /// After an insert transaction that set [`WAKE_AFTER_COMMIT`]
    /// committed: wakes this process's workers for `lane` at once, with a
    /// nonce of this store's count, and has the notifier send the same
    /// nonce to the other processes.
    pub(super) fn wake_after_commit(&self, lane: &str) {
        self.fair_verdicts.touch();
        let nonce = self.wake.counted(lane);
        let pending = &self.notify_pending;
        {
            let mut task = pending.task.lock().unwrap_or_else(PoisonError::into_inner);
            if task
                .as_ref()
                .is_none_or(tokio::task::JoinHandle::is_finished)
                && !self.shutdown.is_cancelled()
            {
                *task = Some(spawn(self, Arc::clone(pending)));
            }
        }
        {
            let mut state = pending.state();
            if state.sent.len() == SENT_KEPT {
                state.sent.pop_front();
            }
            state.sent.push_back(nonce);
            state.lanes.insert(lane.to_owned(), nonce);
        }
        pending.ready.notify_one();
    }
}

/// Starts the notifier task of `store` (on its first wake-up: a store is
/// made outside the runtime as often as in it).
fn spawn(store: &PgStore, pending: Arc<Pending>) -> tokio::task::JoinHandle<()> {
    let pool = store.pool.clone();
    let schema = store.schema.clone();
    let persistent = store.persistent;
    let shutdown = store.shutdown.clone();
    tokio::spawn(run(pool, schema, persistent, pending, shutdown))
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
        let taken = std::mem::take(&mut pending.state().lanes);
        if taken.is_empty() {
            continue;
        }
        let (lanes, nonces): (Vec<String>, Vec<String>) =
            taken.into_iter().map(|(l, n)| (l, n.to_string())).unzip();
        let sent = sqlx::query(NOTIFY_LANES)
            .persistent(persistent)
            .bind(&schema)
            .bind(&lanes)
            .bind(&nonces)
            .execute(&pool)
            .await;
        if let Err(e) = sent {
            tracing::debug!(target: "drover::postgres", error = %e, lanes = lanes.len(),
                "wake-up after commit not sent: other processes' workers find the items at their poll");
        }
    }
}
