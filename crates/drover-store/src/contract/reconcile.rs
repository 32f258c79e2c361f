//! Contract cases for [`ReconcileStore`](crate::reconcile::ReconcileStore):
//! the first batch and its checkpoint, the checkpoint's compare-and-set
//! (stale and racing batches change nothing), replays, each conflict
//! strategy, reviews listed and resolved, and tenant isolation. Run by every
//! backend through [`reconcile_contract_suite!`](crate::reconcile_contract_suite).

use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use super::{Harness, assert_kind, tenant_a, tenant_b};
use crate::reconcile::{
    ApplyBatch, Change, ConflictStrategy, LocalPut, RecordFilter, Resolution, SyncRecord,
};
use drover_core::error::ErrorKind;

/// Expands to one `#[tokio::test]` per reconciler contract case.
#[macro_export]
macro_rules! reconcile_contract_suite {
    ($setup:path) => {
        $crate::__reconcile_cases!($setup;
            reconcile_first_batch_writes_records_and_checkpoint,
            reconcile_stale_batch_changes_nothing,
            reconcile_racing_batches_one_lands,
            reconcile_replay_changes_nothing,
            reconcile_conflicts_follow_the_strategy,
            reconcile_park_for_review_is_listed_and_resolved,
            reconcile_tenants_isolated,
            reconcile_local_put_is_compare_and_set,
            reconcile_local_put_refuses_a_bad_name_or_key,
            reconcile_batch_fences_a_stale_local_writer,
            reconcile_tombstones_purged_after_retention,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __reconcile_cases {
    ($setup:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let h = $setup().await;
                $crate::contract::reconcile::$case(&h).await;
                h.finish().await;
            }
        )*
    };
}

const NAME: &str = "crm";

fn ch(key: &str, version: i64, data: serde_json::Value) -> Change {
    Change {
        key: key.into(),
        version,
        data,
        deleted: false,
    }
}

fn put(
    tenant: Uuid,
    key: &str,
    data: serde_json::Value,
    version: i64,
    expected_revision: Option<i64>,
) -> LocalPut {
    LocalPut {
        tenant_id: tenant,
        reconciler: NAME.into(),
        key: key.into(),
        data,
        version,
        expected_revision,
    }
}

/// A local write at the record's current revision (read first).
async fn local(h: &Harness, tenant: Uuid, key: &str, data: serde_json::Value, version: i64) {
    let expected = h
        .store
        .reconcile_record_get(tenant, NAME, key)
        .await
        .expect("get")
        .map(|r| r.revision);
    h.store
        .reconcile_local_put(&put(tenant, key, data, version, expected))
        .await
        .expect("local put");
}

fn batch(
    tenant: Uuid,
    expected: i64,
    cursor: &str,
    changes: Vec<Change>,
    conflict: ConflictStrategy,
) -> ApplyBatch {
    ApplyBatch {
        tenant_id: tenant,
        reconciler: NAME.into(),
        expected_version: expected,
        cursor: cursor.into(),
        changes,
        conflict,
    }
}

async fn rec(h: &Harness, tenant: Uuid, key: &str) -> SyncRecord {
    h.store
        .reconcile_record_get(tenant, NAME, key)
        .await
        .expect("get")
        .expect("record exists")
}

async fn all(h: &Harness, tenant: Uuid, in_review: bool) -> Vec<SyncRecord> {
    h.store
        .reconcile_record_list(&RecordFilter {
            tenant_id: tenant,
            reconciler: NAME.into(),
            in_review,
            after_key: None,
            limit: 1000,
        })
        .await
        .expect("list")
}

/// A first batch inserts its records and the checkpoint at version 1; a
/// key changed twice in one batch ends at its last change.
pub async fn reconcile_first_batch_writes_records_and_checkpoint(h: &Harness) {
    let s = &h.store;
    assert!(
        s.reconcile_checkpoint_get(tenant_a(), NAME)
            .await
            .unwrap()
            .is_none()
    );
    let b = batch(
        tenant_a(),
        0,
        "c3",
        vec![
            ch("a", 1, json!(1)),
            ch("b", 1, json!(2)),
            ch("a", 2, json!(3)),
        ],
        ConflictStrategy::ExternalWins,
    );
    let r = s.reconcile_apply(&b).await.expect("apply");
    assert_eq!((r.inserted, r.applied, r.checkpoint_version), (2, 1, 1));
    let cp = s
        .reconcile_checkpoint_get(tenant_a(), NAME)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((cp.cursor.as_str(), cp.version, cp.applied), ("c3", 1, 3));
    let a = rec(h, tenant_a(), "a").await;
    assert_eq!(
        (a.data, a.version, a.source_version, a.dirty),
        (json!(3), 2, Some(2), false)
    );
    assert_eq!(all(h, tenant_a(), false).await.len(), 2);
    let listed = s.reconcile_checkpoint_list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0], cp);
}

