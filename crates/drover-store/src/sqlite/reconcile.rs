//! Reconciler checkpoints and records on SQLite.
//!
//! A batch is one `BEGIN IMMEDIATE` transaction on the single writer: the
//! checkpoint's compare-and-set, the read of the batch's records, and their
//! writes land together or not at all, and no other writer interleaves. So
//! a key first seen by a batch cannot be written by a local put between
//! the batch's read and its write (the PostgreSQL store needs an
//! insert-or-nothing for that); a local put's compare-and-set reads and
//! writes in one such transaction too.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use uuid::Uuid;

use super::row::{from_micros, to_micros};
use super::{SqliteStore, sql};
use crate::reconcile::{
    ApplyBatch, ApplyReport, Change, Checkpoint, LocalPut, ReconcileStore, RecordFilter,
    Resolution, SyncRecord, batch_keys, plan_batch, put_local, resolved,
};
use drover_core::error::{Error, Opaque, Result};

fn json_err(what: &str, e: serde_json::Error) -> Error {
    Error::Storage(Opaque::msg(format!("stored {what} is not valid JSON: {e}")))
}

fn checkpoint(row: &SqliteRow) -> Result<Checkpoint> {
    Ok(Checkpoint {
        tenant_id: row.try_get("tenant_id")?,
        reconciler: row.try_get("reconciler")?,
        cursor: row.try_get("cursor")?,
        version: row.try_get("version")?,
        applied: row.try_get("applied")?,
        updated_at: from_micros(row.try_get("updated_at")?)?,
    })
}

fn record(row: &SqliteRow) -> Result<SyncRecord> {
    let data: String = row.try_get("data")?;
    let review: Option<String> = row.try_get("review")?;
    Ok(SyncRecord {
        tenant_id: row.try_get("tenant_id")?,
        reconciler: row.try_get("reconciler")?,
        key: row.try_get("key")?,
        data: serde_json::from_str(&data).map_err(|e| json_err("data", e))?,
        version: row.try_get("version")?,
        revision: row.try_get("revision")?,
        source_version: row.try_get("source_version")?,
        dirty: row.try_get::<i64, _>("dirty")? != 0,
        deleted: row.try_get::<i64, _>("deleted")? != 0,
        review: review
            .map(|s| serde_json::from_str::<Change>(&s))
            .transpose()
            .map_err(|e| json_err("review", e))?,
        updated_at: from_micros(row.try_get("updated_at")?)?,
    })
}

async fn read(
    conn: &mut SqliteConnection,
    tenant: Uuid,
    reconciler: &str,
    keys: &[String],
) -> Result<BTreeMap<String, SyncRecord>> {
    let keys = serde_json::to_string(keys).map_err(|e| json_err("keys", e))?;
    let rows = sqlx::query(sql::RECONCILE_RECORD_READ)
        .bind(tenant)
        .bind(reconciler)
        .bind(keys)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|r| record(r).map(|rec| (rec.key.clone(), rec)))
        .collect()
}

async fn write(conn: &mut SqliteConnection, r: &SyncRecord) -> Result<()> {
    let data = serde_json::to_string(&r.data).map_err(|e| json_err("data", e))?;
    let review = r
        .review
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| json_err("review", e))?;
    sqlx::query(sql::RECONCILE_RECORD_WRITE)
        .bind(r.tenant_id)
        .bind(&r.reconciler)
        .bind(&r.key)
        .bind(data)
        .bind(r.version)
        .bind(r.source_version)
        .bind(i64::from(r.dirty))
        .bind(review)
        .bind(to_micros(r.updated_at))
        .bind(r.revision)
        .bind(i64::from(r.deleted))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[async_trait]
