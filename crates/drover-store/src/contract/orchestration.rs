//! Contract cases for [`OrchestrationStore`](crate::orchestration::OrchestrationStore): the start and its key, the
//! advance's two fences (claim token and version) landing together or not
//! at all, signals kept, consumed and refused, the sweep's due list, and
//! tenant isolation. Run by every backend through
//! [`orchestration_contract_suite!`](crate::orchestration_contract_suite).

use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use super::{Harness, LONG, PAST_SHORT, SHORT, assert_kind, claim_params, get, tenant_a, tenant_b};
use crate::ClaimRef;
use crate::orchestration::transition::step_item;
use crate::orchestration::{
    NewOrchestration, Orchestration, OrchestrationFilter, OrchestrationStatus, RecordWrite, Signal,
    SignalOutcome, Transition,
};
use drover_core::error::ErrorKind;
use drover_core::item::{InsertResult, Status};

mod bounds;
pub use bounds::*;

/// Expands to one `#[tokio::test]` per orchestration contract case.
#[macro_export]
macro_rules! orchestration_contract_suite {
    ($setup:path) => {
        $crate::__orchestration_cases!($setup;
            orchestration_start_writes_record_and_first_item,
            orchestration_started_twice_with_one_key_is_one,
            orchestration_advance_lands_item_and_record_together,
            orchestration_racing_steps_one_lands_other_conflicts,
            orchestration_advance_after_lease_changes_nothing,
            orchestration_signal_before_park_is_consumed_by_it,
            orchestration_signal_wakes_a_parked_record,
            orchestration_signal_refused_when_final_or_unknown,
            orchestration_signal_key_is_idempotent,
            orchestration_due_lists_passed_parks_only,
            orchestration_tenants_isolated,
            orchestration_dead_steps_lists_live_records_with_failed_items,
            orchestration_cancel_request_lets_the_running_step_land,
            orchestration_cancel_request_overrides_a_park,
            orchestration_step_item_not_inserted_fails_the_transition,
            orchestration_cancelled_step_item_is_listed_and_counted,
            orchestration_purge_removes_finished_and_consumed,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __orchestration_cases {
    ($setup:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let h = $setup().await;
                $crate::contract::orchestration::$case(&h).await;
                h.finish().await;
            }
        )*
    };
}

fn new_orch(tenant: Uuid, key: Option<&str>) -> (NewOrchestration, drover_core::item::NewItem) {
    let id = Uuid::now_v7();
    let new = NewOrchestration {
        id,
        tenant_id: tenant,
        kind: "checkout".into(),
        lane: "default".into(),
        max_attempts: 3,
        step: "reserve".into(),
        state: json!({"n": 0}),
        idempotency_key: key.map(str::to_owned),
    };
    let first = step_item(tenant, id, "default", 3, 1, None);
    (new, first)
}

async fn start(h: &Harness, tenant: Uuid) -> Orchestration {
    let (new, first) = new_orch(tenant, None);
    let out = h
        .store
        .orchestration_insert(&new, &first)
        .await
        .expect("insert");
    assert_eq!(out.result, InsertResult::Inserted);
    out.record
}

async fn record(h: &Harness, tenant: Uuid, id: Uuid) -> Orchestration {
    h.store
        .orchestration_get(tenant, id)
        .await
        .expect("get")
        .expect("record exists")
}

/// The transition to `step` with state `n`, enqueuing the next item.
fn to_step(r: &Orchestration, step: &str, n: i64) -> Transition {
    let mut w = RecordWrite::of(r);
    w.completed.push(r.step.clone());
    w.step = step.into();
    w.state = json!({ "n": n });
    Transition {
        tenant_id: r.tenant_id,
        id: r.id,
        expected_version: r.version,
        write: w,
        enqueue: Some(step_item(
            r.tenant_id,
            r.id,
            &r.lane,
            r.max_attempts,
            r.version + 1,
            None,
        )),
        consume_signal: None,
    }
}

fn park_for(r: &Orchestration, name: &str, until: chrono::DateTime<Utc>) -> Transition {
    let mut w = RecordWrite::of(r);
    w.completed.push(r.step.clone());
    w.status = OrchestrationStatus::Parked;
    w.step = "ship".into();
    w.parked_until = Some(until);
    w.waiting_for = Some(name.into());
    w.timeout_step = Some("give_up".into());
    Transition {
        tenant_id: r.tenant_id,
        id: r.id,
        expected_version: r.version,
        write: w,
        enqueue: None,
        consume_signal: None,
    }
}

fn sig(r: &Orchestration, name: &str, key: Option<&str>) -> Signal {
    Signal {
        id: Uuid::now_v7(),
        tenant_id: r.tenant_id,
        orchestration_id: r.id,
        name: name.into(),
        payload: json!({"paid": true}),
        idempotency_key: key.map(str::to_owned),
        consumed_at: None,
        created_at: Utc::now(),
    }
}

async fn claim(
    h: &Harness,
    lease: std::time::Duration,
) -> Vec<(drover_core::item::Item, ClaimRef)> {
    h.store
        .item_claim(&claim_params("default", 10, lease))
        .await
        .expect("claim")
        .into_iter()
        .map(|i| {
            let c = ClaimRef::of(&i).expect("token");
            (i, c)
        })
        .collect()
}

/// A start writes the record at version 1 and its first step's item.
pub async fn orchestration_start_writes_record_and_first_item(h: &Harness) {
    let r = start(h, tenant_a()).await;
    assert_eq!(r.version, 1);
    assert_eq!(r.status, OrchestrationStatus::Running);
    assert_eq!(r.step, "reserve");
    let got = claim(h, LONG).await;
    assert_eq!(got.len(), 1, "one first-step item");
    assert_eq!(got[0].0.kind, crate::orchestration::STEP_KIND);
    assert_eq!(got[0].0.payload["orchestration_id"], json!(r.id));
    assert_eq!(got[0].0.payload["version"], json!(1));
}

/// A start retried with its key meets its own record and adds no item.
pub async fn orchestration_started_twice_with_one_key_is_one(h: &Harness) {
    let (a, fa) = new_orch(tenant_a(), Some("order-7"));
    let (b, fb) = new_orch(tenant_a(), Some("order-7"));
    let first = h.store.orchestration_insert(&a, &fa).await.expect("first");
    let again = h.store.orchestration_insert(&b, &fb).await.expect("again");
    assert_eq!(first.result, InsertResult::Inserted);
    assert_eq!(again.result, InsertResult::KeyExists);
    assert_eq!(again.record.id, a.id);
    let all = h
        .store
        .orchestration_list(&OrchestrationFilter {
            tenant_id: Some(tenant_a()),
            limit: 10,
            ..OrchestrationFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(all.len(), 1);
    assert_eq!(claim(h, LONG).await.len(), 1, "one item only");
    // The same key in another tenant is another orchestration.
    let (c, fc) = new_orch(tenant_b(), Some("order-7"));
    let other = h.store.orchestration_insert(&c, &fc).await.expect("other");
    assert_eq!(other.result, InsertResult::Inserted);
}

/// The advance completes the item, bumps the version, and enqueues the
/// next step's item, all at once.
pub async fn orchestration_advance_lands_item_and_record_together(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let (item, c) = claim(h, LONG).await.remove(0);
    let after = h
        .store
        .orchestration_advance(&c, &to_step(&r, "charge", 1))
        .await
        .expect("advance");
    assert_eq!(after.version, 2);
    assert_eq!(after.step, "charge");
    assert_eq!(after.completed, vec!["reserve".to_owned()]);
    assert_eq!(after.state, json!({"n": 1}));
    assert_eq!(get(h, tenant_a(), item.id).await.status, Status::Done);
    let next = claim(h, LONG).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].0.payload["version"], json!(2));
}

/// Two workers on one step (two items of one version): exactly one
/// transition lands; the other gets `Conflict` and changes nothing, its
/// item still claimed and no extra item enqueued.
pub async fn orchestration_racing_steps_one_lands_other_conflicts(h: &Harness) {
    let r = start(h, tenant_a()).await;
    // A duplicate item for the same version (as a redelivery would make).
    let mut dup = step_item(r.tenant_id, r.id, "default", 3, 1, None);
    dup.idempotency_key = None;
    h.store.item_insert(&dup).await.expect("dup");
    let got = claim(h, LONG).await;
    assert_eq!(got.len(), 2);
    let (a, b) = (&got[0], &got[1]);
    let ta = to_step(&r, "charge", 1);
    let tb = to_step(&r, "refund_everything", 99);
    let (ra, rb) = tokio::join!(
        h.store.orchestration_advance(&a.1, &ta),
        h.store.orchestration_advance(&b.1, &tb)
    );
    let (won, lost_item) = match (ra, rb) {
        (Ok(w), Err(e)) => {
            assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
            (w, &b.0)
        }
        (Err(e), Ok(w)) => {
            assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
            (w, &a.0)
        }
        (x, y) => panic!("exactly one must land: {x:?} / {y:?}"),
    };
    let now = record(h, tenant_a(), r.id).await;
    assert_eq!(now.version, 2);
    assert_eq!(now, won);
    assert_eq!(
        get(h, tenant_a(), lost_item.id).await.status,
        Status::Claimed,
        "the loser's item is not completed by its refused transition"
    );
    assert_eq!(claim(h, LONG).await.len(), 1, "one next item, the winner's");
}

/// A step whose lease passed cannot write its transition: the claim fence
/// refuses it and the record keeps its version.
pub async fn orchestration_advance_after_lease_changes_nothing(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let (item, c) = claim(h, SHORT).await.remove(0);
    h.pass(PAST_SHORT).await;
    assert_kind(
        h.store
            .orchestration_advance(&c, &to_step(&r, "charge", 1))
            .await,
        ErrorKind::Conflict,
        "advance after the lease",
    );
    assert_eq!(record(h, tenant_a(), r.id).await, r);
    assert_eq!(get(h, tenant_a(), item.id).await.status, Status::Claimed);
    // An earlier version's transition is refused the same way.
    let stale = Transition {
        expected_version: 0,
        ..to_step(&r, "charge", 1)
    };
    assert_kind(
        h.store.orchestration_update(&stale).await,
        ErrorKind::Conflict,
        "stale version",
    );
}

/// A signal sent while the record runs is kept, and the park for it
/// consumes it in the same transaction: the record runs on, not parked.
pub async fn orchestration_signal_before_park_is_consumed_by_it(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let out = h
        .store
        .orchestration_signal(&sig(&r, "payment_confirmed", None))
        .await
        .expect("signal");
    assert_eq!(out, SignalOutcome::Kept);
    let (_, c) = claim(h, LONG).await.remove(0);
    let until = h.store.now() + chrono::Duration::seconds(3600);
    let after = h
        .store
        .orchestration_advance(&c, &park_for(&r, "payment_confirmed", until))
        .await
        .expect("park");
    assert_eq!(after.status, OrchestrationStatus::Running);
    assert_eq!(after.step, "ship");
    assert_eq!(after.waiting_for, None);
    let next = claim(h, LONG).await;
    assert_eq!(next.len(), 1, "the woken step's item");
    assert_eq!(next[0].0.payload["signal"], json!({"paid": true}));
    let sigs = h
        .store
        .orchestration_signal_list(tenant_a(), r.id)
        .await
        .expect("signals");
    assert_eq!(sigs.len(), 1);
    assert!(sigs[0].consumed_at.is_some(), "consumed by the park");
}

/// A signal to a record parked for it wakes it at once: running, and the
/// next step's item is there to claim.
pub async fn orchestration_signal_wakes_a_parked_record(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let (_, c) = claim(h, LONG).await.remove(0);
    let until = h.store.now() + chrono::Duration::seconds(3600);
    let parked = h
        .store
        .orchestration_advance(&c, &park_for(&r, "payment_confirmed", until))
        .await
        .expect("park");
    assert_eq!(parked.status, OrchestrationStatus::Parked);
    assert_eq!(
        h.store.orchestration_parked_count().await.expect("count"),
        1
    );
    // Another name is kept, and wakes nothing.
    let other = h
        .store
        .orchestration_signal(&sig(&r, "address_changed", None))
        .await
        .expect("other");
    assert_eq!(other, SignalOutcome::Kept);
    assert!(claim(h, LONG).await.is_empty());
    let out = h
        .store
        .orchestration_signal(&sig(&r, "payment_confirmed", None))
        .await
        .expect("signal");
    assert_eq!(out, SignalOutcome::Woke);
    let now = record(h, tenant_a(), r.id).await;
    assert_eq!(now.status, OrchestrationStatus::Running);
    assert_eq!(now.version, parked.version + 1);
    let next = claim(h, LONG).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].0.payload["version"], json!(now.version));
    assert_eq!(
        h.store.orchestration_parked_count().await.expect("count"),
        0
    );
}