/// A batch pulled at an old checkpoint version changes nothing.
pub async fn reconcile_stale_batch_changes_nothing(h: &Harness) {
    let s = &h.store;
    let first = batch(
        tenant_a(),
        0,
        "c1",
        vec![ch("a", 1, json!(1))],
        ConflictStrategy::ExternalWins,
    );
    s.reconcile_apply(&first).await.unwrap();
    // Again at version 0 (a first batch that lost the race) and at a
    // version not yet reached.
    let again = batch(
        tenant_a(),
        0,
        "c9",
        vec![ch("a", 5, json!(5))],
        ConflictStrategy::ExternalWins,
    );
    assert_kind(
        s.reconcile_apply(&again).await,
        ErrorKind::Conflict,
        "stale first batch",
    );
    let ahead = batch(
        tenant_a(),
        7,
        "c9",
        vec![ch("b", 5, json!(5))],
        ConflictStrategy::ExternalWins,
    );
    assert_kind(
        s.reconcile_apply(&ahead).await,
        ErrorKind::Conflict,
        "wrong version",
    );
    let cp = s
        .reconcile_checkpoint_get(tenant_a(), NAME)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((cp.cursor.as_str(), cp.version), ("c1", 1));
    assert_eq!(rec(h, tenant_a(), "a").await.data, json!(1));
    assert!(
        s.reconcile_record_get(tenant_a(), NAME, "b")
            .await
            .unwrap()
            .is_none()
    );
}

/// Many runners apply the same batch at once: exactly one lands.
pub async fn reconcile_racing_batches_one_lands(h: &Harness) {
    let s = &h.store;
    s.reconcile_apply(&batch(
        tenant_a(),
        0,
        "c1",
        vec![ch("a", 1, json!(1))],
        ConflictStrategy::ExternalWins,
    ))
    .await
    .unwrap();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let s = s.clone();
        let b = batch(
            tenant_a(),
            1,
            &format!("c2-{i}"),
            vec![ch("a", 2, json!(i)), ch(&format!("k{i}"), 1, json!(i))],
            ConflictStrategy::ExternalWins,
        );
        tasks.push(tokio::spawn(async move { s.reconcile_apply(&b).await }));
    }
    let mut won = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        match t.await.unwrap() {
            Ok(_) => won.push(i),
            Err(e) => assert!(e.is_conflict(), "loser got {e}"),
        }
    }
    assert_eq!(won.len(), 1, "exactly one batch lands");
    let w = won[0];
    let cp = s
        .reconcile_checkpoint_get(tenant_a(), NAME)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((cp.cursor, cp.version), (format!("c2-{w}"), 2));
    assert_eq!(rec(h, tenant_a(), "a").await.data, json!(w));
    assert_eq!(
        all(h, tenant_a(), false).await.len(),
        2,
        "only the winner's new key exists"
    );
}

/// A change at or below the source version already taken changes nothing
/// (an at-least-once source re-sending it).
pub async fn reconcile_replay_changes_nothing(h: &Harness) {
    let s = &h.store;
    s.reconcile_apply(&batch(
        tenant_a(),
        0,
        "c1",
        vec![ch("a", 5, json!("v5"))],
        ConflictStrategy::ExternalWins,
    ))
    .await
    .unwrap();
    let r = s
        .reconcile_apply(&batch(
            tenant_a(),
            1,
            "c2",
            vec![ch("a", 5, json!("again")), ch("a", 3, json!("older"))],
            ConflictStrategy::ExternalWins,
        ))
        .await
        .unwrap();
    assert_eq!(r.skipped, 2);
    let a = rec(h, tenant_a(), "a").await;
    assert_eq!((a.data, a.version), (json!("v5"), 5));
}

