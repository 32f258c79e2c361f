//! The lane state rows on PostgreSQL, read and written under the system
//! role (a lane is installation-wide; see `lane`). Every row belongs to the
//! nil tenant, named in each statement.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::PgStore;
use crate::lane::{LaneSetParams, LaneState, LaneStore};
use drover_core::error::Result;

const LANE_SET: &str = include_str!("../../sql/postgres/lane_set.sql");
const LANE_LIST: &str = include_str!("../../sql/postgres/lane_list.sql");

/// The tenant every lane state row belongs to.
const TENANT: Uuid = Uuid::nil();

fn lane_row(r: &PgRow) -> Result<LaneState> {
    Ok(LaneState {
        lane: r.try_get("lane")?,
        paused: r.try_get("paused")?,
        changed_at: r.try_get("changed_at")?,
        changed_by: r.try_get("changed_by")?,
    })
}

#[async_trait]
impl LaneStore for PgStore {
    async fn lane_set(&self, p: &LaneSetParams) -> Result<LaneState> {
        let mut tx = self.begin_system().await?;
        let r = sqlx::query(LANE_SET)
            .persistent(self.persistent)
            .bind(TENANT)
            .bind(&p.lane)
            .bind(p.paused)
            .bind(p.actor)
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        lane_row(&r)
    }

    async fn lane_list(&self) -> Result<Vec<LaneState>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(LANE_LIST)
            .persistent(self.persistent)
            .bind(TENANT)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(lane_row).collect()
    }
}
