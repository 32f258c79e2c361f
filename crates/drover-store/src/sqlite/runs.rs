//! [`RunStore`] on SQLite: the runs the trigger of migration 0040 writes,
//! read on a reader connection filtered by the item's tenant, purged on the
//! writer in one short transaction per batch.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::SqliteStore;
use super::row::{from_micros, to_micros};
use crate::runs::{ItemRun, RunOutcome, RunStore};
use drover_core::error::Result;

const LIST: &str = include_str!("../../sql/sqlite/item_runs_list.sql");
const PURGE: &str = include_str!("../../sql/sqlite/item_runs_purge.sql");

#[async_trait]
impl RunStore for SqliteStore {
    async fn item_runs(&self, tenant: Uuid, id: Uuid) -> Result<Vec<ItemRun>> {
        let rows = sqlx::query(LIST)
            .bind(tenant)
            .bind(id)
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(ItemRun {
                    claim_seq: r.try_get("claim_seq")?,
                    worker: r.try_get("worker")?,
                    started_at: from_micros(r.try_get("started_at")?)?,
                    finished_at: from_micros(r.try_get("finished_at")?)?,
                    outcome: RunOutcome::parse(r.try_get("outcome")?)?,
                    error: r.try_get("error")?,
                })
            })
            .collect()
    }

    async fn item_runs_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(PURGE)
            .bind(to_micros(before))
            .bind(i64::from(batch))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}
