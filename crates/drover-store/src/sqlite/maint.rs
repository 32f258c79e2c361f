//! The system's and the operator's writes: orphan failure, the stale sweep,
//! the purge, cancel and retry.
//!
//! Each is conditional and idempotent, so a sweep that runs twice (two
//! processes on one file, or a retried step) only finds less to do. The
//! stale filter is the SQL twin of [`rules::is_stale`](drover_core::rules::is_stale)
//! and the dead-letter test of [`rules::is_exhausted`](drover_core::rules::is_exhausted).

use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::SqliteStore;
use super::claim::{SYSTEM, refused};
use super::row::{self, after, to_micros};
use super::sql;
use crate::StaleReport;
use drover_core::error::{Error, Result};
use drover_core::item::{Item, Status};
use drover_core::rules::RetryPolicy;

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
            self.purge_batches(before, batch).await?;
            return Ok(0);
        }
        // One short transaction per batch, so the write lock is never held
        // for the whole purge and claims interleave.
        loop {
            let mut tx = self.begin().await?;
            // The batch is picked once, so the rollup loses exactly the
            // rows that are deleted (migration 0024).
            let picked: String = sqlx::query_scalar(sql::ITEM_PURGE_PICK)
                .bind(to_micros(before))
                .bind(batch as i64)
                .fetch_one(&mut *tx)
                .await?;
            sqlx::query(sql::ITEM_PURGE_UNCOUNT)
                .bind(&picked)
                .execute(&mut *tx)
                .await?;
            // Their own link rows go with them (docs/dependencies.md,
            // "Retention").
            for links in [
                sql::ITEM_PURGE_EDGES,
                sql::ITEM_PURGE_WAITS,
                sql::ITEM_PURGE_MEMBERS,
            ] {
                sqlx::query(links).bind(&picked).execute(&mut *tx).await?;
            }
            let n = sqlx::query(sql::ITEM_PURGE)
                .bind(&picked)
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
        self.purge_batches(before, batch).await?;
        Ok(total)
    }

    /// Deletes the batches whose story is over (`batches_purge.sql`), a
    /// short transaction per `batch` of them.
    async fn purge_batches(&self, before: DateTime<Utc>, batch: u64) -> Result<()> {
        let due: Option<i64> = sqlx::query_scalar(sql::BATCHES_PURGE_DUE)
            .bind(to_micros(before))
            .fetch_optional(&self.reader)
            .await?;
        if due.is_none() {
            return Ok(());
        }
        let mut gone = 0;
        loop {
            let mut tx = self.begin().await?;
            let n = sqlx::query(sql::BATCHES_PURGE)
                .bind(to_micros(before))
                .bind(i64::try_from(batch).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            gone += n;
            if n < batch {
                break;
            }
        }
        if gone > 0 {
            tracing::info!(target: "drover::sqlite", batches = gone, "purged finished batches");
        }
        Ok(())
    }

    /// Folds settled final rows into the count rollup (the sweep's step;
    /// migration 0024). The mark stops a second short of this write's own
    /// clock reading: every write is serialized behind this one and reads
    /// its clock under the lock, so nothing can still land below the mark.
    pub(super) async fn settle_counts(&self) -> Result<u64> {
        // A reader says first whether there is anything to fold, so a pass
        // with nothing to do takes no write lock.
        let ready: i64 = sqlx::query_scalar(sql::COUNTS_UNSETTLED)
            .bind(to_micros(self.now()) - 1_000_000)
            .fetch_one(&self.reader)
            .await?;
        if ready == 0 {
            return Ok(0);
        }
        let mut tx = self.begin().await?;
        let upto = to_micros(self.now()) - 1_000_000;
        let folded: i64 = sqlx::query_scalar(sql::COUNTS_UNSETTLED)
            .bind(upto)
            .fetch_one(&mut *tx)
            .await?;
        // The range is read once, grouped into a scratch table both
        // rollups fold from: the writer lock is held for one pass over the
        // range's rows, not one per rollup (the dashboard's minutes,
        // migration 0041, read it a second time and cost the drain).
        sqlx::query(sql::SETTLE_FINE_TABLE)
            .execute(&mut *tx)
            .await?;
        sqlx::query(sql::SETTLE_FINE_CLEAR)
            .execute(&mut *tx)
            .await?;
        let keep = upto
            - crate::throughput::THROUGHPUT_KEEP
                .num_microseconds()
                .unwrap_or(0);
        sqlx::query(sql::SETTLE_FINE)
            .bind(upto)
            .bind(keep)
            .execute(&mut *tx)
            .await?;
        sqlx::query(sql::MINUTES_SETTLE)
            .bind(keep)
            .execute(&mut *tx)
            .await?;
        sqlx::query(sql::MINUTES_EXPIRE)
            .bind(keep)
            .execute(&mut *tx)
            .await?;
        sqlx::query(sql::COUNTS_SETTLE).execute(&mut *tx).await?;
        sqlx::query(sql::SETTLE_FINE_CLEAR)
            .execute(&mut *tx)
            .await?;
        sqlx::query(sql::COUNTS_SETTLE_MARK)
            .bind(upto)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(u64::try_from(folded).unwrap_or(0))
    }

    pub(super) async fn cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        self.operator(
            sql::ITEM_CANCEL,
            "cancel",
            tenant,
            id,
            actor,
            "pending, claimed or failed",
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
        if action == "retry" || action == "cancel" {
            // A retry, or the cancel of a dead letter, takes the row out of
            // its final status: the count rollup forgets it first, if it
            // had counted it (migration 0024; nothing for a row not final).
            // Rolled back with the transaction if the write is refused.
            sqlx::query(sql::COUNTS_UNFINAL)
                .bind(tenant)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
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