/// A record changed locally since it took the source's value meets the
/// next change by the declared strategy; an unchanged one always takes it.
pub async fn reconcile_conflicts_follow_the_strategy(h: &Harness) {
    let s = &h.store;
    for (i, strategy) in ConflictStrategy::ALL.into_iter().enumerate() {
        let tenant = Uuid::from_u128(0x100 + i as u128);
        s.reconcile_apply(&batch(
            tenant,
            0,
            "c1",
            vec![
                ch("low", 1, json!("s1")),
                ch("high", 1, json!("s1")),
                ch("clean", 1, json!("s1")),
            ],
            strategy,
        ))
        .await
        .unwrap();
        // Local edits: one below the coming source version, one above.
        local(h, tenant, "low", json!("local"), 2).await;
        local(h, tenant, "high", json!("local"), 9).await;
        assert!(rec(h, tenant, "low").await.dirty);
        s.reconcile_apply(&batch(
            tenant,
            1,
            "c2",
            vec![
                ch("low", 3, json!("s3")),
                ch("high", 3, json!("s3")),
                ch("clean", 3, json!("s3")),
            ],
            strategy,
        ))
        .await
        .unwrap();
        let (low, high, clean) = (
            rec(h, tenant, "low").await,
            rec(h, tenant, "high").await,
            rec(h, tenant, "clean").await,
        );
        assert_eq!(
            clean.data,
            json!("s3"),
            "{strategy}: no conflict takes the source"
        );
        let want = match strategy {
            ConflictStrategy::ExternalWins => ("s3", "s3"),
            ConflictStrategy::LocalWins | ConflictStrategy::ParkForReview => ("local", "local"),
            ConflictStrategy::NewestVersionWins => ("s3", "local"),
        };
        assert_eq!(
            (low.data, high.data),
            (json!(want.0), json!(want.1)),
            "{strategy}"
        );
        assert_eq!(
            low.source_version,
            Some(3),
            "{strategy}: the change is seen"
        );
        let parked = all(h, tenant, true).await;
        if strategy == ConflictStrategy::ParkForReview {
            let keys: Vec<&str> = parked.iter().map(|r| r.key.as_str()).collect();
            assert_eq!(keys, ["high", "low"]);
        } else {
            assert!(parked.is_empty(), "{strategy}: nothing parked");
        }
    }
}

/// A parked change is listed until resolved, then gone from the list.
pub async fn reconcile_park_for_review_is_listed_and_resolved(h: &Harness) {
    let s = &h.store;
    let p = ConflictStrategy::ParkForReview;
    s.reconcile_apply(&batch(
        tenant_a(),
        0,
        "c1",
        vec![ch("a", 1, json!(1)), ch("b", 1, json!(1))],
        p,
    ))
    .await
    .unwrap();
    local(h, tenant_a(), "a", json!("la"), 1).await;
    local(h, tenant_a(), "b", json!("lb"), 1).await;
    let r = s
        .reconcile_apply(&batch(
            tenant_a(),
            1,
            "c2",
            vec![ch("a", 2, json!(2)), ch("b", 2, json!(2))],
            p,
        ))
        .await
        .unwrap();
    assert_eq!(r.parked, 2);
    assert_eq!(all(h, tenant_a(), true).await.len(), 2);
    let a = s
        .reconcile_review_resolve(tenant_a(), NAME, "a", Resolution::AcceptExternal)
        .await
        .unwrap();
    assert_eq!((a.data, a.dirty, a.review), (json!(2), false, None));
    let b = s
        .reconcile_review_resolve(tenant_a(), NAME, "b", Resolution::KeepLocal)
        .await
        .unwrap();
    assert_eq!((b.data, b.review), (json!("lb"), None));
    assert!(all(h, tenant_a(), true).await.is_empty());
    assert_eq!(rec(h, tenant_a(), "a").await.data, json!(2));
    assert_kind(
        s.reconcile_review_resolve(tenant_a(), NAME, "a", Resolution::KeepLocal)
            .await,
        ErrorKind::Conflict,
        "no review pending",
    );
    assert_kind(
        s.reconcile_review_resolve(tenant_a(), NAME, "zz", Resolution::KeepLocal)
            .await,
        ErrorKind::NotFound,
        "no such record",
    );
}

