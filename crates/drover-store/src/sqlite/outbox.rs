//! The outbox on SQLite: one table (migration 0011), tenant-scoped by the
//! WHERE clause of every per-tenant statement. The claim, the marks after
//! it and the purge run under the one writer's `BEGIN IMMEDIATE`, so two
//! relays (in one process or several sharing the file) never take one row;
//! every write after a claim is fenced on its token and its lease against
//! the store's clock. The purge deletes done rows in batches: SQLite reuses
//! freed pages without a vacuum, so no ring is needed (docs/design.md).

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{after, from_micros, to_micros};
use crate::outbox::{
    NewOutboxRow, OUTBOX_WAKE, OutboxClaim, OutboxClaimParams, OutboxFailOutcome, OutboxFailParams,
    OutboxFilter, OutboxRow, OutboxStats, OutboxStatus, OutboxStore,
};
use drover_core::error::{Error, Result};
use drover_core::item::bound_error;

macro_rules! sql {
    ($name:ident, $file:literal) => {
        const $name: &str = include_str!(concat!("../../sql/sqlite/", $file));
    };
}
sql!(OUTBOX_INSERT, "outbox_insert.sql");
sql!(OUTBOX_GET, "outbox_get.sql");
sql!(OUTBOX_CLAIM, "outbox_claim.sql");
sql!(OUTBOX_COMPLETE, "outbox_complete.sql");
sql!(OUTBOX_FAIL, "outbox_fail.sql");
sql!(OUTBOX_LIST, "outbox_list.sql");
sql!(OUTBOX_STATS, "outbox_stats.sql");
sql!(OUTBOX_LAG, "outbox_lag.sql");
sql!(OUTBOX_PURGE, "outbox_purge.sql");

/// Done rows one purge statement deletes at most.
const PURGE_BATCH: i64 = 5000;

/// Writes `row` inside the caller's own transaction on `conn`, so it
/// exists if and only if the caller commits. `now` (the store's clock)
/// makes it available. Call `drover::Queue::wake_outbox`
/// after the commit for an instant relay.
///
/// `row` must already be validated ([`NewOutboxRow::validate`]).
///
/// # Errors
/// Database errors (a busy file past the busy timeout is
/// [`Error::Unavailable`]).
///
/// # Cancel safety
/// Not cancel safe in the caller's transaction: drop the transaction.
pub async fn outbox_insert_in(
    conn: &mut SqliteConnection,
    row: &NewOutboxRow,
    now: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(OUTBOX_INSERT)
        .bind(row.id)
        .bind(row.tenant_id)
        .bind(&row.kind)
        .bind(row.payload.to_string())
        .bind(row.actor)
        .bind(row.request_id.as_deref())
        .bind(row.traceparent.as_deref())
        .bind(to_micros(row.created_at))
        .bind(to_micros(now))
        .bind(&row.lane)
        .bind(row.priority)
        .bind(row.max_attempts)
        .bind(row.group.as_deref())
        .execute(&mut *conn)
        .await?;
    Ok(())
}

fn outbox_row(r: &SqliteRow) -> Result<OutboxRow> {
    let payload: String = r.try_get("payload")?;
    let status: String = r.try_get("status")?;
    let opt = |name: &str| -> Result<Option<DateTime<Utc>>> {
        let v: Option<i64> = r.try_get(name)?;
        v.map(from_micros).transpose()
    };
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
        created_at: from_micros(r.try_get("created_at")?)?,
        status: OutboxStatus::parse(&status)?,
        attempts: r.try_get("attempts")?,
        available_at: from_micros(r.try_get("available_at")?)?,
        last_error: r.try_get("last_error")?,
        claim_token: r.try_get("claim_token")?,
        lease_expires_at: opt("lease_expires_at")?,
        relayed_at: opt("relayed_at")?,
        lane: r.try_get("lane")?,
        priority: r.try_get("priority")?,
        max_attempts: r.try_get("max_attempts")?,
    })
}

