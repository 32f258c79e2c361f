//! Focused tests of the SQLite store's claims, fences, failures, sweep,
//! purge, operator actions, gauges and workers table. Each test gets its own
//! database file and a `ManualClock`; the shared contract suite runs in
//! `sqlite_contract.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::sqlite_common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use drover::item::{NewItem, Status};
use drover::rules::RetryPolicy;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::store::{
    AuditStore, ClaimRef, FailOutcome, FailParams, ItemStore, ListFilter, Store, SweepStore,
    WorkerRow, WorkerStore,
};
use sqlite_common::*;
use uuid::Uuid;

#[tokio::test]
async fn claim_takes_priority_then_age_and_only_available_items() {
    let db = db().await;
    let now = db.clock.now_for_test();
    let late = item("k").with_available_at(now + chrono::Duration::seconds(60));
    let low = item("k").with_priority(5);
    let high = item("k").with_priority(-1);
    let other_kind = item("other");
    let other_lane = item("k").with_lane("mail");
    for it in [&late, &low, &high, &other_kind, &other_lane] {
        db.store.item_insert(it).await.unwrap();
    }
    let mut p = claim_params("default", 10);
    p.kinds = vec!["k".into()];
    let got = db.store.item_claim(&p).await.unwrap();
    let ids: Vec<Uuid> = got.iter().map(|i| i.id).collect();
    assert_eq!(ids, vec![high.id, low.id]);
    for i in &got {
        assert_eq!(i.status, Status::Claimed);
        assert_eq!(i.claim_seq, 1);
        assert_eq!(i.claimed_by.as_deref(), Some("w1"));
        assert_eq!(
            i.lease_expires_at.unwrap().timestamp_micros(),
            (now + chrono::Duration::seconds(30)).timestamp_micros()
        );
    }
    assert_ne!(got[0].claim_token, got[1].claim_token);

    db.clock.advance(Duration::from_secs(61));
    let rest = db
        .store
        .item_claim(&claim_params("default", 10))
        .await
        .unwrap();
    let ids: HashSet<Uuid> = rest.iter().map(|i| i.id).collect();
    assert_eq!(ids, HashSet::from([late.id, other_kind.id]));
}

#[tokio::test]
async fn concurrent_claimers_each_item_claimed_exactly_once() {
    let db = db().await;
    let batch: Vec<NewItem> = (0..2000).map(|_| item("k")).collect();
    db.store.item_insert_many(&batch).await.unwrap();
    let store = Arc::new(db.store.clone());
    let mut tasks = Vec::new();
    for w in 0..16 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let mut p = claim_params("default", 7);
                p.worker_id = format!("w{w}");
                let got = store.item_claim(&p).await.unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|i| (i.id, i.claim_token.unwrap())));
            }
        }));
    }
    let mut ids = HashSet::new();
    let mut tokens = HashSet::new();
    let mut total = 0;
    for t in tasks {
        for (id, token) in t.await.unwrap() {
            total += 1;
            ids.insert(id);
            tokens.insert(token);
        }
    }
    assert_eq!(total, 2000, "an item was claimed twice");
    assert_eq!(ids.len(), 2000);
    assert_eq!(tokens.len(), 2000, "tokens must be unique per item");
}

