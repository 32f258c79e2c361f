//! Focused tests of the SQLite store's own ground: URL forms, the in-memory
//! database, enqueue (single, bulk, in a caller's transaction), wake-ups,
//! the schema's CHECK constraints, durability across reopening, and the bulk
//! insert rate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::sqlite_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover::item::{InsertResult, NewItem, Status};
use drover::store::sqlite::{SqliteOptions, SqliteStore, insert_in};
use drover::store::{ItemStore, ListFilter, ManualClock, Store};
use serde_json::json;
use sqlite_common::*;
use uuid::Uuid;

#[tokio::test]
async fn open_accepts_every_url_form_and_creates_the_file() {
    for form in ["sqlite://", "sqlite:", ""] {
        let path = temp_path();
        let url = format!("{form}{}", path.display());
        let store = SqliteStore::open(&url, SqliteOptions::default())
            .await
            .unwrap();
        store.migrate().await.unwrap();
        store.migrate().await.unwrap(); // idempotent
        assert!(path.exists(), "{url} did not create the file");
        let it = item("k");
        store.item_insert(&it).await.unwrap();
        assert!(store.item_get(it.tenant_id, it.id).await.unwrap().is_some());
        store.close().await;
        drop(Db {
            store,
            clock: Arc::new(ManualClock::new()),
            path,
        });
    }
}