/// A new signal to a finished record is `Conflict`; to no record,
/// `NotFound`. A signal resent with the key of one the record took before
/// it finished is the same delivery: `Duplicate`, not an error, so a
/// webhook resent after the work it woke has finished is still answered.
pub async fn orchestration_signal_refused_when_final_or_unknown(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let kept = h
        .store
        .orchestration_signal(&sig(&r, "payment_confirmed", Some("psp-1")))
        .await
        .expect("keyed signal while running");
    assert_eq!(kept, SignalOutcome::Kept);
    let (_, c) = claim(h, LONG).await.remove(0);
    let mut t = to_step(&r, "done", 1);
    t.write.status = OrchestrationStatus::Completed;
    t.write.result = Some(json!("ok"));
    t.enqueue = None;
    h.store
        .orchestration_advance(&c, &t)
        .await
        .expect("complete");
    assert_kind(
        h.store
            .orchestration_signal(&sig(&r, "payment_confirmed", None))
            .await,
        ErrorKind::Conflict,
        "signal to a completed orchestration",
    );
    assert_kind(
        h.store
            .orchestration_signal(&sig(&r, "payment_confirmed", Some("psp-2")))
            .await,
        ErrorKind::Conflict,
        "a new key to a completed orchestration",
    );
    let resent = h
        .store
        .orchestration_signal(&sig(&r, "payment_confirmed", Some("psp-1")))
        .await
        .expect("a resent key after the end is a duplicate");
    assert_eq!(resent, SignalOutcome::Duplicate);
    let sigs = h
        .store
        .orchestration_signal_list(tenant_a(), r.id)
        .await
        .expect("list");
    assert_eq!(sigs.len(), 1, "refused signals left no row");
    let mut ghost = sig(&r, "x", None);
    ghost.orchestration_id = Uuid::now_v7();
    assert_kind(
        h.store.orchestration_signal(&ghost).await,
        ErrorKind::NotFound,
        "signal to no orchestration",
    );
}

