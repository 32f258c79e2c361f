//! The outbox on PostgreSQL: a ring of four list partitions (migration
//! 0011). Rows are written inside the caller's transaction (under the
//! runtime role and the row's tenant, in a savepoint) or in one of the
//! store's own; the relay's claim, its fenced marks of done rows, the
//! stats and the purge are system operations; the fenced failure runs
//! under the row's tenant.
//!
//! An id is one row across the whole ring, whatever its tenant: the
//! primary key `(id, slot)` holds it inside a child, the `outbox_id_once`
//! trigger (migration 0030) across children, so a write of an id a row of
//! an older child holds changes nothing, as in one child.
//!
//! The purge is the ring's rotation: once the current child has been
//! current for `rotate_after`, the next child (the oldest) is locked whole,
//! checked (no pending row, every done row past the retention), its parked
//! rows carried into the current child, and truncated; then it becomes
//! current. A parked (failed) row never pins the ring: it is carried
//! forward at every rotation. A child that still holds pending or young
//! done rows pins the ring: the table grows until they are done (a pending
//! row is relayed or parked within its attempt budget), it never loses one.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{Connection, PgConnection, Row};
use uuid::Uuid;

use super::items::{enter_caller_tx, leave_caller_tx};
use super::{PgStore, secs, validate_schema};
use crate::events::{EventAppended, NewEvent};
use crate::outbox::{
    NewOutboxRow, OUTBOX_WAKE, OutboxClaim, OutboxClaimParams, OutboxFailOutcome, OutboxFailParams,
    OutboxFilter, OutboxRow, OutboxStats, OutboxStatus, OutboxStore, RelayBatch, RelayWrites,
    relay_rows,
};
use drover_core::error::{Error, Result};
use drover_core::item::bound_error;
use drover_core::item::{InsertResult, NewItem};

macro_rules! sql {
    ($name:ident, $file:literal) => {
        const $name: &str = include_str!(concat!("../../sql/postgres/", $file));
    };
}
sql!(OUTBOX_INSERT, "outbox_insert.sql");
sql!(OUTBOX_GET, "outbox_get.sql");
sql!(OUTBOX_CLAIM, "outbox_claim.sql");
sql!(OUTBOX_CLAIM_SERIALIZE, "outbox_claim_serialize.sql");
sql!(OUTBOX_COMPLETE, "outbox_complete.sql");
sql!(OUTBOX_CLAIM_LOCKED, "outbox_claim_locked.sql");
sql!(OUTBOX_COMPLETE_LOCKED, "outbox_complete_locked.sql");
sql!(OUTBOX_HOLD_LOCKED, "outbox_hold_locked.sql");
sql!(OUTBOX_FAIL, "outbox_fail.sql");
sql!(OUTBOX_LIST, "outbox_list.sql");
sql!(OUTBOX_STATS, "outbox_stats.sql");
sql!(OUTBOX_LAG, "outbox_lag.sql");
sql!(OUTBOX_RING_LOCK, "outbox_ring_lock.sql");
sql!(OUTBOX_RING_SWITCH, "outbox_ring_switch.sql");
sql!(OUTBOX_CHILD_LOCK, "outbox_child_lock.sql");
sql!(OUTBOX_CHILD_CENSUS, "outbox_child_census.sql");
sql!(OUTBOX_CHILD_CARRY, "outbox_child_carry.sql");
sql!(OUTBOX_CHILD_TRUNCATE, "outbox_child_truncate.sql");
sql!(OUTBOX_LOCK_TIMEOUT, "outbox_lock_timeout.sql");

/// The ring's children (`outbox_0 … outbox_3`, migration 0011).
const RING: i16 = 4;

