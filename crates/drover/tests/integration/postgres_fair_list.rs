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

/// The sweep's purge of idle passes and a claim writing its lane's passes
/// take the rows in the same order (the lane's row first), so they wait
/// for one another instead of in a cycle. Before, the purge deleted the
/// idle tenants' rows and then bumped the lane's token, while a claim
/// held the lane's row and wrote a tenant's: PostgreSQL's deadlock
/// detector ended one of them (seen under faults as a failed claim and a
/// purge step timing out). The claim is played here in SQL, as the store
/// runs it: the lane's row locked, then a tenant's row written.
#[tokio::test]
async fn the_passes_purge_and_a_claim_lock_in_one_order() {
    use drover::store::fairness::FairnessStore;
    use sqlx::{Connection, Executor};
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    let idle = Uuid::from_u128(0x1d1e);
    let mut claim = sqlx::PgConnection::connect(&url).await.unwrap();
    claim
        .execute(format!("SET search_path = {schema}").as_str())
        .await
        .unwrap();
    // The lane's row at virtual time 10, an idle tenant behind it (so the
    // purge deletes it) and nothing pending.
    claim
        .execute(
            format!(
                "INSERT INTO fair_passes (lane, tenant_id, pass) VALUES
                 ('fair-list', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 10),
                 ('fair-list', '{idle}', 0)"
            )
            .as_str(),
        )
        .await
        .unwrap();
    // The claim's first step: the lane's row, locked.
    claim.execute("BEGIN").await.unwrap();
    claim
        .execute(
            "SELECT pass FROM fair_passes WHERE lane = 'fair-list'
               AND tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff' FOR UPDATE",
        )
        .await
        .unwrap();
    let purge = tokio::spawn({
        let store = store.clone();
        async move { store.fair_passes_purge(100).await }
    });
    // Wait until the purge waits on a lock (the lane's row now; before,
    // the lane's row after it had locked the idle tenant's).
    drover::testing::pg_until_waiting_on_lock(&url, "%fair_passes%").await;
    // The claim's last step: the tenant's row written, then commit.
    sqlx::query(
        "INSERT INTO fair_passes (lane, tenant_id, pass) VALUES ('fair-list', $1, 11)
         ON CONFLICT (lane, tenant_id) DO UPDATE SET pass = excluded.pass",
    )
    .bind(idle)
    .execute(&mut claim)
    .await
    .expect("the claim's write of a tenant's pass does not deadlock");
    claim.execute("COMMIT").await.unwrap();
    purge
        .await
        .unwrap()
        .expect("the purge does not deadlock either");
}