/// A signal resent with its key is the same signal.
pub async fn orchestration_signal_key_is_idempotent(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let first = h
        .store
        .orchestration_signal(&sig(&r, "payment_confirmed", Some("psp-1")))
        .await
        .expect("first");
    let again = h
        .store
        .orchestration_signal(&sig(&r, "payment_confirmed", Some("psp-1")))
        .await
        .expect("again");
    assert_eq!(first, SignalOutcome::Kept);
    assert_eq!(again, SignalOutcome::Duplicate);
    let sigs = h
        .store
        .orchestration_signal_list(tenant_a(), r.id)
        .await
        .expect("list");
    assert_eq!(sigs.len(), 1);
}

/// The due list holds parked records whose time has come, and no others.
pub async fn orchestration_due_lists_passed_parks_only(h: &Harness) {
    let soon = start(h, tenant_a()).await;
    let later = start(h, tenant_b()).await;
    let items = claim(h, LONG).await;
    for (item, c) in &items {
        let r = if item.tenant_id == tenant_a() {
            &soon
        } else {
            &later
        };
        let until = if r.id == soon.id {
            h.store.now() + drover_core::rules::to_chrono(SHORT)
        } else {
            h.store.now() + chrono::Duration::seconds(3600)
        };
        let mut t = to_step(r, "charge", 1);
        t.write.status = OrchestrationStatus::Parked;
        t.write.parked_until = Some(until);
        t.enqueue = None;
        h.store.orchestration_advance(c, &t).await.expect("park");
    }
    assert!(h.store.orchestration_due(10).await.expect("due").is_empty());
    h.pass(PAST_SHORT).await;
    let due = h.store.orchestration_due(10).await.expect("due");
    assert_eq!(due.iter().map(|r| r.id).collect::<Vec<_>>(), vec![soon.id]);
    assert_eq!(
        h.store.orchestration_parked_count().await.expect("count"),
        2
    );
    let resumed = h
        .store
        .orchestration_update(&crate::orchestration::transition::resume_due(
            &due[0],
            h.store.now(),
        ))
        .await
        .expect("resume");
    assert_eq!(resumed.status, OrchestrationStatus::Running);
    assert_eq!(resumed.parked_until, None);
    assert!(h.store.orchestration_due(10).await.expect("due").is_empty());
}

