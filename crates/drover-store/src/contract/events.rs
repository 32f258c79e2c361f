//! Contract cases of the event log ([`EventStore`](crate::events::EventStore)):
//! dense positions in order, append twice is a no-op, concurrent appenders
//! leave no gap, tenant isolation, topic filtering, and the purge (old
//! events go, newer ones and positions stay). Run by every backend through
//! [`events_contract_suite!`](crate::events_contract_suite).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use super::{Harness, assert_kind, tenant_a, tenant_b};
use crate::events::{EventAppended, NewEvent};
use drover_core::error::ErrorKind;

#[doc(hidden)]
#[macro_export]
macro_rules! __events_cases {
    ($setup:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let h = $setup().await;
                $crate::contract::events::$case(&h).await;
                h.finish().await;
            }
        )*
    };
}

fn ev(tenant: Uuid, topic: &str, n: i64) -> NewEvent {
    NewEvent::new(topic, json!({ "n": n })).in_tenant(tenant)
}

/// Positions start at 1 per tenant and grow by one per event, single and
/// batched, and a read returns them in that order with every field kept.
pub async fn event_positions_are_dense_and_ordered(h: &Harness) {
    let mut first = ev(tenant_a(), "order_placed", 0);
    first.actor = Uuid::from_u128(7);
    first.request_id = Some("req-1".into());
    first.traceparent = Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into());
    let got = h.store.event_append(&first).await.expect("append");
    assert_eq!(got, EventAppended::Appended { position: 1 });
    let batch: Vec<NewEvent> = (1..=4).map(|n| ev(tenant_a(), "order_paid", n)).collect();
    let got = h
        .store
        .event_append_many(&batch)
        .await
        .expect("append many");
    assert_eq!(
        got.iter().map(EventAppended::position).collect::<Vec<_>>(),
        vec![2, 3, 4, 5]
    );
    assert!(got.iter().all(EventAppended::is_appended));
    let read = h
        .store
        .event_read(tenant_a(), 0, &[], 100)
        .await
        .expect("read");
    assert_eq!(
        read.iter().map(|e| e.position).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5]
    );
    let e1 = &read[0];
    assert_eq!(
        (e1.id, e1.tenant, e1.topic.as_str(), &e1.payload),
        (first.id, tenant_a(), "order_placed", &json!({"n": 0}))
    );
    assert_eq!(e1.actor, first.actor);
    assert_eq!(e1.request_id, first.request_id);
    assert_eq!(e1.traceparent, first.traceparent);
    let after3 = h
        .store
        .event_read(tenant_a(), 3, &[], 100)
        .await
        .expect("read after 3");
    assert_eq!(
        after3.iter().map(|e| e.position).collect::<Vec<_>>(),
        vec![4, 5]
    );
    let head = h.store.event_head(tenant_a()).await.expect("head");
    assert_eq!(head.position, 5);
    assert!(head.at.is_some());
}

/// Appending an id the tenant's log holds appends nothing and answers the
/// existing position, alone, in a batch, and repeated within one batch.
pub async fn event_append_twice_is_a_no_op(h: &Harness) {
    let e = ev(tenant_a(), "order_placed", 1);
    assert_eq!(
        h.store.event_append(&e).await.expect("first"),
        EventAppended::Appended { position: 1 }
    );
    let mut again = e.clone();
    again.payload = json!({"n": "changed"});
    assert_eq!(
        h.store.event_append(&again).await.expect("again"),
        EventAppended::AlreadyThere { position: 1 }
    );
    let fresh = ev(tenant_a(), "order_placed", 2);
    let got = h
        .store
        .event_append_many(&[e.clone(), fresh.clone(), fresh.clone()])
        .await
        .expect("batch");
    assert_eq!(
        got,
        vec![
            EventAppended::AlreadyThere { position: 1 },
            EventAppended::Appended { position: 2 },
            EventAppended::AlreadyThere { position: 2 },
        ]
    );
    let read = h
        .store
        .event_read(tenant_a(), 0, &[], 100)
        .await
        .expect("read");
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].payload, json!({"n": 1}), "never overwritten");
    assert_eq!(
        h.store.event_head(tenant_a()).await.expect("head").position,
        2
    );
}

