//! Reconciler checkpoints and records on PostgreSQL.
//!
//! Per-tenant calls run as the runtime role with the tenant set for the
//! transaction (RLS scopes every statement); the checkpoint listing and the
//! tombstone purge are system operations. A batch is one transaction: the
//! checkpoint's compare-and-set first (so a racing runner waits on its row
//! lock and then matches nothing), then the batch's records locked in key
//! order, decided in Rust by the shared rule, and written back.
//!
//! A key with no row has nothing to lock, so a local put may insert it
//! between the batch's read and its write. The batch therefore inserts its
//! new keys with insert-or-nothing (inside a savepoint) before it writes
//! the rest: when a key appeared meanwhile, the savepoint is rolled back,
//! the keys are locked and read again (the new row is committed by then),
//! and the batch is decided again, so the local write meets the declared
//! conflict strategy instead of being overwritten. A local put does the
//! same: its record locked (or inserted only if still absent), then the
//! shared compare-and-set rule. Every statement is unnamed behind a
//! transaction pooler (`persistent`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::PgStore;
use crate::reconcile::{
    ApplyBatch, ApplyReport, Change, Checkpoint, LocalPut, ReconcileStore, RecordFilter,
    Resolution, SyncRecord, batch_keys, plan_batch, put_local, resolved,
};
use drover_core::error::{Error, Result};

const CHECKPOINT_GET: &str = include_str!("../../sql/postgres/reconcile_checkpoint_get.sql");
const CHECKPOINT_LIST: &str = include_str!("../../sql/postgres/reconcile_checkpoint_list.sql");
const CHECKPOINT_INSERT: &str = include_str!("../../sql/postgres/reconcile_checkpoint_insert.sql");
const CHECKPOINT_ADVANCE: &str =
    include_str!("../../sql/postgres/reconcile_checkpoint_advance.sql");
const RECORD_LOCK: &str = include_str!("../../sql/postgres/reconcile_record_lock.sql");
const RECORD_WRITE: &str = include_str!("../../sql/postgres/reconcile_record_write.sql");
const RECORD_GET: &str = include_str!("../../sql/postgres/reconcile_record_get.sql");
const RECORD_LIST: &str = include_str!("../../sql/postgres/reconcile_record_list.sql");
const RECORD_INSERT: &str = include_str!("../../sql/postgres/reconcile_record_insert.sql");
const PURGE_DELETED: &str = include_str!("../../sql/postgres/reconcile_purge_deleted.sql");

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
        revision: row.try_get("revision")?,
        source_version: row.try_get("source_version")?,
        dirty: row.try_get("dirty")?,
        deleted: row.try_get("deleted")?,
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

/// Binds `records` (one per key) to `statement`
/// (`reconcile_record_write` or `reconcile_record_insert`, which take the
/// same columns).
fn bind_records<'q>(
    statement: &'q str,
    persistent: bool,
    tenant: Uuid,
    reconciler: &'q str,
    records: &'q [SyncRecord],
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let keys: Vec<&str> = records.iter().map(|r| r.key.as_str()).collect();
    let data: Vec<&serde_json::Value> = records.iter().map(|r| &r.data).collect();
    let versions: Vec<i64> = records.iter().map(|r| r.version).collect();
    let sources: Vec<Option<i64>> = records.iter().map(|r| r.source_version).collect();
    let dirty: Vec<bool> = records.iter().map(|r| r.dirty).collect();
    let reviews: Vec<Option<Json<&Change>>> = records
        .iter()
        .map(|r| r.review.as_ref().map(Json))
        .collect();
    let revisions: Vec<i64> = records.iter().map(|r| r.revision).collect();
    let deleted: Vec<bool> = records.iter().map(|r| r.deleted).collect();
    sqlx::query(statement)
        .persistent(persistent)
        .bind(tenant)
        .bind(reconciler)
        .bind(keys)
        .bind(data)
        .bind(versions)
        .bind(sources)
        .bind(dirty)
        .bind(reviews)
        .bind(revisions)
        .bind(deleted)
}

