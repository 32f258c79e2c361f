//! [`ThroughputStore`] on SQLite: the minutes rollup (written by the count
//! settlement, `maint::settle_counts`) and the claimed rows, read on the
//! reader pool.

use async_trait::async_trait;
use sqlx::Row;

use super::SqliteStore;
use super::row::{from_micros, to_micros};
use super::sql;
use crate::throughput::{
    RUNNING_MAX, RunningRow, ThroughputBy, ThroughputQuery, ThroughputRow, ThroughputStore,
    WAIT_KEEP, WaitRow, age_ms, minute_of,
};
use chrono::{DateTime, Utc};
use drover_core::error::Result;

#[async_trait]
impl ThroughputStore for SqliteStore {
    async fn throughput(&self, q: &ThroughputQuery) -> Result<Vec<ThroughputRow>> {
        let statement = match q.by {
            ThroughputBy::Minute => sql::MINUTES_BY_MINUTE,
            ThroughputBy::LaneKind => sql::MINUTES_BY_LANE_KIND,
        };
        let rows = sqlx::query(statement)
            .bind(to_micros(q.since))
            .bind(q.tenant_id)
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                let (minute, lane, kind) = match q.by {
                    ThroughputBy::Minute => (
                        from_micros(r.try_get("minute")?)?,
                        String::new(),
                        String::new(),
                    ),
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
        let rows = sqlx::query(sql::ITEMS_RUNNING)
            .bind(i64::from(RUNNING_MAX))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(RunningRow {
                    tenant_id: r.try_get("tenant_id")?,
                    id: r.try_get("id")?,
                    kind: r.try_get("kind")?,
                    lane: r.try_get("lane")?,
                    worker: r.try_get("worker")?,
                    since: from_micros(r.try_get("since")?)?,
                })
            })
            .collect()
    }

    async fn wait_record(&self, at: DateTime<Utc>, ages: &[(String, f64)]) -> Result<u64> {
        let minute = to_micros(minute_of(at));
        let mut tx = self.begin().await?;
        for (lane, age) in ages {
            sqlx::query(sql::WAITS_RECORD)
                .bind(minute)
                .bind(lane)
                .bind(age_ms(*age))
                .execute(&mut *tx)
                .await?;
        }
        let purged = sqlx::query(sql::WAITS_PURGE)
            .bind(to_micros(minute_of(at) - WAIT_KEEP))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(purged)
    }

    async fn wait_history(&self, since: DateTime<Utc>) -> Result<Vec<WaitRow>> {
        let rows = sqlx::query(sql::WAITS_SINCE)
            .bind(to_micros(since))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(WaitRow {
                    minute: from_micros(r.try_get("minute")?)?,
                    lane: r.try_get("lane")?,
                    oldest_ms: r.try_get("oldest_ms")?,
                })
            })
            .collect()
    }
}
