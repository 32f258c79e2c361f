//! Contract cases of ordered groups: a per-group limit of 1 that orders
//! its groups admits only each group's head (the earliest item not yet
//! final), whatever the priorities, the number of claimers, or a retry's
//! backoff; a dead-lettered item lets the group go on or holds it, as set.

use super::*;
use crate::Completion;
use crate::limits::{LimitScope, LimitSource, LimitSpec, OnDeadLetter};

async fn order(h: &Harness, kind: &str, on_dead_letter: OnDeadLetter) {
    let set = h
        .store
        .limit_set(
            &LimitScope::KindPerGroup(kind.into()),
            LimitSource::Operator,
            LimitSpec::ordered(on_dead_letter),
            Uuid::nil(),
        )
        .await
        .expect("set");
    assert!(set.ordered && set.concurrency == 1, "{set:?}");
    assert_eq!(set.on_dead_letter, on_dead_letter);
}

/// A failure that dead-letters at once.
fn dead_letter() -> FailParams {
    FailParams {
        fatal: true,
        ..fail_params(Duration::ZERO)
    }
}

async fn claim_all(h: &Harness) -> Vec<Item> {
    h.store
        .item_claim(&claim_params("default", 50, LONG))
        .await
        .expect("claim")
}

fn ids(items: &[Item]) -> Vec<Uuid> {
    let mut v: Vec<Uuid> = items.iter().map(|i| i.id).collect();
    v.sort();
    v
}

/// Each group's items run one at a time in enqueue order: later items
/// with a better priority do not overtake, an item retrying after a
/// failure holds its place through its backoff, and the store names the
/// item a later one waits behind. Items of the kind without a group, and
/// other kinds, are not held.
pub async fn ordered_group_runs_in_enqueue_order(h: &Harness) {
    let s = &h.store;
    order(h, "sync", OnDeadLetter::Continue).await;
    // Later items carry a better priority (lower sorts first).
    let a1 = put(h, new("sync").with_group("a").with_priority(5)).await;
    let b1 = put(h, new("sync").with_group("b").with_priority(5)).await;
    let a2 = put(h, new("sync").with_group("a").with_priority(1)).await;
    let b2 = put(h, new("sync").with_group("b").with_priority(1)).await;
    let a3 = put(h, new("sync").with_group("a").with_priority(0)).await;
    let loose = put(h, new("sync").with_priority(9)).await;
    let first = claim_all(h).await;
    assert_eq!(
        ids(&first),
        ids(&[a1.clone(), b1.clone(), loose]),
        "{first:?}"
    );
    assert!(
        claim_all(h).await.is_empty(),
        "every group's head is claimed"
    );
    let blocker = s
        .order_blocker(&a3, OnDeadLetter::Continue)
        .await
        .expect("blocker")
        .expect("a3 waits");
    assert_eq!((blocker.id, blocker.status), (a1.id, Status::Claimed));
    assert!(
        s.order_blocker(&a1, OnDeadLetter::Continue)
            .await
            .expect("head")
            .is_none(),
        "the head waits behind nothing"
    );
    // a1 completes: a2 is next, not a3.
    let c = first.iter().find(|i| i.id == a1.id).expect("a1");
    s.item_complete(&ClaimRef::of(c).expect("claimed"))
        .await
        .expect("complete");
    // b1 fails and retries in an hour: b2 waits behind it meanwhile.
    let c = first.iter().find(|i| i.id == b1.id).expect("b1");
    let out = s
        .item_fail(
            &ClaimRef::of(c).expect("claimed"),
            &fail_params(Duration::from_secs(3600)),
        )
        .await
        .expect("fail");
    assert!(matches!(out, FailOutcome::Requeued { .. }), "{out:?}");
    let next = claim_all(h).await;
    assert_eq!(ids(&next), vec![a2.id], "{next:?}");
    let waits = s
        .order_blocker(&b2, OnDeadLetter::Continue)
        .await
        .expect("blocker")
        .expect("b2 waits");
    assert_eq!((waits.id, waits.status), (b1.id, Status::Pending));
    s.item_release(&ClaimRef::of(&next[0]).expect("claimed"), None)
        .await
        .expect("release");
    let again = claim_all(h).await;
    assert_eq!(
        ids(&again),
        vec![a2.id],
        "a released head is still the head"
    );
}

