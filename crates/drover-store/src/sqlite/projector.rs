//! Projector checkpoints and leases on SQLite (migration 0012). A batch runs
//! in the one writer's `BEGIN IMMEDIATE` transaction: the fenced checkpoint
//! move (token, lease against the store's clock, expected position), then
//! the projector's `apply` for every event on the same connection, then
//! one commit. Every statement names its tenant.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::SqliteStore;
use super::row::{after, from_micros, to_micros};
use crate::events::Event;
use crate::projector::{
    CheckpointRow, LeaseParams, ProjectionTx, Projector, ProjectorLag, ProjectorLease,
    ProjectorStore,
};
use drover_core::error::{Error, Result};

const LEASE_TAKE: &str = include_str!("../../sql/sqlite/projector_lease_take.sql");
const LEASE_RELEASE: &str = include_str!("../../sql/sqlite/projector_lease_release.sql");
const CHECKPOINT_MOVE: &str = include_str!("../../sql/sqlite/projector_checkpoint_move.sql");
const CHECKPOINT_RESET: &str = include_str!("../../sql/sqlite/projector_checkpoint_reset.sql");
const REBUILD_TENANT: &str = include_str!("../../sql/sqlite/projector_request_rebuild_tenant.sql");
const REBUILD_ALL: &str = include_str!("../../sql/sqlite/projector_request_rebuild_all.sql");
const CHECKPOINTS: &str = include_str!("../../sql/sqlite/projector_checkpoints.sql");
const PENDING: &str = include_str!("../../sql/sqlite/projector_pending.sql");
const LAG: &str = include_str!("../../sql/sqlite/projector_lag.sql");
const SEEN: &str = include_str!("../../sql/sqlite/projector_seen.sql");
const FORGET: &str = include_str!("../../sql/sqlite/projector_forget.sql");
const RUNNERS_FORGET: &str = include_str!("../../sql/sqlite/projector_runners_forget.sql");

fn lost(lease: &ProjectorLease) -> Error {
    Error::Conflict(format!(
        "projector {} lost its lease for tenant {} (or its checkpoint moved)",
        lease.projector, lease.tenant
    ))
}

fn next(lease: &ProjectorLease, r: Option<SqliteRow>) -> Result<ProjectorLease> {
    let r = r.ok_or_else(|| lost(lease))?;
    Ok(ProjectorLease {
        position: r.try_get("position")?,
        rebuild_requested: r.try_get::<i64, _>("rebuild_requested")? != 0,
        ..lease.clone()
    })
}

#[async_trait]
impl ProjectorStore for SqliteStore {
    async fn projector_lease_take(&self, p: &LeaseParams) -> Result<Option<ProjectorLease>> {
        let token = Uuid::new_v4();
        let now = self.now();
        let mut tx = self.begin().await?;
        let row = sqlx::query(LEASE_TAKE)
            .bind(p.tenant)
            .bind(&p.projector)
            .bind(token)
            .bind(&p.holder)
            .bind(to_micros(after(now, p.lease)))
            .bind(to_micros(now))
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.map(|r| {
            Ok(ProjectorLease {
                projector: p.projector.clone(),
                tenant: p.tenant,
                token,
                position: r.try_get("position")?,
                rebuild_requested: r.try_get::<i64, _>("rebuild_requested")? != 0,
            })
        })
        .transpose()
    }

