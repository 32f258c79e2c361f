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
//! `store/contract/reconcile.rs` and by `tests/reconcile.rs`):
//!
//! - A batch's records and the checkpoint (cursor) past it commit in one
//!   transaction, so the checkpoint is never ahead of the applied records
//!   and a crash mid-batch leaves neither: the next run pulls the same
//!   batch again from the committed cursor.
//! - The checkpoint moves by a compare-and-set on its version: of two
//!   runners applying the same batch, one lands and the other changes
//!   nothing ([`Error::Conflict`](crate::Error::Conflict)).
//! - A change at or below the version last taken from the source for its
//!   record is a replay and changes nothing, so an at-least-once source
//!   cannot move a record backwards.
//! - A record changed locally since it last took the source's value is in
//!   conflict with the next change; only then does the declared
//!   [`ConflictStrategy`] decide. `park_for_review` never drops the
//!   external change: it is kept on the record and listed until an operator
//!   resolves it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};

mod as_service;
mod backoff;
#[cfg(feature = "test-util")]
pub mod hook;
mod service;
mod store;

pub use backoff::TenantFailure;
pub use service::{
    BatchReport, RECONCILE_BACKOFF_BASE_DEFAULT, RECONCILE_BACKOFF_CAP_DEFAULT,
    RECONCILE_BATCH_DEFAULT, RECONCILE_BATCH_MAX, RECONCILE_INTERVAL_DEFAULT,
    RECONCILE_JITTER_DEFAULT, RECONCILE_PURGE_LIMIT, RECONCILE_RETENTION_DEFAULT,
    RECONCILER_IDEMPOTENCY, RECONCILER_RECOVERY, RECONCILER_RETRY, ReconcileReport, Reconciler,
    ReconcilerConfig, Source, SourceBatch, SourceError,
};
pub use store::{ApplyBatch, ApplyReport, LocalPut, ReconcileStore, RecordFilter, Resolution};

/// How a record changed both locally and in the source is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConflictStrategy {
    /// The source's change replaces the local one.
    ExternalWins,
    /// The local change stays; the source's change is noted as seen.
    LocalWins,
    /// The change with the higher version stays (the local one on a tie).
    NewestVersionWins,
    /// The local change stays and the source's change is kept on the record
    /// for an operator, listed until resolved.
    ParkForReview,
}

impl ConflictStrategy {
    /// Every strategy, in the order the docs list them.
    pub const ALL: [ConflictStrategy; 4] = [
        ConflictStrategy::ExternalWins,
        ConflictStrategy::LocalWins,
        ConflictStrategy::NewestVersionWins,
        ConflictStrategy::ParkForReview,
    ];

    /// The declared name.
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictStrategy::ExternalWins => "external_wins",
            ConflictStrategy::LocalWins => "local_wins",
            ConflictStrategy::NewestVersionWins => "newest_version_wins",
            ConflictStrategy::ParkForReview => "park_for_review",
        }
    }

    /// Parses a declared name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `conflict`.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| Error::invalid("conflict", format!("unknown conflict strategy {s:?}")))
    }
}

impl std::fmt::Display for ConflictStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// One change a source reports for one record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The record's key in the source (1 to 512 bytes).
    pub key: String,
    /// The source's version of the record (a counter or a timestamp, growing
    /// with each change of the record).
    pub version: i64,
    /// The record's value in the source.
    pub data: serde_json::Value,
    /// The source deleted the record: it is kept as a tombstone (so a
    /// replay of an older change cannot bring it back) and purged once
    /// older than the reconciler's retention. Absent in JSON: `false`.
    #[serde(default)]
    pub deleted: bool,
}

