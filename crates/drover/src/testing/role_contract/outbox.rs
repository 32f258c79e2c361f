//! Contract cases for [`OutboxStore`](crate::outbox::OutboxStore) and the
//! relay over it: a rolled-back row is never relayed; a row relayed twice
//! makes one item carrying the row's id (as id and key), actor, request id
//! and trace context, its lane from the payload with the entry removed;
//! concurrent relays make no duplicate item or event; the fences after a
//! claim; retry with backoff then parked; tenant isolation; the purge
//! leaves pending and failed rows. Run by every backend through
//! [`outbox_contract_suite!`](crate::outbox_contract_suite).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::error::ErrorKind;
use crate::item::{InsertResult, NewItem};
use crate::outbox::{
    NewOutboxRow, OutboxClaimParams, OutboxFailParams, OutboxFilter, OutboxStatus, Relay,
    RelayConfig, relayed_item,
};
use crate::store::contract::{Harness, LONG, PAST_SHORT, SHORT, assert_kind, tenant_a, tenant_b};

use super::outbox_fixtures::{TRACE, event_row, items_of, quick, relay, work_row, write};
pub use super::outbox_rules::{
    outbox_an_existing_id_changes_nothing, outbox_bad_event_fails_alone,
    outbox_events_of_a_tenant_relay_in_order_across_claims,
    outbox_payload_lane_field_reaches_the_handler, outbox_raw_write_checks_the_kinds_permission,
    outbox_relay_step_under_saturation,
};

/// Expands to one `#[tokio::test]` per outbox contract case.
#[macro_export]
macro_rules! outbox_contract_suite {
    ($setup:path) => {
        $crate::__outbox_cases!($setup;
            outbox_rolled_back_row_never_relayed,
            outbox_relayed_twice_is_one_item_with_the_rows_identity,
            outbox_event_row_appended_once_under_its_id,
            outbox_concurrent_relays_make_no_duplicates,
            outbox_marks_after_the_lease_are_refused,
            outbox_unrelayable_row_retried_then_parked,
            outbox_tenants_isolated,
            outbox_purge_leaves_pending_and_failed,
            outbox_payload_lane_field_reaches_the_handler,
            outbox_an_existing_id_changes_nothing,
            outbox_events_of_a_tenant_relay_in_order_across_claims,
            outbox_relay_step_under_saturation,
            outbox_bad_event_fails_alone,
            outbox_raw_write_checks_the_kinds_permission,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __outbox_cases {
    ($setup:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let h = $setup().await;
                $crate::testing::role_contract::outbox::$case(&h).await;
                h.finish().await;
            }
        )*
    };
}

/// A row written in a transaction that rolls back does not exist and is
/// never relayed; the committed one beside it is.
pub async fn outbox_rolled_back_row_never_relayed(h: &Harness) {
    let committed = work_row(tenant_a(), json!({"order": 1}));
    write(h, &committed).await;
    let rolled_back = work_row(tenant_a(), json!({"order": 2}));
    if let Some(f) = &h.outbox_in {
        f(rolled_back.clone(), false).await.unwrap();
    }
    assert!(
        h.store
            .outbox_get(tenant_a(), rolled_back.id)
            .await
            .unwrap()
            .is_none()
    );
    let r = relay(h, quick()).run_once().await.unwrap();
    assert_eq!((r.claimed, r.relayed, r.items_inserted), (1, 1, 1));
    let items = items_of(h, tenant_a()).await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].id, committed.id);
    assert!(
        h.store
            .item_get(tenant_a(), rolled_back.id)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(relay(h, quick()).run_once().await.unwrap().claimed, 0);
}

