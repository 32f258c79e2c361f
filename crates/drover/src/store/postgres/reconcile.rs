//! Reconciler checkpoints and records on PostgreSQL.
//!
//! Per-tenant calls run as the runtime role with the tenant set for the
//! transaction (RLS scopes every statement); the checkpoint listing is a
//! system operation. A batch is one transaction: the checkpoint's
//! compare-and-set first (so a racing runner waits on its row lock and then
//! matches nothing), then the batch's records locked in key order, decided
//! in Rust by the shared rule, and written back in one statement. Every
//! statement is unnamed behind a transaction pooler (`persistent`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::PgStore;
use crate::error::{Error, Result};
use crate::reconcile::{
    ApplyBatch, ApplyReport, Change, Checkpoint, ReconcileStore, RecordFilter, Resolution,
    SyncRecord, batch_keys, plan_batch, resolved, validate_key, validate_name,
};

const CHECKPOINT_GET: &str = include_str!("../../../sql/postgres/reconcile_checkpoint_get.sql");
const CHECKPOINT_LIST: &str = include_str!("../../../sql/postgres/reconcile_checkpoint_list.sql");
const CHECKPOINT_INSERT: &str =
    include_str!("../../../sql/postgres/reconcile_checkpoint_insert.sql");
const CHECKPOINT_ADVANCE: &str =
    include_str!("../../../sql/postgres/reconcile_checkpoint_advance.sql");
const RECORD_LOCK: &str = include_str!("../../../sql/postgres/reconcile_record_lock.sql");
const RECORD_WRITE: &str = include_str!("../../../sql/postgres/reconcile_record_write.sql");
const RECORD_GET: &str = include_str!("../../../sql/postgres/reconcile_record_get.sql");
const RECORD_LIST: &str = include_str!("../../../sql/postgres/reconcile_record_list.sql");
const LOCAL_PUT: &str = include_str!("../../../sql/postgres/reconcile_local_put.sql");