/// Tenant A's checkpoint and records are invisible to tenant B.
pub async fn reconcile_tenants_isolated(h: &Harness) {
    let s = &h.store;
    s.reconcile_apply(&batch(
        tenant_a(),
        0,
        "c1",
        vec![ch("a", 1, json!(1))],
        ConflictStrategy::ExternalWins,
    ))
    .await
    .unwrap();
    assert!(
        s.reconcile_checkpoint_get(tenant_b(), NAME)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        s.reconcile_record_get(tenant_b(), NAME, "a")
            .await
            .unwrap()
            .is_none()
    );
    assert!(all(h, tenant_b(), false).await.is_empty());
    assert_kind(
        s.reconcile_review_resolve(tenant_b(), NAME, "a", Resolution::KeepLocal)
            .await,
        ErrorKind::NotFound,
        "other tenant's record",
    );
    // B's own first batch starts at version 0 beside A's.
    s.reconcile_apply(&batch(
        tenant_b(),
        0,
        "b1",
        vec![ch("a", 1, json!("b"))],
        ConflictStrategy::ExternalWins,
    ))
    .await
    .unwrap();
    assert_eq!(rec(h, tenant_a(), "a").await.data, json!(1));
    assert_eq!(rec(h, tenant_b(), "a").await.data, json!("b"));
    assert_eq!(s.reconcile_checkpoint_list().await.unwrap().len(), 2);
}

/// A local put is a compare-and-set on the record's revision: `None`
/// creates only an absent key; the revision read lands once; a stale one,
/// or `None` for an existing key (a tombstone too), is `Conflict` and
/// changes nothing; a revision expected of no record is `NotFound`.
pub async fn reconcile_local_put_is_compare_and_set(h: &Harness) {
    let s = &h.store;
    let t = tenant_a();
    let first = s
        .reconcile_local_put(&put(t, "a", json!("one"), 1, None))
        .await
        .expect("create");
    assert_eq!(
        (first.revision, first.dirty, first.source_version),
        (1, true, None)
    );
    assert_kind(
        s.reconcile_local_put(&put(t, "a", json!("again"), 2, None))
            .await,
        ErrorKind::Conflict,
        "None for an existing key",
    );
    let second = s
        .reconcile_local_put(&put(t, "a", json!("two"), 2, Some(1)))
        .await
        .expect("at the revision read");
    assert_eq!((second.revision, second.data.clone()), (2, json!("two")));
    assert_kind(
        s.reconcile_local_put(&put(t, "a", json!("stale"), 3, Some(1)))
            .await,
        ErrorKind::Conflict,
        "a stale revision",
    );
    assert_kind(
        s.reconcile_local_put(&put(t, "zz", json!("x"), 1, Some(1)))
            .await,
        ErrorKind::NotFound,
        "a revision of no record",
    );
    assert_eq!(
        rec(h, t, "a").await,
        second,
        "refused writes changed nothing"
    );
    assert!(
        s.reconcile_record_get(t, NAME, "zz")
            .await
            .unwrap()
            .is_none()
    );
    // A tombstone exists: a local writer names its revision to revive it.
    s.reconcile_apply(&batch(
        t,
        0,
        "c1",
        vec![Change {
            deleted: true,
            ..ch("gone", 1, json!(null))
        }],
        ConflictStrategy::LocalWins,
    ))
    .await
    .unwrap();
    let tomb = rec(h, t, "gone").await;
    assert!(tomb.deleted);
    assert_kind(
        s.reconcile_local_put(&put(t, "gone", json!("back"), 2, None))
            .await,
        ErrorKind::Conflict,
        "None over a tombstone",
    );
    let back = s
        .reconcile_local_put(&put(t, "gone", json!("back"), 2, Some(tomb.revision)))
        .await
        .unwrap();
    assert_eq!((back.deleted, back.dirty), (false, true));
}

