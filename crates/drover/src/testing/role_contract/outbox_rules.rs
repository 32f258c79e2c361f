//! Contract cases for the outbox's promises to producers and projectors,
//! registered in [`outbox_contract_suite!`](crate::outbox_contract_suite):
//! the payload reaches the handler exactly as written (a field named `lane`
//! included) with the kind's lane, budget and the row's priority; an id
//! already there changes nothing; one tenant's events are relayed in row
//! order across concurrent claims; the sweep step under saturation is
//! bounded and still reports the lag and purges; a bad event fails alone on
//! either relay path; raw writes check the kind's permission.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use super::outbox_fixtures::{event_row, items_of, quick, relay, work_row, write};
use crate::error::ErrorKind;
use crate::outbox::{
    NewOutboxRow, OutboxClaimParams, OutboxStatus, Relay, RelayConfig, RelaySweep,
};
use crate::queue::{Kind, Principal, Queue, QueueConfig};
use crate::store::contract::{Harness, LONG, PAST_SHORT, SHORT, assert_kind, tenant_a, tenant_b};

/// A job with a field named `lane`: the entry the old outbox format took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ShipParcel {
    lane: String,
    parcel: u32,
}

impl Kind for ShipParcel {
    const NAME: &'static str = "ship_parcel";
    const LANE: &'static str = "shipping";
    const MAX_ATTEMPTS: i32 = 9;
}

/// A kind whose enqueue needs a permission of its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct IssueRefund {
    amount: u32,
}

impl Kind for IssueRefund {
    const NAME: &'static str = "issue_refund";
    const PERMISSION: &'static str = "refunds.issue";
}

/// A job whose payload has a `lane` field, written through the outbox, is
/// relayed into its kind's lane with its kind's budget and the row's
/// priority, and its payload decodes to the job as written.
pub async fn outbox_payload_lane_field_reaches_the_handler(h: &Harness) {
    let queue = Queue::new(h.store.clone());
    let who = Principal::new(Uuid::from_u128(0xAC7), tenant_a(), ["*"]);
    let job = ShipParcel {
        lane: "left-dock".into(),
        parcel: 7,
    };
    let row = queue.outbox_work_row(&who, &job).unwrap().with_priority(-3);
    write(h, &row).await;
    let r = relay(h, quick()).run_once().await.unwrap();
    assert_eq!((r.relayed, r.items_inserted, r.retried), (1, 1, 0), "{r:?}");
    let item = h.store.item_get(tenant_a(), row.id).await.unwrap().unwrap();
    assert_eq!(item.kind, "ship_parcel");
    assert_eq!(item.lane, "shipping", "the kind's lane");
    assert_eq!(item.max_attempts, 9, "the kind's attempt budget");
    assert_eq!(item.priority, -3, "the row's priority");
    let decoded: ShipParcel = serde_json::from_value(item.payload).unwrap();
    assert_eq!(decoded, job, "the payload reaches the handler as written");
}

/// Writing an id that is already there changes nothing: not the payload,
/// not under another tenant, not after the row was relayed.
pub async fn outbox_an_existing_id_changes_nothing(h: &Harness) {
    let first = work_row(tenant_a(), json!({"v": 1}));
    write(h, &first).await;
    let again = NewOutboxRow {
        payload: json!({"v": 2}),
        ..first.clone()
    };
    write(h, &again).await;
    let theirs = NewOutboxRow {
        tenant_id: tenant_b(),
        ..again.clone()
    };
    write(h, &theirs).await;
    let stored = h
        .store
        .outbox_get(tenant_a(), first.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.payload, json!({"v": 1}));
    assert!(
        h.store
            .outbox_get(tenant_b(), first.id)
            .await
            .unwrap()
            .is_none()
    );
    let r = relay(h, quick()).run_once().await.unwrap();
    assert_eq!((r.claimed, r.relayed), (1, 1), "{r:?}");
    write(h, &again).await;
    let stats = h.store.outbox_stats().await.unwrap();
    assert_eq!((stats.pending, stats.done, stats.failed), (0, 1, 0));
    assert_eq!(relay(h, quick()).run_once().await.unwrap().claimed, 0);
}

