//! The relay's one-transaction batch on PostgreSQL: a batch cut off
//! part-way leaves nothing behind, not even a claim; the rows of a batch
//! that cannot be relayed keep its claim for their fenced failure while the
//! others are marked done. Each test in its own fresh schema.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use std::sync::Arc;
use std::time::Duration;

use drover::NewItem;
use drover::Queue;
use drover::events::EventStore;
use drover::outbox::{NewOutboxRow, OutboxStatus, OutboxStore, Relay, RelayConfig};
use drover::store::{ItemStore, ListFilter, Store};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_owner_url};
use serde_json::json;
use sqlx::Connection;
use uuid::Uuid;

/// A relay whose claims would hold for an hour: a claim left behind by a
/// failed run would keep its rows from the next run for that long.
fn relay(queue: &Queue) -> Relay {
    Relay::new(
        queue.clone(),
        RelayConfig {
            lease: Duration::from_secs(3600),
            ..RelayConfig::default()
        },
    )
    .unwrap()
}

async fn admin(sql: &str) {
    let mut conn = sqlx::PgConnection::connect(&pg_owner_url().await)
        .await
        .unwrap();
    sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_batch_cut_off_part_way_leaves_no_claim_and_relays_at_the_next_run() {
    let (store, schema) = pg_fresh_store().await;
    let queue = Queue::new(store.clone() as Arc<dyn Store>);
    let work = NewOutboxRow::new("work.send_receipt", json!({"order": 1}));
    let event = NewOutboxRow::new("event.order_placed", json!({"order": 1}));
    store.outbox_insert(&work).await.unwrap();
    store.outbox_insert(&event).await.unwrap();
    // Every item insert fails: the batch has claimed its rows and fails
    // before its event append and its marks.
    admin(&format!(
        "CREATE FUNCTION \"{schema}\".refuse_items() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'refused for the test'; END $$; \
         CREATE TRIGGER refuse_items BEFORE INSERT ON \"{schema}\".items \
         FOR EACH ROW EXECUTE FUNCTION \"{schema}\".refuse_items();"
    ))
    .await;
    let relay = relay(&queue);
    let err = relay.run_once().await.unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    for id in [work.id, event.id] {
        let row = store.outbox_get(Uuid::nil(), id).await.unwrap().unwrap();
        assert_eq!(row.status, OutboxStatus::Pending);
        assert_eq!(row.attempts, 0, "a storage failure spends no attempt");
        assert!(
            row.claim_token.is_none() && row.lease_expires_at.is_none(),
            "the failed batch left a claim: {row:?}"
        );
    }
    assert!(
        store
            .event_read(Uuid::nil(), 0, &[], 10)
            .await
            .unwrap()
            .is_empty(),
        "the failed batch appended its event"
    );
    admin(&format!(
        "DROP TRIGGER refuse_items ON \"{schema}\".items; \
         DROP FUNCTION \"{schema}\".refuse_items();"
    ))
    .await;
    // The next run takes both rows at once (a claim left behind would
    // hold them for the hour's lease).
    let r = relay.run_once().await.unwrap();
    assert_eq!(
        (r.claimed, r.relayed, r.items_inserted, r.events_appended),
        (2, 2, 1, 1),
        "{r:?}"
    );
    let item = store.item_get(Uuid::nil(), work.id).await.unwrap().unwrap();
    assert_eq!(item.kind, "send_receipt");
    let log = store.event_read(Uuid::nil(), 0, &[], 10).await.unwrap();
    assert_eq!(log.iter().map(|e| e.id).collect::<Vec<_>>(), vec![event.id]);
    pg_drop_schema(&pg_owner_url().await, &schema).await;
}

#[tokio::test]
async fn a_row_that_cannot_be_relayed_keeps_the_claim_for_its_failure_and_the_rest_are_done() {
    let (store, schema) = pg_fresh_store().await;
    let queue = Queue::new(store.clone() as Arc<dyn Store>);
    let good = NewOutboxRow::new("work.send_receipt", json!({})).with_lane("mail");
    let bad = NewOutboxRow::new("work.send_receipt", json!({}));
    let event = NewOutboxRow::new("event.order_placed", json!({"n": 1}));
    for row in [&good, &bad, &event] {
        store.outbox_insert(row).await.unwrap();
    }
    // Another item holds the bad row's id as its key: its insert meets
    // KeyExists and the row cannot be relayed.
    store
        .item_insert(&NewItem::new("blocker", json!({})).with_key(bad.id.to_string()))
        .await
        .unwrap();
    let r = relay(&queue).run_once().await.unwrap();
    assert_eq!(
        (r.claimed, r.relayed, r.retried, r.parked, r.stale),
        (3, 2, 1, 0, 0),
        "{r:?}"
    );
    for id in [good.id, event.id] {
        let row = store.outbox_get(Uuid::nil(), id).await.unwrap().unwrap();
        assert_eq!(row.status, OutboxStatus::Done);
        assert!(row.claim_token.is_none() && row.relayed_at.is_some());
    }
    let failed = store
        .outbox_get(Uuid::nil(), bad.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.status, OutboxStatus::Pending);
    assert_eq!(failed.attempts, 1);
    assert!(
        failed.claim_token.is_none(),
        "the failure released the claim"
    );
    assert!(
        failed
            .last_error
            .is_some_and(|e| e.contains("idempotency key"))
    );
    assert!(
        failed.available_at > failed.created_at,
        "a backoff before the retry"
    );
    let items = store
        .item_list(&ListFilter {
            tenant_id: Some(Uuid::nil()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        items
            .iter()
            .filter(|i| i.kind == "send_receipt")
            .map(|i| i.id)
            .collect::<Vec<_>>(),
        vec![good.id]
    );
    pg_drop_schema(&pg_owner_url().await, &schema).await;
}

#[tokio::test]
async fn an_event_over_the_logs_bound_fails_alone_and_the_batch_lands() {
    let (store, schema) = pg_fresh_store().await;
    // The queue accepts payloads up to 1 MiB; the event log's bound is
    // drover's default (256 KiB).
    let queue =
        Queue::new(store.clone() as Arc<dyn Store>).with_config(drover::queue::QueueConfig {
            max_payload_bytes: 1 << 20,
            ..drover::queue::QueueConfig::default()
        });
    let big = NewOutboxRow::new(
        "event.order_placed",
        json!({"blob": "x".repeat(300 * 1024)}),
    );
    let small = NewOutboxRow::new("event.order_placed", json!({"n": 1}));
    let work = NewOutboxRow::new("work.send_receipt", json!({"order": 2}));
    for row in [&big, &small, &work] {
        store.outbox_insert(row).await.unwrap();
    }
    let r = relay(&queue).run_once().await.unwrap();
    assert_eq!(
        (
            r.claimed,
            r.relayed,
            r.retried,
            r.events_appended,
            r.items_inserted
        ),
        (3, 2, 1, 1, 1),
        "{r:?}"
    );
    let failed = store
        .outbox_get(Uuid::nil(), big.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((failed.status, failed.attempts), (OutboxStatus::Pending, 1));
    let log = store.event_read(Uuid::nil(), 0, &[], 10).await.unwrap();
    assert_eq!(log.iter().map(|e| e.id).collect::<Vec<_>>(), vec![small.id]);
    pg_drop_schema(&pg_owner_url().await, &schema).await;
}

async fn scalar_i64(sql: &str) -> i64 {
    let mut conn = sqlx::PgConnection::connect(&pg_owner_url().await)
        .await
        .unwrap();
    let v: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap();
    conn.close().await.unwrap();
    v
}

async fn ring_current(schema: &str) -> i64 {
    scalar_i64(&format!(
        "SELECT current::bigint FROM \"{schema}\".outbox_ring"
    ))
    .await
}

async fn copies(schema: &str, id: Uuid) -> i64 {
    scalar_i64(&format!(
        "SELECT count(*) FROM \"{schema}\".outbox WHERE id = '{id}'"
    ))
    .await
}

/// One rotation of the ring (every child's done rows past retention).
async fn rotate(store: &drover::store::postgres::PgStore) {
    let before = store.db_now().await.unwrap() + chrono::Duration::hours(1);
    store.outbox_purge(before, Duration::ZERO).await.unwrap();
}

#[tokio::test]
async fn an_id_held_by_an_older_child_of_the_ring_is_not_written_again() {
    let (store, schema) = pg_fresh_store().await;
    let first = NewOutboxRow::new("work.send_receipt", json!({"v": 1}));
    store.outbox_insert(&first).await.unwrap();
    rotate(&store).await;
    assert_eq!(
        ring_current(&schema).await,
        1,
        "new rows go to another child"
    );
    let again = NewOutboxRow {
        payload: json!({"v": 2}),
        ..first.clone()
    };
    store.outbox_insert(&again).await.unwrap();
    // Under another tenant, in the caller's transaction: nothing either.
    let mut tx = store.pool().begin().await.unwrap();
    let theirs = NewOutboxRow {
        tenant_id: Uuid::from_u128(0xB),
        ..again.clone()
    };
    drover::store::postgres::outbox_insert_in(&mut tx, &schema, &theirs)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        copies(&schema, first.id).await,
        1,
        "one row across the ring"
    );
    let stored = store
        .outbox_get(Uuid::nil(), first.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.payload, json!({"v": 1}));
    pg_drop_schema(&pg_owner_url().await, &schema).await;
}

#[tokio::test]
async fn a_parked_row_never_pins_the_rotation_even_when_its_id_is_written_again() {
    let (store, schema) = pg_fresh_store().await;
    let queue = Queue::new(store.clone() as Arc<dyn Store>);
    let row = NewOutboxRow::new("work.send_receipt", json!({}));
    store.outbox_insert(&row).await.unwrap();
    store
        .item_insert(&NewItem::new("blocker", json!({})).with_key(row.id.to_string()))
        .await
        .unwrap();
    let parking = Relay::new(
        queue.clone(),
        RelayConfig {
            max_attempts: 1,
            ..RelayConfig::default()
        },
    )
    .unwrap();
    assert_eq!(parking.run_once().await.unwrap().parked, 1);
    // Around the ring twice: the parked row is carried forward each time
    // its child is emptied, and a write of its id while it lives in an
    // older child changes nothing (a second copy would collide with the
    // carry and stop the rotation for good).
    for turn in 1..=8i64 {
        rotate(&store).await;
        assert_eq!(ring_current(&schema).await, turn % 4, "rotation {turn}");
        store.outbox_insert(&row).await.unwrap();
        assert_eq!(copies(&schema, row.id).await, 1, "rotation {turn}");
    }
    let parked = store
        .outbox_get(Uuid::nil(), row.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(parked.status, OutboxStatus::Failed);
    pg_drop_schema(&pg_owner_url().await, &schema).await;
}

#[tokio::test]
async fn a_tenants_events_wait_while_another_batch_holds_its_event_lock() {
    let (store, schema) = pg_fresh_store().await;
    let queue = Queue::new(store.clone() as Arc<dyn Store>);
    let a = Uuid::from_u128(0xA);
    let b = Uuid::from_u128(0xB);
    let ev_a = NewOutboxRow {
        tenant_id: a,
        ..NewOutboxRow::new("event.order_placed", json!({"n": 1}))
    };
    let ev_b = NewOutboxRow {
        tenant_id: b,
        ..NewOutboxRow::new("event.order_placed", json!({"n": 2}))
    };
    store.outbox_insert(&ev_a).await.unwrap();
    store.outbox_insert(&ev_b).await.unwrap();
    // Another relay batch holds tenant A's event lock (its transaction open).
    let mut other = sqlx::PgConnection::connect(&pg_owner_url().await)
        .await
        .unwrap();
    let mut held = other.begin().await.unwrap();
    sqlx::query(&format!(
        "SELECT pg_advisory_xact_lock(hashtext('drover.outbox_events'), \
         hashtext('{schema}' || ':' || '{a}'))"
    ))
    .execute(&mut *held)
    .await
    .unwrap();
    let r = relay(&queue).run_once().await.unwrap();
    assert_eq!((r.claimed, r.relayed), (1, 1), "only tenant B's: {r:?}");
    assert!(store.event_read(a, 0, &[], 10).await.unwrap().is_empty());
    held.rollback().await.unwrap();
    let r = relay(&queue).run_once().await.unwrap();
    assert_eq!((r.claimed, r.relayed), (1, 1), "{r:?}");
    assert_eq!(store.event_read(a, 0, &[], 10).await.unwrap().len(), 1);
    pg_drop_schema(&pg_owner_url().await, &schema).await;
}

#[tokio::test]
async fn a_row_written_before_the_lane_column_relays_as_written() {
    let (store, schema) = pg_fresh_store().await;
    let queue = Queue::new(store.clone() as Arc<dyn Store>);
    let id = Uuid::now_v7();
    admin(&format!(
        "INSERT INTO \"{schema}\".outbox (id, tenant_id, kind, payload, actor, created_at) \
         VALUES ('{id}', '{nil}', 'work.send_receipt', '{{\"lane\": \"mail\", \"order\": 3}}', \
         '{nil}', now())",
        nil = Uuid::nil()
    ))
    .await;
    let r = relay(&queue).run_once().await.unwrap();
    assert_eq!((r.relayed, r.items_inserted), (1, 1), "{r:?}");
    let item = store.item_get(Uuid::nil(), id).await.unwrap().unwrap();
    assert_eq!(item.lane, "mail");
    assert_eq!(item.payload, json!({"order": 3}));
    assert_eq!(item.max_attempts, drover::item::DEFAULT_MAX_ATTEMPTS);
    pg_drop_schema(&pg_owner_url().await, &schema).await;
}
