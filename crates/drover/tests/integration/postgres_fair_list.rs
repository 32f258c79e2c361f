//! The fair claim's tenant list on PostgreSQL (docs/flow-control.md, "Fair
//! share between tenants"): once older than its TTL it still serves claims
//! while it is read again behind them; but a stale list that names only
//! tenants with nothing due is read again at once, so a tenant another
//! process enqueued for is claimed by the next claim, not left for the
//! poll. Two stores on one schema stand for two processes (an enqueue
//! through a store voids that store's own list).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use drover::NewItem;
use drover::store::postgres::{PgOptions, PgStore};
use drover::store::{ClaimParams, ClaimRef, Completion, ItemStore};
use serde_json::json;
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

async fn put(store: &PgStore, tenant: u128) -> Uuid {
    let item = NewItem::new("k", json!({}))
        .with_lane("fair-list")
        .with_tenant(Uuid::from_u128(tenant));
    store.item_insert(&item).await.expect("insert").item.id
}

#[tokio::test]
async fn a_stale_list_of_drained_tenants_is_read_again_before_the_claim_gives_up() {
    let (claimer, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    let producer = PgStore::connect(
        &url,
        PgOptions {
            schema: schema.clone(),
            max_connections: 4,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    put(&producer, 1).await;
    put(&producer, 2).await;
    // The claimer reads the list (tenants 1 and 2) and drains both.
    let first = claimer.item_claim(&params(10)).await.expect("claim");
    assert_eq!(first.len(), 2, "{first:?}");
    let done: Vec<Completion> = first
        .iter()
        .filter_map(ClaimRef::of)
        .map(|claim| Completion {
            claim,
            result: None,
        })
        .collect();
    assert_eq!(
        claimer
            .item_complete_many_with(&done)
            .await
            .expect("complete")
            .len(),
        2
    );
    // Another process enqueues for tenants 3 and 4; the claimer's list
    // (still naming only 1 and 2) passes its TTL.
    let three = put(&producer, 3).await;
    let four = put(&producer, 4).await;
    tokio::time::sleep(drover::store::fairness::FAIR_CACHE_TTL + Duration::from_millis(100)).await;
    let next = claimer.item_claim(&params(10)).await.expect("claim");
    let mut got: Vec<Uuid> = next.iter().map(|i| i.id).collect();
    got.sort();
    let mut want = vec![three, four];
    want.sort();
    assert_eq!(
        got, want,
        "the stale list's claim left the new tenants' items"
    );
    drover::testing::pg_drop_schema(&url, &schema).await;
}

/// Each process keeps the passes it last read or wrote, behind the lane
/// row's version token: after another process's fair claim it must read
/// them again. Claims of one between two tenants of equal weight go A, B,
/// A (the tie after one start each goes to A's older item); a process
/// claiming on its own stale passes (A one start ahead, B level with the
/// virtual time) would start B a second time.
#[tokio::test]
async fn kept_passes_are_read_again_after_another_processs_claim() {
    let (first, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    let second = PgStore::connect(
        &url,
        PgOptions {
            schema: schema.clone(),
            max_connections: 4,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    for _ in 0..5 {
        put(&second, 1).await;
        put(&second, 2).await;
    }
    let tenant_of = |items: Vec<drover::item::Item>| {
        assert_eq!(items.len(), 1, "{items:?}");
        items[0].tenant_id.as_u128()
    };
    let a = tenant_of(first.item_claim(&params(1)).await.expect("claim"));
    let b = tenant_of(second.item_claim(&params(1)).await.expect("claim"));
    let again = tenant_of(first.item_claim(&params(1)).await.expect("claim"));
    assert_eq!((a, b, again), (1, 2, 1), "starts by tenant");
    drover::testing::pg_drop_schema(&url, &schema).await;
}
