//! The schedule state rows of the memory backend, under the store's one
//! lock (so an advance and its items' inserts are one atomic step).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::MemoryStore;
use crate::schedule::{AdvanceOutcome, AdvanceParams, ScheduleDecl, ScheduleRow, ScheduleStore};
use drover_core::error::Result;
use drover_core::item::InsertResult;

#[async_trait]
impl ScheduleStore for MemoryStore {
    async fn schedule_upsert(&self, decl: &ScheduleDecl) -> Result<ScheduleRow> {
        let now = self.now();
        let mut st = self.lock();
        let row = st
            .schedules
            .entry(decl.name.clone())
            .and_modify(|r| {
                r.decl = decl.clone();
                r.seen_at = now;
            })
            .or_insert_with(|| ScheduleRow {
                decl: decl.clone(),
                last_tick: None,
                created_at: now,
                seen_at: now,
            });
        Ok(row.clone())
    }

    async fn schedule_list(&self) -> Result<Vec<ScheduleRow>> {
        Ok(self.lock().schedules.values().cloned().collect())
    }

    async fn schedule_advance(&self, p: &AdvanceParams) -> Result<AdvanceOutcome> {
        let now = self.now();
        let mut lanes = Vec::new();
        let results = {
            let mut st = self.lock();
            match st.schedules.get_mut(&p.name) {
                Some(r) if r.last_tick == p.from && r.last_tick.is_none_or(|t| t < p.to) => {
                    r.last_tick = Some(p.to);
                    r.seen_at = now;
                }
                _ => return Ok(AdvanceOutcome::Stale),
            }
            p.items
                .iter()
                .map(|it| {
                    let (r, _) = st.insert(it, now);
                    if r == InsertResult::Inserted && !lanes.contains(&it.lane) {
                        lanes.push(it.lane.clone());
                    }
                    r
                })
                .collect()
        };
        for lane in lanes {
            self.wake.counted(&lane);
        }
        Ok(AdvanceOutcome::Advanced(results))
    }

    async fn schedule_purge(&self, before: DateTime<Utc>) -> Result<u64> {
        let mut st = self.lock();
        let n = st.schedules.len();
        st.schedules.retain(|_, r| r.seen_at >= before);
        Ok((n - st.schedules.len()) as u64)
    }
}
