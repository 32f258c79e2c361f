//! The sync reconciler: keeps drover-held copies of records in step with an
//! external system.
//!
//! | part | owns |
//! |---|---|
//! | this module | the nouns ([`Change`], [`SyncRecord`], [`Checkpoint`]), the declared [`ReconcilerStrategy`], and [`decide`], the one pure rule every backend applies per record |
//! | [`store`](ReconcileStore) | the storage seam: checkpoints and records, [`ReconcileStore`] |
//! | [`service`](Reconciler) | the service: pulls a batch from a user-supplied [`Source`], applies it with its checkpoint, runs on a jittered timer |
//!
//! Invariants (each checked by the contract cases in
//! `store/contract/reconcile.rs` and by `tests/integration/reconcile.rs`):
//!
//! - A batch's records and the checkpoint (cursor) past it commit in one
//!   transaction, so the checkpoint is never ahead of the applied records
//!   and a crash mid-batch leaves neither: the next run pulls the same
//!   batch again from the committed cursor.
//! - The checkpoint moves by a compare-and-set on its version: of two
//!   runners applying the same batch, one lands and the other changes
//!   nothing ([`Error::Conflict`]).
//! - A change at or below the version last taken from the source for its
//!   record is a replay and changes nothing, so an at-least-once source
//!   cannot move a record backwards.
//! - A record changed locally since it last took the source's value is in
//!   conflict with the next change; only then does the declared
//!   [`ConflictStrategy`] decide. `park_for_review` never drops the
//!   external change: it is kept on the record and listed until an operator
//!   resolves it.

use crate::error::{Error, Result};

mod as_service;
mod backoff;
mod service;

#[cfg(feature = "test-util")]
pub use crate::store::reconcile::hook;
pub use crate::store::reconcile::{
    ApplyBatch, ApplyReport, Change, Checkpoint, ConflictStrategy, Decision, LocalPut,
    ReconcileStore, RecordFilter, Resolution, SyncRecord, after, batch_keys, decide, plan_batch,
    put_local, resolved, validate_key, validate_name,
};
pub use backoff::TenantFailure;
pub use service::{
    BatchReport, RECONCILE_BACKOFF_BASE_DEFAULT, RECONCILE_BACKOFF_CAP_DEFAULT,
    RECONCILE_BATCH_DEFAULT, RECONCILE_BATCH_MAX, RECONCILE_INTERVAL_DEFAULT,
    RECONCILE_JITTER_DEFAULT, RECONCILE_PURGE_LIMIT, RECONCILE_RETENTION_DEFAULT,
    RECONCILER_IDEMPOTENCY, RECONCILER_RECOVERY, RECONCILER_RETRY, ReconcileReport, Reconciler,
    ReconcilerConfig, Source, SourceBatch, SourceError,
};

/// What a reconciler declares, as `drover handlers` prints it. A blank
/// text makes the worker refuse to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcilerStrategy {
    /// How conflicts are settled.
    pub conflict: ConflictStrategy,
    /// Why that strategy suits these records.
    pub conflict_reason: &'static str,
    /// What the checkpoint is and how a restart resumes from it.
    pub checkpoint: &'static str,
}

impl ReconcilerStrategy {
    /// Checks the declaration.
    ///
    /// # Errors
    /// [`Error::Config`] naming the blank field.
    pub fn check(&self, name: &str) -> Result<()> {
        if self.conflict_reason.trim().is_empty() {
            return Err(Error::Config(format!(
                "reconciler {name} declares no reason for its conflict strategy"
            )));
        }
        if self.checkpoint.trim().is_empty() {
            return Err(Error::Config(format!(
                "reconciler {name} declares no checkpoint strategy"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn blank_declarations_are_refused() {
        let ok = ReconcilerStrategy {
            conflict: ConflictStrategy::LocalWins,
            conflict_reason: "local edits are authoritative",
            checkpoint: "cursor per tenant committed with the batch",
        };
        assert!(ok.check("crm").is_ok());
        assert!(
            ReconcilerStrategy {
                conflict_reason: " ",
                ..ok
            }
            .check("crm")
            .is_err()
        );
        assert!(
            ReconcilerStrategy {
                checkpoint: "",
                ..ok
            }
            .check("crm")
            .is_err()
        );
        for s in ConflictStrategy::ALL {
            assert_eq!(ConflictStrategy::parse(s.as_str()).unwrap(), s);
        }
    }
}