/// Many appenders at once (single and batched, some repeating one shared
/// id): the positions are exactly 1..=n, each id once.
pub async fn event_concurrent_appenders_leave_no_gap(h: &Harness) {
    let shared = ev(tenant_a(), "shared", -1);
    let mut tasks = Vec::new();
    for t in 0..8i64 {
        let store = Arc::clone(&h.store);
        let shared = shared.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = vec![];
            for i in 0..10i64 {
                if i % 3 == 0 {
                    let batch = vec![ev(tenant_a(), "batch", t * 100 + i), shared.clone()];
                    ids.push(batch[0].id);
                    store.event_append_many(&batch).await.expect("append many");
                } else {
                    let e = ev(tenant_a(), "single", t * 100 + i);
                    ids.push(e.id);
                    store.event_append(&e).await.expect("append");
                }
            }
            ids
        }));
    }
    let mut ids = BTreeSet::from([shared.id]);
    for t in tasks {
        ids.extend(t.await.expect("task"));
    }
    let read = h
        .store
        .event_read(tenant_a(), 0, &[], 10_000)
        .await
        .expect("read");
    let positions: Vec<i64> = read.iter().map(|e| e.position).collect();
    assert_eq!(positions, (1..=ids.len() as i64).collect::<Vec<_>>());
    let read_ids: BTreeSet<Uuid> = read.iter().map(|e| e.id).collect();
    assert_eq!(read_ids, ids, "every id exactly once");
    assert_eq!(read.len(), ids.len());
}

/// Tenant A's calls never see or touch tenant B's log: positions are per
/// tenant, the same id is B's own event, reads and heads are scoped.
pub async fn event_tenants_isolated(h: &Harness) {
    let a1 = ev(tenant_a(), "t", 1);
    h.store.event_append(&a1).await.expect("a1");
    h.store
        .event_append(&ev(tenant_a(), "t", 2))
        .await
        .expect("a2");
    let mut b1 = a1.clone();
    b1.tenant = tenant_b();
    assert_eq!(
        h.store.event_append(&b1).await.expect("b1"),
        EventAppended::Appended { position: 1 },
        "the same id in another tenant's log is that tenant's own event"
    );
    let b = h
        .store
        .event_read(tenant_b(), 0, &[], 100)
        .await
        .expect("read b");
    assert_eq!(b.len(), 1);
    assert!(b.iter().all(|e| e.tenant == tenant_b()));
    let a = h
        .store
        .event_read(tenant_a(), 0, &[], 100)
        .await
        .expect("read a");
    assert_eq!(a.len(), 2);
    assert!(a.iter().all(|e| e.tenant == tenant_a()));
    assert_eq!(
        h.store.event_head(tenant_a()).await.expect("head").position,
        2
    );
    assert_eq!(
        h.store.event_head(tenant_b()).await.expect("head").position,
        1
    );
    let c = Uuid::from_u128(0xC);
    assert_eq!(h.store.event_head(c).await.expect("head").position, 0);
    assert!(
        h.store
            .event_read(c, 0, &[], 100)
            .await
            .expect("read c")
            .is_empty()
    );
    let tenants = h.store.event_tenants(None, 100).await.expect("tenants");
    assert_eq!(tenants, vec![tenant_a(), tenant_b()]);
    // A cursor: the next page starts after the last id returned.
    let first = h.store.event_tenants(None, 1).await.expect("page 1");
    assert_eq!(first, vec![tenant_a()]);
    let second = h
        .store
        .event_tenants(Some(tenant_a()), 1)
        .await
        .expect("page 2");
    assert_eq!(second, vec![tenant_b()]);
    assert!(
        h.store
            .event_tenants(Some(tenant_b()), 1)
            .await
            .expect("page 3")
            .is_empty()
    );
}

