//! [`ThroughputStore`] on PostgreSQL: the minutes rollup (written by the
//! count settlement, `ops::counts_settle`) and the claimed rows.

use async_trait::async_trait;
use sqlx::Row;

use super::{PgStore, sql};
use crate::throughput::{
    RUNNING_MAX, RunningRow, ThroughputBy, ThroughputQuery, ThroughputRow, ThroughputStore,
    WAIT_KEEP, WaitRow, age_ms, minute_of,
};
use chrono::{DateTime, Utc};
use drover_core::error::Result;

#[async_trait]
impl ThroughputStore for PgStore {
    async fn throughput(&self, q: &ThroughputQuery) -> Result<Vec<ThroughputRow>> {
        let statement = match q.by {
            ThroughputBy::Minute => sql::MINUTES_BY_MINUTE,
            ThroughputBy::LaneKind => sql::MINUTES_BY_LANE_KIND,
        };
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(statement)
            .persistent(self.persistent)
            .bind(q.since)
            .bind(q.tenant_id)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                let (minute, lane, kind) = match q.by {
                    ThroughputBy::Minute => (r.try_get("minute")?, String::new(), String::new()),
                    ThroughputBy::LaneKind => (q.since, r.try_get("lane")?, r.try_get("kind")?),
                };
                Ok(ThroughputRow {
                    minute,
                    lane,
                    kind,
                    done: r.try_get("done")?,
                    failed: r.try_get("failed")?,
                    latency_ms_sum: r.try_get("latency_ms_sum")?,
                    latency_ms_max: r.try_get("latency_ms_max")?,
                })
            })
            .collect()
    }

    async fn items_running(&self) -> Result<Vec<RunningRow>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(sql::ITEMS_RUNNING)
            .persistent(self.persistent)
            .bind(i64::from(RUNNING_MAX))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                Ok(RunningRow {
                    tenant_id: r.try_get("tenant_id")?,
                    id: r.try_get("id")?,
                    kind: r.try_get("kind")?,
                    lane: r.try_get("lane")?,
                    worker: r.try_get("worker")?,
                    since: r.try_get("since")?,
                })
            })
            .collect()
    }

    async fn wait_record(&self, at: DateTime<Utc>, ages: &[(String, f64)]) -> Result<u64> {
        let minute = minute_of(at);
        let lanes: Vec<&str> = ages.iter().map(|(l, _)| l.as_str()).collect();
        let ms: Vec<i64> = ages.iter().map(|(_, a)| age_ms(*a)).collect();
        let mut tx = self.begin_system().await?;
        if !lanes.is_empty() {
            sqlx::query(sql::WAITS_RECORD)
                .persistent(self.persistent)
                .bind(minute)
                .bind(&lanes)
                .bind(&ms)
                .execute(&mut *tx)
                .await?;
        }
        let purged = sqlx::query(sql::WAITS_PURGE)
            .persistent(self.persistent)
            .bind(minute - WAIT_KEEP)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(purged)
    }

    async fn wait_history(&self, since: DateTime<Utc>) -> Result<Vec<WaitRow>> {
        let mut tx = self.begin_system().await?;
        let rows = sqlx::query(sql::WAITS_SINCE)
            .persistent(self.persistent)
            .bind(since)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                Ok(WaitRow {
                    minute: r.try_get("minute")?,
                    lane: r.try_get("lane")?,
                    oldest_ms: r.try_get("oldest_ms")?,
                })
            })
            .collect()
    }
}
