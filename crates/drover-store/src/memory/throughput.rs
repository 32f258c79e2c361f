//! [`ThroughputStore`] in memory: read from the items themselves (a test
//! and development store keeps no rollup; its history is exact at once and
//! reaches as far back as the items it still holds).

use async_trait::async_trait;
use chrono::{DurationRound, TimeDelta};

use super::MemoryStore;
use crate::throughput::{
    RUNNING_MAX, RunningRow, ThroughputQuery, ThroughputRow, ThroughputStore, WAIT_KEEP, WaitRow,
    age_ms, group_rows, minute_of,
};
use chrono::{DateTime, Utc};
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

    async fn wait_record(&self, at: DateTime<Utc>, ages: &[(String, f64)]) -> Result<u64> {
        let minute = minute_of(at);
        let mut st = self.lock();
        for (lane, age) in ages {
            let ms = st.waits.entry((minute, lane.clone())).or_insert(0);
            *ms = (*ms).max(age_ms(*age));
        }
        let before = st.waits.len();
        st.waits.retain(|(m, _), _| *m >= minute - WAIT_KEEP);
        Ok((before - st.waits.len()) as u64)
    }

    async fn wait_history(&self, since: DateTime<Utc>) -> Result<Vec<WaitRow>> {
        let st = self.lock();
        Ok(st
            .waits
            .range((since, String::new())..)
            .map(|((minute, lane), ms)| WaitRow {
                minute: *minute,
                lane: lane.clone(),
                oldest_ms: *ms,
            })
            .collect())
    }
}
