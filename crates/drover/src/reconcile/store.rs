//! The storage seam of the reconciler ([`ReconcileStore`]): checkpoints and
//! the records they cover. Every backend applies [`decide`](super::decide)
//! and [`after`](super::after) per record, inside the transaction that
//! moves the checkpoint.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Change, Checkpoint, ConflictStrategy, SyncRecord};
use crate::error::Result;

/// One batch to apply with the checkpoint past it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyBatch {
    /// The tenant.
    pub tenant_id: Uuid,
    /// The reconciler.
    pub reconciler: String,
    /// The checkpoint version the batch was pulled at (0: no checkpoint
    /// yet). The batch lands only on it.
    pub expected_version: i64,
    /// The source's cursor after the batch.
    pub cursor: String,
    /// The changes, in the source's order.
    pub changes: Vec<Change>,
    /// How conflicts are settled.
    pub conflict: ConflictStrategy,
}

/// What applying a batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyReport {
    /// Records inserted.
    pub inserted: u64,
    /// Records that took the source's value.
    pub applied: u64,
    /// Conflicts the local value won.
    pub kept_local: u64,
    /// Conflicts parked for review.
    pub parked: u64,
    /// Replays that changed nothing.
    pub skipped: u64,
    /// The checkpoint's version after the batch.
    pub checkpoint_version: i64,
}

/// How an operator settles a record parked for review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Take the parked source change.
    AcceptExternal,
    /// Keep the local value; drop the parked change.
    KeepLocal,
}

/// A filter for [`ReconcileStore::reconcile_record_list`].
#[derive(Debug, Clone, Default)]
pub struct RecordFilter {
    /// The tenant.
    pub tenant_id: Uuid,
    /// The reconciler.
    pub reconciler: String,
    /// Only records parked for review.
    pub in_review: bool,
    /// Only keys after this one (paging), in key order.
    pub after_key: Option<String>,
    /// At most this many.
    pub limit: u32,
}

/// The storage of reconciler checkpoints and records. See the module docs
/// of [`reconcile`](super) for the invariants.
#[async_trait]
pub trait ReconcileStore: Send + Sync {
    /// The checkpoint of (`reconciler`, `tenant`), if a batch ever landed.
    async fn reconcile_checkpoint_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
    ) -> Result<Option<Checkpoint>>;

    /// Every checkpoint across tenants (system operation), by reconciler
    /// then tenant.
    async fn reconcile_checkpoint_list(&self) -> Result<Vec<Checkpoint>>;

    /// Moves the checkpoint (compare-and-set on its version) and applies
    /// each change by `batch.conflict`, in one transaction. `Conflict` when
    /// the checkpoint moved since the batch was pulled; nothing changes
    /// then.
    async fn reconcile_apply(&self, batch: &ApplyBatch) -> Result<ApplyReport>;

    /// A local write to a record (the application changed it): sets its
    /// value and version and marks it changed locally.
    async fn reconcile_local_put(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
        data: &serde_json::Value,
        version: i64,
    ) -> Result<SyncRecord>;

    /// Reads one record.
    async fn reconcile_record_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
    ) -> Result<Option<SyncRecord>>;

    /// Lists records in key order.
    async fn reconcile_record_list(&self, filter: &RecordFilter) -> Result<Vec<SyncRecord>>;

    /// Settles a record parked for review. `NotFound` for no such record;
    /// `Conflict` when it has no review pending.
    async fn reconcile_review_resolve(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
        resolution: Resolution,
    ) -> Result<SyncRecord>;
}
