//! The producer's side of the outbox: building a row from a [`Kind`] value
//! or a topic and payload, stamped for a [`Principal`], and writing it on
//! the caller's own connection (so it commits or rolls back with the
//! caller's write) or in a transaction of its own.
//!
//! A `work.<kind>` row needs the permission the kind names, exactly as
//! enqueueing it would: nobody reaches through the outbox what they could
//! not enqueue directly.

use async_trait::async_trait;
use serde::Serialize;
#[cfg(feature = "postgres")]
use sqlx::PgConnection;
#[cfg(feature = "sqlite")]
use sqlx::SqliteConnection;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::queue::{Kind, Principal, Queue};
use crate::store::outbox::{EVENT_PREFIX, NewOutboxRow, OUTBOX_WAKE, OutboxTarget, WORK_PREFIX};
use crate::store::{Tx, TxConn};

/// A connection an outbox row can be written on inside the caller's
/// transaction: the engine-neutral [`Tx`] ([`Queue::begin`]) and
/// [`TxConn`], and `sqlx::PgConnection` (a queue on PostgreSQL) and
/// `sqlx::SqliteConnection` (a queue on SQLite): pass `&mut tx`, or
/// `&mut *tx` for a sqlx transaction.
#[async_trait]
pub trait OutboxConnection: Send {
    /// Writes the validated `row` on this connection.
    async fn outbox_insert_prepared(&mut self, queue: &Queue, row: &NewOutboxRow) -> Result<()>;
}

#[cfg(feature = "postgres")]
#[async_trait]
impl OutboxConnection for PgConnection {
    async fn outbox_insert_prepared(&mut self, queue: &Queue, row: &NewOutboxRow) -> Result<()> {
        let tx = crate::store::CallerTx::Postgres(self);
        queue.store().outbox_insert_in(tx, row).await
    }
}

#[cfg(feature = "sqlite")]
#[async_trait]
impl OutboxConnection for SqliteConnection {
    async fn outbox_insert_prepared(&mut self, queue: &Queue, row: &NewOutboxRow) -> Result<()> {
        let tx = crate::store::CallerTx::Sqlite(self);
        queue.store().outbox_insert_in(tx, row).await
    }
}

#[async_trait]
impl OutboxConnection for Tx {
    async fn outbox_insert_prepared(&mut self, queue: &Queue, row: &NewOutboxRow) -> Result<()> {
        self.conn().outbox_insert_prepared(queue, row).await
    }
}

#[async_trait]
impl OutboxConnection for TxConn<'_> {
    async fn outbox_insert_prepared(&mut self, queue: &Queue, row: &NewOutboxRow) -> Result<()> {
        queue.store().outbox_insert_in(self.caller(), row).await?;
        self.wake_after_commit(OUTBOX_WAKE);
        Ok(())
    }
}

impl Queue {
    /// Builds the `work.<kind>` row for `job` as `principal`: the payload
    /// as the job serializes (a field named `lane` is the job's own), the
    /// kind's lane and attempt budget in the row's columns, the principal's
    /// actor, tenant, request and trace. Nothing is written.
    ///
    /// # Errors
    /// [`Error::Forbidden`] when the principal lacks the kind's permission;
    /// [`Error::InvalidInput`] when the payload is not a JSON object (or
    /// too large) or the kind's name is invalid.
    pub fn outbox_work_row<K: Kind>(&self, principal: &Principal, job: &K) -> Result<NewOutboxRow> {
        if !principal.holds(K::PERMISSION) {
            return Err(Error::Forbidden(format!(
                "writing work.{} requires the permission {:?}",
                K::NAME,
                K::PERMISSION
            )));
        }
        self.register_kind::<K>();
        let group = job.group();
        let payload = serde_json::to_value(job)
            .map_err(|e| Error::invalid("payload", format!("does not serialize: {e}")))?;
        if !payload.is_object() {
            return Err(Error::invalid(
                "payload",
                "a work.<kind> row's payload must serialize to a JSON object",
            ));
        }
        let row = self.outbox_row(principal, format!("{WORK_PREFIX}{}", K::NAME), payload)?;
        let row = row
            .with_lane(K::LANE)
            .with_max_attempts(K::MAX_ATTEMPTS)
            .with_group(group);
        row.validate(self.config().max_payload_bytes)?;
        Ok(row)
    }

    /// Builds the `event.<topic>` row for `payload` as `principal`.
    /// Nothing is written.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `kind` for an invalid topic, on `payload`
    /// when it does not serialize or is too large.
    pub fn outbox_event_row<T: Serialize + ?Sized>(
        &self,
        principal: &Principal,
        topic: &str,
        payload: &T,
    ) -> Result<NewOutboxRow> {
        let payload = serde_json::to_value(payload)
            .map_err(|e| Error::invalid("payload", format!("does not serialize: {e}")))?;
        self.outbox_row(principal, format!("{EVENT_PREFIX}{topic}"), payload)
    }

    fn outbox_row(
        &self,
        principal: &Principal,
        kind: String,
        payload: serde_json::Value,
    ) -> Result<NewOutboxRow> {
        let row = NewOutboxRow {
            tenant_id: principal.tenant,
            actor: principal.actor,
            request_id: principal.request_id.clone(),
            traceparent: principal.traceparent.clone(),
            ..NewOutboxRow::new(kind, payload)
        };
        row.validate(self.config().max_payload_bytes)?;
        Ok(row)
    }