#[tokio::test]
async fn fence_refuses_every_write_after_the_lease_passed() {
    let db = db().await;
    db.store.item_insert(&item("k")).await.unwrap();
    let c = claim_one(&db).await;
    db.clock.advance(LEASE);
    let s = &db.store;
    assert!(s.item_complete(&c).await.unwrap_err().is_conflict());
    assert!(
        s.item_fail(&c, &fail_params(false))
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert!(
        s.item_defer(&c, Duration::ZERO)
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert!(s.item_release(&c, None).await.unwrap_err().is_conflict());
    assert!(
        s.item_extend_lease(&c, LEASE)
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert_eq!(
        s.item_complete_many(&[c]).await.unwrap(),
        Vec::<Uuid>::new()
    );
    let it = s.item_get(c.tenant_id, c.id).await.unwrap().unwrap();
    assert_eq!(
        it.status,
        Status::Claimed,
        "a refused write changed the row"
    );
}

#[tokio::test]
async fn fence_refuses_an_earlier_claims_token() {
    let db = db().await;
    db.store.item_insert(&item("k")).await.unwrap();
    let first = claim_one(&db).await;
    db.store
        .item_release(&first, Some("shutting down"))
        .await
        .unwrap();
    let second = claim_one(&db).await;
    assert_ne!(first.token, second.token);
    let it = db
        .store
        .item_get(second.tenant_id, second.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(it.claim_seq, 2);
    assert_eq!(it.attempts, 0);
    assert_eq!(it.last_error.as_deref(), Some("shutting down"));
    assert!(
        db.store
            .item_complete(&first)
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert!(
        db.store
            .item_extend_lease(&first, LEASE)
            .await
            .unwrap_err()
            .is_conflict()
    );
    db.store.item_complete(&second).await.unwrap();
    // Done is final: the right token is refused now too.
    assert!(
        db.store
            .item_complete(&second)
            .await
            .unwrap_err()
            .is_conflict()
    );
}

#[tokio::test]
async fn fenced_write_under_another_tenant_is_not_found() {
    let db = db().await;
    db.store
        .item_insert(&item("k").with_tenant(Uuid::new_v4()))
        .await
        .unwrap();
    let c = claim_one(&db).await;
    let wrong = ClaimRef {
        tenant_id: Uuid::new_v4(),
        ..c
    };
    assert!(
        db.store
            .item_complete(&wrong)
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        db.store
            .item_get(wrong.tenant_id, c.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        db.store
            .item_cancel(wrong.tenant_id, c.id, Uuid::nil())
            .await
            .unwrap_err()
            .is_not_found()
    );
    db.store.item_complete(&c).await.unwrap();
}

#[tokio::test]
async fn complete_many_lands_fresh_claims_and_skips_a_stale_token() {
    let db = db().await;
    let batch: Vec<NewItem> = (0..5).map(|_| item("k")).collect();
    db.store.item_insert_many(&batch).await.unwrap();
    let got = db
        .store
        .item_claim(&claim_params("default", 5))
        .await
        .unwrap();
    let mut claims: Vec<ClaimRef> = got.iter().map(|i| ClaimRef::of(i).unwrap()).collect();
    claims[2].token = Uuid::new_v4();
    let landed = db.store.item_complete_many(&claims).await.unwrap();
    assert_eq!(landed.len(), 4);
    assert!(!landed.contains(&claims[2].id));
    let stale = db
        .store
        .item_get(claims[2].tenant_id, claims[2].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stale.status, Status::Claimed);
    for c in claims.iter().filter(|c| c.id != claims[2].id) {
        let it = db.store.item_get(c.tenant_id, c.id).await.unwrap().unwrap();
        assert_eq!(it.status, Status::Done);
        assert!(it.claim_token.is_none());
        assert_eq!(it.updated_by, Uuid::nil());
    }
}

#[tokio::test]
async fn fail_requeues_with_delay_then_dead_letters_with_audit() {
    let db = db().await;
    let it = item("k").with_max_attempts(2);
    db.store.item_insert(&it).await.unwrap();
    let c = claim_one(&db).await;
    let long = "x".repeat(10_000);
    let p = FailParams {
        error: long,
        ..fail_params(false)
    };
    let out = db.store.item_fail(&c, &p).await.unwrap();
    let FailOutcome::Requeued { available_at } = out else {
        panic!("expected a requeue")
    };
    let now = db.clock.now_for_test();
    assert_eq!(
        available_at.timestamp_micros(),
        (now + chrono::Duration::seconds(10)).timestamp_micros()
    );
    let s = db
        .store
        .item_get(it.tenant_id, it.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.status, s.attempts), (Status::Pending, 1));
    assert_eq!(s.last_error.unwrap().len(), drover::item::MAX_ERROR_BYTES);
    assert!(
        db.store
            .item_claim(&claim_params("default", 1))
            .await
            .unwrap()
            .is_empty()
    );

    db.clock.advance(Duration::from_secs(10));
    let c = claim_one(&db).await;
    assert_eq!(
        db.store.item_fail(&c, &fail_params(false)).await.unwrap(),
        FailOutcome::DeadLettered
    );
    let s = db
        .store
        .item_get(it.tenant_id, it.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.status, s.attempts), (Status::Failed, 2));
    let audit = db.store.audit_list(it.tenant_id, it.id).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, "dead_letter");
    assert_eq!(audit[0].detail.as_deref(), Some("boom"));
    assert_eq!(db.store.gauges().await.unwrap().failed, 1);
}

#[tokio::test]
async fn fatal_failure_dead_letters_at_once() {
    let db = db().await;
    let it = item("k");
    db.store.item_insert(&it).await.unwrap();
    let c = claim_one(&db).await;
    assert_eq!(
        db.store.item_fail(&c, &fail_params(true)).await.unwrap(),
        FailOutcome::DeadLettered
    );
    let s = db
        .store
        .item_get(it.tenant_id, it.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.status, s.attempts), (Status::Failed, 1));
}

#[tokio::test]
async fn defer_and_extend_spend_no_attempt() {
    let db = db().await;
    let it = item("k");
    db.store.item_insert(&it).await.unwrap();
    let c = claim_one(&db).await;
    db.clock.advance(Duration::from_secs(20));
    let exp = db.store.item_extend_lease(&c, LEASE).await.unwrap();
    db.clock.advance(Duration::from_secs(20)); // past the first lease, inside the renewed one
    assert!(exp > db.clock.now_for_test());
    let at = db
        .store
        .item_defer(&c, Duration::from_secs(5))
        .await
        .unwrap();
    let s = db
        .store
        .item_get(it.tenant_id, it.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (s.status, s.attempts, s.available_at),
        (Status::Pending, 0, at)
    );
    assert!(
        db.store
            .item_claim(&claim_params("default", 1))
            .await
            .unwrap()
            .is_empty()
    );
    db.clock.advance(Duration::from_secs(5));
    claim_one(&db).await;
}

#[tokio::test]
async fn requeue_stale_is_per_tenant_and_dead_letters_at_budget() {
    let db = db().await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let a1 = item("k").with_tenant(a);
    let a2 = item("k").with_tenant(a).with_max_attempts(1);
    let b1 = item("k").with_tenant(b);
    for it in [&a1, &a2, &b1] {
        db.store.item_insert(it).await.unwrap();
    }
    db.store
        .item_claim(&claim_params("default", 10))
        .await
        .unwrap();
    assert!(db.store.item_stale_tenants(10).await.unwrap().is_empty());
    db.clock.advance(LEASE);
    let tenants: HashSet<Uuid> = db
        .store
        .item_stale_tenants(10)
        .await
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(tenants, HashSet::from([a, b]));

    let policy = RetryPolicy::default();
    let r = db.store.item_requeue_stale(a, 10, &policy).await.unwrap();
    assert_eq!((r.requeued, r.dead_lettered), (1, 1));
    let s1 = db.store.item_get(a, a1.id).await.unwrap().unwrap();
    assert_eq!((s1.status, s1.attempts), (Status::Pending, 1));
    assert_eq!(s1.last_error.as_deref(), Some("lease expired"));
    let expect =
        db.clock.now_for_test() + chrono::Duration::from_std(policy.nominal_delay(1)).unwrap();
    assert_eq!(
        s1.available_at.timestamp_micros(),
        expect.timestamp_micros()
    );
    let s2 = db.store.item_get(a, a2.id).await.unwrap().unwrap();
    assert_eq!(s2.status, Status::Failed);
    assert_eq!(
        db.store.audit_list(a, a2.id).await.unwrap()[0].action,
        "dead_letter"
    );
    // Tenant B was not touched by A's sweep.
    let sb = db.store.item_get(b, b1.id).await.unwrap().unwrap();
    assert_eq!(sb.status, Status::Claimed);
    assert_eq!(db.store.item_stale_tenants(10).await.unwrap(), vec![b]);
    // Idempotent: a second sweep of A finds nothing.
    assert_eq!(
        db.store
            .item_requeue_stale(a, 10, &policy)
            .await
            .unwrap()
            .requeued,
        0
    );
}

#[tokio::test]
async fn fail_orphaned_needs_the_token() {
    let db = db().await;
    let it = item("k").with_tenant(Uuid::new_v4());
    db.store.item_insert(&it).await.unwrap();
    let c = claim_one(&db).await;
    assert!(
        db.store
            .item_fail_orphaned(c.id, Uuid::new_v4())
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert!(
        db.store
            .item_fail_orphaned(Uuid::new_v4(), c.token)
            .await
            .unwrap_err()
            .is_not_found()
    );
    db.store.item_fail_orphaned(c.id, c.token).await.unwrap();
    let s = db
        .store
        .item_get(it.tenant_id, it.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.status, s.attempts), (Status::Failed, 0));
    assert!(
        db.store
            .audit_list(it.tenant_id, it.id)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn purge_deletes_old_final_items_in_batches() {
    let db = db().await;
    let batch: Vec<NewItem> = (0..25).map(|_| item("k")).collect();
    db.store.item_insert_many(&batch).await.unwrap();
    let got = db
        .store
        .item_claim(&claim_params("default", 20))
        .await
        .unwrap();
    let claims: Vec<ClaimRef> = got.iter().map(|i| ClaimRef::of(i).unwrap()).collect();
    db.store.item_complete_many(&claims).await.unwrap();
    db.clock.advance(Duration::from_secs(60));
    let before = db.clock.now_for_test();
    // Completed after the cutoff: kept.
    let late = db
        .store
        .item_claim(&claim_params("default", 1))
        .await
        .unwrap();
    db.store
        .item_complete(&ClaimRef::of(&late[0]).unwrap())
        .await
        .unwrap();
    assert_eq!(db.store.item_purge(before, 7).await.unwrap(), 20);
    let left = db.store.item_list(&ListFilter::default()).await.unwrap();
    assert_eq!(left.len(), 5);
    assert_eq!(left.iter().filter(|i| i.status == Status::Done).count(), 1);
}

#[tokio::test]
async fn cancel_and_retry_are_audited_and_refuse_wrong_states() {
    let db = db().await;
    let it = item("k");
    let actor = Uuid::new_v4();
    db.store.item_insert(&it).await.unwrap();
    let c = claim_one(&db).await;
    assert!(
        db.store
            .item_retry(it.tenant_id, it.id, actor)
            .await
            .unwrap_err()
            .is_conflict()
    );
    let s = db
        .store
        .item_cancel(it.tenant_id, it.id, actor)
        .await
        .unwrap();
    assert_eq!(s.status, Status::Cancelled);
    assert!(s.claim_token.is_none());
    // The holder meets the fence.
    assert!(db.store.item_complete(&c).await.unwrap_err().is_conflict());
    assert!(
        db.store
            .item_cancel(it.tenant_id, it.id, actor)
            .await
            .unwrap_err()
            .is_conflict()
    );
    let s = db
        .store
        .item_retry(it.tenant_id, it.id, actor)
        .await
        .unwrap();
    assert_eq!((s.status, s.attempts), (Status::Pending, 0));
    let audit = db.store.audit_list(it.tenant_id, it.id).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(actions, ["cancel", "retry"]);
    assert!(audit.iter().all(|a| a.actor == actor));
    claim_one(&db).await;
}

#[tokio::test]
async fn counts_gauges_and_list_filters() {
    let db = db().await;
    let t = Uuid::new_v4();
    db.store
        .item_insert(&item("a").with_tenant(t))
        .await
        .unwrap();
    db.clock.advance(Duration::from_secs(3));
    db.store
        .item_insert(&item("b").with_lane("mail"))
        .await
        .unwrap();
    let later = db.clock.now_for_test() + chrono::Duration::seconds(100);
    db.store
        .item_insert(&item("c").with_lane("slow").with_available_at(later))
        .await
        .unwrap();
    let counts = db.store.counts().await.unwrap();
    assert_eq!(counts.len(), 3);
    assert!(
        counts
            .iter()
            .all(|r| r.count == 1 && r.status == Status::Pending)
    );
    let g = db.store.gauges().await.unwrap();
    let age = |lane: &str| {
        g.oldest_age_seconds
            .iter()
            .find(|(l, _)| l == lane)
            .unwrap()
            .1
    };
    assert!((age("default") - 3.0).abs() < 1e-6);
    assert_eq!(age("mail"), 0.0);
    assert_eq!(age("slow"), 0.0);
    let mine = ListFilter {
        tenant_id: Some(t),
        ..ListFilter::default()
    };
    assert_eq!(db.store.item_list(&mine).await.unwrap().len(), 1);
    let mail = ListFilter {
        lane: Some("mail".into()),
        limit: 10,
        ..ListFilter::default()
    };
    assert_eq!(db.store.item_list(&mail).await.unwrap()[0].kind, "b");
}

#[tokio::test]
async fn worker_beat_inserts_then_updates() {
    let db = db().await;
    let now = db.clock.now_for_test();
    let mut row = WorkerRow {
        id: "w-1".into(),
        host: "h".into(),
        pid: 42,
        lanes: vec!["default".into(), "mail".into()],
        capacity: 8,
        started_at: now,
        last_beat_at: now,
        state: "running".into(),
        beat_interval_ms: 5000,
        kinds: vec!["mail".into()],
        version: String::new(),
    };
    db.store.worker_beat(&row).await.unwrap();
    row.state = "draining".into();
    // The store stamps the beat with its own clock, not the row's.
    db.clock.advance(std::time::Duration::from_secs(5));
    row.last_beat_at = now + chrono::Duration::seconds(3600);
    db.store.worker_beat(&row).await.unwrap();
    let rows = db.store.worker_list().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state, "draining");
    assert_eq!(rows[0].lanes, row.lanes);
    assert_eq!(
        rows[0].last_beat_at.timestamp_micros(),
        (now + chrono::Duration::seconds(5)).timestamp_micros()
    );
}

#[tokio::test]
async fn sweep_lease_is_shared_by_every_store_on_the_file() {
    let db = db().await;
    // A second store on the same file stands for a second process.
    let other = SqliteStore::open(db.path.to_str().unwrap(), SqliteOptions::default())
        .await
        .unwrap();
    other.migrate().await.unwrap();
    let held = db
        .store
        .sweep_lease_take("one", Duration::from_secs(60))
        .await
        .unwrap()
        .expect("taken");
    assert_eq!(
        other
            .sweep_lease_take("two", Duration::from_secs(60))
            .await
            .unwrap(),
        None,
        "another process on the file is refused"
    );
    db.store.sweep_lease_release(held, true).await.unwrap();
    assert!(
        other
            .sweep_lease_take("two", Duration::from_secs(60))
            .await
            .unwrap()
            .is_some()
    );
    assert!(other.sweep_last_pass().await.unwrap().is_some());
}

#[tokio::test]
async fn cancel_claimed_is_fenced_and_final() {
    let db = db().await;
    let it = item("k");
    db.store.item_insert(&it).await.unwrap();
    let c = claim_one(&db).await;
    let stale = ClaimRef {
        token: Uuid::new_v4(),
        ..c
    };
    assert!(
        db.store
            .cancel_claimed(&stale, "no")
            .await
            .unwrap_err()
            .is_conflict()
    );
    db.store.cancel_claimed(&c, "not wanted").await.unwrap();
    let s = db
        .store
        .item_get(it.tenant_id, it.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.status, s.attempts), (Status::Cancelled, 0));
    assert_eq!(s.last_error.as_deref(), Some("not wanted"));
    assert!(
        db.store
            .cancel_claimed(&c, "again")
            .await
            .unwrap_err()
            .is_conflict()
    );
}

/// A write dropped by its caller at the worst moment: `BEGIN IMMEDIATE` has
/// run on the writer connection (the file's write lock is held) and sqlx is
/// still checking that the custom statement opened a transaction. sqlx has
/// no `Transaction` guard yet at that point, so nothing of its own rolls
/// back; the store must still never leave the file locked, nor its writer
/// stuck inside the transaction.
#[tokio::test]
async fn a_write_dropped_right_after_begin_leaves_no_transaction_open() {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    type Write<'a> =
        Pin<Box<dyn Future<Output = drover::Result<chrono::DateTime<chrono::Utc>>> + Send + 'a>>;
    fn poll_once(f: &mut Write<'_>) -> Poll<drover::Result<chrono::DateTime<chrono::Utc>>> {
        let waker = futures::task::noop_waker();
        f.as_mut().poll(&mut Context::from_waker(&waker))
    }

    let db = db().await;
    db.store.item_insert(&item("k")).await.unwrap();
    let c = claim_one(&db).await;
    // Another process's writer on the same file; it never waits for the
    // lock, so it doubles as a probe of who holds it.
    let other = SqliteStore::open(
        db.path.to_str().unwrap(),
        SqliteOptions {
            busy_timeout: Duration::ZERO,
            ..SqliteOptions::default()
        },
    )
    .await
    .unwrap();
    let held = other.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    // Our write gets its connection and sends BEGIN IMMEDIATE, which waits
    // inside SQLite's busy handler.
    let mut write: Write<'_> = Box::pin(db.store.item_extend_lease(&c, LEASE));
    for _ in 0..20 {
        assert!(poll_once(&mut write).is_pending());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    held.commit().await.unwrap();
    // The busy handler retries and our BEGIN takes the lock; its
    // acknowledgement then waits for the next poll.
    let mut ours = false;
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        match other.writer().begin_with("BEGIN IMMEDIATE").await {
            Ok(tx) => tx.rollback().await.unwrap(),
            Err(_) => {
                ours = true;
                break;
            }
        }
    }
    assert!(ours, "our BEGIN IMMEDIATE never took the lock");
    // This poll takes the acknowledgement and parks in sqlx's post-BEGIN
    // check; the caller gives up there.
    assert!(poll_once(&mut write).is_pending());
    drop(write);
    let mut free = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        if let Ok(tx) = other.writer().begin_with("BEGIN IMMEDIATE").await {
            tx.rollback().await.unwrap();
            free = true;
            break;
        }
    }
    assert!(free, "the dropped write left the file's write lock held");
    db.store.item_extend_lease(&c, LEASE).await.unwrap();
}

/// The store reads its clock once the file's write lock is held: a claim
/// that waited for the lock (up to the busy timeout) gets a lease counted
/// from when it got the lock, not from when it asked. Read before the lock,
/// a long wait would hand out a lease already partly or wholly spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_waits_for_the_lock_reads_the_clock_once_it_holds_it() {
    let db = db().await;
    db.store.item_insert(&item("k")).await.unwrap();
    let other = SqliteStore::open(db.path.to_str().unwrap(), SqliteOptions::default())
        .await
        .unwrap();
    let held = other.writer().begin_with("BEGIN IMMEDIATE").await.unwrap();
    let params = claim_params("default", 1);
    let claim = db.store.item_claim(&params);
    // While the claim waits in SQLite's busy handler, a minute passes by
    // the store's clock; then the lock is let go.
    let release = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        db.clock.advance(Duration::from_secs(60));
        held.commit().await.unwrap();
    };
    let (claimed, ()) = tokio::join!(claim, release);
    let claimed = claimed.unwrap();
    assert_eq!(claimed.len(), 1);
    let lease_expires = claimed[0]
        .lease_expires_at
        .expect("a claimed item has a lease");
    let want = db.clock.now_for_test() + chrono::Duration::from_std(LEASE).unwrap();
    assert!(
        (lease_expires - want).num_milliseconds().abs() <= 1,
        "lease from the clock after the lock: {lease_expires}, want {want}"
    );
}