#[tokio::test]
async fn memory_database_is_shared_by_reads_and_writes() {
    let store = SqliteStore::open("sqlite::memory:", SqliteOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let it = item("k");
    store.item_insert(&it).await.unwrap();
    // Reads and the claim must see the write: one database, not one per connection.
    assert!(store.item_get(it.tenant_id, it.id).await.unwrap().is_some());
    assert_eq!(
        store
            .item_claim(&claim_params("default", 10))
            .await
            .unwrap()
            .len(),
        1
    );
    // A second store on sqlite::memory: is a different, empty database.
    let other = SqliteStore::open("sqlite::memory:", SqliteOptions::default())
        .await
        .unwrap();
    other.migrate().await.unwrap();
    assert!(other.item_get(it.tenant_id, it.id).await.unwrap().is_none());
}

#[tokio::test]
async fn insert_stamps_the_stored_copy() {
    let db = db().await;
    let at = db.clock.now_for_test();
    let it = item("k").with_actor(Uuid::new_v4()).with_priority(3);
    let got = db.store.item_insert(&it).await.unwrap();
    assert_eq!(got.result, InsertResult::Inserted);
    let s = got.item;
    assert_eq!(s.id, it.id);
    assert_eq!(s.status, Status::Pending);
    assert_eq!(s.attempts, 0);
    assert_eq!(s.claim_seq, 0);
    assert!(s.claim_token.is_none() && s.claimed_by.is_none() && s.lease_expires_at.is_none());
    assert_eq!(s.updated_by, it.created_by);
    assert_eq!(
        s.created_at.timestamp_micros(),
        it.created_at.timestamp_micros()
    );
    assert_eq!(s.available_at.timestamp_micros(), at.timestamp_micros());
    assert_eq!(s.payload, json!({"n": 1}));
    assert_eq!(s.priority, 3);
}

#[tokio::test]
async fn insert_collision_changes_nothing_and_names_the_key() {
    let db = db().await;
    let tenant = Uuid::new_v4();
    let first = item("k").with_tenant(tenant).with_key("order:1");
    db.store.item_insert(&first).await.unwrap();
    let claim = claim_one(&db).await;

    // Same id (retried enqueue): the claim survives.
    let again = db.store.item_insert(&first).await.unwrap();
    assert_eq!(again.result, InsertResult::IdExists);
    assert_eq!(again.item.status, Status::Claimed);
    assert_eq!(again.item.claim_token, Some(claim.token));

    // Same key, new id.
    let dup = item("k").with_tenant(tenant).with_key("order:1");
    let got = db.store.item_insert(&dup).await.unwrap();
    assert_eq!(got.result, InsertResult::KeyExists);
    assert_eq!(got.item.id, first.id);
    assert!(db.store.item_get(tenant, dup.id).await.unwrap().is_none());

    // Same key under another tenant is a different item.
    let other = item("k").with_tenant(Uuid::new_v4()).with_key("order:1");
    assert_eq!(
        db.store.item_insert(&other).await.unwrap().result,
        InsertResult::Inserted
    );

    // An id held by another tenant is refused without handing that item over.
    let stolen = item("k").with_tenant(Uuid::new_v4()).with_id(first.id);
    assert!(
        db.store
            .item_insert(&stolen)
            .await
            .unwrap_err()
            .is_conflict()
    );
}

#[tokio::test]
async fn insert_many_reports_per_input_across_chunks() {
    let db = db().await;
    let tenant = Uuid::new_v4();
    let existing = item("k").with_tenant(tenant).with_key("taken");
    db.store.item_insert(&existing).await.unwrap();

    let mut batch: Vec<NewItem> = (0..2500).map(|_| item("k").with_tenant(tenant)).collect();
    batch[10] = existing.clone().with_key("other"); // id collision with a stored row
    batch[20] = item("k").with_tenant(tenant).with_key("taken"); // key collision
    batch[30] = item("k").with_tenant(tenant).with_key("fresh");
    batch[31] = item("k").with_tenant(tenant).with_key("fresh"); // key collision within the batch
    batch[1500] = batch[40].clone(); // id collision across statements
    let got = db.store.item_insert_many(&batch).await.unwrap();
    assert_eq!(got.len(), batch.len());
    assert_eq!(got[10], InsertResult::IdExists);
    assert_eq!(got[20], InsertResult::KeyExists);
    assert_eq!(got[30], InsertResult::Inserted);
    assert_eq!(got[31], InsertResult::KeyExists);
    assert_eq!(got[40], InsertResult::Inserted);
    assert_eq!(got[1500], InsertResult::IdExists);
    let inserted = got.iter().filter(|r| **r == InsertResult::Inserted).count();
    assert_eq!(inserted, 2500 - 4);
    let all = db
        .store
        .item_list(&ListFilter {
            tenant_id: Some(tenant),
            ..ListFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), inserted + 1);
    // The stored row that collided is untouched.
    let kept = db
        .store
        .item_get(tenant, existing.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.idempotency_key.as_deref(), Some("taken"));
}

#[tokio::test]
async fn transactional_enqueue_exists_iff_the_caller_commits() {
    let db = db().await;
    let now = db.clock.now_for_test();
    let kept = item("k");
    let dropped = item("k");

    let mut tx = db
        .store
        .writer()
        .begin_with("BEGIN IMMEDIATE")
        .await
        .unwrap();
    let got = insert_in(&mut tx, &kept, now).await.unwrap();
    assert_eq!(got.result, InsertResult::Inserted);
    tx.commit().await.unwrap();

    let mut tx = db
        .store
        .writer()
        .begin_with("BEGIN IMMEDIATE")
        .await
        .unwrap();
    insert_in(&mut tx, &dropped, now).await.unwrap();
    tx.rollback().await.unwrap();

    assert!(
        db.store
            .item_get(kept.tenant_id, kept.id)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        db.store
            .item_get(dropped.tenant_id, dropped.id)
            .await
            .unwrap()
            .is_none()
    );

    // A caller's own connection to the same file works the same way.
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!(
        "sqlite://{}",
        db.path.display()
    ))
    .await
    .unwrap();
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    let third = item("k");
    insert_in(&mut tx, &third, now).await.unwrap();
    let again = insert_in(&mut tx, &third, now).await.unwrap();
    assert_eq!(again.result, InsertResult::IdExists);
    tx.commit().await.unwrap();
    assert!(
        db.store
            .item_get(third.tenant_id, third.id)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn wakeups_name_each_lane_once_after_commit() {
    let db = db().await;
    let mut rx = db.store.wakeups().await.unwrap();
    let batch = vec![
        item("k"),
        item("k").with_lane("mail"),
        item("k"),
        item("k").with_lane("mail"),
    ];
    db.store.item_insert_many(&batch).await.unwrap();
    let (w1, w2) = (rx.try_recv().unwrap(), rx.try_recv().unwrap());
    // Each wake-up is counted: its own nonce, shared by every subscriber.
    assert!(w1.nonce.is_some() && w1.nonce != w2.nonce, "{w1:?} {w2:?}");
    let mut got = vec![w1.lane, w2.lane];
    got.sort();
    assert_eq!(got, ["default", "mail"]);
    assert!(rx.try_recv().is_err(), "one wake-up per lane per statement");
    // A collision makes no work available: no wake-up.
    db.store.item_insert(&batch[0]).await.unwrap();
    assert!(rx.try_recv().is_err());
}

#[tokio::test]
async fn schema_checks_refuse_broken_invariants() {
    let db = db().await;
    let it = item("k");
    db.store.item_insert(&it).await.unwrap();
    let w = db.store.writer();
    // Each statement breaks one invariant the schema must hold on its own,
    // whatever the code above it does.
    let broken = [
        "UPDATE items SET status = 'claimed'", // claimed without a claim
        "UPDATE items SET claimed_by = 'w'",   // a claim field outside 'claimed'
        "UPDATE items SET max_attempts = 0",   // budget below 1
        "UPDATE items SET attempts = -1",      // negative attempts
        "UPDATE items SET status = 'running'", // unknown status
        "UPDATE items SET lane = 'Bad Lane'",  // lane outside [a-z0-9_-]
        "UPDATE items SET kind = ''",          // empty kind
        "UPDATE items SET payload = '{not json'", // payload not JSON
        "UPDATE items SET last_error = printf('%.3000c', 'x')", // over MAX_ERROR_BYTES
        "UPDATE items SET available_at = 'soon'", // STRICT: not an integer
    ];
    for sql in broken {
        assert!(
            sqlx::query(sql).execute(w).await.is_err(),
            "the schema accepted: {sql}"
        );
    }
    let s = db
        .store
        .item_get(it.tenant_id, it.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.status, Status::Pending);
}

#[tokio::test]
async fn committed_work_survives_reopening_the_file() {
    let db = db().await;
    let it = item("k").with_key("durable");
    db.store.item_insert(&it).await.unwrap();
    let c = claim_one(&db).await;
    db.store.close().await;
    let opts = SqliteOptions {
        clock: db.clock.clone(),
        ..SqliteOptions::default()
    };
    let reopened = SqliteStore::open(db.path.to_str().unwrap(), opts)
        .await
        .unwrap();
    reopened.migrate().await.unwrap();
    let s = reopened
        .item_get_by_key(it.tenant_id, "durable")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((s.status, s.claim_token), (Status::Claimed, Some(c.token)));
    reopened.item_complete(&c).await.unwrap();
}

/// Run with `cargo test --release -p drover --test integration -- --ignored
/// --nocapture sqlite_enqueue::bulk_insert_rate`.
#[tokio::test]
#[ignore = "a measurement, not a check; run in release"]
async fn bulk_insert_rate() {
    let db = db().await;
    let batches = 100;
    let mut total = Duration::ZERO;
    for _ in 0..batches {
        let batch: Vec<NewItem> = (0..1000)
            .map(|i| item("bench").with_priority((i % 3) as i16))
            .collect();
        let t = Instant::now();
        db.store.item_insert_many(&batch).await.unwrap();
        total += t.elapsed();
    }
    let rate = f64::from(batches * 1000) / total.as_secs_f64();
    eprintln!("bulk insert: {rate:.0} items/s in batches of 1000");
}