/// A topic filter returns only those topics, still in position order, and
/// the limit bounds the batch.
pub async fn event_read_filters_topics_and_limit(h: &Harness) {
    let batch: Vec<NewEvent> = (1..=9)
        .map(|n| ev(tenant_a(), ["a", "b", "c"][(n % 3) as usize], n))
        .collect();
    h.store.event_append_many(&batch).await.expect("append");
    let only = h
        .store
        .event_read(tenant_a(), 0, &["a".into(), "c".into()], 100)
        .await
        .expect("read");
    assert_eq!(
        only.iter().map(|e| e.position).collect::<Vec<_>>(),
        vec![2, 3, 5, 6, 8, 9]
    );
    assert!(only.iter().all(|e| e.topic != "b"));
    let limited = h
        .store
        .event_read(tenant_a(), 4, &[], 2)
        .await
        .expect("read");
    assert_eq!(
        limited.iter().map(|e| e.position).collect::<Vec<_>>(),
        vec![5, 6]
    );
}

/// A bad topic, payload or trace context is refused and nothing of the
/// batch is written.
pub async fn event_invalid_append_writes_nothing(h: &Harness) {
    assert_kind(
        h.store
            .event_append(&ev(tenant_a(), "Not A Topic", 1))
            .await,
        ErrorKind::InvalidInput,
        "bad topic",
    );
    let mut bad_tp = ev(tenant_a(), "ok", 2);
    bad_tp.traceparent = Some("nope".into());
    assert_kind(
        h.store
            .event_append_many(&[ev(tenant_a(), "ok", 1), bad_tp])
            .await,
        ErrorKind::InvalidInput,
        "bad traceparent",
    );
    assert!(
        h.store
            .event_read(tenant_a(), 0, &[], 100)
            .await
            .expect("read")
            .is_empty()
    );
    assert_eq!(
        h.store.event_head(tenant_a()).await.expect("head").position,
        0
    );
}

/// Events appended after the cut-off are never removed; with a cut-off
/// after every event, repeated purges (a PostgreSQL purge empties one child
/// of its ring per pass) remove them all; the next append takes the next
/// position, never one handed out before.
pub async fn event_purge_removes_old_keeps_new_and_positions(h: &Harness) {
    h.store
        .event_append_many(&[ev(tenant_a(), "t", 1), ev(tenant_b(), "t", 1)])
        .await
        .expect("old");
    h.pass(Duration::from_millis(20)).await;
    let cut = h.store.db_now().await.expect("now");
    h.pass(Duration::from_millis(20)).await;
    h.store
        .event_append(&ev(tenant_a(), "t", 2))
        .await
        .expect("new");
    let mut removed = 0;
    for _ in 0..8 {
        removed += h.store.event_purge(cut).await.expect("purge").removed;
    }
    // Row by row (memory, SQLite) exactly the two older events go; the
    // PostgreSQL ring truncates whole children only, and the one child
    // holding events also holds the newer one, so nothing goes there.
    let expected = match h.store.backend() {
        crate::Backend::Postgres => 0,
        crate::Backend::Sqlite | crate::Backend::Memory => 2,
    };
    assert_eq!(
        removed, expected,
        "only the two older events may go, and on a row-by-row purge both do"
    );
    let a = h
        .store
        .event_read(tenant_a(), 0, &[], 100)
        .await
        .expect("read");
    assert!(
        a.iter().any(|e| e.position == 2),
        "an event newer than the cut-off stays: {a:?}"
    );
    let all = h.store.db_now().await.expect("now") + chrono::Duration::hours(1);
    for _ in 0..8 {
        removed += h.store.event_purge(all).await.expect("purge").removed;
    }
    assert_eq!(removed, 3, "every event goes once the cut-off passes it");
    assert!(
        h.store
            .event_read(tenant_a(), 0, &[], 100)
            .await
            .expect("read")
            .is_empty()
    );
    assert_eq!(
        h.store.event_head(tenant_a()).await.expect("head").position,
        2
    );
    assert_eq!(
        h.store
            .event_append(&ev(tenant_a(), "t", 3))
            .await
            .expect("after purge"),
        EventAppended::Appended { position: 3 },
        "positions are never handed out twice"
    );
}
