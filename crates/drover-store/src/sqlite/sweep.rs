//! The sweep lease on SQLite: one row of `sweep_lease` in the file, on the
//! store's clock, so every process sharing the file sees the same holder
//! and a stalled holder loses it when its lease passes. The renewal and
//! the release are fenced on the holder's token in the statement itself.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::SqliteStore;
use super::row::{after, from_micros, to_micros};
use super::sql;
use crate::SweepStore;
use drover_core::error::{Error, Result};

impl SqliteStore {
    pub(super) async fn sweep_take(&self, holder: &str, lease: Duration) -> Result<Option<Uuid>> {
        // Every process asks every tick and at most one gets it: ask a
        // reader first, so the others cost no write lock (claims, renewals
        // and completions queue behind every write on the one lock).
        let free: Option<i64> = sqlx::query_scalar(sql::SWEEP_LEASE_FREE)
            .bind(to_micros(self.now()))
            .fetch_optional(&self.reader)
            .await?;
        if free.is_none() {
            return Ok(None);
        }
        let mut tx = self.begin().await?;
        let now = self.now();
        let got: Option<Uuid> = sqlx::query_scalar(sql::SWEEP_LEASE_TAKE)
            .bind(to_micros(now))
            .bind(Uuid::new_v4())
            .bind(holder)
            .bind(to_micros(after(now, lease)))
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(got)
    }

    pub(super) async fn sweep_renew(&self, token: Uuid, lease: Duration) -> Result<()> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let n = sqlx::query(sql::SWEEP_LEASE_RENEW)
            .bind(to_micros(now))
            .bind(token)
            .bind(to_micros(after(now, lease)))
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

    pub(super) async fn sweep_release(&self, token: Uuid, completed: bool) -> Result<bool> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let n = sqlx::query(sql::SWEEP_LEASE_RELEASE)
            .bind(to_micros(now))
            .bind(token)
            .bind(completed)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n == 1)
    }

    pub(super) async fn sweep_last(&self) -> Result<Option<DateTime<Utc>>> {
        let at: Option<Option<i64>> = sqlx::query_scalar(sql::SWEEP_LAST_PASS)
            .fetch_optional(&self.reader)
            .await?;
        at.flatten().map(from_micros).transpose()
    }
}

#[async_trait]
impl SweepStore for SqliteStore {
    async fn sweep_lease_take(&self, holder: &str, lease: Duration) -> Result<Option<Uuid>> {
        self.sweep_take(holder, lease).await
    }

    async fn sweep_lease_renew(&self, token: Uuid, lease: Duration) -> Result<()> {
        self.sweep_renew(token, lease).await
    }

    async fn sweep_lease_release(&self, token: Uuid, completed: bool) -> Result<bool> {
        self.sweep_release(token, completed).await
    }

    async fn sweep_last_pass(&self) -> Result<Option<DateTime<Utc>>> {
        self.sweep_last().await
    }
}