/// Every batch write of a record moves its revision (a kept local value
/// and a parked change too), so a local writer that read before the batch
/// is refused even when the source wrote the same version number it
/// holds: `version` alone could not tell.
pub async fn reconcile_batch_fences_a_stale_local_writer(h: &Harness) {
    let s = &h.store;
    for (i, strategy) in ConflictStrategy::ALL.into_iter().enumerate() {
        let t = Uuid::from_u128(0x200 + i as u128);
        let mine = s
            .reconcile_local_put(&put(t, "k", json!("local"), 2, None))
            .await
            .unwrap();
        let r = s
            .reconcile_apply(&batch(t, 0, "c1", vec![ch("k", 2, json!("s2"))], strategy))
            .await
            .unwrap();
        assert_eq!(r.inserted, 0, "{strategy}: the record existed");
        let after = rec(h, t, "k").await;
        assert_eq!(after.revision, mine.revision + 1, "{strategy}");
        assert_kind(
            s.reconcile_local_put(&put(t, "k", json!("stale"), 3, Some(mine.revision)))
                .await,
            ErrorKind::Conflict,
            "a writer that read before the batch",
        );
        assert_eq!(rec(h, t, "k").await, after, "{strategy}: nothing changed");
    }
}

/// A record the source deleted stays as a tombstone (an older replay
/// cannot revive it) and is purged once written before the cut-off,
/// unless changed locally since or parked; live records, newer
/// tombstones and other reconcilers' are kept.
pub async fn reconcile_tombstones_purged_after_retention(h: &Harness) {
    let s = &h.store;
    let t = tenant_a();
    let del = |key: &str, version| Change {
        deleted: true,
        ..ch(key, version, json!(null))
    };
    s.reconcile_apply(&batch(
        t,
        0,
        "c1",
        vec![
            ch("old", 1, json!(1)),
            del("old", 2),
            ch("live", 1, json!(1)),
            ch("edited", 1, json!(1)),
            del("edited", 2),
        ],
        ConflictStrategy::LocalWins,
    ))
    .await
    .unwrap();
    // Another reconciler's tombstone of the same age.
    s.reconcile_apply(&ApplyBatch {
        reconciler: "billing".into(),
        ..batch(t, 0, "b1", vec![del("old", 2)], ConflictStrategy::LocalWins)
    })
    .await
    .unwrap();
    assert!(rec(h, t, "old").await.deleted);
    let r = s
        .reconcile_apply(&batch(
            t,
            1,
            "c2",
            vec![ch("old", 1, json!("replayed"))],
            ConflictStrategy::LocalWins,
        ))
        .await
        .unwrap();
    assert_eq!(r.skipped, 1, "an older replay does not revive a tombstone");
    local(h, t, "edited", json!("mine"), 3).await;
    h.pass(Duration::from_millis(20)).await;
    let cut = s.db_now().await.expect("now");
    h.pass(Duration::from_millis(20)).await;
    s.reconcile_apply(&batch(
        t,
        2,
        "c3",
        vec![del("new", 1)],
        ConflictStrategy::LocalWins,
    ))
    .await
    .unwrap();
    assert_eq!(
        s.reconcile_purge_deleted(NAME, cut, 1000).await.unwrap(),
        1,
        "only the old tombstone goes"
    );
    assert!(
        s.reconcile_record_get(t, NAME, "old")
            .await
            .unwrap()
            .is_none()
    );
    for key in ["live", "edited", "new"] {
        assert!(
            s.reconcile_record_get(t, NAME, key)
                .await
                .unwrap()
                .is_some(),
            "{key} is kept"
        );
    }
    assert!(
        s.reconcile_record_get(t, "billing", "old")
            .await
            .unwrap()
            .is_some(),
        "another reconciler's tombstone is its own to purge"
    );
    assert_eq!(s.reconcile_purge_deleted(NAME, cut, 1000).await.unwrap(), 0);
}

/// A local write with a malformed reconciler name or key is refused,
/// naming the field, and writes nothing: the store checks it once, above
/// every backend.
pub async fn reconcile_local_put_refuses_a_bad_name_or_key(h: &Harness) {
    let t = tenant_a();
    let mut bad_name = put(t, "k", json!(1), 1, None);
    bad_name.reconciler = "Not A Name".into();
    let long = "k".repeat(513);
    for (p, field) in [
        (bad_name, "name"),
        (put(t, "", json!(1), 1, None), "key"),
        (put(t, &long, json!(1), 1, None), "key"),
    ] {
        match h.store.reconcile_local_put(&p).await {
            Err(drover_core::Error::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected InvalidInput, got {other:?}"),
        }
    }
    assert!(
        h.store
            .reconcile_record_get(t, NAME, "k")
            .await
            .expect("get")
            .is_none(),
        "nothing written"
    );
}
