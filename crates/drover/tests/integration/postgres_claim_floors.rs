//! The claim floors of migration 0025 on a real PostgreSQL: a claim does not
//! walk the dead entries of items claimed before while a snapshot is held
//! open, a row that became visible below a floor is still claimed (at the
//! next refresh), and a priority first used on a busy lane is claimed in
//! order at once. Each test in its own fresh schema.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use std::time::Duration;

use chrono::Utc;
use drover::item::NewItem;
use drover::store::postgres::PgStore;
use drover::store::{ClaimParams, ClaimRef, ItemStore};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_owner_url, pg_url};
use serde_json::json;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

fn params(lane: &str, n: u32) -> ClaimParams {
    ClaimParams {
        lane: lane.into(),
        kinds: vec![],
        worker_id: "w1".into(),
        lease: Duration::from_secs(30),
        limit: n,
    }
}

async fn conn_in(schema: &str) -> PgConnection {
    let mut c = PgConnection::connect(&pg_owner_url().await).await.unwrap();
    sqlx::query(&format!("SET search_path = \"{schema}\""))
        .execute(&mut c)
        .await
        .unwrap();
    c
}

/// Claims and completes everything claimable in `lane`.
async fn drain(s: &PgStore, lane: &str) -> usize {
    let mut n = 0;
    loop {
        let got = s.item_claim(&params(lane, 500)).await.unwrap();
        if got.is_empty() {
            return n;
        }
        n += got.len();
        let refs: Vec<ClaimRef> = got.iter().map(|i| ClaimRef::of(i).unwrap()).collect();
        let done = s.item_complete_many(&refs).await.unwrap();
        assert_eq!(done.len(), refs.len());
    }
}

// items and items_claim are partitioned (migration 0026): their children
// count. Each reads the transaction's own statistics.
/// Entries of `items_claim` read so far in the transaction.
const READ: &str = "SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(i.inhrelid)), 0)::bigint \
                    FROM pg_inherits i WHERE i.inhparent = 'items_claim'::regclass";
/// Sequential scans of any partition of items so far in the transaction.
const SEQ: &str = "SELECT coalesce(sum(pg_stat_get_xact_numscans(i.inhrelid)), 0)::bigint \
                   FROM pg_inherits i WHERE i.inhparent = 'items'::regclass";

/// Entries of `items_claim` (its partitions') one claim of 10 from `lane`
/// read, in a transaction of its own on `c`, and the claim's count.
async fn claim_reads(c: &mut PgConnection, lane: &str) -> (i64, i64) {
    let (got, _, read) = claim_scans(c, lane, 10).await;
    (got, read)
}