/// A dead-lettered item: under `continue` the next item of its group runs;
/// under `hold` the group waits until an operator retries it (then it runs
/// first) or cancels it (then the next runs).
pub async fn ordered_group_dead_letter_continue_or_hold(h: &Harness) {
    let s = &h.store;
    order(h, "go", OnDeadLetter::Continue).await;
    order(h, "hold", OnDeadLetter::Hold).await;
    let go1 = put(h, new("go").with_group("g")).await;
    let go2 = put(h, new("go").with_group("g")).await;
    let hold1 = put(h, new("hold").with_group("g")).await;
    let hold2 = put(h, new("hold").with_group("g")).await;
    let first = claim_all(h).await;
    assert_eq!(ids(&first), ids(&[go1.clone(), hold1.clone()]));
    for c in &first {
        let out = s
            .item_fail(&ClaimRef::of(c).expect("claimed"), &dead_letter())
            .await
            .expect("fail");
        assert_eq!(out, FailOutcome::DeadLettered);
    }
    let next = claim_all(h).await;
    assert_eq!(ids(&next), vec![go2.id], "continue goes on, hold waits");
    let held = s
        .order_blocker(&hold2, OnDeadLetter::Hold)
        .await
        .expect("blocker")
        .expect("hold2 waits");
    assert_eq!((held.id, held.status), (hold1.id, Status::Failed));
    // The operator retries the dead item: it runs before the next.
    s.item_retry(Uuid::nil(), hold1.id, Uuid::nil())
        .await
        .expect("retry");
    let retried = claim_all(h).await;
    assert_eq!(ids(&retried), vec![hold1.id]);
    s.item_fail(&ClaimRef::of(&retried[0]).expect("claimed"), &dead_letter())
        .await
        .expect("fail");
    assert!(claim_all(h).await.is_empty(), "held again");
    // Cancelled instead: the group goes on.
    s.item_cancel(Uuid::nil(), hold1.id, Uuid::nil())
        .await
        .expect("cancel");
    assert_eq!(ids(&claim_all(h).await), vec![hold2.id]);
}

/// Many claimers at once, round after round: exactly one item of the
/// group is claimed each round, and the rounds follow enqueue order.
pub async fn ordered_group_exact_under_concurrent_claimers(h: &Harness) {
    let s = &h.store;
    order(h, "seq", OnDeadLetter::Continue).await;
    let mut enqueued = Vec::new();
    for n in 0..6 {
        enqueued.push(
            put(h, new("seq").with_group("one").with_priority(6 - n))
                .await
                .id,
        );
    }
    let mut ran = Vec::new();
    for _ in 0..6 {
        let mut tasks = Vec::new();
        for w in 0..6 {
            let store = s.clone();
            tasks.push(tokio::spawn(async move {
                let p = ClaimParams {
                    worker_id: format!("w{w}"),
                    ..claim_params("default", 4, LONG)
                };
                store.item_claim(&p).await.expect("claim")
            }));
        }
        let mut got = Vec::new();
        for t in tasks {
            got.extend(t.await.expect("claimer"));
        }
        assert_eq!(got.len(), 1, "one at a time: {got:?}");
        ran.push(got[0].id);
        s.item_complete(&ClaimRef::of(&got[0]).expect("claimed"))
            .await
            .expect("complete");
    }
    assert_eq!(ran, enqueued, "enqueue order");
}