/// A record as drover holds it for one reconciler and tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncRecord {
    /// Its tenant.
    pub tenant_id: Uuid,
    /// The reconciler that keeps it.
    pub reconciler: String,
    /// Its key.
    pub key: String,
    /// Its current value.
    pub data: serde_json::Value,
    /// The version of its current value (the source's, or the local
    /// writer's).
    pub version: i64,
    /// Grows by one with every write of the record (a batch's, a local
    /// put's, a resolution's): what a local put's compare-and-set names
    /// ([`LocalPut::expected_revision`]). `version` cannot fence, as a
    /// source and a local writer may each write the same number.
    pub revision: i64,
    /// The highest source version taken or seen for it (`None`: only ever
    /// written locally).
    pub source_version: Option<i64>,
    /// Changed locally since it last took the source's value.
    pub dirty: bool,
    /// A source change parked for review (strategy `park_for_review`).
    pub review: Option<Change>,
    /// The source deleted it (a tombstone, purged after the retention
    /// unless changed locally or parked).
    pub deleted: bool,
    /// Its last write.
    pub updated_at: DateTime<Utc>,
}

/// A reconciler's position in its source, per tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The tenant.
    pub tenant_id: Uuid,
    /// The reconciler.
    pub reconciler: String,
    /// The source's cursor after the last applied batch.
    pub cursor: String,
    /// Grows by one with every batch; every move is conditioned on it.
    pub version: i64,
    /// Changes applied in all (replays and kept local values included).
    pub applied: i64,
    /// When the last batch committed.
    pub updated_at: DateTime<Utc>,
}

/// What [`decide`] says to do with one change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// New record: insert the source's value.
    Insert,
    /// Take the source's value (no conflict, or the source won it).
    Apply,
    /// A conflict the local value won: note the source version as seen.
    KeepLocal,
    /// A conflict parked for review: keep the local value, hold the change.
    Park,
    /// A replay (at or below the source version already taken): nothing.
    Skip,
}

/// The rule every backend applies to each change, written once.
pub fn decide(local: Option<&SyncRecord>, change: &Change, strategy: ConflictStrategy) -> Decision {
    let Some(local) = local else {
        return Decision::Insert;
    };
    if local.source_version.is_some_and(|v| change.version <= v) {
        return Decision::Skip;
    }
    if !local.dirty {
        return Decision::Apply;
    }
    match strategy {
        ConflictStrategy::ExternalWins => Decision::Apply,
        ConflictStrategy::LocalWins => Decision::KeepLocal,
        ConflictStrategy::NewestVersionWins if change.version > local.version => Decision::Apply,
        ConflictStrategy::NewestVersionWins => Decision::KeepLocal,
        ConflictStrategy::ParkForReview => Decision::Park,
    }
}

/// The record after `decision` (`None` for [`Decision::Skip`]): what the
/// backends write.
pub fn after(
    tenant: Uuid,
    reconciler: &str,
    local: Option<&SyncRecord>,
    change: &Change,
    decision: Decision,
    now: DateTime<Utc>,
) -> Option<SyncRecord> {
    let taken = || SyncRecord {
        tenant_id: tenant,
        reconciler: reconciler.to_owned(),
        key: change.key.clone(),
        data: change.data.clone(),
        version: change.version,
        revision: local.map_or(1, |l| l.revision + 1),
        source_version: Some(change.version),
        dirty: false,
        review: None,
        deleted: change.deleted,
        updated_at: now,
    };
    match (decision, local) {
        (Decision::Skip, _) => None,
        (Decision::Insert | Decision::Apply, _) | (_, None) => Some(taken()),
        (Decision::KeepLocal, Some(l)) => Some(SyncRecord {
            source_version: Some(change.version),
            revision: l.revision + 1,
            updated_at: now,
            ..l.clone()
        }),
        (Decision::Park, Some(l)) => Some(SyncRecord {
            source_version: Some(change.version),
            revision: l.revision + 1,
            review: Some(change.clone()),
            updated_at: now,
            ..l.clone()
        }),
    }
}

