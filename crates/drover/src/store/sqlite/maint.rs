//! The system's and the operator's writes: orphan failure, the stale sweep,
//! the purge, cancel and retry.
//!
//! Each is conditional and idempotent, so a sweep that runs twice (two
//! processes on one file, or a retried step) only finds less to do. The
//! stale filter is the SQL twin of [`rules::is_stale`](crate::rules::is_stale)
//! and the dead-letter test of [`rules::is_exhausted`](crate::rules::is_exhausted).

use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::claim::{SYSTEM, refused};
use super::row::{self, after, to_micros};
use super::sql;
use crate::error::{Error, Result};
use crate::item::{Item, Status};
use crate::rules::RetryPolicy;
use crate::store::StaleReport;

/// What an orphaned item keeps as `last_error`.
const ORPHANED_ERROR: &str = "orphaned: tenant gone";

async fn audit(
    conn: &mut SqliteConnection,
    tenant: Uuid,
    item: Uuid,
    action: &str,
    actor: Uuid,
    detail: Option<&str>,
    at: DateTime<Utc>,
) -> Result<()> {
    sqlx::query(sql::AUDIT_INSERT)
        .bind(tenant)
        .bind(item)
        .bind(action)
        .bind(actor)
        .bind(detail)
        .bind(to_micros(at))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

impl SqliteStore {
    pub(super) async fn fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()> {
        let mut tx = self.begin().await?;
        let now = to_micros(self.now());
        let n = sqlx::query(sql::ITEM_FAIL_ORPHANED)
            .bind(now)
            .bind(SYSTEM)
            .bind(id)
            .bind(token)
            .bind(ORPHANED_ERROR)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 0 {
            // A system operation: the item is looked up across tenants.
            let exists: bool = sqlx::query_scalar(sql::ITEM_ID_EXISTS)
                .bind(id)
                .fetch_one(&mut *tx)
                .await?;
            return Err(if exists {
                Error::Conflict(format!("item {id}: the claim is stale"))
            } else {
                Error::NotFound(format!("item {id}"))
            });
        }
        tx.commit().await?;
        tracing::info!(target: "drover::sqlite", item = %id, "failed as orphaned");
        Ok(())
    }

    pub(super) async fn stale_tenants(&self, limit: u32) -> Result<Vec<Uuid>> {
        Ok(sqlx::query_scalar(sql::ITEM_STALE_TENANTS)
            .bind(to_micros(self.now()))
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?)
    }

    pub(super) async fn requeue_stale(
        &self,
        tenant: Uuid,
        limit: u32,
        policy: &RetryPolicy,
    ) -> Result<StaleReport> {
        let mut report = StaleReport::default();
        if limit == 0 {
            return Ok(report);
        }
        let mut tx = self.begin().await?;
        let now = self.now();
        // Selected and updated under one write lock, so nothing moves in
        // between; each update still repeats the fence so the statement is
        // correct on its own.
        let stale = sqlx::query(sql::ITEM_STALE_SELECT)
            .bind(tenant)
            .bind(to_micros(now))
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        let mut woke = Vec::new();
        for r in &stale {
            let id: Uuid = r.try_get("id")?;
            let token: Uuid = r.try_get("claim_token")?;
            let attempts: i32 = r.try_get("attempts")?;
            // The delay is computed here because the policy is Rust; the
            // nominal (un-jittered) delay keeps the sweep deterministic.
            let retry_at = after(now, policy.nominal_delay(attempts.saturating_add(1)));
            let Some(u) = sqlx::query(sql::ITEM_REQUEUE_STALE)
                .bind(to_micros(now))
                .bind(SYSTEM)
                .bind(tenant)
                .bind(id)
                .bind(token)
                .bind(to_micros(retry_at))
                .fetch_optional(&mut *tx)
                .await?
            else {
                continue;
            };
            if row::status(u.try_get("status")?)? == Status::Failed {
                audit(
                    &mut tx,
                    tenant,
                    id,
                    "dead_letter",
                    SYSTEM,
                    Some("lease expired"),
                    now,
                )
                .await?;
                report.dead_lettered += 1;
            } else {
                report.requeued += 1;
                if retry_at <= now {
                    woke.push(u.try_get::<String, _>("lane")?);
                }
            }
        }
        tx.commit().await?;
        self.wake_lanes(woke.iter().map(String::as_str));
        if report != StaleReport::default() {
            tracing::info!(target: "drover::sqlite", tenant = %tenant,
                requeued = report.requeued, dead_lettered = report.dead_lettered,
                "handed back lease-expired items");
        }
        Ok(report)
    }

    pub(super) async fn purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        let batch = u64::from(batch.max(1));
        let mut total = 0;
        // Most passes find nothing to purge: a reader says so without the
        // write lock.
        let due: Option<i64> = sqlx::query_scalar(sql::ITEM_PURGE_DUE)
            .bind(to_micros(before))
            .fetch_optional(&self.reader)
            .await?;
        if due.is_none() {
            return Ok(0);
        }
        // One short transaction per batch, so the write lock is never held
        // for the whole purge and claims interleave.
        loop {
            let mut tx = self.begin().await?;
            let n = sqlx::query(sql::ITEM_PURGE)
                .bind(to_micros(before))
                .bind(batch as i64)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            total += n;
            if n < batch {
                break;
            }
        }
        if total > 0 {
            tracing::info!(target: "drover::sqlite", purged = total, "purged final items");
        }
        Ok(total)
    }

    pub(super) async fn cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        self.operator(
            sql::ITEM_CANCEL,
            "cancel",
            tenant,
            id,
            actor,
            "pending or claimed",
        )
        .await
    }

    pub(super) async fn retry(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        let item = self
            .operator(
                sql::ITEM_RETRY,
                "retry",
                tenant,
                id,
                actor,
                "done, failed or cancelled",
            )
            .await?;
        self.wake_lanes([item.lane.as_str()]);
        Ok(item)
    }

    /// An operator's transition with its audit entry, in one transaction.
    async fn operator(
        &self,
        statement: &'static str,
        action: &'static str,
        tenant: Uuid,
        id: Uuid,
        actor: Uuid,
        allowed_from: &str,
    ) -> Result<Item> {
        let mut tx = self.begin().await?;
        let now = self.now();
        // An operator's write is signed by the operator, not the system:
        // the row shows who last touched it.
        let Some(r) = sqlx::query(statement)
            .bind(to_micros(now))
            .bind(actor)
            .bind(tenant)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Err(match refused(&mut tx, tenant, id).await? {
                Error::Conflict(_) => {
                    Error::Conflict(format!("item {id}: {action} needs an item {allowed_from}"))
                }
                other => other,
            });
        };
        let item = row::item(&r)?;
        audit(&mut tx, tenant, id, action, actor, None, now).await?;
        tx.commit().await?;
        tracing::info!(target: "drover::sqlite", item = %id, tenant = %tenant, actor = %actor,
            action, "operator action");
        Ok(item)
    }
}
