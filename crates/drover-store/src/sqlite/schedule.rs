//! The schedule state rows on SQLite. Every row belongs to the nil tenant
//! (see `periodic::store`), named in every statement. An advance runs under
//! the one writer's `BEGIN IMMEDIATE`, so two processes racing over one
//! range are serialised and the second matches nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use super::SqliteStore;
use super::insert::insert_on;
use super::row::{from_micros, to_micros};
use crate::schedule::{
    AdvanceOutcome, AdvanceParams, MisfirePolicy, ScheduleDecl, ScheduleRow, ScheduleStore,
};
use drover_core::error::Result;
use drover_core::item::InsertResult;

const SCHEDULE_UPSERT: &str = include_str!("../../sql/sqlite/schedule_upsert.sql");
const SCHEDULE_LIST: &str = include_str!("../../sql/sqlite/schedule_list.sql");
const SCHEDULE_ADVANCE: &str = include_str!("../../sql/sqlite/schedule_advance.sql");
const SCHEDULE_PURGE: &str = include_str!("../../sql/sqlite/schedule_purge.sql");

/// The tenant every schedule row belongs to.
const TENANT: Uuid = Uuid::nil();

fn schedule_row(r: &SqliteRow) -> Result<ScheduleRow> {
    let misfire: String = r.try_get("misfire")?;
    let backfill: i64 = r.try_get("max_backfill")?;
    let last: Option<i64> = r.try_get("last_tick")?;
    Ok(ScheduleRow {
        decl: ScheduleDecl {
            name: r.try_get("name")?,
            cron: r.try_get("cron")?,
            zone: r.try_get("zone")?,
            kind: r.try_get("kind")?,
            lane: r.try_get("lane")?,
            misfire: MisfirePolicy::from_parts(&misfire, u32::try_from(backfill).unwrap_or(0))?,
        },
        last_tick: last.map(from_micros).transpose()?,
        created_at: from_micros(r.try_get("created_at")?)?,
        seen_at: from_micros(r.try_get("seen_at")?)?,
    })
}

#[async_trait]
impl ScheduleStore for SqliteStore {
    async fn schedule_upsert(&self, d: &ScheduleDecl) -> Result<ScheduleRow> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(SCHEDULE_UPSERT)
            .bind(TENANT)
            .bind(&d.name)
            .bind(&d.cron)
            .bind(&d.zone)
            .bind(&d.kind)
            .bind(&d.lane)
            .bind(d.misfire.name())
            .bind(i64::from(d.misfire.max_backfill()))
            .bind(to_micros(self.now()))
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        schedule_row(&r)
    }

    async fn schedule_list(&self) -> Result<Vec<ScheduleRow>> {
        let rows = sqlx::query(SCHEDULE_LIST)
            .bind(TENANT)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn schedule_advance(&self, p: &AdvanceParams) -> Result<AdvanceOutcome> {
        let mut tx = self.begin().await?;
        let now = self.now();
        let moved = sqlx::query(SCHEDULE_ADVANCE)
            .bind(&p.name)
            .bind(to_micros(p.to))
            .bind(p.from.map(to_micros))
            .bind(TENANT)
            .bind(to_micros(now))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if moved == 0 {
            tx.rollback().await?;
            return Ok(AdvanceOutcome::Stale);
        }
        let mut results = Vec::with_capacity(p.items.len());
        for item in &p.items {
            results.push(insert_on(&mut tx, item, now).await?.result);
        }
        tx.commit().await?;
        self.wake_lanes(
            p.items
                .iter()
                .zip(&results)
                .filter(|(_, r)| **r == InsertResult::Inserted)
                .map(|(i, _)| i.lane.as_str()),
        );
        Ok(AdvanceOutcome::Advanced(results))
    }

    async fn schedule_purge(&self, before: DateTime<Utc>) -> Result<u64> {
        let mut tx = self.begin().await?;
        let n = sqlx::query(SCHEDULE_PURGE)
            .bind(TENANT)
            .bind(to_micros(before))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}
