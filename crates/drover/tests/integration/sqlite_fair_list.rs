//! The fair claim's tenant list on SQLite (docs/flow-control.md, "Fair
//! share between tenants"), kept per process as on PostgreSQL: a list that
//! names only tenants with nothing due is read again at once, so a tenant
//! another process enqueued for is claimed by the next claim, not left for
//! the poll; and a list older than its TTL still serves claims while it
//! is read again on the reader pool, after which the new tenant is shared
//! in. Two stores on one file stand for two processes (an enqueue through
//! a store voids that store's own list).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use crate::sqlite_common;

use std::time::Duration;

use drover::NewItem;
use drover::store::sqlite::{SqliteOptions, SqliteStore};
use drover::store::{ClaimParams, ClaimRef, Completion, ItemStore};
use serde_json::json;
use sqlite_common::*;
use uuid::Uuid;

fn params(limit: u32) -> ClaimParams {
    ClaimParams {
        lane: "fair-list".into(),
        kinds: vec![],
        worker_id: "w".into(),
        lease: Duration::from_secs(60),
        limit,
    }
}

async fn put(store: &SqliteStore, tenant: u128) -> Uuid {
    let item = NewItem::new("k", json!({}))
        .with_lane("fair-list")
        .with_tenant(Uuid::from_u128(tenant));
    store.item_insert(&item).await.expect("insert").item.id
}

/// The other process: a second store over the same file, on the first's
/// clock.
async fn producer(db: &Db) -> SqliteStore {
    SqliteStore::open(
        db.path.to_str().unwrap(),
        SqliteOptions {
            clock: db.clock.clone(),
            ..SqliteOptions::default()
        },
    )
    .await
    .unwrap()
}

async fn complete(store: &SqliteStore, items: &[drover::item::Item]) {
    let done: Vec<Completion> = items
        .iter()
        .filter_map(ClaimRef::of)
        .map(|claim| Completion {
            claim,
            result: None,
        })
        .collect();
    let landed = store
        .item_complete_many_with(&done)
        .await
        .expect("complete");
    assert_eq!(landed.len(), items.len());
}

#[tokio::test]
async fn a_list_of_drained_tenants_is_read_again_before_the_claim_gives_up() {
    let db = db().await;
    let producer = producer(&db).await;
    put(&producer, 1).await;
    put(&producer, 2).await;
    // The claimer reads the list (tenants 1 and 2) and drains both.
    let first = db.store.item_claim(&params(10)).await.expect("claim");
    assert_eq!(first.len(), 2, "{first:?}");
    complete(&db.store, &first).await;
    // Another process enqueues for tenants 3 and 4; the claimer's kept
    // list still names only 1 and 2.
    let three = put(&producer, 3).await;
    let four = put(&producer, 4).await;
    let next = db.store.item_claim(&params(10)).await.expect("claim");
    let mut got: Vec<Uuid> = next.iter().map(|i| i.id).collect();
    got.sort();
    let mut want = vec![three, four];
    want.sort();
    assert_eq!(
        got, want,
        "the kept list's claim left the new tenants' items"
    );
    producer.close().await;
}

#[tokio::test]
async fn a_stale_list_serves_while_it_is_read_again_and_the_new_tenant_is_shared_in() {
    let db = db().await;
    let producer = producer(&db).await;
    for _ in 0..50 {
        put(&producer, 1).await;
        put(&producer, 2).await;
    }
    let first = db.store.item_claim(&params(2)).await.expect("claim");
    assert_eq!(first.len(), 2, "{first:?}");
    // Tenant 3 arrives through the other process; the claimer's list
    // passes its TTL.
    let three = put(&producer, 3).await;
    tokio::time::sleep(drover::store::fairness::FAIR_CACHE_TTL + Duration::from_millis(50)).await;
    // The stale list serves (tenants 1 and 2) and is read again behind
    // the claims; tenant 3 is started once the read lands, well within
    // the backlog of 1 and 2.
    let mut claims = 0;
    loop {
        let got = db.store.item_claim(&params(2)).await.expect("claim");
        assert_eq!(got.len(), 2, "work-conserving: {got:?}");
        claims += 1;
        if got.iter().any(|i| i.id == three) {
            break;
        }
        assert!(claims < 40, "tenant 3 was never shared in");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    producer.close().await;
}
