//! The sweep lease on PostgreSQL: one row of `sweep_lease` per schema, on
//! the database clock, so two installations never share it and a stalled
//! holder loses it when its lease passes (a session advisory lock, which
//! this replaces, lived as long as its holder's connection). Every call is
//! a documented cross-tenant operation and runs under the system role; the
//! renewal and the release are fenced on the holder's token in the
//! statement itself.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{PgStore, secs, sql};
use crate::SweepStore;
use drover_core::error::{Error, Result};

/// Takes the lease when free or passed; `None` while another's runs.
pub(super) async fn take(store: &PgStore, holder: &str, lease: Duration) -> Result<Option<Uuid>> {
    let mut tx = store.begin_system().await?;
    let got: Option<Uuid> = sqlx::query_scalar(sql::SWEEP_LEASE_TAKE)
        .persistent(store.persistent)
        .bind(Uuid::new_v4())
        .bind(holder)
        .bind(secs(lease))
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(got)
}

/// Extends the lease held under `token`; `Conflict` once it no longer holds.
pub(super) async fn renew(store: &PgStore, token: Uuid, lease: Duration) -> Result<()> {
    let mut tx = store.begin_system().await?;
    let n = sqlx::query(sql::SWEEP_LEASE_RENEW)
        .persistent(store.persistent)
        .bind(token)
        .bind(secs(lease))
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    if n == 0 {
        return Err(Error::Conflict(
            "the sweep lease is no longer held: it passed or was released".into(),
        ));
    }
    Ok(())
}

/// Gives the lease up when `token` still holds it; false when it did not.
pub(super) async fn release(store: &PgStore, token: Uuid, completed: bool) -> Result<bool> {
    let mut tx = store.begin_system().await?;
    let n = sqlx::query(sql::SWEEP_LEASE_RELEASE)
        .persistent(store.persistent)
        .bind(token)
        .bind(completed)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    Ok(n == 1)
}

/// When the last completed pass ended.
pub(super) async fn last_pass(store: &PgStore) -> Result<Option<DateTime<Utc>>> {
    let mut tx = store.begin_system().await?;
    let at: Option<Option<DateTime<Utc>>> = sqlx::query_scalar(sql::SWEEP_LAST_PASS)
        .persistent(store.persistent)
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(at.flatten())
}

#[async_trait]
impl SweepStore for PgStore {
    async fn sweep_lease_take(&self, holder: &str, lease: Duration) -> Result<Option<Uuid>> {
        take(self, holder, lease).await
    }

    async fn sweep_lease_renew(&self, token: Uuid, lease: Duration) -> Result<()> {
        renew(self, token, lease).await
    }

    async fn sweep_lease_release(&self, token: Uuid, completed: bool) -> Result<bool> {
        release(self, token, completed).await
    }

    async fn sweep_last_pass(&self) -> Result<Option<DateTime<Utc>>> {
        last_pass(self).await
    }
}
