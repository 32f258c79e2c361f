//! Projector checkpoints and leases on PostgreSQL (migration 0012).
//!
//! A batch runs in one transaction opened as the store's login, with the
//! login's own `search_path` (`PgStore::begin_as_login`): the checkpoint
//! moves first, fenced, under the runtime role and drover's schema scoped
//! to the tenant (entered and left as the transactional enqueue does, so
//! the row lock and RLS apply, and the login's settings come back), then
//! the projector's `apply` runs as the login for every event of the batch,
//! naming its tables as the service does on its own pool, and the commit
//! lands both or neither. The row
//! lock taken by the fenced move also keeps a second runner from taking the
//! lease until the batch ends.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::items::{enter_caller_tx, leave_caller_tx};
use super::{PgStore, secs};
use crate::events::Event;
use crate::projector::{
    CheckpointRow, LeaseParams, ProjectionTx, Projector, ProjectorLag, ProjectorLease,
    ProjectorStore,
};
use drover_core::error::{Error, Result};

const LEASE_TAKE: &str = include_str!("../../sql/postgres/projector_lease_take.sql");
const LEASE_RELEASE: &str = include_str!("../../sql/postgres/projector_lease_release.sql");
const CHECKPOINT_MOVE: &str = include_str!("../../sql/postgres/projector_checkpoint_move.sql");
const CHECKPOINT_RESET: &str = include_str!("../../sql/postgres/projector_checkpoint_reset.sql");
const REBUILD_TENANT: &str =
    include_str!("../../sql/postgres/projector_request_rebuild_tenant.sql");
const REBUILD_ALL: &str = include_str!("../../sql/postgres/projector_request_rebuild_all.sql");
const CHECKPOINTS: &str = include_str!("../../sql/postgres/projector_checkpoints.sql");
const PENDING: &str = include_str!("../../sql/postgres/projector_pending.sql");
const LAG: &str = include_str!("../../sql/postgres/projector_lag.sql");
const SEEN: &str = include_str!("../../sql/postgres/projector_seen.sql");
const FORGET: &str = include_str!("../../sql/postgres/projector_forget.sql");
const RUNNERS_FORGET: &str = include_str!("../../sql/postgres/projector_runners_forget.sql");

fn lost(lease: &ProjectorLease) -> Error {
    Error::Conflict(format!(
        "projector {} lost its lease for tenant {} (or its checkpoint moved)",
        lease.projector, lease.tenant
    ))
}

fn next(lease: &ProjectorLease, r: &PgRow) -> Result<ProjectorLease> {
    Ok(ProjectorLease {
        position: r.try_get("position")?,
        rebuild_requested: r.try_get("rebuild_requested")?,
        ..lease.clone()
    })
}

impl PgStore {
    /// Runs one fenced checkpoint statement (`sql`, binding tenant,
    /// projector, token, expected position, then `extra`) under the runtime
    /// role inside `tx`, restoring the login's settings afterwards.
    async fn fenced(
        &self,
        tx: &mut PgConnection,
        sql: &str,
        lease: &ProjectorLease,
        to: Option<i64>,
        renew: Duration,
    ) -> Result<ProjectorLease> {
        let saved = enter_caller_tx(&mut *tx, &self.schema, lease.tenant).await?;
        let q = sqlx::query(sql)
            .persistent(false)
            .bind(lease.tenant)
            .bind(&lease.projector)
            .bind(lease.token)
            .bind(lease.position);
        let q = match to {
            Some(p) => q.bind(p),
            None => q,
        };
        let row = q.bind(secs(renew)).fetch_optional(&mut *tx).await?;
        leave_caller_tx(&mut *tx, saved).await?;
        match row {
            Some(r) => next(lease, &r),
            None => Err(lost(lease)),
        }
    }
}