/// Writes `row` inside the caller's transaction on `conn`, into the outbox
/// of `schema`: it exists if and only if the caller commits, and its
/// `NOTIFY` is delivered at that commit. Like
/// [`insert_in`](super::insert_in) it runs in a savepoint under the runtime
/// role and the row's tenant and puts the caller's settings back.
///
/// `row` must already be validated ([`NewOutboxRow::validate`]).
///
/// # Errors
/// [`Error::InvalidInput`] for a bad schema name; database errors (the
/// savepoint is rolled back, so the caller's transaction stays usable).
///
/// # Cancel safety
/// Not cancel safe in the caller's transaction (see [`insert_in`](super::insert_in)).
pub async fn outbox_insert_in(
    conn: &mut PgConnection,
    schema: &str,
    row: &NewOutboxRow,
) -> Result<()> {
    // The row is the caller's to validate (the queue does); the schema is
    // a PostgreSQL-only argument, spliced into SQL text, so it is checked
    // here.
    validate_schema(schema)?;
    let mut sp = conn.begin().await?;
    let saved = enter_caller_tx(&mut sp, schema, row.tenant_id).await?;
    insert_row(&mut sp, row, false).await?;
    leave_caller_tx(&mut sp, saved).await?;
    sp.commit().await?;
    Ok(())
}

async fn insert_row(conn: &mut PgConnection, row: &NewOutboxRow, persistent: bool) -> Result<()> {
    sqlx::query(OUTBOX_INSERT)
        .persistent(persistent)
        .bind(row.id)
        .bind(row.tenant_id)
        .bind(&row.kind)
        .bind(row.payload.to_string())
        .bind(row.actor)
        .bind(row.request_id.as_deref())
        .bind(row.traceparent.as_deref())
        .bind(row.created_at)
        .bind(&row.lane)
        .bind(row.priority)
        .bind(row.max_attempts)
        .bind(row.group.as_deref())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

fn outbox_row(r: &PgRow) -> Result<OutboxRow> {
    let payload: String = r.try_get("payload")?;
    let status: String = r.try_get("status")?;
    Ok(OutboxRow {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        kind: r.try_get("kind")?,
        payload: serde_json::from_str(&payload)
            .map_err(|e| Error::invalid("payload", format!("stored payload is not JSON: {e}")))?,
        actor: r.try_get("actor")?,
        request_id: r.try_get("request_id")?,
        traceparent: r.try_get("traceparent")?,
        group: r.try_get("group_key")?,
        created_at: r.try_get("created_at")?,
        status: OutboxStatus::parse(&status)?,
        attempts: r.try_get("attempts")?,
        available_at: r.try_get("available_at")?,
        last_error: r.try_get("last_error")?,
        claim_token: r.try_get("claim_token")?,
        lease_expires_at: r.try_get("lease_expires_at")?,
        relayed_at: r.try_get("relayed_at")?,
        lane: r.try_get("lane")?,
        priority: r.try_get("priority")?,
        max_attempts: r.try_get("max_attempts")?,
    })
}

/// The one-transaction relay's writes: each on the open system-role
/// transaction that holds the claim's row locks, keeping the items it
/// inserted (for the wake-ups after the commit).
struct TxWrites<'t> {
    tx: &'t mut sqlx::PgConnection,
    persistent: bool,
    items: Vec<NewItem>,
    results: Vec<InsertResult>,
}

#[async_trait]
impl RelayWrites for TxWrites<'_> {
    async fn insert_items(&mut self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        let results = super::items::insert_groups(
            self.tx,
            items,
            self.persistent,
            false,
            super::items::Taken::Resolve,
        )
        .await?;
        self.items = items.to_vec();
        self.results.clone_from(&results);
        Ok(results)
    }

    async fn append_events(&mut self, events: &[NewEvent]) -> Result<Vec<Result<EventAppended>>> {
        // The plan refused every event the append would (RelayPlan::of
        // checks the event log's bound too), as on the stepwise path: an
        // error here is the database's, and fails the whole run.
        let answers = super::events::append_system(self.tx, events, self.persistent).await?;
        Ok(answers.into_iter().map(Ok).collect())
    }

    async fn mark_done(&mut self, done: &[OutboxClaim]) -> Result<u64> {
        let ids: Vec<Uuid> = done.iter().map(|c| c.id).collect();
        let marked: Vec<Uuid> = sqlx::query_scalar(OUTBOX_COMPLETE_LOCKED)
            .persistent(self.persistent)
            .bind(ids)
            .fetch_all(&mut *self.tx)
            .await?;
        Ok(marked.len() as u64)
    }
}

