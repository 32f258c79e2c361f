//! Contract cases for the orchestration repairs and bounds (issue 23): the
//! cooperative cancel request, a step item that cannot be inserted, a
//! step item cancelled behind the runner's back, and the retention purge.
//! Registered with the other orchestration cases in
//! [`orchestration_contract_suite!`](crate::orchestration_contract_suite).

use chrono::Duration as Span;
use serde_json::json;

use super::super::{Harness, LONG, assert_kind, get, tenant_a};
use super::{claim, park_for, record, sig, start, to_step};
use crate::orchestration::transition::step_item;
use crate::orchestration::{OrchestrationStatus, RecordWrite, SignalOutcome, Transition};
use drover_core::error::ErrorKind;
use drover_core::item::Status;

/// A cancel request on a running record keeps its version (the step in
/// flight still lands); the step's transition keeps the flag and, in its
/// own transaction, turns into compensation from the step just completed:
/// its compensation's item is enqueued, not the next step's.
pub async fn orchestration_cancel_request_lets_the_running_step_land(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let (_, c) = claim(h, LONG).await.remove(0);
    let asked = h
        .store
        .orchestration_request_cancel(tenant_a(), r.id, r.version)
        .await
        .expect("request");
    assert_eq!(asked.version, r.version, "the request does not bump");
    assert!(asked.cancel_requested);
    assert_eq!(asked.status, OrchestrationStatus::Running);
    // A stale request is refused.
    assert_kind(
        h.store
            .orchestration_request_cancel(tenant_a(), r.id, r.version + 7)
            .await,
        ErrorKind::Conflict,
        "stale cancel request",
    );
    // The step read the record before the request: its write says false.
    let after = h
        .store
        .orchestration_advance(&c, &to_step(&r, "charge", 1))
        .await
        .expect("the step lands");
    assert_eq!(after.status, OrchestrationStatus::Compensating);
    assert!(after.cancel_requested);
    assert_eq!(
        after.step, "reserve",
        "compensation starts at the step just done"
    );
    assert_eq!(after.completed, vec!["reserve".to_owned()]);
    let next = claim(h, LONG).await;
    assert_eq!(next.len(), 1, "only the compensation's item: {next:?}");
    assert_eq!(next[0].0.payload["version"], json!(after.version));
    // Compensated to the end, it is `cancelled`.
    let mut w = RecordWrite::of(&after);
    w.completed.clear();
    w.status = OrchestrationStatus::Cancelled;
    let done = h
        .store
        .orchestration_advance(
            &next[0].1,
            &Transition {
                tenant_id: after.tenant_id,
                id: after.id,
                expected_version: after.version,
                write: w,
                enqueue: None,
                consume_signal: None,
            },
        )
        .await
        .expect("end");
    assert_eq!(done.status, OrchestrationStatus::Cancelled);
    // Not running any more: a request is refused.
    assert_kind(
        h.store
            .orchestration_request_cancel(tenant_a(), r.id, done.version)
            .await,
        ErrorKind::Conflict,
        "request on a final record",
    );
}

/// A step that parks after a cancel request starts compensation instead of
/// parking (and a history past the cap is trimmed and counted).
pub async fn orchestration_cancel_request_overrides_a_park(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let (_, c) = claim(h, LONG).await.remove(0);
    h.store
        .orchestration_request_cancel(tenant_a(), r.id, r.version)
        .await
        .expect("request");
    let until = h.store.now() + Span::seconds(3600);
    let mut t = park_for(&r, "payment_confirmed", until);
    for i in 0..(crate::orchestration::HISTORY_CAP + 5) {
        t.write.push_history(crate::orchestration::HistoryEntry {
            step: format!("s{i}"),
            attempt: 1,
            started: until,
            ended: until,
            outcome: "next".into(),
        });
    }
    let after = h.store.orchestration_advance(&c, &t).await.expect("park");
    assert_eq!(after.status, OrchestrationStatus::Compensating);
    assert_eq!(after.parked_until, None);
    assert_eq!(after.history.len(), crate::orchestration::HISTORY_CAP);
    assert_eq!(
        after.history_dropped, 6,
        "5 over the cap, then the cancel's entry"
    );
    assert_eq!(claim(h, LONG).await.len(), 1, "the compensation's item");
}

