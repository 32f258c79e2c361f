//! The lane state rows on SQLite. Every row belongs to the nil tenant (a
//! lane is installation-wide; see `lane`), named in every statement.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::SqliteStore;
use super::row::{from_micros, to_micros};
use crate::lane::{LaneSetParams, LaneState, LaneStore};
use drover_core::error::Result;

const LANE_SET: &str = include_str!("../../sql/sqlite/lane_set.sql");
const LANE_LIST: &str = include_str!("../../sql/sqlite/lane_list.sql");

/// The tenant every lane state row belongs to.
const TENANT: Uuid = Uuid::nil();

fn lane_row(r: &SqliteRow) -> Result<LaneState> {
    let paused: i64 = r.try_get("paused")?;
    Ok(LaneState {
        lane: r.try_get("lane")?,
        paused: paused != 0,
        changed_at: from_micros(r.try_get("changed_at")?)?,
        changed_by: r.try_get("changed_by")?,
    })
}

#[async_trait]
impl LaneStore for SqliteStore {
    async fn lane_set(&self, p: &LaneSetParams) -> Result<LaneState> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(LANE_SET)
            .bind(TENANT)
            .bind(&p.lane)
            .bind(i64::from(p.paused))
            .bind(to_micros(self.now()))
            .bind(p.actor)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        lane_row(&r)
    }

    async fn lane_list(&self) -> Result<Vec<LaneState>> {
        let rows = sqlx::query(LANE_LIST)
            .bind(TENANT)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(lane_row).collect()
    }
}