    async fn projector_lease_release(&self, lease: &ProjectorLease) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(LEASE_RELEASE)
            .bind(lease.tenant)
            .bind(&lease.projector)
            .bind(lease.token)
            .bind(to_micros(self.now()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn projector_apply_valid(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        events: &[Event],
        projector: &dyn Projector,
    ) -> Result<ProjectorLease> {
        let Some(last) = events.last() else {
            return Ok(lease.clone());
        };
        let topics = projector.topics();
        let now = self.now();
        let mut tx = self.begin().await?;
        let row = sqlx::query(CHECKPOINT_MOVE)
            .bind(lease.tenant)
            .bind(&lease.projector)
            .bind(lease.token)
            .bind(lease.position)
            .bind(last.position)
            .bind(to_micros(after(now, renew)))
            .bind(to_micros(now))
            .fetch_optional(&mut *tx)
            .await?;
        let moved = next(lease, row)?;
        {
            let mut ptx = ProjectionTx::Sqlite(&mut tx);
            for e in events {
                if topics.is_empty() || topics.contains(&e.topic) {
                    projector.apply(e, &mut ptx).await?;
                }
            }
        }
        tx.commit().await?;
        Ok(moved)
    }

    async fn projector_rebuild(
        &self,
        lease: &ProjectorLease,
        renew: Duration,
        projector: &dyn Projector,
    ) -> Result<ProjectorLease> {
        let now = self.now();
        let mut tx = self.begin().await?;
        let row = sqlx::query(CHECKPOINT_RESET)
            .bind(lease.tenant)
            .bind(&lease.projector)
            .bind(lease.token)
            .bind(lease.position)
            .bind(to_micros(after(now, renew)))
            .bind(to_micros(now))
            .fetch_optional(&mut *tx)
            .await?;
        let moved = next(lease, row)?;
        projector
            .reset(lease.tenant, &mut ProjectionTx::Sqlite(&mut tx))
            .await?;
        tx.commit().await?;
        Ok(moved)
    }

    async fn projector_request_rebuild(
        &self,
        projector: &str,
        tenant: Option<Uuid>,
    ) -> Result<u64> {
        let now = to_micros(self.now());
        let mut tx = self.begin().await?;
        let n = match tenant {
            Some(t) => sqlx::query(REBUILD_TENANT)
                .bind(t)
                .bind(projector)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected(),
            None => sqlx::query(REBUILD_ALL)
                .bind(projector)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected(),
        };
        tx.commit().await?;
        Ok(n)
    }

    async fn projector_checkpoints(&self, projector: Option<&str>) -> Result<Vec<CheckpointRow>> {
        let rows = sqlx::query(CHECKPOINTS)
            .bind(projector)
            .bind(to_micros(self.now()))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                let lease: Option<i64> = r.try_get("lease_expires_at")?;
                let applied: Option<i64> = r.try_get("applied_at")?;
                Ok(CheckpointRow {
                    projector: r.try_get("projector")?,
                    tenant: r.try_get("tenant_id")?,
                    position: r.try_get("position")?,
                    holder: r.try_get("lease_holder")?,
                    lease_expires_at: lease.map(from_micros).transpose()?,
                    rebuild_requested: r.try_get::<i64, _>("rebuild_requested")? != 0,
                    rebuilds: r.try_get::<i32, _>("rebuilds")?,
                    applied_at: applied.map(from_micros).transpose()?,
                })
            })
            .collect()
    }

    async fn projector_pending(
        &self,
        projector: &str,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Uuid>> {
        Ok(sqlx::query_scalar(PENDING)
            .bind(projector)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?)
    }

    async fn projector_lag(&self, projector: &str) -> Result<ProjectorLag> {
        let r = sqlx::query(LAG)
            .bind(projector)
            .bind(to_micros(self.now()))
            .fetch_one(&self.reader)
            .await?;
        let micros: i64 = r.try_get("behind_micros")?;
        Ok(ProjectorLag {
            tenants: u64::try_from(r.try_get::<i64, _>("tenants")?).unwrap_or(0),
            behind_events: r.try_get("behind_events")?,
            behind_seconds: micros.max(0) as f64 / 1_000_000.0,
        })
    }

    async fn projector_seen(&self, projector: &str) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(SEEN)
            .bind(projector)
            .bind(to_micros(self.now()))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn projector_forget(&self, before: DateTime<Utc>) -> Result<u64> {
        let before = to_micros(before);
        let mut tx = self.begin().await?;
        let n = sqlx::query(FORGET)
            .bind(before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query(RUNNERS_FORGET)
            .bind(before)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(n)
    }
}