/// Writes `records` (one per key, each locked or inserted by this
/// transaction) in one statement.
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
    bind_records(RECORD_WRITE, persistent, tenant, reconciler, records)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Inserts `records` of keys found absent; true when every one went in,
/// false (and nothing inserted: the savepoint is rolled back) when one of
/// the keys appeared since it was read.
async fn insert_new(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    persistent: bool,
    tenant: Uuid,
    reconciler: &str,
    records: &[SyncRecord],
) -> Result<bool> {
    if records.is_empty() {
        return Ok(true);
    }
    let mut sp = sqlx::Acquire::begin(&mut **tx).await?;
    let inserted = bind_records(RECORD_INSERT, persistent, tenant, reconciler, records)
        .fetch_all(&mut *sp)
        .await?;
    if inserted.len() == records.len() {
        sp.commit().await?;
        Ok(true)
    } else {
        sp.rollback().await?;
        Ok(false)
    }
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
        let keys = batch_keys(b);
        // Each pass that finds a key appeared since its read ends with that
        // key's row committed and locked by the next read, so at most one
        // pass per key, plus the one that lands.
        let mut report = None;
        for _ in 0..=keys.len() {
            let locals = lock(&mut tx, self.persistent, &b.reconciler, &keys).await?;
            let (writes, planned) = plan_batch(b, locals.clone(), chrono::Utc::now());
            #[cfg(feature = "test-util")]
            crate::reconcile::hook::after_plan(b.tenant_id, &b.reconciler).await;
            let (old, new): (Vec<SyncRecord>, Vec<SyncRecord>) = writes
                .into_iter()
                .partition(|r| locals.contains_key(&r.key));
            if !insert_new(&mut tx, self.persistent, b.tenant_id, &b.reconciler, &new).await? {
                tracing::debug!(reconciler = %b.reconciler, tenant = %b.tenant_id,
                    "a key of the batch was written meanwhile; deciding the batch again");
                continue;
            }
            write(&mut tx, self.persistent, b.tenant_id, &b.reconciler, &old).await?;
            report = Some(planned);
            break;
        }
        let Some(mut report) = report else {
            return Err(Error::Conflict(format!(
                "the records of reconciler {} kept changing under the batch",
                b.reconciler
            )));
        };
        tx.commit().await?;
        debug_assert_eq!(applied_count(&report), n);
        report.checkpoint_version = version;
        Ok(report)
    }

    async fn reconcile_local_put_valid(&self, put: &LocalPut) -> Result<SyncRecord> {
        let mut tx = self.begin_tenant(put.tenant_id).await?;
        let mut locked = lock(
            &mut tx,
            self.persistent,
            &put.reconciler,
            std::slice::from_ref(&put.key),
        )
        .await?;
        let existing = locked.remove(&put.key);
        let next = put_local(existing.as_ref(), put, chrono::Utc::now())?;
        let one = std::slice::from_ref(&next);
        if existing.is_some() {
            write(
                &mut tx,
                self.persistent,
                put.tenant_id,
                &put.reconciler,
                one,
            )
            .await?;
        } else if !insert_new(
            &mut tx,
            self.persistent,
            put.tenant_id,
            &put.reconciler,
            one,
        )
        .await?
        {
            // A batch or another writer created the key since the read: the
            // writer expected it absent.
            return Err(Error::Conflict(format!(
                "record {} of reconciler {} was created meanwhile",
                put.key, put.reconciler
            )));
        }
        // Read back for the database's own timestamp of the write.
        let row = sqlx::query(RECORD_GET)
            .persistent(self.persistent)
            .bind(&put.reconciler)
            .bind(&put.key)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        record(&row)
    }

    async fn reconcile_purge_deleted(
        &self,
        reconciler: &str,
        before: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        let done = sqlx::query(PURGE_DELETED)
            .persistent(self.persistent)
            .bind(reconciler)
            .bind(before)
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
