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

use super::{EVENT_PREFIX, LANE_ENTRY, NewOutboxRow, OUTBOX_WAKE, WORK_PREFIX};
use crate::error::{Error, Result};
use crate::queue::{Kind, Principal, Queue};

/// A connection an outbox row can be written on inside the caller's
/// transaction: `sqlx::PgConnection` (a queue on PostgreSQL) and
/// `sqlx::SqliteConnection` (a queue on SQLite). Pass `&mut *tx`.
#[async_trait]
pub trait OutboxConnection: Send {
    /// Writes the validated `row` on this connection.
    async fn outbox_insert_prepared(&mut self, queue: &Queue, row: &NewOutboxRow) -> Result<()>;
}

#[cfg(feature = "postgres")]
#[async_trait]
impl OutboxConnection for PgConnection {
    async fn outbox_insert_prepared(&mut self, queue: &Queue, row: &NewOutboxRow) -> Result<()> {
        let schema = queue.store().pg_schema().ok_or_else(|| {
            Error::Config(
                "a PostgreSQL connection was given to a queue that is not on PostgreSQL".into(),
            )
        })?;
        crate::store::postgres::outbox_insert_in(self, schema, row).await
    }
}

#[cfg(feature = "sqlite")]
#[async_trait]
impl OutboxConnection for SqliteConnection {
    async fn outbox_insert_prepared(&mut self, queue: &Queue, row: &NewOutboxRow) -> Result<()> {
        if queue.store().backend() != crate::store::Backend::Sqlite {
            return Err(Error::Config(
                "a SQLite connection was given to a queue that is not on SQLite".into(),
            ));
        }
        crate::store::sqlite::outbox_insert_in(self, row, queue.store().now()).await
    }
}

impl Queue {
    /// Builds the `work.<kind>` row for `job` as `principal`: the kind's
    /// lane as the payload's `lane` entry, the principal's actor, tenant,
    /// request and trace. Nothing is written.
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
        let mut payload = serde_json::to_value(job)
            .map_err(|e| Error::invalid("payload", format!("does not serialize: {e}")))?;
        let Some(obj) = payload.as_object_mut() else {
            return Err(Error::invalid(
                "payload",
                "a work.<kind> row's payload must serialize to a JSON object",
            ));
        };
        obj.insert(LANE_ENTRY.to_owned(), K::LANE.into());
        self.outbox_row(principal, format!("{WORK_PREFIX}{}", K::NAME), payload)
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

    /// Writes a prepared row (see [`Queue::outbox_work_row`]) on the
    /// caller's connection, inside the caller's transaction.
    ///
    /// # Errors
    /// As [`Queue::outbox_work_in`], and [`Error::InvalidInput`] for a row
    /// that does not validate.
    ///
    /// # Cancel safety
    /// Not cancel safe: drop the caller's transaction if this is dropped.
    pub async fn outbox_write_in<C>(&self, conn: &mut C, row: &NewOutboxRow) -> Result<()>
    where
        C: OutboxConnection + ?Sized,
    {
        row.validate(self.config().max_payload_bytes)?;
        conn.outbox_insert_prepared(self, row).await
    }

    /// Writes a row in a transaction of its own (the memory store's way;
    /// a service with its own write uses [`Queue::outbox_write_in`]).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a row that does not validate; storage errors.
    ///
    /// # Cancel safety
    /// One transaction: dropped, it either committed or not.
    pub async fn outbox_write(&self, row: &NewOutboxRow) -> Result<()> {
        row.validate(self.config().max_payload_bytes)?;
        self.store().outbox_insert(row).await
    }

    /// Publishes the in-process outbox wake-up: call it after committing an
    /// outbox write on SQLite so a local relay runs at once.
    pub fn wake_outbox(&self) {
        self.store().wake(OUTBOX_WAKE);
    }
}