/// While one claim holds a tenant's older event row, no other relay
/// appends that tenant's younger events (another tenant's go ahead); once
/// the holder's lease passes, the next relay appends them oldest first.
pub async fn outbox_events_of_a_tenant_relay_in_order_across_claims(h: &Harness) {
    let base = chrono::Utc::now() - chrono::Duration::seconds(5);
    let at = |ms: i64, row: NewOutboxRow| NewOutboxRow {
        created_at: base + chrono::Duration::milliseconds(ms),
        ..row
    };
    let e1 = at(0, event_row(tenant_a(), 1));
    let e2 = at(10, event_row(tenant_a(), 2));
    let other = at(20, event_row(tenant_b(), 3));
    for row in [&e1, &e2, &other] {
        write(h, row).await;
    }
    // A relay claims the oldest row and stalls (or dies) before appending.
    let held = h
        .store
        .outbox_claim(&OutboxClaimParams {
            lease: SHORT,
            limit: 1,
        })
        .await
        .unwrap();
    assert_eq!(held.iter().map(|r| r.id).collect::<Vec<_>>(), vec![e1.id]);
    let r = relay(h, quick()).run_once().await.unwrap();
    assert_eq!(r.relayed, 1, "only the other tenant's event: {r:?}");
    assert!(
        h.store
            .event_read(tenant_a(), 0, &[], 10)
            .await
            .unwrap()
            .is_empty(),
        "a younger event of the tenant overtook the held one"
    );
    assert_eq!(
        h.store
            .event_read(tenant_b(), 0, &[], 10)
            .await
            .unwrap()
            .len(),
        1
    );
    h.pass(PAST_SHORT).await;
    let r = relay(h, quick()).run_once().await.unwrap();
    assert_eq!(r.relayed, 2, "{r:?}");
    let log = h.store.event_read(tenant_a(), 0, &[], 10).await.unwrap();
    assert_eq!(
        log.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![e1.id, e2.id],
        "the tenant's events in row order"
    );
}

/// The relay step under saturation: with more rows than its budget, one
/// pass relays exactly its budget of batches and returns, having reported
/// the lag and run the purge (which removed the done row past retention
/// where the store's clock can be moved).
pub async fn outbox_relay_step_under_saturation(h: &Harness) {
    let config = RelayConfig {
        batch: 5,
        sweep_batches: 2,
        sweep_budget: LONG,
        retention: Duration::from_secs(60),
        ..quick()
    };
    let old = work_row(tenant_a(), json!({"old": true}));
    write(h, &old).await;
    relay(h, quick()).run_once().await.unwrap();
    if h.clock.is_some() {
        h.pass(Duration::from_secs(120)).await;
    }
    for n in 0..23 {
        write(h, &work_row(tenant_a(), json!({"n": n}))).await;
    }
    let step = RelaySweep::new(Arc::new(relay(h, config)));
    let report = step.run_once().await.unwrap();
    assert_eq!(report.batches, 2, "{report:?}");
    assert_eq!(report.relayed, 10, "the budget, no more: {report:?}");
    assert!(report.budget_spent, "{report:?}");
    assert!(report.lag_seconds.is_some_and(|l| l >= 0.0), "{report:?}");
    assert!(report.purged.is_some(), "the purge ran: {report:?}");
    let stats = h.store.outbox_stats().await.unwrap();
    assert_eq!(stats.pending, 13, "{stats:?}");
    if h.clock.is_some() {
        assert_eq!(report.purged, Some(1), "{report:?}");
        assert!(
            h.store
                .outbox_get(tenant_a(), old.id)
                .await
                .unwrap()
                .is_none()
        );
    }
}

