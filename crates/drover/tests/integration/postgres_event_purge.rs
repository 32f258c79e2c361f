//! A purge beside a long appender (PostgreSQL): every appender touches
//! every child of the event ring (the idempotent append's id lookup reads
//! them all), so a purge that asks for the oldest child's ACCESS EXCLUSIVE
//! lock while an appender's transaction is open must give up within its
//! short `lock_timeout` and skip the pass; otherwise its waiting lock
//! request queues every later append, of every tenant, behind the open
//! transaction.
//!
//! Synchronised on `pg_locks` and on the calls' answers; the only timeouts
//! turn a hang (the defect) into a failure, they assert no timing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state their expectations by panicking

use std::time::Duration;

use drover::events::{EventStore, NewEvent};
use drover::store::Store;
use drover::store::postgres::event_append_in;
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_owner_url, pg_url};
use serde_json::json;
use sqlx::Connection;
use uuid::Uuid;

/// Far longer than any lock timeout of the purge: reaching it means a call
/// waited behind the open transaction.
const HANG: Duration = Duration::from_secs(30);

/// Lock requests on `child` of `schema` not granted yet.
async fn waiting_on(conn: &mut sqlx::PgConnection, schema: &str, child: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks l \
         JOIN pg_class c ON c.oid = l.relation \
         JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = $1 AND c.relname = $2 AND NOT l.granted",
    )
    .bind(schema)
    .bind(child)
    .fetch_one(conn)
    .await
    .expect("pg_locks")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_purge_beside_a_long_appender_skips_and_blocks_no_append() {
    let (store, schema) = pg_fresh_store().await;
    let owner = pg_owner_url().await;
    let tenant_a = Uuid::from_u128(0xA1);
    let tenant_b = Uuid::from_u128(0xB1);

    // The long appender: its transaction stays open, holding its locks on
    // every child of the ring, until the end of the test.
    let mut long = sqlx::PgConnection::connect(&owner).await.expect("connect");
    let mut tx = long.begin().await.expect("begin");
    event_append_in(
        &mut tx,
        &schema,
        &[NewEvent::new("t", json!({})).in_tenant(tenant_a)],
    )
    .await
    .expect("append in");

    // A cut-off an hour ahead: the ring's next rotation is due at once and
    // the oldest child (events_1, empty) is past it.
    let all = store.db_now().await.expect("now") + chrono::Duration::hours(1);
    let purging = {
        let store = store.clone();
        tokio::spawn(async move { tokio::time::timeout(HANG, store.event_purge(all)).await })
    };
    // Wait until the purge's lock request is seen waiting on the child, or
    // until it has already answered.
    let mut watch = sqlx::PgConnection::connect(&owner).await.expect("connect");
    while !purging.is_finished() && waiting_on(&mut watch, &schema, "events_1").await == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Another tenant's append, while the purge is waiting or after it gave
    // up: it must not queue behind the purge's lock request.
    let other = tokio::time::timeout(
        HANG,
        store.event_append(&NewEvent::new("t", json!({})).in_tenant(tenant_b)),
    )
    .await
    .expect("an append queued behind the purge's lock request")
    .expect("append");
    assert!(other.is_appended());

    let purged = purging
        .await
        .expect("purge task")
        .expect("the purge waited for the long appender instead of giving up")
        .expect("purge");
    assert!(purged.busy, "the purge skipped its pass: {purged:?}");
    assert_eq!(purged.removed, 0);
    assert_eq!(
        waiting_on(&mut watch, &schema, "events_1").await,
        0,
        "no lock request is left waiting"
    );

    // Once the appender ends, the next pass rotates.
    tx.commit().await.expect("commit");
    let purged = tokio::time::timeout(HANG, store.event_purge(all))
        .await
        .expect("purge with no appender open")
        .expect("purge");
    assert!(!purged.busy, "{purged:?}");
    let read = store.event_read(tenant_a, 0, &[], 10).await.expect("read");
    assert_eq!(read.len(), 1, "the current child was not touched");

    let _ = watch.close().await;
    let _ = long.close().await;
    drop(store);
    pg_drop_schema(&pg_url().await, &schema).await;
}