#[async_trait]
impl ProjectorStore for PgStore {
    async fn projector_lease_take(&self, p: &LeaseParams) -> Result<Option<ProjectorLease>> {
        let token = Uuid::new_v4();
        let mut tx = self.begin_tenant(p.tenant).await?;
        let row = sqlx::query(LEASE_TAKE)
            .persistent(self.persistent)
            .bind(p.tenant)
            .bind(&p.projector)
            .bind(token)
            .bind(&p.holder)
            .bind(secs(p.lease))
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        row.map(|r| {
            Ok(ProjectorLease {
                projector: p.projector.clone(),
                tenant: p.tenant,
                token,
                position: r.try_get("position")?,
                rebuild_requested: r.try_get("rebuild_requested")?,
            })
        })
        .transpose()
    }

    async fn projector_lease_release(&self, lease: &ProjectorLease) -> Result<()> {
        let mut tx = self.begin_tenant(lease.tenant).await?;
        sqlx::query(LEASE_RELEASE)
            .persistent(self.persistent)
            .bind(lease.tenant)
            .bind(&lease.projector)
            .bind(lease.token)
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
        let mut tx = self.begin_as_login().await?;
        let moved = self
            .fenced(&mut tx, CHECKPOINT_MOVE, lease, Some(last.position), renew)
            .await?;
        {
            let mut ptx = ProjectionTx::Postgres(&mut tx);
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
        let mut tx = self.begin_as_login().await?;
        let moved = self
            .fenced(&mut tx, CHECKPOINT_RESET, lease, None, renew)
            .await?;
        projector
            .reset(lease.tenant, &mut ProjectionTx::Postgres(&mut tx))
            .await?;
        tx.commit().await?;
        Ok(moved)
    }

    async fn projector_request_rebuild(
        &self,
        projector: &str,
        tenant: Option<Uuid>,
    ) -> Result<u64> {
        let n = match tenant {
            Some(t) => {
                let mut tx = self.begin_tenant(t).await?;
                let n = sqlx::query(REBUILD_TENANT)
                    .persistent(self.persistent)
                    .bind(t)
                    .bind(projector)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                n
            }
            None => {
                let mut tx = self.begin_system().await?;
                let n = sqlx::query(REBUILD_ALL)
                    .persistent(self.persistent)
                    .bind(projector)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                tx.commit().await?;
                n
            }
        };
        Ok(n)
    }

    async fn projector_checkpoints(&self, projector: Option<&str>) -> Result<Vec<CheckpointRow>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(CHECKPOINTS)
            .persistent(self.persistent)
            .bind(projector)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                Ok(CheckpointRow {
                    projector: r.try_get("projector")?,
                    tenant: r.try_get("tenant_id")?,
                    position: r.try_get("position")?,
                    holder: r.try_get("lease_holder")?,
                    lease_expires_at: r.try_get("lease_expires_at")?,
                    rebuild_requested: r.try_get("rebuild_requested")?,
                    rebuilds: r.try_get("rebuilds")?,
                    applied_at: r.try_get("applied_at")?,
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
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query_scalar(PENDING)
            .persistent(self.persistent)
            .bind(projector)
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(rows)
    }

    async fn projector_lag(&self, projector: &str) -> Result<ProjectorLag> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(LAG)
            .persistent(self.persistent)
            .bind(projector)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(ProjectorLag {
            tenants: u64::try_from(r.try_get::<i64, _>("tenants")?).unwrap_or(0),
            behind_events: r.try_get("behind_events")?,
            behind_seconds: r.try_get::<f64, _>("behind_seconds")?.max(0.0),
        })
    }

    async fn projector_seen(&self, projector: &str) -> Result<()> {
        let mut tx = self.begin_system().await?;
        sqlx::query(SEEN)
            .persistent(self.persistent)
            .bind(projector)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn projector_forget(&self, before: DateTime<Utc>) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        let n = sqlx::query(FORGET)
            .persistent(self.persistent)
            .bind(before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query(RUNNERS_FORGET)
            .persistent(self.persistent)
            .bind(before)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(n)
    }
}
