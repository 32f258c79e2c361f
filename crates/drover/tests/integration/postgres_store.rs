//! Focused tests of the PostgreSQL store: each in its own fresh schema.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use drover::item::{InsertResult, NewItem, Status};
use drover::rules::RetryPolicy;
use drover::store::postgres::{PgStore, insert_in};
use drover::store::{
    AuditStore, ClaimParams, ClaimRef, FailOutcome, FailParams, ItemStore, ListFilter, Store,
    SweepStore, WorkerStore,
};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use serde_json::json;
use sqlx::Connection;
use uuid::Uuid;

fn claim_params(lane: &str, n: u32, lease: Duration) -> ClaimParams {
    ClaimParams {
        lane: lane.into(),
        kinds: vec![],
        worker_id: "w1".into(),
        lease,
        limit: n,
    }
}

async fn claim_one(s: &PgStore, lease: Duration) -> drover::Item {
    let mut got = s
        .item_claim(&claim_params("default", 1, lease))
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "expected one claimable item");
    got.remove(0)
}

async fn done(schema: String) {
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn insert_stamps_and_reports_collisions() {
    let (s, schema) = pg_fresh_store().await;
    let t = Uuid::new_v4();
    let item = NewItem::new("send_email", json!({"to": "a"}))
        .with_tenant(t)
        .with_key("k1");
    let first = s.item_insert(&item).await.unwrap();
    assert_eq!(first.result, InsertResult::Inserted);
    assert_eq!(first.item.status, Status::Pending);
    assert_eq!(first.item.attempts, 0);
    assert_eq!(first.item.claim_seq, 0);
    assert!(first.item.claim_token.is_none());
    assert_eq!(first.item.updated_by, item.created_by);

    let again = s.item_insert(&item).await.unwrap();
    assert_eq!(again.result, InsertResult::IdExists);
    assert_eq!(again.item.id, item.id);

    let same_key = NewItem::new("send_email", json!({}))
        .with_tenant(t)
        .with_key("k1");
    let r = s.item_insert(&same_key).await.unwrap();
    assert_eq!(r.result, InsertResult::KeyExists);
    assert_eq!(r.item.id, item.id);

    // The same key under another tenant is a different item.
    let other = NewItem::new("send_email", json!({}))
        .with_tenant(Uuid::new_v4())
        .with_key("k1");
    assert_eq!(
        s.item_insert(&other).await.unwrap().result,
        InsertResult::Inserted
    );
    done(schema).await;
}

#[tokio::test]
async fn insert_many_reports_each_input() {
    let (s, schema) = pg_fresh_store().await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let existing = NewItem::new("k", json!(1)).with_tenant(a).with_key("dup");
    s.item_insert(&existing).await.unwrap();
    let fresh = NewItem::new("k", json!(2)).with_tenant(a);
    let batch = vec![
        fresh.clone(),
        existing.clone(),                                           // id
        NewItem::new("k", json!(3)).with_tenant(a).with_key("dup"), // key
        NewItem::new("k", json!(4)).with_tenant(b).with_key("dup"), // other tenant
        fresh.clone(),                                              // same id twice in batch
        NewItem::new("k", json!(5))
            .with_tenant(b)
            .with_lane("other"),
    ];
    let r = s.item_insert_many(&batch).await.unwrap();
    assert_eq!(
        r,
        vec![
            InsertResult::Inserted,
            InsertResult::IdExists,
            InsertResult::KeyExists,
            InsertResult::Inserted,
            InsertResult::IdExists,
            InsertResult::Inserted,
        ]
    );
    let listed = s
        .item_list(&ListFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 4);
    done(schema).await;
}

#[tokio::test]
async fn claim_is_exclusive_under_concurrency() {
    let (s, schema) = pg_fresh_store().await;
    let items: Vec<NewItem> = (0..200).map(|i| NewItem::new("k", json!(i))).collect();
    s.item_insert_many(&items).await.unwrap();
    let mut tasks = Vec::new();
    for w in 0..6 {
        let s: Arc<PgStore> = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let p = ClaimParams {
                    worker_id: format!("w{w}"),
                    ..claim_params("default", 7, Duration::from_secs(60))
                };
                let got = s.item_claim(&p).await.unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|i| i.id));
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(all.len(), 200, "every item claimed once");
    assert_eq!(unique.len(), 200, "no item claimed twice");
    done(schema).await;
}

