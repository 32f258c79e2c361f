//! The relay's one-transaction batch on PostgreSQL: a batch cut off
//! part-way leaves nothing behind, not even a claim; the rows of a batch
//! that cannot be relayed keep its claim for their fenced failure while the
//! others are marked done. Each test in its own fresh schema.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use std::sync::Arc;
use std::time::Duration;

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
    let good = NewOutboxRow::new("work.send_receipt", json!({"lane": "mail"}));
    let bad = NewOutboxRow::new("work.send_receipt", json!({"lane": "Not A Lane!"}));
    let event = NewOutboxRow::new("event.order_placed", json!({"n": 1}));
    for row in [&good, &bad, &event] {
        store.outbox_insert(row).await.unwrap();
    }
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
    assert!(failed.last_error.is_some_and(|e| e.contains("lane")));
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
        items.iter().map(|i| i.id).collect::<Vec<_>>(),
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
