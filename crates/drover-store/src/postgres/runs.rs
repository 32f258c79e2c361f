//! [`RunStore`] on PostgreSQL: the runs the trigger of migration 0040
//! writes, read under the runtime role for the item's tenant (row-level
//! security keeps other tenants' runs out), purged under the system role.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::PgStore;
use crate::runs::{ItemRun, RunOutcome, RunStore};
use drover_core::error::Result;

const LIST: &str = include_str!("../../sql/postgres/item_runs_list.sql");
const PURGE: &str = include_str!("../../sql/postgres/item_runs_purge.sql");

#[async_trait]
impl RunStore for PgStore {
    async fn item_runs(&self, tenant: Uuid, id: Uuid) -> Result<Vec<ItemRun>> {
        let mut tx = self.begin_tenant(tenant).await?;
        let rows = sqlx::query(LIST)
            .persistent(self.persistent)
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                Ok(ItemRun {
                    claim_seq: r.try_get("claim_seq")?,
                    worker: r.try_get("worker")?,
                    started_at: r.try_get("started_at")?,
                    finished_at: r.try_get("finished_at")?,
                    outcome: RunOutcome::parse(r.try_get("outcome")?)?,
                    error: r.try_get("error")?,
                })
            })
            .collect()
    }

    async fn item_runs_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut tx = self.begin_system().await?;
        let n = sqlx::query(PURGE)
            .persistent(self.persistent)
            .bind(before)
            .bind(i64::from(batch))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}
