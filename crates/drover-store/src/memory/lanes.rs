//! The lane state rows of the memory backend, under the store's one lock.

use async_trait::async_trait;

use super::MemoryStore;
use crate::lane::{LaneSetParams, LaneState, LaneStore};
use drover_core::error::Result;

#[async_trait]
impl LaneStore for MemoryStore {
    async fn lane_set(&self, p: &LaneSetParams) -> Result<LaneState> {
        let now = self.now();
        let row = LaneState {
            lane: p.lane.clone(),
            paused: p.paused,
            changed_at: now,
            changed_by: p.actor,
        };
        self.lock().lanes.insert(p.lane.clone(), row.clone());
        Ok(row)
    }

    async fn lane_list(&self) -> Result<Vec<LaneState>> {
        Ok(self.lock().lanes.values().cloned().collect())
    }
}
