//! Transactional enqueue: the item is written on the caller's own
//! connection, inside the caller's own transaction, so it exists if and only
//! if the caller's write commits.
//!
//! On PostgreSQL the wake-up is a `NOTIFY` the server delivers at the
//! caller's commit (and never after a rollback). On SQLite call
//! [`Queue::wake`] after committing for an instant pickup; otherwise workers
//! find the item on their next poll.
//!
//! The connection reaches the backend only through the store's seam
//! ([`Store::item_insert_in`](crate::store::Store::item_insert_in) and its
//! siblings, given a [`CallerTx`](crate::store::CallerTx)): this module names no
//! backend.

use async_trait::async_trait;
#[cfg(feature = "postgres")]
use sqlx::PgConnection;
#[cfg(feature = "sqlite")]
use sqlx::SqliteConnection;

use crate::error::Result;
use crate::item::{Inserted, NewItem};
use crate::queue::{Principal, Queue};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::store::CallerTx;

/// A connection drover can enqueue on inside the caller's transaction:
/// `sqlx::PgConnection` (for a queue on PostgreSQL) and
/// `sqlx::SqliteConnection` (for a queue on SQLite). Pass `&mut *tx`.
#[async_trait]
pub trait Transactional: Send {
    /// Inserts the prepared `item` on this connection.
    async fn insert_prepared(&mut self, queue: &Queue, item: &NewItem) -> Result<Inserted>;

    /// Starts an orchestration (its record and first item) on this connection.
    async fn start_prepared(
        &mut self,
        queue: &Queue,
        new: &crate::store::orchestration::NewOrchestration,
        first: &NewItem,
    ) -> Result<crate::store::orchestration::OrchestrationInserted>;
}

#[cfg(feature = "postgres")]
#[async_trait]
impl Transactional for PgConnection {
    async fn insert_prepared(&mut self, queue: &Queue, item: &NewItem) -> Result<Inserted> {
        let tx = CallerTx::Postgres(self);
        queue.store().item_insert_in(tx, item).await
    }

    async fn start_prepared(
        &mut self,
        queue: &Queue,
        new: &crate::store::orchestration::NewOrchestration,
        first: &NewItem,
    ) -> Result<crate::store::orchestration::OrchestrationInserted> {
        let tx = CallerTx::Postgres(self);
        queue.store().orchestration_insert_in(tx, new, first).await
    }
}

#[cfg(feature = "sqlite")]
#[async_trait]
impl Transactional for SqliteConnection {
    async fn insert_prepared(&mut self, queue: &Queue, item: &NewItem) -> Result<Inserted> {
        let tx = CallerTx::Sqlite(self);
        queue.store().item_insert_in(tx, item).await
    }

    async fn start_prepared(
        &mut self,
        queue: &Queue,
        new: &crate::store::orchestration::NewOrchestration,
        first: &NewItem,
    ) -> Result<crate::store::orchestration::OrchestrationInserted> {
        let tx = CallerTx::Sqlite(self);
        queue.store().orchestration_insert_in(tx, new, first).await
    }
}

impl Queue {
    /// Enqueues an untyped item as `principal` on the caller's connection,
    /// inside the caller's transaction.
    ///
    /// # Errors
    /// As [`Queue::prepare`]; [`Error::Config`](crate::Error::Config) when the connection is of
    /// another backend than the queue; database errors (the caller's
    /// transaction stays usable on PostgreSQL: the insert runs in a
    /// savepoint).
    ///
    /// # Cancel safety
    /// Not cancel safe: drop the caller's transaction if this is dropped.
    pub async fn enqueue_item_in<C>(
        &self,
        conn: &mut C,
        principal: &Principal,
        item: NewItem,
    ) -> Result<Inserted>
    where
        C: Transactional + ?Sized,
    {
        let item = self.prepare(principal, item)?;
        conn.insert_prepared(self, &item).await
    }

    /// Publishes an in-process wake-up for `lane`: call it after committing
    /// a transactional enqueue on SQLite so local workers claim at once.
    pub fn wake(&self, lane: &str) {
        self.store.wake(lane);
    }
}
