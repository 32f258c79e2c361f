//! The fair claim in one call on PostgreSQL (`postgres/fair_call.rs`,
//! migration 0057): taken once the process kept the lane's passes, it
//! claims what the claim under the client's own lock claims, moves the
//! kept passes as the server moved them, and gives way to that claim when
//! another process wrote the passes or the schema has no such function.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use drover::NewItem;
use drover::store::fairness::FairnessStore;
use drover::store::postgres::PgStore;
use drover::store::{ClaimParams, ItemStore};
use serde_json::json;
use uuid::Uuid;

const LANE: &str = "fair-call";

fn params(limit: u32) -> ClaimParams {
    ClaimParams {
        lane: LANE.into(),
        kinds: vec![],
        worker_id: "w".into(),
        lease: Duration::from_secs(60),
        limit,
    }
}

/// Tenants 1 to 4 (tenant 1 at weight 3), with `per` items each and each
/// tenant's items at priorities 0 and -1 alternately, one insert each (so
/// no two items share an enqueue time).
async fn fill(store: &PgStore, per: usize) {
    store
        .fair_weight_set(Uuid::from_u128(1), 3, Uuid::nil())
        .await
        .expect("weight");
    for n in 0..per {
        for t in 1..=4u128 {
            let item = NewItem::new("k", json!({"n": n}))
                .with_lane(LANE)
                .with_tenant(Uuid::from_u128(t))
                .with_priority(if n % 2 == 0 { 0 } else { -1 });
            store.item_insert(&item).await.expect("insert");
        }
    }
}

/// The claims of `store` in a row, each as its items' (tenant, payload n).
async fn drain(store: &PgStore, claims: usize, limit: u32) -> Vec<Vec<(u128, i64)>> {
    let mut out = Vec::new();
    for _ in 0..claims {
        let got = store.item_claim(&params(limit)).await.expect("claim");
        let mut ids: Vec<(u128, i64)> = got
            .iter()
            .map(|i| (i.tenant_id.as_u128(), i.payload["n"].as_i64().unwrap()))
            .collect();
        ids.sort_unstable();
        out.push(ids);
    }
    out
}

/// Drops the one call's function from `schema`: its store then claims
/// under its own lock.
async fn without_the_call(url: &str, schema: &str) {
    use sqlx::{Connection, Executor};
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    c.execute(format!("DROP FUNCTION \"{schema}\".fair_claim_call").as_str())
        .await
        .unwrap();
}

/// The same items and weights in two schemas, one with the call and one
/// without: every claim takes the same items (so the passes each keeps
/// moved alike, or a later claim would differ), and the one with the call
/// took it for every claim after its first.
#[tokio::test]
async fn the_call_claims_what_the_locked_claim_claims() {
    let url = drover::testing::pg_owner_url().await;
    let (a, schema_a) = drover::testing::pg_fresh_store().await;
    let (b, schema_b) = drover::testing::pg_fresh_store().await;
    without_the_call(&url, &schema_b).await;
    fill(&a, 24).await;
    fill(&b, 24).await;
    let with_call = drain(&a, 9, 5).await;
    let locked = drain(&b, 9, 5).await;
    assert_eq!(with_call, locked);
    // Weight 3 against three of weight 1: tenant 1 starts half of the 40
    // starts of the first eight claims.
    let ones = with_call[..8].concat().iter().filter(|x| x.0 == 1).count();
    assert!((19..=21).contains(&ones), "{ones} of 40: {with_call:?}");
    assert_eq!(a.fair_calls_made(), 8, "every claim after the first");
    assert_eq!(b.fair_calls_made(), 0);
    drover::testing::pg_drop_schema(&url, &schema_a).await;
    drover::testing::pg_drop_schema(&url, &schema_b).await;
}

/// Two processes alternate: a claim after the other process's finds the
/// token moved and claims under its lock (and keeps the passes it read,
/// so its next claim is a call again); every item is claimed once and
/// each claim shares as the weights say.
#[tokio::test]
async fn another_process_writing_the_passes_sends_the_claim_under_the_lock() {
    let url = drover::testing::pg_owner_url().await;
    let (a, schema) = drover::testing::pg_fresh_store().await;
    let b: Arc<PgStore> = drover::testing::pg_peer_store(&schema, false).await;
    fill(&a, 24).await;
    let mut seen = HashSet::new();
    let order = [&a, &a, &b, &b, &a, &b, &a, &a];
    for (n, store) in order.iter().enumerate() {
        let got = store.item_claim(&params(6)).await.expect("claim");
        assert_eq!(got.len(), 6, "claim {n}");
        for i in &got {
            assert!(seen.insert(i.id), "claim {n} took {} again", i.id);
        }
        let ones = got.iter().filter(|i| i.tenant_id.as_u128() == 1).count();
        assert_eq!(ones, 3, "claim {n}: weight 3 of 6 gets half: {got:?}");
    }
    // a: its 1st claim and those after b's (5th, 7th) were under the lock.
    assert_eq!(a.fair_calls_made(), 2, "a's 2nd and 8th claims");
    assert_eq!(b.fair_calls_made(), 1, "b's 4th claim");
    drover::testing::pg_drop_schema(&url, &schema).await;
}

/// While the call waits for the lane's row, another writer moves the
/// lane's token and charges tenant 1 far ahead (played by a transaction
/// holding the row): the call, which locks before it reads, finds the
/// token moved, claims nothing, and the claim made under the lock instead
/// reads the committed passes: both starts are tenant 2's.
#[tokio::test]
async fn a_token_moved_during_the_calls_lock_wait_sends_the_claim_under_the_lock() {
    use sqlx::Executor;
    let url = drover::testing::pg_owner_url().await;
    let (a, schema) = drover::testing::pg_fresh_store().await;
    for _ in 0..4 {
        for t in 1..=2u128 {
            let item = NewItem::new("k", json!({"n": 0}))
                .with_lane(LANE)
                .with_tenant(Uuid::from_u128(t));
            a.item_insert(&item).await.expect("insert");
        }
    }
    // The first claim keeps the passes; the next would be a call.
    assert_eq!(a.item_claim(&params(2)).await.expect("claim").len(), 2);
    let (mut other, holder) =
        drover::testing::pg_fair_token_moving(&url, &schema, LANE, Uuid::from_u128(1)).await;
    let claim = tokio::spawn({
        let a = a.clone();
        async move { a.item_claim(&params(2)).await }
    });
    drover::testing::pg_until_blocked_by(&url, holder).await;
    other.execute("COMMIT").await.unwrap();
    let got = claim.await.unwrap().expect("claim");
    let tenants: Vec<u128> = got.iter().map(|i| i.tenant_id.as_u128()).collect();
    assert_eq!(tenants, vec![2, 2], "{got:?}");
    assert_eq!(
        a.fair_calls_made(),
        0,
        "the call ran, found the token moved"
    );
    drover::testing::pg_drop_schema(&url, &schema).await;
}
