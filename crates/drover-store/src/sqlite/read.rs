//! The reads: items, listings, counts, gauges, the audit trail and the
//! workers table, plus the worker heartbeat upsert.
//!
//! Reads run on the read pool (WAL lets them run beside the writer); each
//! per-tenant read carries `tenant_id = ?`.

use sqlx::Row;
use uuid::Uuid;

use super::SqliteStore;
use super::row::{self, to_micros};
use super::sql;
use crate::{AuditEntry, CountRow, Gauges, ListFilter, WorkerRow};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::Item;

impl SqliteStore {
    pub(super) async fn get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Item>> {
        sqlx::query(sql::ITEM_GET)
            .bind(tenant)
            .bind(id)
            .fetch_optional(&self.reader)
            .await?
            .as_ref()
            .map(row::item)
            .transpose()
    }

    pub(super) async fn get_by_key(&self, tenant: Uuid, key: &str) -> Result<Option<Item>> {
        sqlx::query(sql::ITEM_GET_BY_KEY)
            .bind(tenant)
            .bind(key)
            .fetch_optional(&self.reader)
            .await?
            .as_ref()
            .map(row::item)
            .transpose()
    }

    pub(super) async fn list(&self, f: &ListFilter) -> Result<Vec<Item>> {
        // A limit of 0 (the filter's default) means no limit.
        let limit = if f.limit == 0 { -1 } else { i64::from(f.limit) };
        // Per-tenant listings have their own statement so they walk the
        // tenant index; only the system listing reads across tenants.
        let q = match f.tenant_id {
            Some(tenant) => sqlx::query(sql::ITEM_LIST_TENANT).bind(tenant),
            None => sqlx::query(sql::ITEM_LIST),
        };
        let rows = q
            .bind(f.status.map(|s| s.as_str()))
            .bind(f.lane.as_deref())
            .bind(f.kind.as_deref())
            .bind(limit)
            .bind(f.key.as_deref())
            .bind(f.created_after.map(to_micros))
            .bind(f.created_before.map(to_micros))
            .bind(f.error_contains.as_deref())
            .bind(f.after.map(|c| to_micros(c.created_at)))
            .bind(f.after.map(|c| c.id))
            .bind(f.group.as_deref())
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(row::item).collect()
    }

    pub(super) async fn read_counts(&self, lane: Option<&str>) -> Result<Vec<CountRow>> {
        let rows = match lane {
            None => sqlx::query(sql::COUNTS).fetch_all(&self.reader).await?,
            Some(lane) => {
                sqlx::query(sql::COUNTS_LANE)
                    .bind(lane)
                    .fetch_all(&self.reader)
                    .await?
            }
        };
        rows.iter()
            .map(|r| {
                Ok(CountRow {
                    lane: r.try_get("lane")?,
                    kind: r.try_get("kind")?,
                    status: row::status(r.try_get("status")?)?,
                    count: r.try_get("count")?,
                })
            })
            .collect()
    }

    pub(super) async fn read_counts_tenant(&self, tenant: Uuid) -> Result<Vec<CountRow>> {
        let rows = sqlx::query(sql::COUNTS_TENANT)
            .bind(tenant)
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(CountRow {
                    lane: r.try_get("lane")?,
                    kind: r.try_get("kind")?,
                    status: row::status(r.try_get("status")?)?,
                    count: r.try_get("count")?,
                })
            })
            .collect()
    }

    pub(super) async fn read_gauges(&self) -> Result<Gauges> {
        let now = to_micros(self.now());
        let rows = sqlx::query(sql::GAUGES_OLDEST)
            .bind(now)
            .fetch_all(&self.reader)
            .await?;
        let mut oldest_age_seconds = Vec::with_capacity(rows.len());
        for r in &rows {
            let lane: String = r.try_get("lane")?;
            let oldest: Option<i64> = r.try_get("oldest")?;
            let age = oldest.map_or(0.0, |t| now.saturating_sub(t).max(0) as f64 / 1e6);
            oldest_age_seconds.push((lane, age));
        }
        let failed: i64 = sqlx::query_scalar(sql::GAUGES_FAILED)
            .fetch_one(&self.reader)
            .await?;
        Ok(Gauges {
            oldest_age_seconds,
            failed,
        })
    }

    pub(super) async fn read_audit(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query(sql::AUDIT_LIST)
            .bind(tenant)
            .bind(item_id)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(row::audit).collect()
    }

    pub(super) async fn beat(&self, w: &WorkerRow) -> Result<()> {
        let lanes = serde_json::to_string(&w.lanes)
            .map_err(|e| Error::Storage(Opaque::msg(format!("lanes do not serialize: {e}"))))?;
        let kinds = serde_json::to_string(&w.kinds)
            .map_err(|e| Error::Storage(Opaque::msg(format!("kinds do not serialize: {e}"))))?;
        let mut tx = self.begin().await?;
        // The store's clock, read once the write lock is held, as every
        // write here does: readers judge liveness against the same clock.
        let now = to_micros(self.now());
        sqlx::query(sql::WORKER_BEAT)
            .bind(&w.id)
            .bind(&w.host)
            .bind(w.pid)
            .bind(lanes)
            .bind(w.capacity)
            .bind(to_micros(w.started_at))
            .bind(now)
            .bind(&w.state)
            .bind(w.beat_interval_ms.max(1))
            .bind(kinds)
            .bind(&w.version)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn read_workers(&self) -> Result<Vec<WorkerRow>> {
        let rows = sqlx::query(sql::WORKER_LIST)
            .bind(to_micros(self.now()))
            .bind(i64::from(crate::LOST_AFTER_BEATS))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(row::worker).collect()
    }

    pub(super) async fn purge_workers(&self, older_than: std::time::Duration) -> Result<u64> {
        let before = self.now() - drover_core::rules::to_chrono(older_than);
        // Most passes find no dead worker's row: a reader says so without
        // the write lock.
        let due: Option<i64> = sqlx::query_scalar(sql::WORKER_PURGE_DUE)
            .bind(to_micros(before))
            .fetch_optional(&self.reader)
            .await?;
        if due.is_none() {
            return Ok(0);
        }
        let mut tx = self.begin().await?;
        let n = sqlx::query(sql::WORKER_PURGE)
            .bind(to_micros(before))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}
