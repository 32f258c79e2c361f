//! [`WorkerStore`] in memory: the liveness rows, stamped on the injected
//! clock.

use std::time::Duration;

use async_trait::async_trait;

use super::MemoryStore;
use crate::{WorkerRow, WorkerStore};
use drover_core::error::Result;

#[async_trait]
impl WorkerStore for MemoryStore {
    async fn worker_beat(&self, row: &WorkerRow) -> Result<()> {
        let mut row = row.clone();
        row.last_beat_at = self.clock.now();
        row.beat_interval_ms = row.beat_interval_ms.max(1);
        self.lock().workers.insert(row.id.clone(), row);
        Ok(())
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRow>> {
        let now = self.clock.now();
        let mut rows: Vec<WorkerRow> = self.lock().workers.values().cloned().collect();
        for r in &mut rows {
            let silent = chrono::Duration::milliseconds(
                i64::from(r.beat_interval_ms) * i64::from(crate::LOST_AFTER_BEATS),
            );
            if r.state != "offline" && r.last_beat_at < now - silent {
                r.state = "lost".into();
            }
        }
        rows.sort_by(|a, b| b.last_beat_at.cmp(&a.last_beat_at).then(a.id.cmp(&b.id)));
        Ok(rows)
    }

    async fn worker_purge(&self, older_than: Duration) -> Result<u64> {
        let before = self.clock.now() - drover_core::rules::to_chrono(older_than);
        let mut st = self.lock();
        let n = st.workers.len();
        st.workers.retain(|_, r| r.last_beat_at >= before);
        Ok((n - st.workers.len()) as u64)
    }
}