/// Marks claimed rows done on an open system-role transaction, each fenced
/// on its token and lease; returns the ids that landed.
async fn complete_on(
    conn: &mut PgConnection,
    claims: &[OutboxClaim],
    persistent: bool,
) -> Result<Vec<Uuid>> {
    let ids: Vec<Uuid> = claims.iter().map(|c| c.id).collect();
    let tokens: Vec<Uuid> = claims.iter().map(|c| c.token).collect();
    Ok(sqlx::query_scalar(OUTBOX_COMPLETE)
        .persistent(persistent)
        .bind(ids)
        .bind(tokens)
        .fetch_all(&mut *conn)
        .await?)
}

fn child(slot: i16) -> String {
    // A number 0..RING spliced into DDL: nothing else is.
    format!("outbox_{}", slot.rem_euclid(RING))
}

impl PgStore {
    /// One rotation step of the outbox ring (see the module docs). Returns
    /// the done rows the truncate removed.
    async fn outbox_rotate(&self, before: DateTime<Utc>, rotate_after: Duration) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        sqlx::query(OUTBOX_LOCK_TIMEOUT)
            .persistent(self.persistent)
            .execute(&mut *tx)
            .await?;
        let ring = sqlx::query(OUTBOX_RING_LOCK)
            .persistent(self.persistent)
            .fetch_one(&mut *tx)
            .await?;
        let current: i16 = ring.try_get("current")?;
        let switched_at: DateTime<Utc> = ring.try_get("switched_at")?;
        let now: DateTime<Utc> = ring.try_get("now")?;
        if now - switched_at < drover_core::rules::to_chrono(rotate_after) {
            tx.rollback().await?;
            return Ok(0);
        }
        let next = (current + 1).rem_euclid(RING);
        let lock = OUTBOX_CHILD_LOCK.replace("{child}", &child(next));
        sqlx::query(&lock)
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        let census = sqlx::query(OUTBOX_CHILD_CENSUS)
            .persistent(self.persistent)
            .bind(next)
            .bind(before)
            .fetch_one(&mut *tx)
            .await?;
        let pending: i64 = census.try_get("pending")?;
        let young: i64 = census.try_get("young")?;
        let done: i64 = census.try_get("done")?;
        if pending > 0 || young > 0 {
            tracing::info!(child = %child(next), pending, young,
                "outbox ring pinned: its oldest child still holds rows not done or not past retention");
            tx.rollback().await?;
            return Ok(0);
        }
        sqlx::query(OUTBOX_CHILD_CARRY)
            .persistent(self.persistent)
            .bind(next)
            .bind(current)
            .execute(&mut *tx)
            .await?;
        let truncate = OUTBOX_CHILD_TRUNCATE.replace("{child}", &child(next));
        sqlx::query(&truncate)
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        sqlx::query(OUTBOX_RING_SWITCH)
            .persistent(self.persistent)
            .bind(next)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(u64::try_from(done).unwrap_or(0))
    }
}

#[async_trait]
impl OutboxStore for PgStore {
    async fn outbox_insert(&self, row: &NewOutboxRow) -> Result<()> {
        let mut tx = self.begin_tenant(row.tenant_id).await?;
        insert_row(&mut tx, row, self.persistent).await?;
        tx.commit().await?;
        self.wake_local(OUTBOX_WAKE);
        Ok(())
    }

