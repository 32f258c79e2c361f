//! The storage seam of the reconciler ([`ReconcileStore`]): checkpoints and
//! the records they cover. Every backend applies [`decide`](super::decide)
//! and [`after`](super::after) per record, inside the transaction that
//! moves the checkpoint, and [`put_local`](super::put_local) to a local
//! write, against the stored record it holds locked (or, for a new key, by
//! an insert that does nothing when the key appeared meanwhile).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
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

/// A local write to a record (the application changed it), a
/// compare-and-set on the record's revision.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalPut {
    /// The tenant.
    pub tenant_id: Uuid,
    /// The reconciler.
    pub reconciler: String,
    /// The record's key.
    pub key: String,
    /// Its new value.
    pub data: serde_json::Value,
    /// The version of the new value (compared with the source's by
    /// `newest_version_wins`).
    pub version: i64,
    /// The revision the writer read ([`SyncRecord::revision`]); `None`: the
    /// record must not exist yet. Any other revision stored (a batch or
    /// another writer wrote since) refuses the write with `Conflict`.
    pub expected_revision: Option<i64>,
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
    /// value and version, marks it changed locally (and no longer
    /// deleted), by a compare-and-set on its revision
    /// ([`put_local`](super::put_local)). `Conflict` for a stale or
    /// absent-but-existing expectation, `NotFound` for a revision expected
    /// of no record; nothing changes then.
    async fn reconcile_local_put(&self, put: &LocalPut) -> Result<SyncRecord>;

    /// Purges up to `limit` tombstones of `reconciler` across tenants
    /// (system operation): records the source deleted, last written before
    /// `before`, neither changed locally since nor parked for review.
    /// Returns how many went.
    async fn reconcile_purge_deleted(
        &self,
        reconciler: &str,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64>;

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