#[tokio::test]
async fn claim_orders_by_priority_and_filters_kinds() {
    let (s, schema) = pg_fresh_store().await;
    let low = NewItem::new("a", json!(1)).with_priority(5);
    let high = NewItem::new("b", json!(2)).with_priority(-1);
    let later = NewItem::new("a", json!(3))
        .with_available_at(chrono::Utc::now() + chrono::Duration::hours(1));
    s.item_insert_many(&[low.clone(), high.clone(), later])
        .await
        .unwrap();
    let p = ClaimParams {
        kinds: vec!["a".into()],
        ..claim_params("default", 10, Duration::from_secs(30))
    };
    let got = s.item_claim(&p).await.unwrap();
    assert_eq!(got.iter().map(|i| i.id).collect::<Vec<_>>(), vec![low.id]);
    let got = s
        .item_claim(&claim_params("default", 10, Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(got.iter().map(|i| i.id).collect::<Vec<_>>(), vec![high.id]);
    let it = &got[0];
    assert_eq!(it.status, Status::Claimed);
    assert_eq!(it.claim_seq, 1);
    assert!(it.lease_expires_at.unwrap() > chrono::Utc::now() + chrono::Duration::seconds(20));
    done(schema).await;
}

#[tokio::test]
async fn fenced_writes_refuse_stale_holders() {
    let (s, schema) = pg_fresh_store().await;
    let item = NewItem::new("k", json!({}));
    s.item_insert(&item).await.unwrap();
    let first = claim_one(&s, Duration::from_secs(60)).await;
    let old = ClaimRef::of(&first).unwrap();
    s.item_release(&old, Some("not mine")).await.unwrap();
    let second = claim_one(&s, Duration::from_secs(60)).await;
    assert_eq!(second.claim_seq, 2);
    assert_eq!(second.last_error.as_deref(), Some("not mine"));
    // The token of the earlier claim is refused by every fenced write.
    assert!(s.item_complete(&old).await.unwrap_err().is_conflict());
    assert!(
        s.item_extend_lease(&old, Duration::from_secs(5))
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert!(
        s.item_defer(&old, Duration::from_secs(5))
            .await
            .unwrap_err()
            .is_conflict()
    );
    assert!(s.item_release(&old, None).await.unwrap_err().is_conflict());
    let fp = FailParams {
        error: "x".into(),
        retry_delay: Duration::ZERO,
        fatal: false,
    };
    assert!(s.item_fail(&old, &fp).await.unwrap_err().is_conflict());
    // Another tenant's handle on the same id sees nothing.
    let foreign = ClaimRef {
        tenant_id: Uuid::new_v4(),
        ..ClaimRef::of(&second).unwrap()
    };
    assert!(s.item_complete(&foreign).await.unwrap_err().is_not_found());
    let missing = ClaimRef {
        id: Uuid::new_v4(),
        ..old
    };
    assert!(s.item_complete(&missing).await.unwrap_err().is_not_found());

    let cur = ClaimRef::of(&second).unwrap();
    let until = s
        .item_extend_lease(&cur, Duration::from_secs(120))
        .await
        .unwrap();
    assert!(until > chrono::Utc::now() + chrono::Duration::seconds(100));
    s.item_complete(&cur).await.unwrap();
    assert!(s.item_complete(&cur).await.unwrap_err().is_conflict());
    let stored = s.item_get(item.tenant_id, item.id).await.unwrap().unwrap();
    assert_eq!(stored.status, Status::Done);
    assert!(stored.claim_token.is_none());
    assert_eq!(stored.updated_by, Uuid::nil());
    done(schema).await;
}

#[tokio::test]
async fn completion_after_lease_passed_is_refused() {
    let (s, schema) = pg_fresh_store().await;
    s.item_insert(&NewItem::new("k", json!({}))).await.unwrap();
    let it = claim_one(&s, Duration::from_millis(50)).await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(
        s.item_complete(&ClaimRef::of(&it).unwrap())
            .await
            .unwrap_err()
            .is_conflict()
    );
    done(schema).await;
}

#[tokio::test]
async fn fail_requeues_then_dead_letters_with_audit() {
    let (s, schema) = pg_fresh_store().await;
    let item = NewItem::new("k", json!({})).with_max_attempts(2);
    s.item_insert(&item).await.unwrap();
    let fp = FailParams {
        error: "boom".into(),
        retry_delay: Duration::ZERO,
        fatal: false,
    };
    let c = claim_one(&s, Duration::from_secs(60)).await;
    let out = s.item_fail(&ClaimRef::of(&c).unwrap(), &fp).await.unwrap();
    assert!(matches!(out, FailOutcome::Requeued { .. }));
    let got = s.item_get(item.tenant_id, item.id).await.unwrap().unwrap();
    assert_eq!((got.status, got.attempts), (Status::Pending, 1));
    assert!(got.claim_token.is_none());
    assert!(
        s.audit_list(item.tenant_id, item.id)
            .await
            .unwrap()
            .is_empty()
    );

    let c = claim_one(&s, Duration::from_secs(60)).await;
    let long = "e".repeat(5000);
    let out = s
        .item_fail(
            &ClaimRef::of(&c).unwrap(),
            &FailParams { error: long, ..fp },
        )
        .await
        .unwrap();
    assert_eq!(out, FailOutcome::DeadLettered);
    let got = s.item_get(item.tenant_id, item.id).await.unwrap().unwrap();
    assert_eq!((got.status, got.attempts), (Status::Failed, 2));
    assert_eq!(got.last_error.unwrap().len(), drover::item::MAX_ERROR_BYTES);
    let audit = s.audit_list(item.tenant_id, item.id).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, "dead_letter");
    assert_eq!(s.gauges().await.unwrap().failed, 1);

    // An operator retry: pending with a fresh budget, audited with the actor.
    let op = Uuid::new_v4();
    let r = s.item_retry(item.tenant_id, item.id, op).await.unwrap();
    assert_eq!((r.status, r.attempts), (Status::Pending, 0));
    assert!(
        s.item_retry(item.tenant_id, item.id, op)
            .await
            .unwrap_err()
            .is_conflict()
    );
    let c = s.item_cancel(item.tenant_id, item.id, op).await.unwrap();
    assert_eq!(c.status, Status::Cancelled);
    let actions: Vec<_> = s
        .audit_list(item.tenant_id, item.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.action, a.actor))
        .collect();
    assert_eq!(
        actions[1..],
        [("retry".to_owned(), op), ("cancel".to_owned(), op)]
    );
    done(schema).await;
}

#[tokio::test]
async fn fatal_failure_dead_letters_at_once() {
    let (s, schema) = pg_fresh_store().await;
    s.item_insert(&NewItem::new("k", json!({}))).await.unwrap();
    let c = claim_one(&s, Duration::from_secs(60)).await;
    let fp = FailParams {
        error: "bad input".into(),
        retry_delay: Duration::from_secs(1),
        fatal: true,
    };
    assert_eq!(
        s.item_fail(&ClaimRef::of(&c).unwrap(), &fp).await.unwrap(),
        FailOutcome::DeadLettered
    );
    done(schema).await;
}

#[tokio::test]
async fn requeue_stale_is_per_tenant() {
    let (s, schema) = pg_fresh_store().await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let items = vec![
        NewItem::new("k", json!(1)).with_tenant(a),
        NewItem::new("k", json!(2))
            .with_tenant(a)
            .with_max_attempts(1),
        NewItem::new("k", json!(3)).with_tenant(b),
    ];
    s.item_insert_many(&items).await.unwrap();
    let claimed = s
        .item_claim(&claim_params("default", 10, Duration::from_millis(50)))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    tokio::time::sleep(Duration::from_millis(120)).await;
    let mut tenants = s.item_stale_tenants(10).await.unwrap();
    tenants.sort();
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(tenants, want);

    let policy = RetryPolicy {
        base: Duration::from_secs(10),
        ..RetryPolicy::default()
    };
    let before = chrono::Utc::now();
    let rep = s.item_requeue_stale(a, 10, &policy).await.unwrap();
    assert_eq!((rep.requeued, rep.dead_lettered), (1, 1));
    let requeued = s.item_get(a, items[0].id).await.unwrap().unwrap();
    assert_eq!(requeued.status, Status::Pending);
    assert_eq!(requeued.attempts, 1);
    assert_eq!(requeued.last_error.as_deref(), Some("lease expired"));
    // Nominal (unjittered) delay for the first failure: the base.
    let delay = requeued.available_at - before;
    assert!(
        delay > chrono::Duration::seconds(9) && delay < chrono::Duration::seconds(12),
        "{delay}"
    );
    let dead = s.item_get(a, items[1].id).await.unwrap().unwrap();
    assert_eq!(dead.status, Status::Failed);
    assert_eq!(
        s.audit_list(a, items[1].id).await.unwrap()[0].action,
        "dead_letter"
    );
    // Tenant B untouched until its own sweep.
    assert_eq!(
        s.item_get(b, items[2].id).await.unwrap().unwrap().status,
        Status::Claimed
    );
    assert_eq!(s.item_stale_tenants(10).await.unwrap(), vec![b]);
    let rep = s.item_requeue_stale(b, 10, &policy).await.unwrap();
    assert_eq!((rep.requeued, rep.dead_lettered), (1, 0));
    done(schema).await;
}

#[tokio::test]
async fn purge_deletes_only_old_final_items_in_batches() {
    let (s, schema) = pg_fresh_store().await;
    let items: Vec<NewItem> = (0..25).map(|i| NewItem::new("k", json!(i))).collect();
    s.item_insert_many(&items).await.unwrap();
    let claimed = s
        .item_claim(&claim_params("default", 20, Duration::from_secs(60)))
        .await
        .unwrap();
    let refs: Vec<ClaimRef> = claimed.iter().filter_map(ClaimRef::of).collect();
    assert_eq!(s.item_complete_many(&refs).await.unwrap().len(), 20);
    let n = s
        .item_purge(chrono::Utc::now() + chrono::Duration::seconds(5), 3)
        .await
        .unwrap();
    assert_eq!(n, 20);
    let left = s
        .item_list(&ListFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(left.len(), 5);
    assert!(left.iter().all(|i| i.status == Status::Pending));
    assert_eq!(
        s.item_purge(chrono::Utc::now() - chrono::Duration::hours(1), 3)
            .await
            .unwrap(),
        0
    );
    done(schema).await;
}

#[tokio::test]
async fn complete_many_skips_the_stale_token() {
    let (s, schema) = pg_fresh_store().await;
    let t2 = Uuid::new_v4();
    let mut items: Vec<NewItem> = (0..5).map(|i| NewItem::new("k", json!(i))).collect();
    items.push(NewItem::new("k", json!(9)).with_tenant(t2));
    s.item_insert_many(&items).await.unwrap();
    let claimed = s
        .item_claim(&claim_params("default", 10, Duration::from_secs(60)))
        .await
        .unwrap();
    let mut refs: Vec<ClaimRef> = claimed.iter().filter_map(ClaimRef::of).collect();
    let stale = refs[2].id;
    refs[2].token = Uuid::new_v4();
    let landed = s.item_complete_many(&refs).await.unwrap();
    assert_eq!(landed.len(), 5);
    assert!(!landed.contains(&stale));
    let expect: Vec<Uuid> = refs
        .iter()
        .map(|r| r.id)
        .filter(|id| *id != stale)
        .collect();
    assert_eq!(landed, expect, "landed ids in input order");
    let t = items[0].tenant_id;
    assert_eq!(
        s.item_get(t, stale).await.unwrap().unwrap().status,
        Status::Claimed
    );
    done(schema).await;
}

#[tokio::test]
async fn orphan_failure_is_fenced_and_unaudited() {
    let (s, schema) = pg_fresh_store().await;
    let item = NewItem::new("k", json!({})).with_tenant(Uuid::new_v4());
    s.item_insert(&item).await.unwrap();
    let c = claim_one(&s, Duration::from_secs(60)).await;
    assert!(
        s.item_fail_orphaned(c.id, Uuid::new_v4())
            .await
            .unwrap_err()
            .is_conflict()
    );
    s.item_fail_orphaned(c.id, c.claim_token.unwrap())
        .await
        .unwrap();
    let got = s.item_get(item.tenant_id, item.id).await.unwrap().unwrap();
    assert_eq!(got.status, Status::Failed);
    assert_eq!(got.last_error.as_deref(), Some("orphaned: tenant gone"));
    assert!(
        s.audit_list(item.tenant_id, item.id)
            .await
            .unwrap()
            .is_empty()
    );
    done(schema).await;
}

#[tokio::test]
async fn transactional_enqueue_commits_or_vanishes_and_restores_settings() {
    let (s, schema) = pg_fresh_store().await;
    let mut wake = s.wakeups().await.unwrap();
    let url = pg_url().await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let before: (String, String) =
        sqlx::query_as("SELECT current_setting('role'), current_setting('search_path')")
            .fetch_one(&mut conn)
            .await
            .unwrap();

    // Rolled back: the item never exists.
    let gone = NewItem::new("k", json!({})).with_lane("tx_lane");
    {
        let mut tx = conn.begin().await.unwrap();
        let r = insert_in(&mut tx, &schema, &gone).await.unwrap();
        assert_eq!(r.result, InsertResult::Inserted);
        let inside: (String, String) =
            sqlx::query_as("SELECT current_setting('role'), current_setting('search_path')")
                .fetch_one(&mut *tx)
                .await
                .unwrap();
        assert_eq!(
            inside, before,
            "settings restored inside the caller's transaction"
        );
        tx.rollback().await.unwrap();
    }
    assert!(s.item_get(gone.tenant_id, gone.id).await.unwrap().is_none());

    // Committed: it exists, and the wake-up arrives after the commit.
    let kept = NewItem::new("k", json!({})).with_lane("tx_lane");
    let mut tx = conn.begin().await.unwrap();
    insert_in(&mut tx, &schema, &kept).await.unwrap();
    let again = insert_in(&mut tx, &schema, &kept).await.unwrap();
    assert_eq!(again.result, InsertResult::IdExists);
    let txid: i64 = sqlx::query_scalar("SELECT txid_current()")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(s.item_get(kept.tenant_id, kept.id).await.unwrap().is_some());
    let w = tokio::time::timeout(Duration::from_secs(10), wake.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(w.lane, "tx_lane");
    // The nonce every listener shares is the sending transaction's id.
    assert_eq!(w.nonce, u64::try_from(txid).ok());
    let after: (String, String) =
        sqlx::query_as("SELECT current_setting('role'), current_setting('search_path')")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(after, before);
    done(schema).await;
}

/// A second store on `schema` (another process, as far as wake-ups and
/// leases go).
async fn peer_store(schema: &str) -> PgStore {
    PgStore::connect(
        &pg_url().await,
        drover::store::postgres::PgOptions {
            schema: schema.to_owned(),
            max_connections: 2,
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn wakeups_cross_stores_and_filter_schema() {
    let (s, schema) = pg_fresh_store().await;
    let (other, other_schema) = pg_fresh_store().await;
    let mut wake = s.wakeups().await.unwrap();
    // Give the listener a moment to LISTEN; a wake-up is only a hint, so the
    // test retries the insert rather than assume a delivery it never promises.
    let peer = peer_store(&schema).await;
    let mut got = None;
    for _ in 0..50 {
        other
            .item_insert(&NewItem::new("k", json!({})).with_lane("noise"))
            .await
            .unwrap();
        peer.item_insert(&NewItem::new("k", json!({})).with_lane("remote"))
            .await
            .unwrap();
        if let Ok(Ok(l)) = tokio::time::timeout(Duration::from_millis(200), wake.recv()).await {
            got = Some(l);
            break;
        }
    }
    let got = got.expect("a wake-up from the peer");
    assert_eq!(got.lane, "remote");
    assert!(got.nonce.is_some(), "a NOTIFY carries its transaction's id");
    done(schema).await;
    done(other_schema).await;
}

/// The store's own enqueue sends its wake-up after its commit, from a
/// transaction of its own (migration 0053): a transaction that NOTIFYs
/// holds PostgreSQL's notify lock through its commit's flush, so enqueues
/// that each sent their own committed one after another. The nonce is the
/// enqueuing store's: its own workers get it in process at the commit,
/// another process hears the same one, and the enqueuing store's listener
/// drops its own `NOTIFY` (its workers were woken already).
#[tokio::test]
async fn a_store_enqueue_is_woken_after_its_commit_not_from_it() {
    let (s, schema) = pg_fresh_store().await;
    let mut wake = s.wakeups().await.unwrap();
    let peer = peer_store(&schema).await;
    let mut own = peer.wakeups().await.unwrap();
    let mut got = None;
    let mut enqueues = 0;
    for _ in 0..50 {
        let item = NewItem::new("k", json!({})).with_lane("remote");
        peer.item_insert(&item).await.unwrap();
        enqueues += 1;
        if let Ok(Ok(w)) = tokio::time::timeout(Duration::from_millis(200), wake.recv()).await {
            got = Some(w);
            break;
        }
    }
    let w = got.expect("a wake-up from the peer's enqueue");
    assert_eq!(w.lane, "remote");
    let nonce = w.nonce.expect("a NOTIFY carries its nonce");
    // Not sent by an inserting transaction (the trigger's nonce is its id).
    let xmins: Vec<i64> = sqlx::query_scalar(&format!(
        "SELECT (xmin::text)::bigint FROM \"{schema}\".items"
    ))
    .fetch_all(s.pool())
    .await
    .unwrap();
    assert_eq!(xmins.len(), enqueues);
    assert!(
        xmins
            .iter()
            .all(|x| u64::try_from(*x).unwrap() != nonce % (1 << 32)),
        "the wake-up was sent by an inserting transaction: nonce {nonce}, enqueues {xmins:?}"
    );
    // A NOTIFY of another sender after everything the peer sent: once the
    // peer's listener forwards it, it has read the peer's own NOTIFYs.
    sqlx::query("SELECT pg_notify('drover_wake', $1)")
        .bind(format!("{schema}:fence"))
        .execute(s.pool())
        .await
        .unwrap();
    let mut heard = Vec::new();
    loop {
        let w = tokio::time::timeout(Duration::from_secs(10), own.recv())
            .await
            .expect("the fence reaches the peer")
            .unwrap();
        if w.lane == "fence" {
            break;
        }
        heard.push(w);
    }
    assert_eq!(
        heard.len(),
        enqueues,
        "one in-process wake-up per enqueue, the peer's own NOTIFYs dropped: {heard:?}"
    );
    assert!(heard.iter().all(|h| h.lane == "remote"));
    assert!(
        heard.iter().any(|h| h.nonce == Some(nonce)),
        "the other store heard a nonce the peer's workers got: {nonce} not in {heard:?}"
    );
    done(schema).await;
}

#[tokio::test]
async fn sweep_lease_is_shared_per_schema_and_outlives_no_session() {
    let (s, schema) = pg_fresh_store().await;
    let (other, other_schema) = pg_fresh_store().await;
    let peer = peer_store(&schema).await;
    let held = s
        .sweep_lease_take("s", Duration::from_secs(60))
        .await
        .unwrap()
        .expect("taken");
    assert_eq!(
        peer.sweep_lease_take("peer", Duration::from_secs(60))
            .await
            .unwrap(),
        None,
        "another store on the same schema is refused"
    );
    let theirs = other
        .sweep_lease_take("other", Duration::from_secs(60))
        .await
        .unwrap()
        .expect("another schema has its own lease");
    // The lease is a row, not a session: closing the holder's pool (the
    // connections a stalled process would keep) neither frees nor keeps
    // it; the release does, from any store.
    s.pool().close().await;
    assert_eq!(
        peer.sweep_lease_take("peer", Duration::from_secs(60))
            .await
            .unwrap(),
        None
    );
    peer.sweep_lease_release(held, false).await.unwrap();
    assert!(
        peer.sweep_lease_take("peer", Duration::from_secs(60))
            .await
            .unwrap()
            .is_some()
    );
    other.sweep_lease_release(theirs, false).await.unwrap();
    done(other_schema).await;
    done(schema).await;
}

#[tokio::test]
async fn migrate_is_idempotent_and_counts_and_workers_work() {
    let (s, schema) = pg_fresh_store().await;
    s.migrate().await.unwrap();
    s.item_insert_many(&[NewItem::new("a", json!(1)), NewItem::new("b", json!(2))])
        .await
        .unwrap();
    let counts = s.counts().await.unwrap();
    assert_eq!(counts.len(), 2);
    let g = s.gauges().await.unwrap();
    assert_eq!(g.oldest_age_seconds.len(), 1);
    assert_eq!(g.oldest_age_seconds[0].0, "default");
    let now = chrono::Utc::now();
    let w = drover::store::WorkerRow {
        id: "w-1".into(),
        host: "h".into(),
        pid: 42,
        lanes: vec!["default".into()],
        capacity: 4,
        started_at: now,
        last_beat_at: now,
        state: "running".into(),
        beat_interval_ms: 5000,
        kinds: vec!["mail".into()],
        version: String::new(),
    };
    s.worker_beat(&w).await.unwrap();
    s.worker_beat(&drover::store::WorkerRow {
        state: "draining".into(),
        ..w.clone()
    })
    .await
    .unwrap();
    let ws = s.worker_list().await.unwrap();
    assert_eq!(ws.len(), 1);
    assert_eq!(ws[0].state, "draining");
    done(schema).await;
}

/// A rough throughput probe (run with `--ignored --nocapture`, ideally in
/// release): bulk enqueue in batches of 1000, then drain by claim +
/// complete_many in batches of 500.
#[tokio::test]
#[ignore = "throughput probe, not a correctness test"]
async fn throughput_probe() {
    let (s, schema) = pg_fresh_store().await;
    let total = 50_000;
    let t0 = std::time::Instant::now();
    for _ in 0..total / 1000 {
        let batch: Vec<NewItem> = (0..1000)
            .map(|i| NewItem::new("k", json!({"i": i})))
            .collect();
        s.item_insert_many(&batch).await.unwrap();
    }
    let ins = t0.elapsed();
    let t1 = std::time::Instant::now();
    let mut drained = 0;
    let (mut in_claim, mut in_complete) = (Duration::ZERO, Duration::ZERO);
    loop {
        let c0 = std::time::Instant::now();
        let got = s
            .item_claim(&claim_params("default", 500, Duration::from_secs(60)))
            .await
            .unwrap();
        in_claim += c0.elapsed();
        if got.is_empty() {
            break;
        }
        let refs: Vec<ClaimRef> = got.iter().filter_map(ClaimRef::of).collect();
        let c1 = std::time::Instant::now();
        drained += s.item_complete_many(&refs).await.unwrap().len();
        in_complete += c1.elapsed();
    }
    eprintln!("claim {in_claim:?}, complete {in_complete:?}");
    let dr = t1.elapsed();
    assert_eq!(drained, total);
    eprintln!(
        "enqueue {:.0}/s, drain {:.0}/s",
        total as f64 / ins.as_secs_f64(),
        total as f64 / dr.as_secs_f64()
    );
    done(schema).await;
}

/// A release, a zero-delay defer, an operator retry and a stale requeue due
/// at once reach another process's listener: the NOTIFY is sent by the
/// transition's own statement, not only in process.
#[tokio::test]
async fn transitions_that_make_work_available_notify_other_processes() {
    let (s, schema) = pg_fresh_store().await;
    let peer = peer_store(&schema).await;
    let mut rx = peer.wakeups().await.unwrap();
    async fn heard(rx: &mut tokio::sync::broadcast::Receiver<drover::store::Wake>, lane: &str) {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match rx.recv().await {
                    Ok(w) if w.lane == lane => {
                        // Every statement's NOTIFY names its transaction.
                        assert!(w.nonce.is_some(), "{lane}: a NOTIFY without a nonce");
                        return;
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no NOTIFY for {lane} reached the other process"));
    }
    async fn claimed(s: &PgStore, lane: &str, lease: Duration) -> ClaimRef {
        let got = s
            .item_claim(&ClaimParams {
                lane: lane.into(),
                kinds: vec![],
                worker_id: "w".into(),
                lease,
                limit: 1,
            })
            .await
            .unwrap();
        ClaimRef::of(&got[0]).unwrap()
    }
    let put = |lane: &str| NewItem::new("n", json!({})).with_lane(lane);

    s.item_insert(&put("p-release")).await.unwrap();
    let c = claimed(&s, "p-release", Duration::from_secs(60)).await;
    s.item_release(&c, None).await.unwrap();
    heard(&mut rx, "p-release").await;

    s.item_insert(&put("p-defer")).await.unwrap();
    let c = claimed(&s, "p-defer", Duration::from_secs(60)).await;
    s.item_defer(&c, Duration::ZERO).await.unwrap();
    heard(&mut rx, "p-defer").await;

    let it = s.item_insert(&put("p-retry")).await.unwrap().item;
    let c = claimed(&s, "p-retry", Duration::from_secs(60)).await;
    s.item_complete(&c).await.unwrap();
    s.item_retry(it.tenant_id, it.id, uuid::Uuid::nil())
        .await
        .unwrap();
    heard(&mut rx, "p-retry").await;

    s.item_insert(&put("p-stale")).await.unwrap();
    claimed(&s, "p-stale", Duration::from_millis(200)).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let zero = RetryPolicy {
        base: Duration::ZERO,
        ..RetryPolicy::default()
    };
    let r = s
        .item_requeue_stale(uuid::Uuid::nil(), 10, &zero)
        .await
        .unwrap();
    assert_eq!(r.requeued, 1);
    heard(&mut rx, "p-stale").await;
    done(schema).await;
}

/// The gathered write on PostgreSQL claims markers, inserts and stores
/// answers in one transaction, so a key another batch is writing is told
/// apart by that batch's advisory lock on it: `InFlight` at once, nothing
/// written, no wait. Once the holder ends, the key runs; the same key
/// again replays the stored answer; a write that fails leaves no marker.
#[tokio::test]
async fn gathered_write_is_one_transaction_and_tells_a_key_in_flight() {
    use drover::access::{Claimed, MarkerBegin, MarkerClaim, MarkerKey};
    let (s, schema) = pg_fresh_store().await;
    let tenant = Uuid::new_v4();
    let claim = |key: &str| MarkerClaim {
        key: MarkerKey {
            tenant_id: tenant,
            principal: Uuid::from_u128(7),
            route: "POST /v1/items".into(),
            key: key.into(),
        },
        fingerprint: "fp".into(),
    };
    let item = || NewItem::new("send_email", json!({"to": "a"})).with_tenant(tenant);
    // The answers are data the caller makes from the outcomes.
    let answer = |r: &drover::Result<drover::Inserted>| match r {
        Ok(ins) => (201u16, ins.item.id.to_string()),
        Err(_) => (400u16, "refused".to_owned()),
    };
    let write = |claims: Vec<Option<MarkerClaim>>, prepared: Vec<drover::Result<NewItem>>| {
        let s = &s;
        async move {
            let w = s
                .item_insert_each_claimed(
                    &claims,
                    prepared,
                    Duration::from_secs(3600),
                    Duration::from_secs(60),
                )
                .await?;
            let answers: Vec<_> = w
                .outcomes()
                .iter()
                .map(|c| match c {
                    Claimed::Written(r) => Some(answer(r)),
                    Claimed::Settled(_) => None,
                })
                .collect();
            w.commit(&answers).await
        }
    };

    // Another transaction holds the key's lock, as a batch writing it does.
    let mut holder = sqlx::PgConnection::connect(&pg_url().await).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query(
        "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2 || ' ' || $3 || ' ' || $4))",
    )
    .bind(format!("{schema}:{tenant}"))
    .bind(Uuid::from_u128(7).to_string())
    .bind("POST /v1/items")
    .bind("k1")
    .execute(&mut holder)
    .await
    .unwrap();
    let out = write(vec![Some(claim("k1")), None], vec![Ok(item()), Ok(item())])
        .await
        .unwrap();
    assert!(
        matches!(out[0], Claimed::Settled(MarkerBegin::InFlight)),
        "{out:?}"
    );
    assert!(
        matches!(&out[1], Claimed::Written(Ok(ins)) if ins.result == InsertResult::Inserted),
        "the keyless input of the batch is written all the same: {out:?}"
    );
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();

    // The holder gone, the key runs, then replays what it stored.
    let out = write(vec![Some(claim("k1"))], vec![Ok(item())])
        .await
        .unwrap();
    let Claimed::Written(Ok(first)) = &out[0] else {
        panic!("{out:?}")
    };
    let out = write(vec![Some(claim("k1"))], vec![Ok(item())])
        .await
        .unwrap();
    match &out[0] {
        Claimed::Settled(MarkerBegin::Completed { status, body }) => {
            assert_eq!(*status, 201);
            assert_eq!(body, &first.item.id.to_string());
        }
        other => panic!("expected the replay, got {other:?}"),
    }

    // A write the database refuses (a lane name the table's check rejects,
    // past the queue's validation) rolls back its claim with it.
    let bad = NewItem::new("send_email", json!({}))
        .with_tenant(tenant)
        .with_lane("Bad Lane");
    assert!(write(vec![Some(claim("k2"))], vec![Ok(bad)]).await.is_err());
    let markers: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM \"{schema}\".idempotency_markers WHERE key = 'k2'"
    ))
    .fetch_one(&mut holder)
    .await
    .unwrap();
    assert_eq!(markers, 0, "a failed write leaves no marker held");
    let out = write(vec![Some(claim("k2"))], vec![Ok(item())])
        .await
        .unwrap();
    assert!(matches!(&out[0], Claimed::Written(Ok(_))), "{out:?}");
    holder.close().await.unwrap();
    done(schema).await;
}

/// Whether a session named `app` waits for the advisory lock `key` (a
/// bigint key is held as classid = its high half, objid = its low half).
async fn waits_for_advisory(conn: &mut sqlx::PgConnection, app: &str, key: i64) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
         WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1 \
         AND ((l.classid::bigint << 32) | l.objid::bigint) = $1 \
         AND a.application_name = $2)",
    )
    .bind(key)
    .bind(app)
    .fetch_one(conn)
    .await
    .unwrap()
}

/// A migration locks its own schema, so installations in other schemas of
/// the database migrate side by side (every test schema did wait for every
/// other's under sqlx's one lock per database); and it takes that database
/// lock shared, so a binary that takes it exclusively (an older drover in a
/// rolling upgrade) still excludes it. Synchronised on `pg_locks`.
#[tokio::test]
async fn migrations_lock_their_schema_and_share_the_database_lock() {
    use drover::store::postgres::{PgOptions, sqlx_migrate_lock_id};
    let owner = drover::testing::pg_owner_url().await;
    let mut holder = sqlx::PgConnection::connect(&pg_url().await).await.unwrap();
    let mut watcher = sqlx::PgConnection::connect(&pg_url().await).await.unwrap();
    // Each store's sessions carry its schema as their application name, so
    // a wait is seen as that store's, not another test's.
    let store_in = |schema: &str| {
        let opts = PgOptions {
            schema: schema.to_owned(),
            ..PgOptions::default()
        };
        let sep = if owner.contains('?') { '&' } else { '?' };
        let url = format!("{owner}{sep}application_name={schema}");
        async move { PgStore::connect(&url, opts).await.unwrap() }
    };

    // The schema's own lock held elsewhere: another schema migrates.
    let a = format!("drover_t_{}", Uuid::new_v4().simple());
    let key_a: i64 = sqlx::query_scalar("SELECT hashtextextended('drover.migrate:' || $1, 0)")
        .bind(&a)
        .fetch_one(&mut holder)
        .await
        .unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(key_a)
        .execute(&mut holder)
        .await
        .unwrap();
    let (other, other_schema) = pg_fresh_store().await;
    assert!(other.migration_status().await.unwrap().is_current());
    // ... while that schema's own migration waits for it.
    let store_a = store_in(&a).await;
    let migrating = tokio::spawn(async move { store_a.migrate().await.map(|_| store_a) });
    while !waits_for_advisory(&mut watcher, &a, key_a).await {
        tokio::task::yield_now().await;
    }
    assert!(!migrating.is_finished());
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(key_a)
        .execute(&mut holder)
        .await
        .unwrap();
    let store_a = migrating.await.unwrap().unwrap();
    assert!(store_a.migration_status().await.unwrap().is_current());

    // sqlx's database-wide lock held exclusively: a migration waits.
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&mut holder)
        .await
        .unwrap();
    let key_db = sqlx_migrate_lock_id(&database);
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(key_db)
        .execute(&mut holder)
        .await
        .unwrap();
    let b = format!("drover_t_{}", Uuid::new_v4().simple());
    let store_b = store_in(&b).await;
    let migrating = tokio::spawn(async move { store_b.migrate().await.map(|_| store_b) });
    while !waits_for_advisory(&mut watcher, &b, key_db).await {
        tokio::task::yield_now().await;
    }
    assert!(!migrating.is_finished());
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(key_db)
        .execute(&mut holder)
        .await
        .unwrap();
    let store_b = migrating.await.unwrap().unwrap();
    assert!(store_b.migration_status().await.unwrap().is_current());

    // Nothing of the two migrations' is left locked (other tests' migrations
    // may hold the database's key shared meanwhile: only these sessions count).
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
         WHERE l.locktype = 'advisory' AND a.application_name IN ($1, $2)",
    )
    .bind(&a)
    .bind(&b)
    .fetch_one(&mut watcher)
    .await
    .unwrap();
    assert_eq!(held, 0);
    for s in [other_schema, a, b] {
        done(s).await;
    }
}

/// Every table's rows (as JSON, in a stable order), the tables' names and
/// the sequences' states of `schema`: what a case could read of it.
async fn schema_contents(admin: &str, schema: &str) -> serde_json::Value {
    let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1",
    )
    .bind(schema)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut out = serde_json::Map::new();
    for t in &tables {
        let rows: Option<serde_json::Value> = sqlx::query_scalar(&format!(
            "SELECT jsonb_agg(to_jsonb(r) ORDER BY to_jsonb(r)::text) FROM \"{schema}\".\"{t}\" r"
        ))
        .fetch_one(&mut conn)
        .await
        .unwrap();
        out.insert(t.clone(), rows.unwrap_or(serde_json::Value::Null));
    }
    for seq in ["items_seq", "audit_id_seq"] {
        let state: serde_json::Value = sqlx::query_scalar(&format!(
            "SELECT jsonb_build_object('v', last_value, 'c', is_called) FROM \"{schema}\".\"{seq}\""
        ))
        .fetch_one(&mut conn)
        .await
        .unwrap();
        out.insert(seq.into(), state);
    }
    conn.close().await.unwrap();
    serde_json::Value::Object(out)
}