#[tokio::test]
async fn a_held_snapshot_does_not_make_claims_walk_dead_entries() {
    let (s, schema) = pg_fresh_store().await;
    // A snapshot held open in another session: nothing claimed from now on
    // can be vacuumed, and no index entry of it can be marked dead.
    let mut holder = PgConnection::connect(&pg_url().await).await.unwrap();
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut holder)
        .await
        .unwrap();
    sqlx::query("SELECT 1").execute(&mut holder).await.unwrap();

    // Items available an hour ago: their pending entries sit below any
    // floor a refresh sets once they are gone.
    const N: usize = 2_000;
    let past = Utc::now() - chrono::Duration::hours(1);
    let tenant = Uuid::new_v4();
    let batch: Vec<NewItem> = (0..N)
        .map(|i| {
            NewItem::new("churn", json!({ "i": i }))
                .with_tenant(tenant)
                .with_lane("floors")
                .with_available_at(past)
        })
        .collect();
    s.item_insert_many(&batch).await.unwrap();
    assert_eq!(drain(&s, "floors").await, N);

    // Every claim from here finds nothing. Until the next refresh (at most
    // a second away) the floor is still where the drain began, an hour ago;
    // the refresh reads the stripe from its start (all N dead entries) and
    // moves the floor to a second before now, and the claims after it start
    // there and read (almost) nothing.
    let mut c = conn_in(&schema).await;
    let mut reads = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (got, read) = claim_reads(&mut c, "floors").await;
        assert_eq!(got, 0);
        reads.push(read);
        if read < 50 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no claim in 10 s started at a floor above the dead entries (reads per claim: {reads:?})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The entries are still there to walk: the held snapshot keeps them.
    let dead_versions: i64 =
        sqlx::query_scalar("SELECT count(*) FROM items WHERE lane = 'floors' AND status = 'done'")
            .fetch_one(&mut c)
            .await
            .unwrap();
    assert_eq!(dead_versions, N as i64);
    sqlx::query("COMMIT").execute(&mut holder).await.unwrap();
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn a_row_visible_below_the_floor_is_claimed_at_the_next_refresh() {
    let (s, schema) = pg_fresh_store().await;
    let tenant = Uuid::new_v4();
    // A claim refreshes the lane's floor to a second before now.
    s.item_insert(
        &NewItem::new("first", json!({}))
            .with_tenant(tenant)
            .with_lane("late"),
    )
    .await
    .unwrap();
    assert_eq!(drain(&s, "late").await, 1);
    // Then an item whose available_at is far below that floor (what an
    // enqueue in a transaction open for longer than the margin looks like).
    let late = NewItem::new("late", json!({}))
        .with_tenant(tenant)
        .with_lane("late")
        .with_available_at(Utc::now() - chrono::Duration::minutes(10));
    s.item_insert(&late).await.unwrap();
    // Claimed within the next refresh: polled, never given up on silently.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut tries = 0u32;
    loop {
        tries += 1;
        let got = s.item_claim(&params("late", 10)).await.unwrap();
        if let Some(item) = got.first() {
            assert_eq!(item.id, late.id);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the late item was not claimed in {tries} tries over 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn a_new_priority_on_a_busy_lane_is_claimed_in_order_at_once() {
    let (s, schema) = pg_fresh_store().await;
    let tenant = Uuid::new_v4();
    let item = |p: i16| {
        NewItem::new("p", json!({}))
            .with_tenant(tenant)
            .with_lane("prio")
            .with_priority(p)
    };
    // The lane's floors are fresh after this claim: priority 5 only.
    s.item_insert(&item(5)).await.unwrap();
    assert_eq!(drain(&s, "prio").await, 1);
    let later = item(5);
    s.item_insert(&later).await.unwrap();
    let urgent = item(1);
    s.item_insert(&urgent).await.unwrap();
    // Within the second the floors stay fresh, priority 1 is still first.
    let got = s.item_claim(&params("prio", 1)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, urgent.id);
    let got = s.item_claim(&params("prio", 1)).await.unwrap();
    assert_eq!(got[0].id, later.id);
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// Sequential scans of any partition of items in a transaction of its own
/// on `c` in which one claim of `limit` from `lane` ran, the claim's count,
/// and the entries of the claim index it read.
async fn claim_scans(c: &mut PgConnection, lane: &str, limit: i64) -> (i64, i64, i64) {
    let mut tx = c.begin().await.unwrap();
    let seq0: i64 = sqlx::query_scalar(SEQ).fetch_one(&mut *tx).await.unwrap();
    let read0: i64 = sqlx::query_scalar(READ).fetch_one(&mut *tx).await.unwrap();
    let got: i64 =
        sqlx::query_scalar("SELECT count(*) FROM claim_items($1, '{}'::text[], 'probe', 30, $2)")
            .bind(lane)
            .bind(limit)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    let seq1: i64 = sqlx::query_scalar(SEQ).fetch_one(&mut *tx).await.unwrap();
    let read1: i64 = sqlx::query_scalar(READ).fetch_one(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    (got, seq1 - seq0, read1 - read0)
}

/// Completes `claimed` (id, token) of `tenant` through `complete_items` in a
/// transaction of its own on `c`: how many it completed, and the sequential
/// scans of any partition of items meanwhile.
async fn complete_scans(
    c: &mut PgConnection,
    tenant: Uuid,
    claimed: &[(Uuid, Uuid)],
) -> (i64, i64) {
    let ids: Vec<Uuid> = claimed.iter().map(|c| c.0).collect();
    let tokens: Vec<Uuid> = claimed.iter().map(|c| c.1).collect();
    let mut tx = c.begin().await.unwrap();
    let seq0: i64 = sqlx::query_scalar(SEQ).fetch_one(&mut *tx).await.unwrap();
    let done: i64 = sqlx::query_scalar("SELECT count(*) FROM complete_items($1, $2, $3)")
        .bind(tenant)
        .bind(&ids)
        .bind(&tokens)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let seq1: i64 = sqlx::query_scalar(SEQ).fetch_one(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    (done, seq1 - seq0)
}

#[tokio::test]
async fn a_claim_kept_from_empty_children_reads_only_what_it_takes_once_they_fill() {
    let (s, schema) = pg_fresh_store().await;
    // Children of items ahead of the clock, as the purge makes them: empty.
    s.items_rotate(
        Utc::now() - chrono::Duration::hours(1),
        chrono::TimeDelta::seconds(60),
        chrono::TimeDelta::seconds(180),
        100,
    )
    .await
    .unwrap();
    let mut c = conn_in(&schema).await;
    let parts: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = 'items'::regclass")
            .fetch_one(&mut c)
            .await
            .unwrap();
    assert!(
        parts >= 3,
        "the claim should run over several partitions, not {parts}"
    );
    // The session plans its claim now, over empty partitions (migration 0027
    // keeps that plan).
    let tenant = Uuid::new_v4();
    for _ in 0..6 {
        assert_eq!(claim_scans(&mut c, "deep", 10).await.0, 0);
        assert_eq!(complete_scans(&mut c, tenant, &[]).await, (0, 0));
    }
    // Then a backlog far larger than any claim fills the current child;
    // nothing re-plans meanwhile.
    const N: usize = 20_000;
    let past = Utc::now() - chrono::Duration::minutes(1);
    for chunk in 0..(N / 2_000) {
        let batch: Vec<NewItem> = (0..2_000)
            .map(|i| {
                NewItem::new("deep", json!({ "i": chunk * 2_000 + i }))
                    .with_tenant(tenant)
                    .with_lane("deep")
                    .with_available_at(past + chrono::Duration::milliseconds(i as i64))
            })
            .collect();
        s.item_insert_many(&batch).await.unwrap();
    }
    // Each claim walks about the entries it takes: no partition is scanned
    // whole, and the backlog is not sorted (that would read all of it).
    for round in 0..12 {
        let (got, seq, read) = claim_scans(&mut c, "deep", 10).await;
        assert_eq!(got, 10, "round {round}");
        assert_eq!(seq, 0, "round {round}: a sequential scan of a partition");
        assert!(
            read <= 10 * (round + 2) + 4 * parts,
            "round {round}: a claim of 10 read {read} entries of a backlog of {N}"
        );
    }
    // The batched completion keeps its plan too: by primary key, whatever
    // the sizes were when it was planned.
    for round in 0..8 {
        let claimed: Vec<(Uuid, Uuid)> = sqlx::query_as(
            "SELECT id, claim_token FROM claim_items('deep', '{}'::text[], 'probe', 30, 10)",
        )
        .fetch_all(&mut c)
        .await
        .unwrap();
        assert_eq!(claimed.len(), 10);
        let (done, seq) = complete_scans(&mut c, tenant, &claimed).await;
        assert_eq!(done, 10, "round {round}");
        assert_eq!(seq, 0, "round {round}: a sequential scan of a partition");
    }
    pg_drop_schema(&pg_url().await, &schema).await;
}