/// A relay that died after inserting the item (before marking the row)
/// leaves the row to the next relay, which meets its own item (`IdExists`)
/// and changes nothing; the item carries the row's identity.
pub async fn outbox_relayed_twice_is_one_item_with_the_rows_identity(h: &Harness) {
    let row = work_row(tenant_a(), json!({"order": 7})).with_lane("mail");
    write(h, &row).await;
    // The first relay: claims, inserts the item, and dies.
    let claimed = h
        .store
        .outbox_claim(&OutboxClaimParams {
            lease: SHORT,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let item = relayed_item(&claimed[0], "send_receipt", 1 << 20).unwrap();
    let first = h.store.item_insert(&item).await.unwrap();
    assert_eq!(first.result, InsertResult::Inserted);
    h.pass(PAST_SHORT).await;
    // The second relay takes the row over and meets the item.
    let r = relay(h, quick()).run_once().await.unwrap();
    assert_eq!((r.claimed, r.relayed, r.items_inserted), (1, 1, 0), "{r:?}");
    let items = items_of(h, tenant_a()).await;
    assert_eq!(items.len(), 1, "one item for the row");
    let it = &items[0];
    assert_eq!(it.id, row.id);
    assert_eq!(
        it.idempotency_key.as_deref(),
        Some(row.id.to_string().as_str())
    );
    assert_eq!(it.created_by, row.actor);
    assert_eq!(it.request_id.as_deref(), Some("req-1"));
    assert_eq!(it.traceparent.as_deref(), Some(TRACE));
    assert_eq!(it.kind, "send_receipt");
    assert_eq!(it.lane, "mail");
    assert_eq!(it.payload, json!({"order": 7}), "the payload as written");
    assert_eq!(
        it.updated_at, first.item.updated_at,
        "the second relay changed nothing"
    );
    let stored = h
        .store
        .outbox_get(tenant_a(), row.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, OutboxStatus::Done);
    assert!(stored.claim_token.is_none() && stored.relayed_at.is_some());
    // A row whose lane is not set goes to the default lane.
    let plain = work_row(tenant_a(), json!({"order": 8}));
    write(h, &plain).await;
    relay(h, quick()).run_once().await.unwrap();
    assert_eq!(
        h.store
            .item_get(tenant_a(), plain.id)
            .await
            .unwrap()
            .unwrap()
            .lane,
        "default"
    );
}

/// An `event.<topic>` row is appended to the event log under the row's id,
/// with its actor; relaying it again appends nothing.
pub async fn outbox_event_row_appended_once_under_its_id(h: &Harness) {
    let row = NewOutboxRow {
        request_id: Some("req-9".into()),
        ..event_row(tenant_a(), 1)
    };
    write(h, &row).await;
    let claimed = h
        .store
        .outbox_claim(&OutboxClaimParams {
            lease: SHORT,
            limit: 10,
        })
        .await
        .unwrap();
    let ev = crate::outbox::relayed_event(&claimed[0], "order_placed");
    assert!(h.store.event_append(&ev).await.unwrap().is_appended());
    h.pass(PAST_SHORT).await;
    let r = relay(h, quick()).run_once().await.unwrap();
    assert_eq!(
        (r.claimed, r.relayed, r.events_appended),
        (1, 1, 0),
        "{r:?}"
    );
    let events = h.store.event_read(tenant_a(), 0, &[], 100).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].id, row.id);
    assert_eq!(events[0].topic, "order_placed");
    assert_eq!(events[0].actor, row.actor);
    assert_eq!(events[0].request_id.as_deref(), Some("req-9"));
    assert_eq!(events[0].payload, json!({"n": 1}));
}