/// A transition whose step item cannot be inserted (its key is held by
/// another item) fails whole: the record keeps its version and status, the
/// claimed item stays claimed. A start likewise writes no record.
pub async fn orchestration_step_item_not_inserted_fails_the_transition(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let (item, c) = claim(h, LONG).await.remove(0);
    // Another item already holds the next step's key.
    let mut squatter = drover_core::item::NewItem::new("other.kind", json!({}))
        .with_tenant(tenant_a())
        .with_lane("elsewhere");
    squatter.idempotency_key = Some(format!("{}:{}:2", crate::orchestration::STEP_KIND, r.id));
    h.store.item_insert(&squatter).await.expect("squatter");
    assert_kind(
        h.store
            .orchestration_advance(&c, &to_step(&r, "charge", 1))
            .await,
        ErrorKind::Conflict,
        "advance with a colliding item",
    );
    assert_eq!(record(h, tenant_a(), r.id).await, r, "nothing changed");
    assert_eq!(get(h, tenant_a(), item.id).await.status, Status::Claimed);
    assert_kind(
        h.store
            .orchestration_update(&to_step(&r, "charge", 1))
            .await,
        ErrorKind::Conflict,
        "update with a colliding item",
    );
    assert_eq!(record(h, tenant_a(), r.id).await, r);
    // A start whose first item collides writes no record either.
    let (new, _) = super::new_orch(tenant_a(), None);
    let mut first = step_item(tenant_a(), new.id, "default", 3, 1, None);
    first.idempotency_key = squatter.idempotency_key.clone();
    assert_kind(
        h.store.orchestration_insert(&new, &first).await,
        ErrorKind::Conflict,
        "start with a colliding item",
    );
    assert_eq!(
        h.store
            .orchestration_get(tenant_a(), new.id)
            .await
            .expect("get"),
        None
    );
}

/// A step item cancelled through the item API is listed for the sweep's
/// repair (flagged as cancelled) and counted in the parked gauge until the
/// record moves on.
pub async fn orchestration_cancelled_step_item_is_listed_and_counted(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let before = h.store.orchestration_parked_count().await.expect("count");
    let (item, _) = claim(h, LONG).await.remove(0);
    h.store
        .item_cancel(tenant_a(), item.id, uuid::Uuid::nil())
        .await
        .expect("cancel the item");
    let dead = h.store.orchestration_dead_steps(10).await.expect("dead");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].record.id, r.id);
    assert!(dead[0].cancelled);
    assert_eq!(
        h.store.orchestration_parked_count().await.expect("count"),
        before + 1,
        "a stranded record is counted"
    );
    let moved = h
        .store
        .orchestration_update(&crate::orchestration::transition::cancel_requested(
            &dead[0].record,
            h.store.now(),
        ))
        .await
        .expect("repair");
    assert_eq!(moved.status, OrchestrationStatus::Cancelled);
    assert!(
        h.store
            .orchestration_dead_steps(10)
            .await
            .expect("dead")
            .is_empty()
    );
    assert_eq!(
        h.store.orchestration_parked_count().await.expect("count"),
        before
    );
}

/// The retention purge deletes final records (with their signals) and
/// consumed signals older than the cutoff, and nothing else.
pub async fn orchestration_purge_removes_finished_and_consumed(h: &Harness) {
    // A finished record with a kept (never consumed) signal.
    let done = start(h, tenant_a()).await;
    h.store
        .orchestration_signal(&sig(&done, "late", None))
        .await
        .expect("signal");
    let mut w = RecordWrite::of(&done);
    w.status = OrchestrationStatus::Completed;
    w.result = Some(json!(1));
    h.store
        .orchestration_update(&Transition {
            tenant_id: done.tenant_id,
            id: done.id,
            expected_version: done.version,
            write: w,
            enqueue: None,
            consume_signal: None,
        })
        .await
        .expect("complete");
    // A live record parked, woken by a signal (consumed), and a kept one.
    let live = start(h, tenant_a()).await;
    let (_, c) = claim(h, LONG)
        .await
        .into_iter()
        .find(|(i, _)| i.payload["orchestration_id"] == json!(live.id))
        .expect("live item");
    let until = h.store.now() + Span::seconds(3600);
    h.store
        .orchestration_advance(&c, &park_for(&live, "paid", until))
        .await
        .expect("park");
    let woke = h
        .store
        .orchestration_signal(&sig(&live, "paid", None))
        .await
        .expect("signal");
    assert_eq!(woke, SignalOutcome::Woke);
    h.store
        .orchestration_signal(&sig(&live, "other", None))
        .await
        .expect("kept");
    // A cutoff in the past purges nothing.
    let past = h.store.now() - Span::seconds(3600);
    assert_eq!(
        h.store.orchestration_purge(past, 100).await.expect("purge"),
        0
    );
    let future = h.store.now() + Span::seconds(3600);
    let n = h
        .store
        .orchestration_purge(future, 100)
        .await
        .expect("purge");
    assert_eq!(n, 3, "the finished record, its signal, the consumed signal");
    assert_eq!(
        h.store
            .orchestration_get(tenant_a(), done.id)
            .await
            .expect("get"),
        None
    );
    assert!(
        h.store
            .orchestration_get(tenant_a(), live.id)
            .await
            .expect("get")
            .is_some()
    );
    let left = h
        .store
        .orchestration_signal_list(tenant_a(), live.id)
        .await
        .expect("signals");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].name, "other");
    assert_eq!(
        h.store
            .orchestration_purge(future, 100)
            .await
            .expect("again"),
        0
    );
}