fn lag(now: DateTime<Utc>, oldest: Option<i64>) -> Result<f64> {
    Ok(match oldest {
        Some(us) => {
            ((now - from_micros(us)?).num_microseconds().unwrap_or(0) as f64 / 1e6).max(0.0)
        }
        None => 0.0,
    })
}

#[async_trait]
impl OutboxStore for SqliteStore {
    async fn outbox_insert(&self, row: &NewOutboxRow) -> Result<()> {
        let mut tx = self.begin().await?;
        outbox_insert_in(&mut tx, row, self.now()).await?;
        tx.commit().await?;
        self.notify(OUTBOX_WAKE);
        Ok(())
    }

    async fn outbox_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<OutboxRow>> {
        let r = sqlx::query(OUTBOX_GET)
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        r.as_ref().map(outbox_row).transpose()
    }

    async fn outbox_claim(&self, p: &OutboxClaimParams) -> Result<Vec<OutboxRow>> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let rows = sqlx::query(OUTBOX_CLAIM)
            .bind(i64::from(p.limit))
            .bind(to_micros(now))
            .bind(Uuid::new_v4())
            .bind(to_micros(after(now, p.lease)))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut rows = rows.iter().map(outbox_row).collect::<Result<Vec<_>>>()?;
        rows.sort_by_key(|r| (r.created_at, r.id));
        Ok(rows)
    }

    async fn outbox_complete(&self, claims: &[OutboxClaim]) -> Result<Vec<Uuid>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let now = to_micros(self.now());
        let mut tx = self.begin().await?;
        let mut done = Vec::with_capacity(claims.len());
        for c in claims {
            let n = sqlx::query(OUTBOX_COMPLETE)
                .bind(c.id)
                .bind(c.token)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 1 {
                done.push(c.id);
            }
        }
        tx.commit().await?;
        Ok(done)
    }

    async fn outbox_fail(
        &self,
        claim: &OutboxClaim,
        p: &OutboxFailParams,
    ) -> Result<OutboxFailOutcome> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let r = sqlx::query(OUTBOX_FAIL)
            .bind(claim.tenant_id)
            .bind(claim.id)
            .bind(claim.token)
            .bind(bound_error(&p.error))
            .bind(p.max_attempts)
            .bind(to_micros(now))
            .bind(to_micros(after(now, p.retry_delay)))
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
                available_at: from_micros(r.try_get("available_at")?)?,
            },
        })
    }

    async fn outbox_list(&self, f: &OutboxFilter) -> Result<Vec<OutboxRow>> {
        let rows = sqlx::query(OUTBOX_LIST)
            .bind(f.tenant_id)
            .bind(f.status.map(OutboxStatus::as_str))
            .bind(i64::from(f.limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(outbox_row).collect()
    }

    async fn outbox_stats(&self) -> Result<OutboxStats> {
        let r = sqlx::query(OUTBOX_STATS).fetch_one(&self.reader).await?;
        Ok(OutboxStats {
            pending: r.try_get("pending")?,
            done: r.try_get("done")?,
            failed: r.try_get("failed")?,
            lag_seconds: lag(self.now(), r.try_get("oldest")?)?,
        })
    }

    async fn outbox_lag(&self) -> Result<f64> {
        let oldest: Option<i64> = sqlx::query_scalar(OUTBOX_LAG)
            .fetch_one(&self.reader)
            .await?;
        lag(self.now(), oldest)
    }

    async fn outbox_purge(&self, before: DateTime<Utc>, _rotate_after: Duration) -> Result<u64> {
        let mut total = 0;
        loop {
            let mut tx = self.begin().await?;
            let n = sqlx::query(OUTBOX_PURGE)
                .bind(to_micros(before))
                .bind(PURGE_BATCH)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            total += n;
            if n < PURGE_BATCH as u64 {
                return Ok(total);
            }
        }
    }
}