/// An operator may cancel (discard) a dead letter, as the way on for an
/// ordered group that holds on one; done and cancelled items still refuse.
/// The counts stay exact through the rollup's settlement on both sides.
pub async fn cancel_discards_a_dead_letter_with_exact_counts(h: &Harness) {
    use super::operations::count_map;
    let s = &h.store;
    let op = Uuid::from_u128(42);
    let dead = put(h, new("x")).await;
    let (_, r) = claim_one(h, LONG).await;
    s.item_fail(&r, &dead_letter()).await.expect("fail");
    let key = |st: Status| ("default".to_owned(), "x".to_owned(), st);
    h.pass(Duration::from_millis(1500)).await;
    s.counts_settle().await.expect("settle");
    assert_eq!(count_map(h).await.get(&key(Status::Failed)), Some(&1));
    let c = s
        .item_cancel(Uuid::nil(), dead.id, op)
        .await
        .expect("cancel");
    assert_eq!((c.status, c.updated_by), (Status::Cancelled, op));
    let counts = count_map(h).await;
    assert_eq!(counts.get(&key(Status::Failed)), None, "{counts:?}");
    assert_eq!(counts.get(&key(Status::Cancelled)), Some(&1));
    assert_eq!(s.gauges().await.expect("gauges").failed, 0);
    h.pass(Duration::from_millis(1500)).await;
    s.counts_settle().await.expect("settle");
    let counts = count_map(h).await;
    assert_eq!(counts.get(&key(Status::Failed)), None, "{counts:?}");
    assert_eq!(counts.get(&key(Status::Cancelled)), Some(&1));
    assert_kind(
        s.item_cancel(Uuid::nil(), dead.id, op).await,
        ErrorKind::Conflict,
        "cancel a cancelled item",
    );
}

/// A completion that hands its slot over (`item_complete_then_claim`):
/// each completion is fenced on its own token (a stale one is refused and
/// its slot stays held), the handler's result is stored, and the claim
/// after it counts the slot the completion freed: an ordered group's next
/// item is admitted in the same call, never one of a group whose slot is
/// still held, never past its limit.
pub async fn ordered_group_handover_claims_the_freed_slot(h: &Harness) {
    let s = &h.store;
    order(h, "sync", OnDeadLetter::Continue).await;
    let a1 = put(h, new("sync").with_group("a")).await;
    let b1 = put(h, new("sync").with_group("b")).await;
    let a2 = put(h, new("sync").with_group("a")).await;
    let b2 = put(h, new("sync").with_group("b")).await;
    let a3 = put(h, new("sync").with_group("a")).await;
    let first = claim_all(h).await;
    assert_eq!(ids(&first), ids(&[a1.clone(), b1.clone()]), "{first:?}");
    let claim_of = |id: Uuid| {
        ClaimRef::of(first.iter().find(|i| i.id == id).expect("claimed")).expect("token")
    };
    let (ca1, cb1) = (claim_of(a1.id), claim_of(b1.id));
    // a1 done with a result: its slot goes to a2 in the same call, and
    // nothing of b (b1 still holds b's slot), though the claim asks for 5.
    let done = [Completion {
        claim: ca1,
        result: Some(json!({"ok": 1})),
    }];
    let h1 = s
        .item_complete_then_claim(&done, &claim_params("default", 5, LONG))
        .await
        .expect("handover");
    assert_eq!(h1.landed, vec![a1.id]);
    let got = h1.claimed.expect("claimed");
    assert_eq!(ids(&got), vec![a2.id], "{got:?}");
    let a1_now = get(h, a1.tenant_id, a1.id).await;
    assert_eq!(a1_now.status, Status::Done);
    assert_eq!(a1_now.result, Some(json!({"ok": 1})));
    // a1 again (stale: already done) with b1 under a wrong token: neither
    // lands, no slot is freed, nothing is claimed.
    let wrong = ClaimRef {
        token: Uuid::from_u128(77),
        ..cb1
    };
    let stale = [ca1, wrong].map(|claim| Completion {
        claim,
        result: None,
    });
    let h2 = s
        .item_complete_then_claim(&stale, &claim_params("default", 5, LONG))
        .await
        .expect("stale handover");
    assert!(h2.landed.is_empty(), "{:?}", h2.landed);
    assert!(h2.claimed.expect("claimed").is_empty());
    assert_eq!(get(h, b1.tenant_id, b1.id).await.status, Status::Claimed);
    // b1 under its own token: b2 follows; a3 waits behind a2.
    let done = [Completion {
        claim: cb1,
        result: None,
    }];
    let h3 = s
        .item_complete_then_claim(&done, &claim_params("default", 5, LONG))
        .await
        .expect("handover b");
    assert_eq!(h3.landed, vec![b1.id]);
    assert_eq!(ids(&h3.claimed.expect("claimed")), vec![b2.id]);
    assert_eq!(get(h, a3.tenant_id, a3.id).await.status, Status::Pending);
}