    /// Writes a `work.<kind>` row for `job` on the caller's connection,
    /// inside the caller's transaction; the relay enqueues the item after
    /// the commit, under the row's id. Returns that id.
    ///
    /// On SQLite call [`Queue::wake_outbox`] after committing for an
    /// instant relay; PostgreSQL's `NOTIFY` arrives at the commit.
    ///
    /// # Errors
    /// As [`Queue::outbox_work_row`]; [`Error::Config`] for a connection of
    /// another backend; database errors (on PostgreSQL the caller's
    /// transaction stays usable: the write runs in a savepoint).
    ///
    /// # Cancel safety
    /// Not cancel safe: drop the caller's transaction if this is dropped.
    pub async fn outbox_work_in<C, K>(
        &self,
        conn: &mut C,
        principal: &Principal,
        job: &K,
    ) -> Result<Uuid>
    where
        C: OutboxConnection + ?Sized,
        K: Kind,
    {
        let row = self.outbox_work_row(principal, job)?;
        conn.outbox_insert_prepared(self, &row).await?;
        Ok(row.id)
    }

    /// Writes an `event.<topic>` row on the caller's connection, inside the
    /// caller's transaction; the relay appends the event after the commit,
    /// under the row's id. Returns that id.
    ///
    /// # Errors
    /// As [`Queue::outbox_event_row`] and [`Queue::outbox_work_in`].
    ///
    /// # Cancel safety
    /// Not cancel safe: drop the caller's transaction if this is dropped.
    pub async fn outbox_event_in<C, T>(
        &self,
        conn: &mut C,
        principal: &Principal,
        topic: &str,
        payload: &T,
    ) -> Result<Uuid>
    where
        C: OutboxConnection + ?Sized,
        T: Serialize + Sync + ?Sized,
    {
        let row = self.outbox_event_row(principal, topic, payload)?;
        conn.outbox_insert_prepared(self, &row).await?;
        Ok(row.id)
    }

    /// Stamps a raw row for `principal` and checks it, as
    /// [`Queue::prepare`] does an untyped item: the principal's actor; the
    /// principal's tenant for a nil tenant (another tenant only for a
    /// principal holding `*`); the principal's request and trace where the
    /// row has none; and, for a `work.<kind>` row, the permission the kind
    /// names (registered kinds; [`crate::queue::DEFAULT_PERMISSION`]
    /// otherwise), so nobody reaches through the outbox what they could not
    /// enqueue directly.
    ///
    /// # Errors
    /// [`Error::Forbidden`] for a missing permission or a foreign tenant;
    /// [`Error::InvalidInput`] for a row that does not validate.
    pub fn prepare_outbox_row(
        &self,
        principal: &Principal,
        row: &NewOutboxRow,
    ) -> Result<NewOutboxRow> {
        if let Some(OutboxTarget::Work(kind)) = OutboxTarget::of(&row.kind) {
            let permission = self.kind_permission(kind);
            if !principal.holds(&permission) {
                return Err(Error::Forbidden(format!(
                    "writing work.{kind} requires the permission {permission:?}"
                )));
            }
        }
        let mut row = row.clone();
        row.actor = principal.actor;
        if row.tenant_id.is_nil() {
            row.tenant_id = principal.tenant;
        } else if row.tenant_id != principal.tenant && !principal.holds("*") {
            return Err(Error::Forbidden(format!(
                "the principal may not write outbox rows of tenant {}",
                row.tenant_id
            )));
        }
        if row.request_id.is_none() {
            row.request_id = principal.request_id.clone();
        }
        if row.traceparent.is_none() {
            row.traceparent = principal.traceparent.clone();
        }
        row.validate(self.config().max_payload_bytes)?;
        Ok(row)
    }

    /// Writes a raw row as `principal` (stamped and checked by
    /// [`Queue::prepare_outbox_row`]) on the caller's connection, inside
    /// the caller's transaction. Returns the row's id.
    ///
    /// # Errors
    /// As [`Queue::prepare_outbox_row`] and [`Queue::outbox_work_in`].
    ///
    /// # Cancel safety
    /// Not cancel safe: drop the caller's transaction if this is dropped.
    pub async fn outbox_write_in<C>(
        &self,
        conn: &mut C,
        principal: &Principal,
        row: &NewOutboxRow,
    ) -> Result<Uuid>
    where
        C: OutboxConnection + ?Sized,
    {
        let row = self.prepare_outbox_row(principal, row)?;
        conn.outbox_insert_prepared(self, &row).await?;
        Ok(row.id)
    }

    /// Writes a raw row as `principal` in a transaction of its own (the
    /// memory store's way; a service with its own write uses
    /// [`Queue::outbox_write_in`]). Returns the row's id.
    ///
    /// # Errors
    /// As [`Queue::prepare_outbox_row`]; storage errors.
    ///
    /// # Cancel safety
    /// One transaction: dropped, it either committed or not.
    pub async fn outbox_write(&self, principal: &Principal, row: &NewOutboxRow) -> Result<Uuid> {
        let row = self.prepare_outbox_row(principal, row)?;
        self.store().outbox_insert(&row).await?;
        Ok(row.id)
    }

    /// Publishes the in-process outbox wake-up: call it after committing an
    /// outbox write on SQLite so a local relay runs at once (a relay in
    /// another process on the file sees the commit through its store's
    /// watch of the file).
    pub fn wake_outbox(&self) {
        self.store().wake(OUTBOX_WAKE);
    }
}