    async fn outbox_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<OutboxRow>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let r = sqlx::query(OUTBOX_GET)
            .persistent(self.persistent)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        r.as_ref().map(outbox_row).transpose()
    }

    async fn outbox_claim(&self, p: &OutboxClaimParams) -> Result<Vec<OutboxRow>> {
        let mut tx = self.begin_system().await?;
        sqlx::query(OUTBOX_CLAIM_SERIALIZE)
            .persistent(self.persistent)
            .execute(&mut *tx)
            .await?;
        let rows = sqlx::query(OUTBOX_CLAIM)
            .persistent(self.persistent)
            .bind(i64::from(p.limit))
            .bind(Uuid::new_v4())
            .bind(secs(p.lease))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut rows = rows.iter().map(outbox_row).collect::<Result<Vec<_>>>()?;
        rows.sort_by_key(|r| (r.created_at, r.id));
        Ok(rows)
    }

    async fn outbox_relay_atomic(
        &self,
        p: &OutboxClaimParams,
        max_payload: usize,
    ) -> Result<Option<RelayBatch>> {
        // Claim, items, events and marks on one system-role transaction.
        // The claim is the rows' FOR UPDATE lock, held until the commit, so
        // a run that fails part-way (a lost connection, a restart, SIGKILL)
        // rolls back whole and leaves no claim to wait out its lease; and
        // each relayed row is written once (marked done), not stamped with
        // a claim first. Every statement names the tenant of its rows (the
        // system role sees all tenants), so scoping is the statements' own,
        // as in the claim.
        let token = Uuid::new_v4();
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(OUTBOX_CLAIM_LOCKED)
            .persistent(self.persistent)
            .bind(i64::from(p.limit))
            .bind(token)
            .bind(secs(p.lease))
            .fetch_all(&mut *tx)
            .await?;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(Some(RelayBatch::default()));
        }
        let rows = rows.iter().map(outbox_row).collect::<Result<Vec<_>>>()?;
        let mut writes = TxWrites {
            tx: &mut tx,
            persistent: self.persistent,
            items: Vec::new(),
            results: Vec::new(),
        };
        let batch = relay_rows(rows, max_payload, &mut writes).await?;
        let (items, item_results) = (writes.items, writes.results);
        let (rows, tally, landed) = (batch.rows, batch.tally, batch.landed);
        if !tally.failed.is_empty() {
            // The rows that failed keep the batch's claim past the commit,
            // for the relay's fenced outbox_fail.
            let ids: Vec<Uuid> = tally.failed.iter().map(|(i, _)| rows[*i].id).collect();
            sqlx::query(OUTBOX_HOLD_LOCKED)
                .persistent(self.persistent)
                .bind(ids)
                .bind(token)
                .bind(secs(p.lease))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        super::items::wake_inserted(self, &items, &item_results);
        Ok(Some(RelayBatch {
            rows,
            tally,
            landed,
        }))
    }

    async fn outbox_complete(&self, claims: &[OutboxClaim]) -> Result<Vec<Uuid>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin_system().await?;
        let done = complete_on(&mut tx, claims, self.persistent).await?;
        tx.commit().await?;
        Ok(done)
    }

    async fn outbox_fail(
        &self,
        claim: &OutboxClaim,
        p: &OutboxFailParams,
    ) -> Result<OutboxFailOutcome> {
        let mut tx = self.begin_tenant(claim.tenant_id).await?;
        let r = sqlx::query(OUTBOX_FAIL)
            .persistent(self.persistent)
            .bind(claim.id)
            .bind(claim.token)
            .bind(bound_error(&p.error))
            .bind(p.max_attempts)
            .bind(secs(p.retry_delay))
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        let Some(r) = r else {
            return Err(Error::Conflict(format!(
                "outbox row {} is not held by this relay claim",
                claim.id
            )));
        };
        let status: String = r.try_get("status")?;
        Ok(match OutboxStatus::parse(&status)? {
            OutboxStatus::Failed => OutboxFailOutcome::Parked,
            _ => OutboxFailOutcome::Retrying {
                available_at: r.try_get("available_at")?,
            },
        })
    }

    async fn outbox_list(&self, f: &OutboxFilter) -> Result<Vec<OutboxRow>> {
        let mut tx = match f.tenant_id {
            Some(t) => self.begin_tenant(t).await?,
            None => self.begin_system().await?,
        };
        let rows = sqlx::query(OUTBOX_LIST)
            .persistent(self.persistent)
            .bind(f.status.map(OutboxStatus::as_str))
            .bind(i64::from(f.limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(outbox_row).collect()
    }

    async fn outbox_stats(&self) -> Result<OutboxStats> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(OUTBOX_STATS)
            .persistent(self.persistent)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(OutboxStats {
            pending: r.try_get("pending")?,
            done: r.try_get("done")?,
            failed: r.try_get("failed")?,
            lag_seconds: r.try_get::<f64, _>("lag_seconds")?.max(0.0),
        })
    }

    async fn outbox_lag(&self) -> Result<f64> {
        let mut tx = self.begin_system().await?;
        let lag: f64 = sqlx::query_scalar(OUTBOX_LAG)
            .persistent(self.persistent)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(lag.max(0.0))
    }

    async fn outbox_purge(&self, before: DateTime<Utc>, rotate_after: Duration) -> Result<u64> {
        self.outbox_rotate(before, rotate_after).await
    }
}