impl ReconcileStore for SqliteStore {
    async fn reconcile_checkpoint_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
    ) -> Result<Option<Checkpoint>> {
        let row = sqlx::query(sql::RECONCILE_CHECKPOINT_GET)
            .bind(tenant)
            .bind(reconciler)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(checkpoint).transpose()
    }

    async fn reconcile_checkpoint_list(&self) -> Result<Vec<Checkpoint>> {
        let rows = sqlx::query(sql::RECONCILE_CHECKPOINT_LIST)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(checkpoint).collect()
    }

    async fn reconcile_apply(&self, b: &ApplyBatch) -> Result<ApplyReport> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let n = i64::try_from(b.changes.len()).unwrap_or(i64::MAX);
        let moved: Option<i64> = if b.expected_version == 0 {
            sqlx::query_scalar(sql::RECONCILE_CHECKPOINT_INSERT)
                .bind(b.tenant_id)
                .bind(&b.reconciler)
                .bind(&b.cursor)
                .bind(n)
                .bind(to_micros(now))
                .fetch_optional(&mut *tx)
                .await?
        } else {
            sqlx::query_scalar(sql::RECONCILE_CHECKPOINT_ADVANCE)
                .bind(b.tenant_id)
                .bind(&b.reconciler)
                .bind(b.expected_version)
                .bind(&b.cursor)
                .bind(n)
                .bind(to_micros(now))
                .fetch_optional(&mut *tx)
                .await?
        };
        let Some(version) = moved else {
            tx.rollback().await?;
            return Err(Error::Conflict(format!(
                "the checkpoint of reconciler {} moved past version {}",
                b.reconciler, b.expected_version
            )));
        };
        let locals = read(&mut tx, b.tenant_id, &b.reconciler, &batch_keys(b)).await?;
        let (writes, mut report) = plan_batch(b, locals, now);
        for r in &writes {
            write(&mut tx, r).await?;
        }
        tx.commit().await?;
        report.checkpoint_version = version;
        Ok(report)
    }

    async fn reconcile_local_put_valid(&self, put: &LocalPut) -> Result<SyncRecord> {
        // The read and the write share the one write transaction, so no
        // batch or other writer lands between the check and the write.
        let mut tx = self.begin().await?;
        let mut found = read(
            &mut tx,
            put.tenant_id,
            &put.reconciler,
            std::slice::from_ref(&put.key),
        )
        .await?;
        // At the stored precision, so the record returned is the one read.
        let now = from_micros(to_micros(self.now()))?;
        let next = match put_local(found.remove(&put.key).as_ref(), put, now) {
            Ok(n) => n,
            Err(e) => {
                tx.rollback().await?;
                return Err(e);
            }
        };
        write(&mut tx, &next).await?;
        tx.commit().await?;
        Ok(next)
    }

    async fn reconcile_purge_deleted(
        &self,
        reconciler: &str,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64> {
        let mut tx = self.begin().await?;
        let done = sqlx::query(sql::RECONCILE_PURGE_DELETED)
            .bind(reconciler)
            .bind(to_micros(before))
            .bind(i64::from(limit))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected())
    }

    async fn reconcile_record_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
    ) -> Result<Option<SyncRecord>> {
        let row = sqlx::query(sql::RECONCILE_RECORD_GET)
            .bind(tenant)
            .bind(reconciler)
            .bind(key)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(record).transpose()
    }

    async fn reconcile_record_list(&self, f: &RecordFilter) -> Result<Vec<SyncRecord>> {
        let rows = sqlx::query(sql::RECONCILE_RECORD_LIST)
            .bind(f.tenant_id)
            .bind(&f.reconciler)
            .bind(i64::from(f.in_review))
            .bind(f.after_key.as_deref())
            .bind(i64::from(f.limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(record).collect()
    }

    async fn reconcile_review_resolve(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
        resolution: Resolution,
    ) -> Result<SyncRecord> {
        let mut tx = self.begin().await?;
        let mut found = read(&mut tx, tenant, reconciler, &[key.to_owned()]).await?;
        let Some(r) = found.remove(key) else {
            tx.rollback().await?;
            return Err(Error::NotFound(format!(
                "record {key} of reconciler {reconciler}"
            )));
        };
        let next = match resolved(&r, resolution, self.now()) {
            Ok(n) => n,
            Err(e) => {
                tx.rollback().await?;
                return Err(e);
            }
        };
        write(&mut tx, &next).await?;
        tx.commit().await?;
        Ok(next)
    }
}
