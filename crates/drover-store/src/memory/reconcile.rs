//! Reconciler checkpoints and records in memory, under the store's one
//! lock: a batch's checkpoint move and record writes are one critical
//! section, exactly as one SQL transaction.

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::MemoryStore;
use crate::reconcile::{
    ApplyBatch, ApplyReport, Checkpoint, LocalPut, ReconcileStore, RecordFilter, Resolution,
    SyncRecord, batch_keys, plan_batch, put_local, resolved,
};
use drover_core::error::{Error, Result};

/// The checkpoints and records, keyed by (tenant, reconciler[, key]).
#[derive(Default)]
pub(super) struct Sync {
    checkpoints: BTreeMap<(Uuid, String), Checkpoint>,
    records: BTreeMap<(Uuid, String, String), SyncRecord>,
}

/// A tombstone past retention: deleted by the source, written before
/// `before`, not changed locally since, nothing parked.
fn purgeable(r: &SyncRecord, before: DateTime<Utc>) -> bool {
    r.deleted && !r.dirty && r.review.is_none() && r.updated_at < before
}

#[async_trait]
impl ReconcileStore for MemoryStore {
    async fn reconcile_checkpoint_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
    ) -> Result<Option<Checkpoint>> {
        let st = self.lock();
        Ok(st
            .sync
            .checkpoints
            .get(&(tenant, reconciler.to_owned()))
            .cloned())
    }

    async fn reconcile_checkpoint_list(&self) -> Result<Vec<Checkpoint>> {
        let st = self.lock();
        let mut all: Vec<Checkpoint> = st.sync.checkpoints.values().cloned().collect();
        all.sort_by(|a, b| (&a.reconciler, a.tenant_id).cmp(&(&b.reconciler, b.tenant_id)));
        Ok(all)
    }

    async fn reconcile_apply(&self, b: &ApplyBatch) -> Result<ApplyReport> {
        let now = self.now();
        let mut st = self.lock();
        let id = (b.tenant_id, b.reconciler.clone());
        let current = st.sync.checkpoints.get(&id).map_or(0, |c| c.version);
        if current != b.expected_version {
            return Err(Error::Conflict(format!(
                "the checkpoint of reconciler {} moved past version {}",
                b.reconciler, b.expected_version
            )));
        }
        let locals = batch_keys(b)
            .into_iter()
            .filter_map(|k| {
                st.sync
                    .records
                    .get(&(b.tenant_id, b.reconciler.clone(), k.clone()))
                    .map(|r| (k, r.clone()))
            })
            .collect();
        let (writes, mut report) = plan_batch(b, locals, now);
        for r in writes {
            st.sync
                .records
                .insert((r.tenant_id, r.reconciler.clone(), r.key.clone()), r);
        }
        let applied = st.sync.checkpoints.get(&id).map_or(0, |c| c.applied);
        let cp = Checkpoint {
            tenant_id: b.tenant_id,
            reconciler: b.reconciler.clone(),
            cursor: b.cursor.clone(),
            version: current + 1,
            applied: applied + i64::try_from(b.changes.len()).unwrap_or(i64::MAX),
            updated_at: now,
        };
        st.sync.checkpoints.insert(id, cp);
        report.checkpoint_version = current + 1;
        Ok(report)
    }

    async fn reconcile_local_put_valid(&self, put: &LocalPut) -> Result<SyncRecord> {
        let now = self.now();
        let mut st = self.lock();
        let id = (put.tenant_id, put.reconciler.clone(), put.key.clone());
        let next = put_local(st.sync.records.get(&id), put, now)?;
        st.sync.records.insert(id, next.clone());
        Ok(next)
    }

    async fn reconcile_purge_deleted(
        &self,
        reconciler: &str,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64> {
        let mut st = self.lock();
        let gone: Vec<_> = st
            .sync
            .records
            .iter()
            .filter(|(_, r)| r.reconciler == reconciler && purgeable(r, before))
            .map(|(id, _)| id.clone())
            .take(limit as usize)
            .collect();
        for id in &gone {
            st.sync.records.remove(id);
        }
        Ok(gone.len() as u64)
    }

    async fn reconcile_record_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
    ) -> Result<Option<SyncRecord>> {
        let st = self.lock();
        Ok(st
            .sync
            .records
            .get(&(tenant, reconciler.to_owned(), key.to_owned()))
            .cloned())
    }

    async fn reconcile_record_list(&self, f: &RecordFilter) -> Result<Vec<SyncRecord>> {
        let st = self.lock();
        Ok(st
            .sync
            .records
            .values()
            .filter(|r| r.tenant_id == f.tenant_id && r.reconciler == f.reconciler)
            .filter(|r| !f.in_review || r.review.is_some())
            .filter(|r| f.after_key.as_ref().is_none_or(|k| r.key > *k))
            .take(f.limit as usize)
            .cloned()
            .collect())
    }

    async fn reconcile_review_resolve(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
        resolution: Resolution,
    ) -> Result<SyncRecord> {
        let now = self.now();
        let mut st = self.lock();
        let id = (tenant, reconciler.to_owned(), key.to_owned());
        let Some(r) = st.sync.records.get(&id) else {
            return Err(Error::NotFound(format!(
                "record {key} of reconciler {reconciler}"
            )));
        };
        let next = resolved(r, resolution, now)?;
        st.sync.records.insert(id, next.clone());
        Ok(next)
    }
}