/// The record after an operator's `resolution` of its parked review.
///
/// # Errors
/// [`Error::Conflict`] when it has no review pending.
pub fn resolved(r: &SyncRecord, resolution: Resolution, now: DateTime<Utc>) -> Result<SyncRecord> {
    let Some(review) = &r.review else {
        return Err(Error::Conflict(format!(
            "record {} of reconciler {} has no review pending",
            r.key, r.reconciler
        )));
    };
    Ok(match resolution {
        Resolution::AcceptExternal => SyncRecord {
            data: review.data.clone(),
            version: review.version,
            revision: r.revision + 1,
            dirty: false,
            deleted: review.deleted,
            review: None,
            updated_at: now,
            ..r.clone()
        },
        Resolution::KeepLocal => SyncRecord {
            revision: r.revision + 1,
            review: None,
            updated_at: now,
            ..r.clone()
        },
    })
}

/// The record after a local write `put` over the stored one (`existing`):
/// the compare-and-set every backend applies, written once.
///
/// # Errors
/// [`Error::Conflict`] when `put.expected_revision` is `None` and the
/// record exists (a tombstone included), or names another revision than
/// the stored one; [`Error::NotFound`] when it names a revision and there
/// is no record.
pub fn put_local(
    existing: Option<&SyncRecord>,
    put: &LocalPut,
    now: DateTime<Utc>,
) -> Result<SyncRecord> {
    match (existing, put.expected_revision) {
        (None, None) => Ok(SyncRecord {
            tenant_id: put.tenant_id,
            reconciler: put.reconciler.clone(),
            key: put.key.clone(),
            data: put.data.clone(),
            version: put.version,
            revision: 1,
            source_version: None,
            dirty: true,
            review: None,
            deleted: false,
            updated_at: now,
        }),
        (None, Some(_)) => Err(Error::NotFound(format!(
            "record {} of reconciler {}",
            put.key, put.reconciler
        ))),
        (Some(r), expected) if expected != Some(r.revision) => Err(Error::Conflict(format!(
            "record {} of reconciler {} is at revision {}, not {}",
            put.key,
            put.reconciler,
            r.revision,
            expected.map_or_else(|| "absent".to_owned(), |v| v.to_string())
        ))),
        (Some(r), _) => Ok(SyncRecord {
            data: put.data.clone(),
            version: put.version,
            revision: r.revision + 1,
            dirty: true,
            deleted: false,
            updated_at: now,
            ..r.clone()
        }),
    }
}

/// Decides every change of `batch` in order against the records read for
/// its keys (`locals`), a later change of a key seeing the earlier one's
/// result: the final value of each key written (one per key, in key
/// order, its revision one past the stored one however many changes of
/// the batch touched it) and the counts. Shared by every backend.
pub fn plan_batch(
    batch: &ApplyBatch,
    mut locals: std::collections::BTreeMap<String, SyncRecord>,
    now: DateTime<Utc>,
) -> (Vec<SyncRecord>, ApplyReport) {
    let stored: std::collections::BTreeMap<String, i64> = locals
        .iter()
        .map(|(k, r)| (k.clone(), r.revision))
        .collect();
    let mut report = ApplyReport::default();
    let mut touched = std::collections::BTreeSet::new();
    for change in &batch.changes {
        let local = locals.get(&change.key);
        let decision = decide(local, change, batch.conflict);
        match decision {
            Decision::Insert => report.inserted += 1,
            Decision::Apply => report.applied += 1,
            Decision::KeepLocal => report.kept_local += 1,
            Decision::Park => report.parked += 1,
            Decision::Skip => report.skipped += 1,
        }
        if let Some(next) = after(
            batch.tenant_id,
            &batch.reconciler,
            local,
            change,
            decision,
            now,
        ) {
            touched.insert(change.key.clone());
            locals.insert(change.key.clone(), next);
        }
    }
    let writes = touched
        .into_iter()
        .filter_map(|k| {
            let mut r = locals.remove(&k)?;
            r.revision = stored.get(&k).map_or(1, |v| v + 1);
            Some(r)
        })
        .collect();
    (writes, report)
}

/// The distinct keys of a batch, sorted (the order rows are locked in, so
/// two transactions never lock one pair of rows in opposite orders).
pub fn batch_keys(batch: &ApplyBatch) -> Vec<String> {
    let keys: std::collections::BTreeSet<&str> =
        batch.changes.iter().map(|c| c.key.as_str()).collect();
    keys.into_iter().map(str::to_owned).collect()
}

