//! The fair claim's first read in the lock's statement on PostgreSQL
//! (`postgres/fair_first.rs`): kept when the process's kept passes are the
//! lane's, dropped for a read under the lock whenever they may not be, and
//! the same claims either way. Two stores on one schema stand for two
//! processes.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use drover::NewItem;
use drover::store::postgres::PgStore;
use drover::store::{ClaimParams, ItemStore};
use serde_json::json;
use uuid::Uuid;

const LANE: &str = "fair-first";

fn params(limit: u32) -> ClaimParams {
    ClaimParams {
        lane: LANE.into(),
        kinds: vec![],
        worker_id: "w".into(),
        lease: Duration::from_secs(60),
        limit,
    }
}

async fn put(store: &PgStore, tenant: u128) -> Uuid {
    let item = NewItem::new("k", json!({}))
        .with_lane(LANE)
        .with_tenant(Uuid::from_u128(tenant));
    store.item_insert(&item).await.expect("insert").item.id
}

/// Two processes drain three tenants of equal weight, three items a
/// claim, in an order that makes each take both paths (a second claim in
/// a row keeps its first read; one after the other process's drops it):
/// every claim starts one item of each tenant and every item is claimed
/// once.
#[tokio::test]
async fn both_paths_make_the_same_claims_across_two_processes() {
    let (a, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    let b = drover::testing::pg_peer_store(&schema, false).await;
    let mut all = HashSet::new();
    for _ in 0..8 {
        for t in 1..=3 {
            all.insert(put(&a, t).await);
        }
    }
    let mut seen = HashSet::new();
    let order = [&a, &a, &b, &a, &b, &b, &a, &a];
    for (n, store) in order.iter().enumerate() {
        let got = store.item_claim(&params(3)).await.expect("claim");
        let mut per: BTreeMap<u128, u32> = BTreeMap::new();
        for i in &got {
            *per.entry(i.tenant_id.as_u128()).or_default() += 1;
            assert!(seen.insert(i.id), "claim {n} took {} again", i.id);
        }
        assert_eq!(
            per,
            BTreeMap::from([(1, 1), (2, 1), (3, 1)]),
            "claim {n}: starts by tenant"
        );
    }
    assert_eq!(seen, all, "every item claimed once");
    drover::testing::pg_drop_schema(&url, &schema).await;
}

/// While the lock's statement waits for the lane's row, another writer
/// moves the lane's token and a tenant's pass (played here by a
/// transaction holding the row): the statement's snapshot predates that
/// commit, so its candidates and the kept passes are dropped and the claim
/// is made on the passes as they are now. (The schema has no one-call fair
/// claim, `postgres_fair_call.rs`, so the claim takes this path.)
#[tokio::test]
async fn a_token_moved_during_the_lock_wait_drops_the_first_read() {
    use sqlx::{Connection, Executor};
    let (a, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
    c.execute(format!("DROP FUNCTION \"{schema}\".fair_claim_call").as_str())
        .await
        .unwrap();
    for _ in 0..4 {
        put(&a, 1).await;
        put(&a, 2).await;
    }
    // The first claim keeps the passes.
    assert_eq!(a.item_claim(&params(2)).await.expect("claim").len(), 2);
    // Tenant 1 charged far ahead and the token moved, uncommitted.
    let (mut other, holder) =
        drover::testing::pg_fair_token_moving(&url, &schema, LANE, Uuid::from_u128(1)).await;
    let claim = tokio::spawn({
        let a = a.clone();
        async move { a.item_claim(&params(2)).await }
    });
    drover::testing::pg_until_blocked_by(&url, holder).await;
    other.execute("COMMIT").await.unwrap();
    let got = claim.await.unwrap().expect("claim");
    // On the committed passes tenant 1 is far ahead: both starts are 2's.
    let tenants: Vec<u128> = got.iter().map(|i| i.tenant_id.as_u128()).collect();
    assert_eq!(tenants, vec![2, 2], "{got:?}");
    drover::testing::pg_drop_schema(&url, &schema).await;
}

/// The plan of the lock-and-read as a session keeps it: made at its first
/// run on a small lane that was never analyzed (a fresh installation, or
/// a lane that grows), under the fair claim's transaction settings.
async fn kept_plan(settings: &str) -> String {
    use drover::store::postgres::fair_plans::lock_first_read_sql;
    use sqlx::{Connection, Executor, Row};
    let (store, schema) = drover::testing::pg_fresh_store().await;
    let url = drover::testing::pg_owner_url().await;
    for t in 1..=2 {
        let item = NewItem::new("k", json!({}))
            .with_lane(LANE)
            .with_tenant(Uuid::from_u128(t));
        store.item_insert(&item).await.expect("insert");
    }
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    conn.execute(format!("BEGIN; SET LOCAL search_path = {schema}; {settings}").as_str())
        .await
        .unwrap();
    let sql = lock_first_read_sql().replace('\n', " ");
    conn.execute(format!("PREPARE r AS {sql}").as_str())
        .await
        .unwrap();
    let args = format!(
        "'{LANE}', ARRAY['{}', '{}']::uuid[], ARRAY[3, 3]::bigint[], '{{}}'::text[]",
        Uuid::from_u128(1),
        Uuid::from_u128(2)
    );
    conn.execute(format!("EXECUTE r({args})").as_str())
        .await
        .unwrap();
    let rows = sqlx::raw_sql(&format!("EXPLAIN EXECUTE r({args})"))
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let plan: Vec<String> = rows.iter().map(|r| r.get::<String, _>(0)).collect();
    conn.execute("ROLLBACK").await.unwrap();
    drover::testing::pg_drop_schema(&url, &schema).await;
    plan.join("\n")
}

/// A generic plan is made once per session from the statistics of that
/// moment. Made on a small, never analyzed lane with only
/// `force_generic_plan`, the lock-and-read scanned and sorted a tenant's
/// whole backlog per tenant once the lane was large (10,000 tenants x 100:
/// 33 ms a claim on average, 1.36 s at worst). Under the fair claim's
/// settings the kept plan walks each tenant's items in claim order by
/// index, whatever the lane's size later.
#[tokio::test]
async fn the_lock_and_read_keeps_an_index_walk_made_on_a_small_lane() {
    use drover::store::postgres::fair_plans::GENERIC_INDEX_PLANS;
    let plan = kept_plan(GENERIC_INDEX_PLANS).await;
    assert!(plan.contains("Index Scan"), "{plan}");
    // A node's name follows its arrow (or opens the plan); "Sort Key" of
    // a Merge Append is not a sort.
    let nodes: Vec<&str> = plan
        .lines()
        .map(|l| l.trim_start().trim_start_matches("->").trim_start())
        .collect();
    for bad in [
        "Seq Scan on items",
        "Sort  (",
        "Incremental Sort  (",
        "Bitmap Heap Scan on items",
    ] {
        assert!(
            !nodes.iter().any(|n| n.starts_with(bad)),
            "{bad} in the kept plan:\n{plan}"
        );
    }
}