/// A tenant reads, lists, signals and writes only its own records.
pub async fn orchestration_tenants_isolated(h: &Harness) {
    let a = start(h, tenant_a()).await;
    assert!(
        h.store
            .orchestration_get(tenant_b(), a.id)
            .await
            .expect("get")
            .is_none()
    );
    let listed = h
        .store
        .orchestration_list(&OrchestrationFilter {
            tenant_id: Some(tenant_b()),
            limit: 10,
            ..OrchestrationFilter::default()
        })
        .await
        .expect("list");
    assert!(listed.is_empty());
    let mut s = sig(&a, "x", None);
    s.tenant_id = tenant_b();
    assert_kind(
        h.store.orchestration_signal(&s).await,
        ErrorKind::NotFound,
        "signal across tenants",
    );
    let mut t = to_step(&a, "charge", 1);
    t.tenant_id = tenant_b();
    t.enqueue = None;
    assert!(h.store.orchestration_update(&t).await.is_err());
    assert_eq!(record(h, tenant_a(), a.id).await, a);
}

/// A live record whose current step's item is in the dead letter is
/// listed (with the item's attempts and error); a record whose item is
/// still pending, or whose dead item belongs to an earlier version, is not.
pub async fn orchestration_dead_steps_lists_live_records_with_failed_items(h: &Harness) {
    let r = start(h, tenant_a()).await;
    let (_, c) = claim(h, LONG).await.remove(0);
    let p = crate::FailParams {
        error: "handler timed out".into(),
        retry_delay: std::time::Duration::ZERO,
        fatal: true,
    };
    assert_eq!(
        h.store.item_fail(&c, &p).await.expect("fail"),
        crate::FailOutcome::DeadLettered
    );
    let pending = start(h, tenant_b()).await;
    let dead = h.store.orchestration_dead_steps(10).await.expect("dead");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].record.id, r.id);
    assert_eq!(dead[0].record.version, r.version);
    assert_eq!(dead[0].attempts, 1);
    assert_eq!(dead[0].error.as_deref(), Some("handler timed out"));
    assert!(dead.iter().all(|d| d.record.id != pending.id));
    // Once the record moves on (here to a new version), the old dead item
    // no longer lists it.
    let mut w = RecordWrite::of(&r);
    w.status = OrchestrationStatus::Compensated;
    h.store
        .orchestration_update(&Transition {
            tenant_id: r.tenant_id,
            id: r.id,
            expected_version: r.version,
            write: w,
            enqueue: None,
            consume_signal: None,
        })
        .await
        .expect("update");
    assert!(
        h.store
            .orchestration_dead_steps(10)
            .await
            .expect("dead")
            .is_empty()
    );
}
