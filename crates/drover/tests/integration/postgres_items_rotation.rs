//! Purge by retention on PostgreSQL drops whole children of `items`
//! (migration 0026, `store/postgres/rotate.rs`): a child past the cutoff
//! goes with its final rows, its live rows carried to the default partition
//! with every field kept (a claim's fenced write still lands); the count
//! rollup loses exactly what was dropped; an idempotency key stays unique
//! across children and is free again once its item is gone. Each test in
//! its own fresh schema. Children a few seconds wide keep the tests short.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use drover::item::{InsertResult, NewItem, Status};
use drover::store::postgres::PgStore;
use drover::store::{ClaimParams, ClaimRef, ItemStore};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_owner_url, pg_url};
use serde_json::json;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

const WIDTH: TimeDelta = TimeDelta::seconds(2);
const AHEAD: TimeDelta = TimeDelta::seconds(6);

fn params(lane: &str, n: u32) -> ClaimParams {
    ClaimParams {
        lane: lane.into(),
        kinds: vec![],
        worker_id: "w1".into(),
        lease: Duration::from_secs(60),
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

/// The partition that holds item `id`.
async fn home(c: &mut PgConnection, id: Uuid) -> Option<String> {
    sqlx::query_scalar("SELECT tableoid::regclass::text FROM items WHERE id = $1")
        .bind(id)
        .fetch_optional(c)
        .await
        .unwrap()
}

async fn children(c: &mut PgConnection) -> Vec<String> {
    sqlx::query_scalar("SELECT name FROM items_children()")
        .fetch_all(c)
        .await
        .unwrap()
}

/// Whether a table named `name` exists (attached or not).
async fn table_exists(c: &mut PgConnection, name: &str) -> bool {
    sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
        .bind(name)
        .fetch_one(c)
        .await
        .unwrap()
}

/// The key rows of item `id`.
async fn key_rows(c: &mut PgConnection, id: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM item_keys WHERE item_id = $1")
        .bind(id)
        .fetch_one(c)
        .await
        .unwrap()
}

/// Waits (on the database clock) until the window of child `name` has ended.
async fn past_window(c: &mut PgConnection, name: &str) {
    loop {
        let ended: bool =
            sqlx::query_scalar("SELECT hi < now() FROM items_children() WHERE name = $1")
                .bind(name)
                .fetch_one(&mut *c)
                .await
                .unwrap();
        if ended {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn rotate(s: &PgStore, before: chrono::DateTime<Utc>) -> u64 {
    s.items_rotate(before, WIDTH, AHEAD, 2).await.unwrap()
}

fn count_of(rows: &[drover::store::CountRow], lane: &str, status: Status) -> i64 {
    rows.iter()
        .filter(|r| r.lane == lane && r.status == status)
        .map(|r| r.count)
        .sum()
}

#[tokio::test]
async fn a_child_past_the_cutoff_is_dropped_and_its_live_rows_carried() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    // The first rotation makes the children from now on.
    assert_eq!(rotate(&s, Utc::now() - TimeDelta::hours(1)).await, 0);
    let made = children(&mut c).await;
    assert!(made.len() >= 3, "children ahead: {made:?}");

    let tenant = Uuid::new_v4();
    let put = |k: &str| {
        NewItem::new(k, json!({ "k": k }))
            .with_tenant(tenant)
            .with_lane("rot")
    };
    let done_a = s
        .item_insert(&put("a").with_key("key-a"))
        .await
        .unwrap()
        .item;
    let done_b = s.item_insert(&put("b")).await.unwrap().item;
    let held = s.item_insert(&put("c")).await.unwrap().item;
    let child = home(&mut c, done_a.id).await.unwrap();
    assert!(child.starts_with("items_c"), "{child}");
    for id in [done_b.id, held.id] {
        assert_eq!(home(&mut c, id).await.as_deref(), Some(child.as_str()));
    }
    // a and b done, c claimed and held; then one more, still pending.
    let got = s.item_claim(&params("rot", 3)).await.unwrap();
    assert_eq!(got.len(), 3);
    let mut held_ref = None;
    for it in &got {
        let r = ClaimRef::of(it).unwrap();
        if it.id == held.id {
            held_ref = Some(r);
        } else {
            s.item_complete(&r).await.unwrap();
        }
    }
    let held_ref = held_ref.unwrap();
    let waiting = s.item_insert(&put("d")).await.unwrap().item;
    let waiting_home = home(&mut c, waiting.id).await.unwrap();

    past_window(&mut c, &child).await;
    past_window(&mut c, &waiting_home).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.counts_settle().await.unwrap();
    let before_counts = s.counts().await.unwrap();
    assert_eq!(count_of(&before_counts, "rot", Status::Done), 2);

    // Every row of the window is older than this cutoff.
    let cutoff = Utc::now();
    let purged = rotate(&s, cutoff).await;
    assert_eq!(purged, 2, "the two done items");
    let left = children(&mut c).await;
    assert!(!left.contains(&child), "{child} still attached: {left:?}");
    let exists = table_exists(&mut c, &child).await;
    assert!(!exists, "{child} not dropped");
    assert_eq!(home(&mut c, done_a.id).await, None);
    assert_eq!(home(&mut c, done_b.id).await, None);
    // The live rows moved, whole: the claim's fenced write still lands.
    assert_eq!(
        home(&mut c, held.id).await.as_deref(),
        Some("items_default")
    );
    assert_eq!(
        home(&mut c, waiting.id).await.as_deref(),
        Some("items_default")
    );
    let moved = s.item_get(tenant, held.id).await.unwrap().unwrap();
    assert_eq!(moved.status, Status::Claimed);
    assert_eq!(moved.claim_token, Some(held_ref.token));
    s.item_complete(&held_ref).await.unwrap();
    let again = s.item_claim(&params("rot", 5)).await.unwrap();
    assert_eq!(
        again.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![waiting.id]
    );
    // The rollup lost the two dropped rows; the carried one, done since,
    // counts once settled.
    let after = s.counts().await.unwrap();
    assert_eq!(count_of(&after, "rot", Status::Done), 1, "{after:?}");
    assert_eq!(count_of(&after, "rot", Status::Claimed), 1, "{after:?}");
    // The dropped item's key is free again.
    let keys = key_rows(&mut c, done_a.id).await;
    assert_eq!(keys, 0, "the dropped item's key row is deleted");
    let reused = s.item_insert(&put("a").with_key("key-a")).await.unwrap();
    assert_eq!(reused.result, InsertResult::Inserted);
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn a_key_is_unique_across_children_and_a_stale_key_is_taken_over() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    rotate(&s, Utc::now() - TimeDelta::hours(1)).await;
    let tenant = Uuid::new_v4();
    let put = || {
        NewItem::new("k", json!({}))
            .with_tenant(tenant)
            .with_lane("keys")
            .with_key("once")
    };
    let first = s.item_insert(&put()).await.unwrap();
    assert_eq!(first.result, InsertResult::Inserted);
    let first_home = home(&mut c, first.item.id).await.unwrap();
    past_window(&mut c, &first_home).await;
    // A new id lands in a later child: the key still refuses it.
    let second = s.item_insert(&put()).await.unwrap();
    assert_eq!(second.result, InsertResult::KeyExists);
    assert_eq!(second.item.id, first.item.id);
    let many = s.item_insert_many(&[put(), put()]).await.unwrap();
    assert!(
        many.iter().all(|r| *r == InsertResult::KeyExists),
        "{many:?}"
    );
    // Another tenant's same key is its own.
    let other = s
        .item_insert(&put().with_tenant(Uuid::new_v4()))
        .await
        .unwrap();
    assert_eq!(other.result, InsertResult::Inserted);

    // A key row whose item is gone (here: deleted behind the store's back)
    // is stale, and the next insert of the key takes it over.
    sqlx::query("DELETE FROM items WHERE id = $1")
        .bind(first.item.id)
        .execute(&mut c)
        .await
        .unwrap();
    let third = s.item_insert(&put()).await.unwrap();
    assert_eq!(third.result, InsertResult::Inserted);
    let owner: Uuid = sqlx::query_scalar(
        "SELECT item_id FROM item_keys WHERE tenant_id = $1 AND idempotency_key = 'once'",
    )
    .bind(tenant)
    .fetch_one(&mut c)
    .await
    .unwrap();
    assert_eq!(owner, third.item.id);
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn a_child_with_many_live_rows_is_purged_row_by_row_and_kept() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    rotate(&s, Utc::now() - TimeDelta::hours(1)).await;
    let tenant = Uuid::new_v4();
    // More live rows than a drop carries (twice over: the ids may straddle
    // two windows), and a few done ones.
    let max = usize::try_from(drover::store::postgres::ITEMS_CARRY_MAX).unwrap();
    let n = 2 * max + 10;
    let batch: Vec<NewItem> = (0..n)
        .map(|i| {
            NewItem::new("bulk", json!({ "i": i }))
                .with_tenant(tenant)
                .with_lane("backlog")
        })
        .collect();
    s.item_insert_many(&batch).await.unwrap();
    let per_child: Vec<(String, i64)> = sqlx::query_as(
        "SELECT tableoid::regclass::text, count(*) FROM items WHERE lane = 'backlog' GROUP BY 1",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    let big: Vec<&String> = per_child
        .iter()
        .filter(|(_, k)| *k > i64::try_from(max).unwrap() + 3)
        .map(|(h, _)| h)
        .collect();
    assert!(!big.is_empty(), "{per_child:?}");
    let got = s.item_claim(&params("backlog", 3)).await.unwrap();
    for it in &got {
        s.item_complete(&ClaimRef::of(it).unwrap()).await.unwrap();
    }
    for (h, _) in &per_child {
        past_window(&mut c, h).await;
    }
    let purged = rotate(&s, Utc::now()).await;
    assert_eq!(purged, 3, "the done rows, row by row or with a small child");
    let left = children(&mut c).await;
    for h in &big {
        assert!(left.contains(h), "{h} dropped with its backlog: {left:?}");
    }
    let pending: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM items WHERE lane = 'backlog' AND status = 'pending'",
    )
    .fetch_one(&mut c)
    .await
    .unwrap();
    assert_eq!(pending, i64::try_from(n - 3).unwrap());
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn a_child_detached_but_not_dropped_is_dropped_by_the_next_pass() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    rotate(&s, Utc::now() - TimeDelta::hours(1)).await;
    let tenant = Uuid::new_v4();
    let item = s
        .item_insert(
            &NewItem::new("k", json!({}))
                .with_tenant(tenant)
                .with_lane("left")
                .with_key("left-key"),
        )
        .await
        .unwrap()
        .item;
    let got = s.item_claim(&params("left", 1)).await.unwrap();
    s.item_complete(&ClaimRef::of(&got[0]).unwrap())
        .await
        .unwrap();
    let child = home(&mut c, item.id).await.unwrap();
    // What a process that stopped between the detach's commit and the drop
    // leaves: a detached child, its item's key row still there.
    sqlx::query("SELECT items_child_end($1, false)")
        .bind(&child)
        .execute(&mut c)
        .await
        .unwrap();
    assert_eq!(home(&mut c, item.id).await, None);
    // The next pass (whatever its cutoff) drops it and purges the key row.
    rotate(&s, Utc::now() - TimeDelta::hours(1)).await;
    let exists = table_exists(&mut c, &child).await;
    assert!(!exists, "{child} left behind");
    let keys = key_rows(&mut c, item.id).await;
    assert_eq!(keys, 0);
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// A child of `n` done items of lane `lane` and one claimed item held;
/// returns the child, a done item and the held claim.
async fn big_child(
    s: &PgStore,
    c: &mut PgConnection,
    tenant: Uuid,
    lane: &str,
    n: u32,
) -> (String, Uuid, ClaimRef) {
    // Every id carries one instant, so all of them (the held one too) fall
    // in one child however long the inserts take: the children are
    // WIDTH wide by id time, and on a loaded machine 300 inserts can
    // outlast one.
    let at = uuid::Timestamp::now(uuid::NoContext);
    let put = |k: String| {
        NewItem::new("big", json!({ "k": k, "pad": "x".repeat(200) }))
            .with_id(Uuid::new_v7(at))
            .with_tenant(tenant)
            .with_lane(lane)
    };
    let first = s.item_insert(&put("0".into())).await.unwrap().item;
    for i in 1..n {
        s.item_insert(&put(i.to_string())).await.unwrap();
    }
    let child = home(c, first.id).await.unwrap();
    let held = s.item_insert(&put("held".into())).await.unwrap().item;
    assert_eq!(home(c, held.id).await.as_deref(), Some(child.as_str()));
    let mut held_ref = None;
    let mut left = n + 1;
    while left > 0 {
        let got = s.item_claim(&params(lane, 100)).await.unwrap();
        assert!(!got.is_empty());
        left -= u32::try_from(got.len()).unwrap();
        for it in &got {
            let r = ClaimRef::of(it).unwrap();
            if it.id == held.id {
                held_ref = Some(r);
            } else {
                s.item_complete(&r).await.unwrap();
            }
        }
    }
    (child, first.id, held_ref.unwrap())
}

/// Settles the counts until the rollup's mark is past every final row: a
/// sliced tally uses only settled rows.
async fn settle_all(s: &PgStore, c: &mut PgConnection) {
    loop {
        s.counts_settle().await.unwrap();
        let past: bool = sqlx::query_scalar(
            "SELECT settled_to > (SELECT max(updated_at) FROM items \
             WHERE status IN ('done', 'failed', 'cancelled')) FROM item_counts_mark",
        )
        .fetch_one(&mut *c)
        .await
        .unwrap();
        if past {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One slice per pass: the sliced tally on a child of a few pages.
fn sliced() -> drover::store::postgres::ItemsTallyLimits {
    drover::store::postgres::ItemsTallyLimits {
        one_pass_pages: 0,
        slice_pages: 2,
        pass_budget: Duration::ZERO,
    }
}

/// Rotates until `child` is gone; returns the passes and the rows purged.
async fn rotate_until_gone(s: &PgStore, c: &mut PgConnection, child: &str) -> (u32, u64) {
    let (mut passes, mut purged) = (0, 0);
    while children(c).await.iter().any(|n| n == child) {
        passes += 1;
        assert!(passes < 200, "{child} never dropped");
        purged += rotate(s, Utc::now()).await;
    }
    (passes, purged)
}

#[tokio::test]
async fn a_large_child_is_tallied_in_slices_across_passes_and_counted_out_exactly() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    assert_eq!(rotate(&s, Utc::now() - TimeDelta::hours(1)).await, 0);
    let tenant = Uuid::new_v4();
    let (child, _, held) = big_child(&s, &mut c, tenant, "big", 300).await;
    let pages: i64 = sqlx::query_scalar("SELECT (pg_relation_size($1::regclass) / 8192)::int8")
        .bind(&child)
        .fetch_one(&mut c)
        .await
        .unwrap();
    assert!(pages >= 6, "{child}: {pages} pages, too few to slice");
    past_window(&mut c, &child).await;
    settle_all(&s, &mut c).await;
    assert_eq!(
        count_of(&s.counts().await.unwrap(), "big", Status::Done),
        300
    );

    s.set_items_tally_limits(sliced());
    let (passes, purged) = rotate_until_gone(&s, &mut c, &child).await;
    // Two pages a pass, then the pass that drops it.
    assert!(
        i64::from(passes) >= pages / 2,
        "{passes} passes for {pages} pages"
    );
    assert_eq!(purged, 300);
    assert!(!table_exists(&mut c, &child).await);
    let after = s.counts().await.unwrap();
    assert_eq!(count_of(&after, "big", Status::Done), 0, "{after:?}");
    assert_eq!(count_of(&after, "big", Status::Claimed), 1, "{after:?}");
    // The survivor kept its claim.
    assert_eq!(
        home(&mut c, held.id).await.as_deref(),
        Some("items_default")
    );
    s.item_complete(&held).await.unwrap();
    pg_drop_schema(&pg_url().await, &schema).await;
}

#[tokio::test]
async fn a_retry_during_a_sliced_tally_starts_it_again_and_the_counts_stay_exact() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    assert_eq!(rotate(&s, Utc::now() - TimeDelta::hours(1)).await, 0);
    let tenant = Uuid::new_v4();
    let (child, done, held) = big_child(&s, &mut c, tenant, "big", 300).await;
    past_window(&mut c, &child).await;
    settle_all(&s, &mut c).await;

    s.set_items_tally_limits(sliced());
    // One slice tallied, then an operator's retry of a row it may have
    // counted: the census moves, so that tally must not be used.
    assert_eq!(rotate(&s, Utc::now()).await, 0);
    assert!(children(&mut c).await.contains(&child));
    s.item_retry(tenant, done, Uuid::new_v4()).await.unwrap();
    let (_, purged) = rotate_until_gone(&s, &mut c, &child).await;
    assert_eq!(purged, 299, "every done row but the retried one");
    s.counts_settle().await.unwrap();
    let after = s.counts().await.unwrap();
    assert_eq!(count_of(&after, "big", Status::Done), 0, "{after:?}");
    assert_eq!(count_of(&after, "big", Status::Pending), 1, "{after:?}");
    assert_eq!(count_of(&after, "big", Status::Claimed), 1, "{after:?}");
    assert_eq!(home(&mut c, done).await.as_deref(), Some("items_default"));
    s.item_complete(&held).await.unwrap();
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// A dropped child's items lose their own link rows (their edges as
/// dependants, their open counts, their batch memberships) by the child's
/// range of ids, and the finished batch goes; a survivor carried to the
/// default partition (a `wait` dependant of a dead letter) keeps its edge
/// and its count.
#[tokio::test]
async fn a_dropped_childs_link_rows_go_and_a_survivor_keeps_its_own() {
    use drover::store::FailParams;
    use drover::store::links::{AfterPolicy, LinkCensus, LinkStore, NewBatch};
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    rotate(&s, Utc::now() - TimeDelta::hours(1)).await;
    let tenant = Uuid::new_v4();
    let put = |k: &str, lane: &str| {
        NewItem::new(k, json!({ "k": k }))
            .with_tenant(tenant)
            .with_lane(lane)
    };
    let mut batch = NewBatch::new(Uuid::now_v7(), "cb");
    batch.tenant_id = tenant;
    batch.callback_lane = "lk-cb".into();
    s.batch_create(&batch).await.unwrap();
    let a = s.item_insert(&put("a", "lk")).await.unwrap().item;
    let f = s.item_insert(&put("f", "lk-f")).await.unwrap().item;
    s.links_insert(&[
        put("c", "lk-c").with_after([a.id]),
        put("w", "lk-w")
            .with_after([f.id])
            .with_after_policy(AfterPolicy::Wait),
        put("m", "lk-m").with_batch(batch.id),
    ])
    .await
    .unwrap();
    s.batch_seal(tenant, batch.id).await.unwrap();
    for lane in ["lk", "lk-c", "lk-m", "lk-cb"] {
        let got = s.item_claim(&params(lane, 5)).await.unwrap();
        assert_eq!(got.len(), 1, "{lane}");
        s.item_complete(&ClaimRef::of(&got[0]).unwrap())
            .await
            .unwrap();
    }
    let got = s.item_claim(&params("lk-f", 5)).await.unwrap();
    let fail = FailParams {
        error: "boom".into(),
        retry_delay: Duration::ZERO,
        fatal: true,
    };
    s.item_fail(&ClaimRef::of(&got[0]).unwrap(), &fail)
        .await
        .unwrap();
    let all = LinkCensus {
        edges: 2,
        waits: 2,
        members: 1,
        batches: 1,
    };
    assert_eq!(s.links_census().await.unwrap(), all);
    let child = home(&mut c, a.id).await.unwrap();
    assert!(child.starts_with("items_c"), "{child}");
    // Every child the items landed in is past its window.
    let mut homes = Vec::new();
    let rows: Vec<(Uuid,)> = sqlx::query_as("SELECT id FROM items")
        .fetch_all(&mut c)
        .await
        .unwrap();
    for (id,) in rows {
        homes.push(home(&mut c, id).await.unwrap());
    }
    for h in &homes {
        past_window(&mut c, h).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.counts_settle().await.unwrap();
    // a, c, f, the member and the callback; w stays, pending.
    assert_eq!(rotate(&s, Utc::now()).await, 5);
    assert!(!table_exists(&mut c, &child).await, "{child} not dropped");
    assert_eq!(
        s.links_census().await.unwrap(),
        LinkCensus {
            edges: 1,
            waits: 1,
            members: 0,
            batches: 0
        }
    );
    let w: (Uuid, String) = sqlx::query_as("SELECT id, tableoid::regclass::text FROM items")
        .fetch_one(&mut c)
        .await
        .unwrap();
    assert_eq!(w.1, "items_default", "the survivor carried");
    let links = s.links_of(tenant, w.0).await.unwrap();
    assert_eq!((links.after, links.waiting_on), (vec![f.id], 1));
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// Children are made while another session holds the lock every claim,
/// completion and enqueue holds on `items` (ROW EXCLUSIVE): the child's
/// files and index builds happen beside `items`, and the attach needs only
/// SHARE UPDATE EXCLUSIVE on it (migration 0052). Before, the child was
/// made under ACCESS EXCLUSIVE on `items`: this pass timed out on the lock
/// and made nothing, and in a soak every claim waited out each child.
#[tokio::test]
async fn children_are_made_while_writers_hold_items() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    let mut writer = conn_in(&schema).await;
    sqlx::query("BEGIN").execute(&mut writer).await.unwrap();
    sqlx::query("LOCK TABLE ONLY items IN ROW EXCLUSIVE MODE")
        .execute(&mut writer)
        .await
        .unwrap();
    rotate(&s, Utc::now() - TimeDelta::hours(1)).await;
    let made = children(&mut c).await;
    assert!(made.len() >= 3, "children ahead: {made:?}");
    sqlx::query("COMMIT").execute(&mut writer).await.unwrap();
    // A new item lands in its window's child, with the child's indexes
    // named as the parent's.
    let item = s
        .item_insert(&NewItem::new("k", json!({})).with_lane("made"))
        .await
        .unwrap()
        .item;
    let home = home(&mut c, item.id).await.unwrap();
    assert!(made.contains(&home), "{home} not among {made:?}");
    let claim_index: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1 AND indexname = $1 || '_claim'",
    )
    .bind(&home)
    .fetch_one(&mut c)
    .await
    .unwrap();
    assert_eq!(
        claim_index, 1,
        "{home}'s indexes are named after the parent's"
    );
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// A table prepared but never attached (a lock timeout, or a process that
/// stopped between the two transactions) is attached by the next pass.
#[tokio::test]
async fn a_prepared_child_left_unattached_is_attached_by_the_next_pass() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    // Hour-wide windows: the pass below starts in the same window as this
    // prepare (2 s windows would cross a boundary between the two now and
    // then).
    let prepared: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM items_child_prepare(now(), now() + interval '3 hours', interval '1 hour')",
    )
    .fetch_all(&mut c)
    .await
    .unwrap();
    assert!(prepared.len() >= 3, "{prepared:?}");
    // The sweep's drop of detached children leaves prepared tables alone.
    assert!(
        prepared.iter().all(|p| p.starts_with("items_p")),
        "{prepared:?}"
    );
    // One prepared for a window long past (a width since changed) never
    // will be attached: the next prepare drops it.
    sqlx::query("CREATE TABLE items_p000000000001 (LIKE items INCLUDING ALL)")
        .execute(&mut c)
        .await
        .unwrap();
    s.items_rotate(
        Utc::now() - TimeDelta::hours(5),
        TimeDelta::hours(1),
        TimeDelta::hours(3),
        2,
    )
    .await
    .unwrap();
    let made = children(&mut c).await;
    for p in &prepared {
        let child = p.replacen("items_p", "items_c", 1);
        assert!(made.contains(&child), "{p} not attached: {made:?}");
    }
    assert!(!table_exists(&mut c, "items_p000000000001").await);
    pg_drop_schema(&pg_url().await, &schema).await;
}

/// The rotation does not ask for its exclusive lock while a vacuum (here a
/// session holding the lock a vacuum takes) holds a child: the request
/// would wait behind the vacuum, and every claim, completion and enqueue
/// would queue behind the request (the soak's wait record placed a 111 ms
/// claim there, behind an autovacuum). The child goes on a later pass.
#[tokio::test]
async fn the_rotation_does_not_queue_its_lock_behind_a_vacuum() {
    let (s, schema) = pg_fresh_store().await;
    let mut c = conn_in(&schema).await;
    rotate(&s, Utc::now() - TimeDelta::hours(1)).await;
    let item = s
        .item_insert(&NewItem::new("v", json!({})).with_lane("vac"))
        .await
        .unwrap()
        .item;
    let child = home(&mut c, item.id).await.unwrap();
    let got = s.item_claim(&params("vac", 1)).await.unwrap();
    s.item_complete(&ClaimRef::of(&got[0]).unwrap())
        .await
        .unwrap();
    past_window(&mut c, &child).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.counts_settle().await.unwrap();

    let mut vacuum = conn_in(&schema).await;
    sqlx::query("BEGIN").execute(&mut vacuum).await.unwrap();
    sqlx::query(&format!(
        "LOCK TABLE \"{child}\" IN SHARE UPDATE EXCLUSIVE MODE"
    ))
    .execute(&mut vacuum)
    .await
    .unwrap();
    // Watches for a lock request on items or a partition left waiting (the
    // relations read first: naming items while the request waits would
    // queue the watcher behind it too).
    let tree: Vec<sqlx::postgres::types::Oid> =
        sqlx::query_scalar("SELECT relid::oid FROM pg_partition_tree('items'::regclass)")
            .fetch_all(&mut c)
            .await
            .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        let mut w = conn_in(&schema).await;
        tokio::spawn(async move {
            let mut seen = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                let waiting: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = ANY($1)",
                )
                .bind(&tree)
                .fetch_one(&mut w)
                .await
                .unwrap();
                seen += u32::from(waiting > 0);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            seen
        })
    };
    let cutoff = Utc::now();
    assert_eq!(
        rotate(&s, cutoff).await,
        0,
        "the child waits for the vacuum"
    );
    stop.store(true, std::sync::atomic::Ordering::Release);
    assert_eq!(
        watcher.await.unwrap(),
        0,
        "the rotation queued a lock request behind the vacuum"
    );
    assert!(children(&mut c).await.contains(&child));
    sqlx::query("COMMIT").execute(&mut vacuum).await.unwrap();
    assert_eq!(
        rotate(&s, cutoff).await,
        1,
        "dropped once the vacuum is done"
    );
    assert!(!table_exists(&mut c, &child).await);
    pg_drop_schema(&pg_url().await, &schema).await;
}