/// A handover under a per-group limit that does not order: the freed
/// group's next item fills the slot; an item of a better priority of a
/// group with room goes first; a freed group with nothing left hands the
/// slot to the lane's next admissible item; a group whose slot is held
/// gets nothing.
pub async fn handover_takes_the_freed_groups_next_item(h: &Harness) {
    let s = &h.store;
    s.limit_set(
        &LimitScope::KindPerGroup("sync".into()),
        LimitSource::Operator,
        LimitSpec::concurrency(1),
        Uuid::nil(),
    )
    .await
    .expect("set");
    let a1 = put(h, new("sync").with_group("a")).await;
    let b1 = put(h, new("sync").with_group("b")).await;
    let a2 = put(h, new("sync").with_group("a")).await;
    let b2 = put(h, new("sync").with_group("b")).await;
    let first = s
        .item_claim(&claim_params("default", 2, LONG))
        .await
        .expect("claim");
    assert_eq!(ids(&first), ids(&[a1.clone(), b1.clone()]), "{first:?}");
    let claim_of = |items: &[Item], id: Uuid| {
        ClaimRef::of(items.iter().find(|i| i.id == id).expect("claimed")).expect("token")
    };
    // a1 done: a2 takes a's slot; b2 waits behind b1.
    let done = [Completion {
        claim: claim_of(&first, a1.id),
        result: None,
    }];
    let h1 = s
        .item_complete_then_claim(&done, &claim_params("default", 1, LONG))
        .await
        .expect("handover");
    assert_eq!(h1.landed, vec![a1.id]);
    let got = h1.claimed.expect("claimed");
    assert_eq!(ids(&got), vec![a2.id], "{got:?}");
    // Behind a2, a3; c1 (a group with room) has a better priority: c1
    // goes first, a3 waits.
    let a3 = put(h, new("sync").with_group("a")).await;
    let c1 = put(h, new("sync").with_group("c").with_priority(-5)).await;
    let done = [Completion {
        claim: claim_of(&got, a2.id),
        result: None,
    }];
    let h2 = s
        .item_complete_then_claim(&done, &claim_params("default", 1, LONG))
        .await
        .expect("handover with a better priority waiting");
    let got = h2.claimed.expect("claimed");
    assert_eq!(ids(&got), vec![c1.id], "{got:?}");
    assert_eq!(get(h, a3.tenant_id, a3.id).await.status, Status::Pending);
    // c1 done: c has nothing left; its slot goes to a3 (a is free).
    let done = [Completion {
        claim: claim_of(&got, c1.id),
        result: None,
    }];
    let h3 = s
        .item_complete_then_claim(&done, &claim_params("default", 1, LONG))
        .await
        .expect("handover of an emptied group");
    assert_eq!(ids(&h3.claimed.expect("claimed")), vec![a3.id]);
    assert_eq!(get(h, b2.tenant_id, b2.id).await.status, Status::Pending);
}
