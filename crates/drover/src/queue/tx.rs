//! Transactional enqueue: the item is written on the caller's own
//! connection, inside the caller's own transaction, so it exists if and only
//! if the caller's write commits.
//!
//! On PostgreSQL the wake-up is a `NOTIFY` the server delivers at the
//! caller's commit (and never after a rollback). On SQLite call
//! [`Queue::wake`] after committing for an instant pickup; otherwise workers
//! find the item on their next poll.
//!
//! The caller's transaction is the engine-neutral [`Tx`] that
//! [`Queue::begin`] opens (or a [`TxConn`] borrowed from it or from a
//! projector's transaction), so one body of code serves PostgreSQL and
//! SQLite; a sqlx connection of the queue's engine is accepted too. A
//! [`Tx`] publishes SQLite's in-process wake-up itself at its commit.
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
use crate::item::{InsertResult, Inserted, NewItem};
use crate::queue::{Principal, Queue};
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use crate::store::CallerTx;
use crate::store::orchestration::{NewOrchestration, OrchestrationInserted};
use crate::store::{Tx, TxConn};

/// A connection drover can enqueue on inside the caller's transaction:
/// the engine-neutral [`Tx`] ([`Queue::begin`]) and [`TxConn`], and
/// `sqlx::PgConnection` (for a queue on PostgreSQL) and
/// `sqlx::SqliteConnection` (for a queue on SQLite): pass `&mut tx`, or
/// `&mut *tx` for a sqlx transaction.
#[async_trait]
pub trait Transactional: Send {
    /// Inserts the prepared `item` on this connection.
    async fn insert_prepared(&mut self, queue: &Queue, item: &NewItem) -> Result<Inserted>;

    /// Inserts the prepared `items` with their links (a DAG, batch
    /// members) on this connection, all or none.
    async fn insert_linked(&mut self, queue: &Queue, items: &[NewItem]) -> Result<Vec<Inserted>>;

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

    async fn insert_linked(&mut self, queue: &Queue, items: &[NewItem]) -> Result<Vec<Inserted>> {
        let tx = CallerTx::Postgres(self);
        queue.store().links_insert_in(tx, items).await
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

    async fn insert_linked(&mut self, queue: &Queue, items: &[NewItem]) -> Result<Vec<Inserted>> {
        let tx = CallerTx::Sqlite(self);
        queue.store().links_insert_in(tx, items).await
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

#[async_trait]
impl Transactional for Tx {
    async fn insert_prepared(&mut self, queue: &Queue, item: &NewItem) -> Result<Inserted> {
        self.conn().insert_prepared(queue, item).await
    }

    async fn insert_linked(&mut self, queue: &Queue, items: &[NewItem]) -> Result<Vec<Inserted>> {
        self.conn().insert_linked(queue, items).await
    }

    async fn start_prepared(
        &mut self,
        queue: &Queue,
        new: &NewOrchestration,
        first: &NewItem,
    ) -> Result<OrchestrationInserted> {
        self.conn().start_prepared(queue, new, first).await
    }
}

#[async_trait]
impl Transactional for TxConn<'_> {
    async fn insert_prepared(&mut self, queue: &Queue, item: &NewItem) -> Result<Inserted> {
        let out = queue.store().item_insert_in(self.caller(), item).await?;
        if out.result == InsertResult::Inserted {
            self.wake_after_commit(&item.lane);
        }
        Ok(out)
    }

    async fn insert_linked(&mut self, queue: &Queue, items: &[NewItem]) -> Result<Vec<Inserted>> {
        let out = queue.store().links_insert_in(self.caller(), items).await?;
        for o in &out {
            if o.result == InsertResult::Inserted
                && !crate::store::links::is_waiting_at(o.item.available_at)
            {
                self.wake_after_commit(&o.item.lane);
            }
        }
        Ok(out)
    }

    async fn start_prepared(
        &mut self,
        queue: &Queue,
        new: &NewOrchestration,
        first: &NewItem,
    ) -> Result<OrchestrationInserted> {
        let out = queue
            .store()
            .orchestration_insert_in(self.caller(), new, first)
            .await?;
        if out.result == InsertResult::Inserted {
            self.wake_after_commit(&first.lane);
        }
        Ok(out)
    }
}

impl Queue {
    /// Opens a transaction on the queue's own database for the caller's
    /// writes, whichever engine it runs on: the caller's statements
    /// ([`Tx::query`], one SQL text for both engines), enqueues
    /// ([`Queue::enqueue_in`]), orchestration starts ([`Queue::start_in`])
    /// and outbox rows ([`Queue::outbox_work_in`]) on it commit or roll
    /// back together. On PostgreSQL it is a transaction of the store's pool
    /// as its login, with the login's own `search_path`; on SQLite the one
    /// writer's `BEGIN IMMEDIATE` (the store's own writes wait while it is
    /// open). Its commit publishes SQLite's in-process wake-ups;
    /// PostgreSQL's `NOTIFY` arrives at the commit.
    ///
    /// ```no_run
    /// # use drover::queue::{Kind, Queue};
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct SendReceipt { order: i64 }
    /// # impl Kind for SendReceipt { const NAME: &'static str = "send_receipt"; }
    /// # async fn f(queue: Queue) -> drover::Result<()> {
    /// let mut tx = queue.begin().await?;
    /// tx.query("INSERT INTO orders (id, total) VALUES ($1, $2)")
    ///     .bind(7_i64)
    ///     .bind(1250_i64)
    ///     .execute()
    ///     .await?;
    /// queue.enqueue_in(&mut tx, SendReceipt { order: 7 }).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) on the memory store, whose
    /// writes share no database with the caller (write with
    /// [`Queue::enqueue`], [`Queue::start`], [`Queue::outbox_write`]
    /// instead); database errors.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the transaction is rolled back.
    pub async fn begin(&self) -> Result<Tx> {
        self.store.tx_begin().await
    }

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
    /// a transactional enqueue on SQLite so local workers claim at once
    /// (workers in other processes on the file see the commit through their
    /// store's watch of the file).
    pub fn wake(&self, lane: &str) {
        self.store.wake(lane);
    }
}
