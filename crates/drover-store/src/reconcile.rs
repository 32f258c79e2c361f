//! The storage seam of the reconciler ([`ReconcileStore`]): checkpoints and
//! the records they cover, the nouns ([`Change`], [`SyncRecord`],
//! [`Checkpoint`], [`ConflictStrategy`]) and the pure rules the backends
//! compute with. `crate::reconcile` re-exports them under their old paths
//! and keeps the service. Every backend applies [`decide`]
//! and [`after`] per record (planned by [`plan_batch`]), inside the
//! transaction that moves the checkpoint, and [`put_local`] to a local
//! write, against the stored record it holds locked (or, for a new key, by
//! an insert that does nothing when the key appeared meanwhile).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::{Error, Result};

#[cfg(feature = "test-util")]
pub mod hook;

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
///
/// Names and keys are checked ([`validate_name`], [`validate_key`]) above
/// the backends, once: the reconciler checks its name when it is built and
/// each change's key before [`ReconcileStore::reconcile_apply`]; the
/// queue's record reads check theirs; and
/// [`ReconcileStore::reconcile_local_put`], the entry an application calls
/// on the store itself, is provided: it checks here, for every backend,
/// and calls [`ReconcileStore::reconcile_local_put_valid`].
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
    /// then. The batch's name and keys are valid (its caller checked them).
    async fn reconcile_apply(&self, batch: &ApplyBatch) -> Result<ApplyReport>;

    /// A local write to a record (the application changed it): sets its
    /// value and version, marks it changed locally (and no longer
    /// deleted), by a compare-and-set on its revision
    /// ([`put_local`](put_local)). `Conflict` for a stale or
    /// absent-but-existing expectation, `NotFound` for a revision expected
    /// of no record; nothing changes then.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `name` or `key` for a malformed one
    /// (nothing changes); as above; storage errors.
    async fn reconcile_local_put(&self, put: &LocalPut) -> Result<SyncRecord> {
        validate_name(&put.reconciler)?;
        validate_key(&put.key)?;
        self.reconcile_local_put_valid(put).await
    }

    /// The backend's half of [`ReconcileStore::reconcile_local_put`], as
    /// that method says, for a valid name and key. Call the provided method
    /// instead; it checks first.
    ///
    /// # Errors
    /// As [`ReconcileStore::reconcile_local_put`], but for the checks.
    async fn reconcile_local_put_valid(&self, put: &LocalPut) -> Result<SyncRecord>;

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
    drover_core::item::validate_kind(name).map_err(|_| {
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
}