/// Checks a reconciler's name (the kind rules: `[a-z0-9_.:-]{1,128}`).
///
/// # Errors
/// [`Error::InvalidInput`] on `name`.
pub fn validate_name(name: &str) -> Result<()> {
    crate::item::validate_kind(name).map_err(|_| {
        Error::invalid(
            "name",
            format!("reconciler name {name:?} must match [a-z0-9_.:-]{{1,128}}"),
        )
    })
}

/// Checks a change's key.
///
/// # Errors
/// [`Error::InvalidInput`] on `key`.
pub fn validate_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > 512 {
        return Err(Error::invalid("key", "must be 1 to 512 bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn rec(version: i64, source: Option<i64>, dirty: bool) -> SyncRecord {
        SyncRecord {
            tenant_id: Uuid::nil(),
            reconciler: "crm".into(),
            key: "k".into(),
            data: json!("local"),
            version,
            revision: 1,
            source_version: source,
            dirty,
            review: None,
            deleted: false,
            updated_at: Utc::now(),
        }
    }

    fn ch(version: i64) -> Change {
        Change {
            key: "k".into(),
            version,
            data: json!("external"),
            deleted: false,
        }
    }

    #[test]
    fn no_conflict_takes_the_source_under_every_strategy() {
        for s in ConflictStrategy::ALL {
            assert_eq!(decide(None, &ch(1), s), Decision::Insert);
            assert_eq!(
                decide(Some(&rec(3, Some(3), false)), &ch(4), s),
                Decision::Apply
            );
        }
    }

    #[test]
    fn replay_is_skipped_under_every_strategy() {
        for s in ConflictStrategy::ALL {
            assert_eq!(
                decide(Some(&rec(3, Some(3), false)), &ch(3), s),
                Decision::Skip
            );
            assert_eq!(
                decide(Some(&rec(9, Some(5), true)), &ch(2), s),
                Decision::Skip
            );
        }
    }

    #[test]
    fn conflict_follows_the_strategy() {
        let local = rec(10, Some(5), true);
        assert_eq!(
            decide(Some(&local), &ch(6), ConflictStrategy::ExternalWins),
            Decision::Apply
        );
        assert_eq!(
            decide(Some(&local), &ch(6), ConflictStrategy::LocalWins),
            Decision::KeepLocal
        );
        assert_eq!(
            decide(Some(&local), &ch(6), ConflictStrategy::NewestVersionWins),
            Decision::KeepLocal
        );
        assert_eq!(
            decide(Some(&local), &ch(10), ConflictStrategy::NewestVersionWins),
            Decision::KeepLocal,
            "a tie keeps the local value"
        );
        assert_eq!(
            decide(Some(&local), &ch(11), ConflictStrategy::NewestVersionWins),
            Decision::Apply
        );
        assert_eq!(
            decide(Some(&local), &ch(6), ConflictStrategy::ParkForReview),
            Decision::Park
        );
    }

    #[test]
    fn park_keeps_local_and_holds_the_change_until_resolved() {
        let local = rec(10, Some(5), true);
        let now = Utc::now();
        let parked = after(
            Uuid::nil(),
            "crm",
            Some(&local),
            &ch(6),
            Decision::Park,
            now,
        )
        .unwrap();
        assert_eq!(parked.data, json!("local"));
        assert_eq!(parked.review, Some(ch(6)));
        assert_eq!(parked.source_version, Some(6));
        let kept = resolved(&parked, Resolution::KeepLocal, now).unwrap();
        assert_eq!(
            (kept.data.clone(), kept.review.clone(), kept.dirty),
            (json!("local"), None, true)
        );
        let taken = resolved(&parked, Resolution::AcceptExternal, now).unwrap();
        assert_eq!(
            (taken.data, taken.version, taken.dirty),
            (json!("external"), 6, false)
        );
        assert!(resolved(&kept, Resolution::KeepLocal, now).is_err());
    }

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