fn checkpoint(row: &PgRow) -> Result<Checkpoint> {
    Ok(Checkpoint {
        tenant_id: row.try_get("tenant_id")?,
        reconciler: row.try_get("reconciler")?,
        cursor: row.try_get("cursor")?,
        version: row.try_get("version")?,
        applied: row.try_get("applied")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn record(row: &PgRow) -> Result<SyncRecord> {
    let review: Option<Json<Change>> = row.try_get("review")?;
    Ok(SyncRecord {
        tenant_id: row.try_get("tenant_id")?,
        reconciler: row.try_get("reconciler")?,
        key: row.try_get("key")?,
        data: row.try_get("data")?,
        version: row.try_get("version")?,
        source_version: row.try_get("source_version")?,
        dirty: row.try_get("dirty")?,
        review: review.map(|j| j.0),
        updated_at: row.try_get("updated_at")?,
    })
}

fn applied_count(report: &ApplyReport) -> i64 {
    let n = report.inserted + report.applied + report.kept_local + report.parked + report.skipped;
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Locks the records of `keys` (sorted) and returns them by key.
async fn lock(
    conn: &mut PgConnection,
    persistent: bool,
    reconciler: &str,
    keys: &[String],
) -> Result<BTreeMap<String, SyncRecord>> {
    let rows = sqlx::query(RECORD_LOCK)
        .persistent(persistent)
        .bind(reconciler)
        .bind(keys)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|r| record(r).map(|rec| (rec.key.clone(), rec)))
        .collect()
}

/// Writes `records` (one per key) in one statement.
async fn write(
    conn: &mut PgConnection,
    persistent: bool,
    tenant: Uuid,
    reconciler: &str,
    records: &[SyncRecord],
) -> Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let keys: Vec<&str> = records.iter().map(|r| r.key.as_str()).collect();
    let data: Vec<&serde_json::Value> = records.iter().map(|r| &r.data).collect();
    let versions: Vec<i64> = records.iter().map(|r| r.version).collect();
    let sources: Vec<Option<i64>> = records.iter().map(|r| r.source_version).collect();
    let dirty: Vec<bool> = records.iter().map(|r| r.dirty).collect();
    let reviews: Vec<Option<Json<&Change>>> = records
        .iter()
        .map(|r| r.review.as_ref().map(Json))
        .collect();
    sqlx::query(RECORD_WRITE)
        .persistent(persistent)
        .bind(tenant)
        .bind(reconciler)
        .bind(keys)
        .bind(data)
        .bind(versions)
        .bind(sources)
        .bind(dirty)
        .bind(reviews)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[async_trait]
impl ReconcileStore for PgStore {
    async fn reconcile_checkpoint_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
    ) -> Result<Option<Checkpoint>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let row = sqlx::query(CHECKPOINT_GET)
            .persistent(self.persistent)
            .bind(reconciler)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.as_ref().map(checkpoint).transpose()
    }

    async fn reconcile_checkpoint_list(&self) -> Result<Vec<Checkpoint>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(CHECKPOINT_LIST)
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(checkpoint).collect()
    }

    async fn reconcile_apply(&self, b: &ApplyBatch) -> Result<ApplyReport> {
        validate_name(&b.reconciler)?;
        for c in &b.changes {
            validate_key(&c.key)?;
        }
        let mut tx = self.begin_tenant(b.tenant_id).await?;
        let n = i64::try_from(b.changes.len()).unwrap_or(i64::MAX);
        let moved: Option<i64> = if b.expected_version == 0 {
            sqlx::query_scalar(CHECKPOINT_INSERT)
                .persistent(self.persistent)
                .bind(b.tenant_id)
                .bind(&b.reconciler)
                .bind(&b.cursor)
                .bind(n)
                .fetch_optional(&mut *tx)
                .await?
        } else {
            sqlx::query_scalar(CHECKPOINT_ADVANCE)
                .persistent(self.persistent)
                .bind(&b.reconciler)
                .bind(b.expected_version)
                .bind(&b.cursor)
                .bind(n)
                .fetch_optional(&mut *tx)
                .await?
        };
        let Some(version) = moved else {
            return Err(Error::Conflict(format!(
                "the checkpoint of reconciler {} moved past version {}",
                b.reconciler, b.expected_version
            )));
        };
        let locals = lock(&mut tx, self.persistent, &b.reconciler, &batch_keys(b)).await?;
        let (writes, mut report) = plan_batch(b, locals, chrono::Utc::now());
        write(
            &mut tx,
            self.persistent,
            b.tenant_id,
            &b.reconciler,
            &writes,
        )
        .await?;
        tx.commit().await?;
        debug_assert_eq!(applied_count(&report), n);
        report.checkpoint_version = version;
        Ok(report)
    }

    async fn reconcile_local_put(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
        data: &serde_json::Value,
        version: i64,
    ) -> Result<SyncRecord> {
        validate_name(reconciler)?;
        validate_key(key)?;
        let mut tx = self.begin_tenant(tenant).await?;
        let row = sqlx::query(LOCAL_PUT)
            .persistent(self.persistent)
            .bind(tenant)
            .bind(reconciler)
            .bind(key)
            .bind(data)
            .bind(version)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        record(&row)
    }

    async fn reconcile_record_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
    ) -> Result<Option<SyncRecord>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let row = sqlx::query(RECORD_GET)
            .persistent(self.persistent)
            .bind(reconciler)
            .bind(key)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.as_ref().map(record).transpose()
    }

    async fn reconcile_record_list(&self, f: &RecordFilter) -> Result<Vec<SyncRecord>> {
        let mut tx = self.begin_tenant(f.tenant_id).await?;
        let rows = sqlx::query(RECORD_LIST)
            .persistent(self.persistent)
            .bind(&f.reconciler)
            .bind(f.in_review)
            .bind(f.after_key.as_deref())
            .bind(i64::from(f.limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(record).collect()
    }

    async fn reconcile_review_resolve(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
        resolution: Resolution,
    ) -> Result<SyncRecord> {
        let mut tx = self.begin_tenant(tenant).await?;
        let mut locked = lock(&mut tx, self.persistent, reconciler, &[key.to_owned()]).await?;
        let Some(r) = locked.remove(key) else {
            return Err(Error::NotFound(format!(
                "record {key} of reconciler {reconciler}"
            )));
        };
        let next = resolved(&r, resolution, chrono::Utc::now())?;
        write(
            &mut tx,
            self.persistent,
            tenant,
            reconciler,
            std::slice::from_ref(&next),
        )
        .await?;
        tx.commit().await?;
        Ok(next)
    }
}
