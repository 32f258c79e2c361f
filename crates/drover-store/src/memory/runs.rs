//! [`RunStore`] in memory: each item's last [`RUNS_KEPT`] runs, recorded
//! where a claim ends, by [`ItemRun::ended`] (the rule the SQL triggers of
//! migration 0040 follow).

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{MemoryStore, State};
use crate::runs::{ItemRun, RUNS_KEPT, RunStore};
use drover_core::error::Result;
use drover_core::item::{Item, Status};

/// One item's runs: its tenant and the runs by slot.
#[derive(Default)]
pub(super) struct Kept {
    tenant: Uuid,
    by_slot: BTreeMap<i64, ItemRun>,
}

impl State {
    /// Records the run that ended if `before` (the row as it was) was
    /// claimed and the row now is not: the memory twin of the trigger.
    pub(super) fn end_run(&mut self, before: &Item) {
        if before.status != Status::Claimed {
            return;
        }
        let Some(after) = self.items.get(&before.id) else {
            return;
        };
        // A first claim that ends done is the item itself (the SQL
        // backends' trigger writes no row for it either).
        if after.status == Status::Claimed
            || (after.status == Status::Done && before.claim_seq <= 1)
        {
            return;
        }
        let run = ItemRun::ended(before, after);
        let kept = self.runs.entry(before.id).or_default();
        kept.tenant = before.tenant_id;
        kept.by_slot.insert(run.slot(), run);
    }
}

#[async_trait]
impl RunStore for MemoryStore {
    async fn item_runs(&self, tenant: Uuid, id: Uuid) -> Result<Vec<ItemRun>> {
        let st = self.lock();
        let Some(kept) = st.runs.get(&id).filter(|k| k.tenant == tenant) else {
            return Ok(Vec::new());
        };
        let mut runs: Vec<ItemRun> = kept.by_slot.values().cloned().collect();
        runs.sort_by_key(|r| std::cmp::Reverse(r.claim_seq));
        runs.truncate(RUNS_KEPT as usize);
        Ok(runs)
    }

    async fn item_runs_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        let mut st = self.lock();
        let mut left = u64::from(batch);
        let mut gone = 0;
        st.runs.retain(|_, kept| {
            kept.by_slot.retain(|_, run| {
                if left > 0 && run.finished_at < before {
                    left -= 1;
                    gone += 1;
                    false
                } else {
                    true
                }
            });
            !kept.by_slot.is_empty()
        });
        Ok(gone)
    }
}
