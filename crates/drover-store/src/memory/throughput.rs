//! [`ThroughputStore`] in memory: read from the items themselves (a test
//! and development store keeps no rollup; its history is exact at once and
//! reaches as far back as the items it still holds).

use async_trait::async_trait;
use chrono::{DurationRound, TimeDelta};

use super::MemoryStore;
use crate::throughput::{
    RUNNING_MAX, RunningRow, ThroughputQuery, ThroughputRow, ThroughputStore, group_rows,
};
use drover_core::error::Result;
use drover_core::item::Status;

#[async_trait]
impl ThroughputStore for MemoryStore {
    async fn throughput(&self, q: &ThroughputQuery) -> Result<Vec<ThroughputRow>> {
        let st = self.lock();
        let rows = st
            .items
            .values()
            .filter(|i| matches!(i.status, Status::Done | Status::Failed))
            .filter(|i| q.tenant_id.is_none_or(|t| t == i.tenant_id))
            .map(|i| {
                let done = i.status == Status::Done;
                let ms = if done {
                    (i.updated_at - i.available_at).num_milliseconds().max(0)
                } else {
                    0
                };
                ThroughputRow {
                    minute: i
                        .updated_at
                        .duration_trunc(TimeDelta::minutes(1))
                        .unwrap_or(i.updated_at),
                    lane: i.lane.clone(),
                    kind: i.kind.clone(),
                    done: i64::from(done),
                    failed: i64::from(!done),
                    latency_ms_sum: ms,
                    latency_ms_max: ms,
                }
            })
            .collect();
        Ok(group_rows(rows, q))
    }

    async fn items_running(&self) -> Result<Vec<RunningRow>> {
        let st = self.lock();
        let mut rows: Vec<RunningRow> = st
            .items
            .values()
            .filter(|i| i.status == Status::Claimed)
            .map(|i| RunningRow {
                tenant_id: i.tenant_id,
                id: i.id,
                kind: i.kind.clone(),
                lane: i.lane.clone(),
                worker: i.claimed_by.clone().unwrap_or_default(),
                since: i.updated_at,
            })
            .collect();
        rows.sort_by_key(|a| (a.since, a.id));
        rows.truncate(RUNNING_MAX as usize);
        Ok(rows)
    }
}
