//! The rate cells' purge against a claim whose transaction began before a
//! cell's time and reached the cell only after the purge deleted it, on a
//! real PostgreSQL (the only backend whose claims run concurrently with
//! the purge). Such a claim admits on its transaction's clock; finding the
//! cell gone, it would start a second burst inside the window the deleted
//! cell still guarded. The purge keeps cells for the grace
//! (`CELL_GRACE`), and a claim older than the grace at its cell locks
//! admits nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use std::time::Duration;

use drover::item::NewItem;
use drover::store::limits::{LimitScope, LimitSource};
use drover::store::rates::{CELL_GRACE, Rate, RateStore};
use drover::store::{ClaimParams, ItemStore};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_owner_url};
use serde_json::json;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

const KIND: &str = "rated.burst";

fn params(n: u32) -> ClaimParams {
    ClaimParams {
        lane: "default".into(),
        kinds: vec![],
        worker_id: "w1".into(),
        lease: Duration::from_secs(30),
        limit: n,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_outlived_a_purged_cell_starts_no_second_burst() {
    let (store, schema) = pg_fresh_store().await;
    // One start a second, a burst of two: the first claim takes one start
    // and leaves room for one more until its cell's time.
    store
        .rate_set(
            &LimitScope::KindPerGroup(KIND.into()),
            LimitSource::Operator,
            Rate::per(1, Duration::from_secs(1)).with_burst(2),
            Uuid::nil(),
        )
        .await
        .expect("rate");
    for n in 0..4 {
        store
            .item_insert(&NewItem::new(KIND, json!({ "n": n })).with_group("g"))
            .await
            .expect("insert");
    }
    let first = store.item_claim(&params(1)).await.expect("first claim");
    assert_eq!(first.len(), 1);

    // Hold the claim's candidates back: the next claim begins now (its
    // clock) and waits for the lock before it reaches its cell.
    let mut holder = PgConnection::connect(&pg_owner_url().await).await.unwrap();
    sqlx::query(&format!("SET search_path = \"{schema}\""))
        .execute(&mut holder)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .unwrap();
    let late = {
        let store = store.clone();
        tokio::spawn(async move { store.item_claim(&params(10)).await })
    };
    // The late claim's transaction is open and waiting on the lock.
    let mut watcher = PgConnection::connect(&pg_owner_url().await).await.unwrap();
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND state = 'active'",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The cell goes idle (its time is a second after the first start) and
    // the purge, past the grace, deletes it while the late claim waits.
    tokio::time::sleep(Duration::from_secs(1) + CELL_GRACE + Duration::from_millis(200)).await;
    assert_eq!(store.rate_cells_purge(100).await.expect("purge"), 1);
    sqlx::query("COMMIT").execute(&mut holder).await.unwrap();

    let late = late.await.unwrap().expect("late claim");
    // Both claims lease for the same time: the leases' ends are the
    // starts' clocks, shifted alike.
    let first_at = first[0].lease_expires_at.expect("leased");
    let within: Vec<_> = late
        .iter()
        .filter(|i| {
            i.lease_expires_at
                .is_some_and(|t| t < first_at + chrono::Duration::seconds(1))
        })
        .collect();
    assert!(
        within.len() < 2,
        "{} starts in the second after the first start (rate 1/s, burst 2): {late:?}",
        1 + within.len()
    );
    // A claim that begins now starts afresh.
    assert!(
        !store
            .item_claim(&params(10))
            .await
            .expect("claim")
            .is_empty()
    );
    pg_drop_schema(&pg_owner_url().await, &schema).await;
}