/// Four relays racing over 200 mixed rows: every row done, one item per
/// work row, one event per event row.
pub async fn outbox_concurrent_relays_make_no_duplicates(h: &Harness) {
    let mut work = HashSet::new();
    let mut events = HashSet::new();
    for n in 0..200u64 {
        let row = if n % 2 == 0 {
            work_row(tenant_a(), json!({"n": n}))
        } else {
            event_row(tenant_a(), n)
        };
        if n % 2 == 0 {
            work.insert(row.id);
        } else {
            events.insert(row.id);
        }
        write(h, &row).await;
    }
    let relays: Vec<Arc<Relay>> = (0..4)
        .map(|_| {
            Arc::new(relay(
                h,
                RelayConfig {
                    batch: 7,
                    ..quick()
                },
            ))
        })
        .collect();
    let tasks: Vec<_> = relays
        .into_iter()
        .map(|r| {
            tokio::spawn(async move {
                let mut relayed = 0;
                loop {
                    let rep = r.run_once().await.unwrap();
                    relayed += rep.relayed;
                    if rep.claimed == 0 {
                        return relayed;
                    }
                }
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 200, "each row marked done by exactly one relay");
    let items: HashSet<Uuid> = items_of(h, tenant_a()).await.iter().map(|i| i.id).collect();
    assert_eq!(items, work);
    let log = h
        .store
        .event_read(tenant_a(), 0, &[], 10_000)
        .await
        .unwrap();
    assert_eq!(log.len(), events.len(), "no event appended twice");
    assert_eq!(log.iter().map(|e| e.id).collect::<HashSet<_>>(), events);
    let stats = h.store.outbox_stats().await.unwrap();
    assert_eq!((stats.pending, stats.done, stats.failed), (0, 200, 0));
}

/// After the lease passes, the claim's marks change nothing: done is not
/// landed, a failure is `Conflict`; the row is claimable again.
pub async fn outbox_marks_after_the_lease_are_refused(h: &Harness) {
    let row = work_row(tenant_a(), json!({}));
    write(h, &row).await;
    let params = OutboxClaimParams {
        lease: SHORT,
        limit: 10,
    };
    let first = h.store.outbox_claim(&params).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(
        h.store.outbox_claim(&params).await.unwrap().is_empty(),
        "held by the first claim"
    );
    let stale = first[0].claim().unwrap();
    h.pass(PAST_SHORT).await;
    assert!(h.store.outbox_complete(&[stale]).await.unwrap().is_empty());
    let fail = OutboxFailParams {
        error: "x".into(),
        retry_delay: Duration::ZERO,
        max_attempts: 5,
    };
    assert_kind(
        h.store.outbox_fail(&stale, &fail).await,
        ErrorKind::Conflict,
        "stale fail",
    );
    let second = h
        .store
        .outbox_claim(&OutboxClaimParams {
            lease: LONG,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    let fresh = second[0].claim().unwrap();
    assert_ne!(fresh.token, stale.token);
    assert!(
        h.store.outbox_complete(&[stale]).await.unwrap().is_empty(),
        "old token refused"
    );
    assert_eq!(
        h.store.outbox_complete(&[fresh]).await.unwrap(),
        vec![row.id]
    );
    let stored = h
        .store
        .outbox_get(tenant_a(), row.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((stored.status, stored.attempts), (OutboxStatus::Done, 0));
}

/// Makes `row` unrelayable: another item of its tenant holds the row's id
/// as its idempotency key, so the relay's insert meets `KeyExists`.
pub(super) async fn block(h: &Harness, row: &NewOutboxRow) {
    let blocker = NewItem::new("blocker", json!({}))
        .with_key(row.id.to_string())
        .with_tenant(row.tenant_id);
    let out = h.store.item_insert(&blocker).await.unwrap();
    assert_eq!(out.result, InsertResult::Inserted);
}

/// A row that cannot be relayed (its id is another item's key) is retried
/// after a backoff, then parked as failed with its error, counted in stats.
pub async fn outbox_unrelayable_row_retried_then_parked(h: &Harness) {
    let row = work_row(tenant_a(), json!({}));
    write(h, &row).await;
    block(h, &row).await;
    let r = relay(
        h,
        RelayConfig {
            max_attempts: 2,
            backoff_base: SHORT / 2,
            backoff_cap: SHORT / 2,
            ..quick()
        },
    );
    let first = r.run_once().await.unwrap();
    assert_eq!(
        (first.claimed, first.retried, first.parked),
        (1, 1, 0),
        "{first:?}"
    );
    assert_eq!(
        r.run_once().await.unwrap().claimed,
        0,
        "waits out its backoff"
    );
    let waiting = h
        .store
        .outbox_get(tenant_a(), row.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (waiting.status, waiting.attempts),
        (OutboxStatus::Pending, 1)
    );
    assert!(
        waiting
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("idempotency key"),
        "{waiting:?}"
    );
    h.pass(PAST_SHORT).await;
    let second = r.run_once().await.unwrap();
    assert_eq!((second.claimed, second.parked), (1, 1), "{second:?}");
    let parked = h
        .store
        .outbox_get(tenant_a(), row.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((parked.status, parked.attempts), (OutboxStatus::Failed, 2));
    let stats = h.store.outbox_stats().await.unwrap();
    assert_eq!((stats.pending, stats.failed), (0, 1));
    assert!(
        h.store
            .item_get(tenant_a(), row.id)
            .await
            .unwrap()
            .is_none()
    );
    let listed = h
        .store
        .outbox_list(&OutboxFilter {
            status: Some(OutboxStatus::Failed),
            limit: 10,
            ..OutboxFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
}

/// Every per-tenant outbox call under tenant B neither sees nor touches
/// tenant A's rows, and A's relayed item and event stay A's.
pub async fn outbox_tenants_isolated(h: &Harness) {
    let a_work = work_row(tenant_a(), json!({}));
    let a_event = event_row(tenant_a(), 1);
    write(h, &a_work).await;
    write(h, &a_event).await;
    assert!(
        h.store
            .outbox_get(tenant_b(), a_work.id)
            .await
            .unwrap()
            .is_none()
    );
    let b_list = h
        .store
        .outbox_list(&OutboxFilter {
            tenant_id: Some(tenant_b()),
            limit: 10,
            ..OutboxFilter::default()
        })
        .await
        .unwrap();
    assert!(b_list.is_empty());
    let claimed = h
        .store
        .outbox_claim(&OutboxClaimParams {
            lease: LONG,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    // A failure recorded under tenant B with A's token touches nothing.
    let mut forged = claimed[0].claim().unwrap();
    forged.tenant_id = tenant_b();
    let fail = OutboxFailParams {
        error: "x".into(),
        retry_delay: Duration::ZERO,
        max_attempts: 1,
    };
    assert_kind(
        h.store.outbox_fail(&forged, &fail).await,
        ErrorKind::Conflict,
        "cross-tenant fail",
    );
    let untouched = h
        .store
        .outbox_get(tenant_a(), claimed[0].id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (untouched.status, untouched.attempts),
        (OutboxStatus::Pending, 0)
    );
    h.store
        .outbox_complete(&claimed.iter().filter_map(|r| r.claim()).collect::<Vec<_>>())
        .await
        .unwrap();
    let b_own = work_row(tenant_b(), json!({}));
    write(h, &b_own).await;
    relay(h, quick()).run_once().await.unwrap();
    assert!(
        h.store
            .item_get(tenant_a(), b_own.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        h.store
            .item_get(tenant_b(), b_own.id)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(items_of(h, tenant_b()).await.len(), 1);
    assert!(
        h.store
            .event_read(tenant_b(), 0, &[], 10)
            .await
            .unwrap()
            .is_empty()
    );
    let a_rows = h
        .store
        .outbox_list(&OutboxFilter {
            tenant_id: Some(tenant_a()),
            limit: 10,
            ..OutboxFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(a_rows.len(), 2);
    assert!(a_rows.iter().all(|r| r.tenant_id == tenant_a()));
}

/// The purge never removes a pending or failed row; done rows past the
/// retention go once nothing pins them.
pub async fn outbox_purge_leaves_pending_and_failed(h: &Harness) {
    let done = work_row(tenant_a(), json!({}));
    write(h, &done).await;
    relay(h, quick()).run_once().await.unwrap();
    let failed = work_row(tenant_a(), json!({}));
    write(h, &failed).await;
    block(h, &failed).await;
    relay(
        h,
        RelayConfig {
            max_attempts: 1,
            ..quick()
        },
    )
    .run_once()
    .await
    .unwrap();
    let pending = work_row(tenant_a(), json!({}));
    write(h, &pending).await;
    let status = |id| async move {
        h.store
            .outbox_get(tenant_a(), id)
            .await
            .unwrap()
            .map(|r| r.status)
    };
    assert_eq!(status(failed.id).await, Some(OutboxStatus::Failed));
    // Past the retention by any clock: `before` an hour ahead.
    let before = h.store.db_now().await.unwrap() + chrono::Duration::hours(1);
    // A backend may purge the done row now or keep it while a pending row
    // shares its segment (PostgreSQL's ring); either way it goes once.
    let mut purged = 0;
    for _ in 0..8 {
        purged += h.store.outbox_purge(before, Duration::ZERO).await.unwrap();
    }
    assert_eq!(status(pending.id).await, Some(OutboxStatus::Pending));
    assert_eq!(status(failed.id).await, Some(OutboxStatus::Failed));
    // Once the pending row is relayed, nothing pins the done ones.
    relay(h, quick()).run_once().await.unwrap();
    for _ in 0..8 {
        purged += h.store.outbox_purge(before, Duration::ZERO).await.unwrap();
    }
    assert_eq!(purged, 2, "both done rows purged once");
    assert_eq!(status(done.id).await, None);
    assert_eq!(status(pending.id).await, None);
    assert_eq!(
        status(failed.id).await,
        Some(OutboxStatus::Failed),
        "a parked row is never purged"
    );
    // Purging never touches a row younger than `before`.
    let young = work_row(tenant_a(), json!({}));
    write(h, &young).await;
    relay(h, quick()).run_once().await.unwrap();
    let past = h.store.db_now().await.unwrap() - chrono::Duration::hours(1);
    for _ in 0..8 {
        h.store.outbox_purge(past, Duration::ZERO).await.unwrap();
    }
    assert_eq!(status(young.id).await, Some(OutboxStatus::Done));
}