/// The contract harnesses reuse schemas: a spare emptied after a case is,
/// table by table and sequence by sequence, what its migrations left (the
/// rows the migrations wrote are back), and a spare whose shape a case changed is
/// refused rather than emptied (the harness then drops it).
#[tokio::test]
async fn spare_schema_empties_to_its_migrated_state() {
    let admin = pg_url().await;
    let (s, schema) = pg_fresh_store().await;
    drover::testing::register_spare(&admin, &schema).await;
    let migrated = schema_contents(&admin, &schema).await;

    let items: Vec<NewItem> = (0..25).map(|i| NewItem::new("k", json!(i))).collect();
    s.item_insert_many(&items).await.unwrap();
    let claimed = s
        .item_claim(&claim_params("default", 20, Duration::from_secs(60)))
        .await
        .unwrap();
    let refs: Vec<ClaimRef> = claimed.iter().filter_map(ClaimRef::of).collect();
    assert_eq!(s.item_complete_many(&refs).await.unwrap().len(), 20);
    let held = s
        .sweep_lease_take("s", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(held.is_some());
    assert_ne!(schema_contents(&admin, &schema).await, migrated);

    assert!(drover::testing::empty_spare(&admin, &schema).await);
    assert_eq!(schema_contents(&admin, &schema).await, migrated);
    // And the store works on it again from the start.
    let again = s.item_insert(&NewItem::new("k", json!(1))).await.unwrap();
    assert_eq!(again.result, InsertResult::Inserted);

    // The purge drops the item partition whose window ended empty (the
    // migration's first): a table the reset cannot put back, so it refuses.
    s.item_purge(chrono::Utc::now() + chrono::Duration::seconds(5), 3)
        .await
        .unwrap();
    assert!(!drover::testing::empty_spare(&admin, &schema).await);
    let n = s
        .item_list(&ListFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .len();
    assert_eq!(n, 1, "a refused spare is left as it was");
    let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
    sqlx::query("DELETE FROM drover_test_spares.spares WHERE schema = $1")
        .bind(&schema)
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    done(schema).await;
}