/// An event the event log refuses (a payload over the log's bound that the
/// queue's larger bound let through) fails alone, on the one-transaction
/// path and the stepwise one alike: the batch's work row and good event are
/// relayed, the bad row spends one attempt and waits with its error.
pub async fn outbox_bad_event_fails_alone(h: &Harness) {
    let queue = Queue::new(h.store.clone()).with_config(QueueConfig {
        max_payload_bytes: 4 << 20,
        ..QueueConfig::default()
    });
    let relay = Relay::new(queue, quick()).unwrap();
    let big = "x".repeat(crate::store::events::EVENT_PAYLOAD_MAX_DEFAULT + 1024);
    let base = chrono::Utc::now() - chrono::Duration::seconds(5);
    let bad = NewOutboxRow {
        payload: json!({"blob": big}),
        created_at: base,
        ..event_row(tenant_a(), 1)
    };
    let good = NewOutboxRow {
        created_at: base + chrono::Duration::milliseconds(10),
        ..event_row(tenant_a(), 2)
    };
    let work = NewOutboxRow {
        created_at: base + chrono::Duration::milliseconds(20),
        ..work_row(tenant_a(), json!({}))
    };
    for row in [&bad, &good, &work] {
        write(h, row).await;
    }
    let r = relay.run_once().await.unwrap();
    assert_eq!(
        (
            r.claimed,
            r.relayed,
            r.items_inserted,
            r.events_appended,
            r.retried
        ),
        (3, 2, 1, 1, 1),
        "{r:?}"
    );
    let log = h.store.event_read(tenant_a(), 0, &[], 10).await.unwrap();
    assert_eq!(log.iter().map(|e| e.id).collect::<Vec<_>>(), vec![good.id]);
    assert_eq!(items_of(h, tenant_a()).await.len(), 1);
    let stored = h
        .store
        .outbox_get(tenant_a(), bad.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((stored.status, stored.attempts), (OutboxStatus::Pending, 1));
    assert!(
        stored
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("payload"),
        "{stored:?}"
    );
}

/// A raw outbox write of a `work.<kind>` row needs the kind's permission,
/// and a tenant's principal cannot write another tenant's row: nobody
/// reaches through the outbox what they could not enqueue directly.
pub async fn outbox_raw_write_checks_the_kinds_permission(h: &Harness) {
    let queue = Queue::new(h.store.clone());
    queue.register_kind::<IssueRefund>();
    let actor = Uuid::from_u128(0xC1E7);
    let clerk = Principal::new(actor, tenant_a(), ["orders.write"]);
    let manager = Principal::new(actor, tenant_a(), ["refunds.issue"]);
    let row = NewOutboxRow::new("work.issue_refund", json!({"amount": 5}));
    assert_kind(
        queue.outbox_write(&clerk, &row).await,
        ErrorKind::Forbidden,
        "a principal without the kind's permission",
    );
    assert!(
        h.store
            .outbox_get(tenant_a(), row.id)
            .await
            .unwrap()
            .is_none()
    );
    let foreign = NewOutboxRow {
        tenant_id: tenant_b(),
        ..NewOutboxRow::new("work.issue_refund", json!({"amount": 6}))
    };
    assert_kind(
        queue.outbox_write(&manager, &foreign).await,
        ErrorKind::Forbidden,
        "another tenant's row",
    );
    let id = queue.outbox_write(&manager, &row).await.unwrap();
    let stored = h.store.outbox_get(tenant_a(), id).await.unwrap().unwrap();
    assert_eq!((stored.tenant_id, stored.actor), (tenant_a(), actor));
    // An event row names no kind: any principal of the tenant writes it.
    queue
        .outbox_write(&clerk, &NewOutboxRow::new("event.refund_asked", json!({})))
        .await
        .unwrap();
    // The typed writer checks the same permission.
    assert_kind(
        queue.outbox_work_row(&clerk, &IssueRefund { amount: 1 }),
        ErrorKind::Forbidden,
        "typed write without the permission",
    );
}
