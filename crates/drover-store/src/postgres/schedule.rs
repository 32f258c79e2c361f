//! The schedule state rows on PostgreSQL. Every call runs under the runtime
//! role scoped to the nil tenant, the tenant schedules and their items
//! belong to (see `periodic::store` for why); RLS enforces it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::postgres::PgRow;
use uuid::Uuid;

use super::{PgStore, items};
use crate::schedule::{
    AdvanceOutcome, AdvanceParams, MisfirePolicy, ScheduleDecl, ScheduleRow, ScheduleStore,
};
use drover_core::error::Result;
use drover_core::item::InsertResult;

const SCHEDULE_UPSERT: &str = include_str!("../../sql/postgres/schedule_upsert.sql");
const SCHEDULE_LIST: &str = include_str!("../../sql/postgres/schedule_list.sql");
const SCHEDULE_ADVANCE: &str = include_str!("../../sql/postgres/schedule_advance.sql");
const SCHEDULE_PURGE: &str = include_str!("../../sql/postgres/schedule_purge.sql");
pub(super) const CLOCK_NOW: &str = include_str!("../../sql/postgres/clock_now.sql");

/// The tenant every schedule row belongs to.
const TENANT: Uuid = Uuid::nil();

fn schedule_row(r: &PgRow) -> Result<ScheduleRow> {
    let misfire: String = r.try_get("misfire")?;
    let backfill: i32 = r.try_get("max_backfill")?;
    Ok(ScheduleRow {
        decl: ScheduleDecl {
            name: r.try_get("name")?,
            cron: r.try_get("cron")?,
            zone: r.try_get("zone")?,
            kind: r.try_get("kind")?,
            lane: r.try_get("lane")?,
            misfire: MisfirePolicy::from_parts(&misfire, u32::try_from(backfill).unwrap_or(0))?,
        },
        last_tick: r.try_get("last_tick")?,
        created_at: r.try_get("created_at")?,
        seen_at: r.try_get("seen_at")?,
    })
}

/// The database clock.
pub(super) async fn db_now(store: &PgStore) -> Result<DateTime<Utc>> {
    if store.persistent {
        return Ok(sqlx::query_scalar(CLOCK_NOW).fetch_one(&store.pool).await?);
    }
    // Behind a transaction pooler: an unnamed statement inside a
    // transaction, so its parse and execute reach one server connection.
    let mut tx = super::super::begin::begin(&store.pool, "BEGIN").await?;
    let now = sqlx::query_scalar(CLOCK_NOW)
        .persistent(false)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(now)
}

#[async_trait]
impl ScheduleStore for PgStore {
    async fn schedule_upsert(&self, d: &ScheduleDecl) -> Result<ScheduleRow> {
        let mut tx = self.begin_tenant(TENANT).await?;
        let r = sqlx::query(SCHEDULE_UPSERT)
            .persistent(self.persistent)
            .bind(TENANT)
            .bind(&d.name)
            .bind(&d.cron)
            .bind(&d.zone)
            .bind(&d.kind)
            .bind(&d.lane)
            .bind(d.misfire.name())
            .bind(i32::try_from(d.misfire.max_backfill()).unwrap_or(i32::MAX))
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        schedule_row(&r)
    }

    async fn schedule_list(&self) -> Result<Vec<ScheduleRow>> {
        let mut tx = self.begin_tenant(TENANT).await?;
        let rows = sqlx::query(SCHEDULE_LIST)
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter().map(schedule_row).collect()
    }

    async fn schedule_advance(&self, p: &AdvanceParams) -> Result<AdvanceOutcome> {
        let mut tx = self.begin_tenant(TENANT).await?;
        // The row lock taken here serialises racing schedulers: the loser
        // waits, re-reads last_tick and matches nothing.
        let moved = sqlx::query(SCHEDULE_ADVANCE)
            .persistent(self.persistent)
            .bind(&p.name)
            .bind(p.to)
            .bind(p.from)
            .bind(TENANT)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if moved == 0 {
            tx.rollback().await?;
            return Ok(AdvanceOutcome::Stale);
        }
        let mut results = Vec::with_capacity(p.items.len());
        for item in &p.items {
            results.push(
                items::insert_one(&mut tx, item, self.persistent)
                    .await?
                    .result,
            );
        }
        tx.commit().await?;
        // The insert trigger has notified other processes; wake this one.
        for (item, r) in p.items.iter().zip(&results) {
            if *r == InsertResult::Inserted {
                self.wake_local(&item.lane);
            }
        }
        Ok(AdvanceOutcome::Advanced(results))
    }

    async fn schedule_purge(&self, before: DateTime<Utc>) -> Result<u64> {
        let mut tx = self.begin_tenant(TENANT).await?;
        let n = sqlx::query(SCHEDULE_PURGE)
            .persistent(self.persistent)
            .bind(before)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(n)
    }
}
