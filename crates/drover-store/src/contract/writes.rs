//! Contract cases for the writes after a claim: every fenced write from
//! every starting state, batched completion, orphaning, and tenant
//! isolation of reads and writes.

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;

#[derive(Debug, Clone, Copy)]
enum Op {
    Complete,
    Fail,
    Defer,
    Release,
    Extend,
    Cancel,
}

async fn apply(h: &Harness, op: Op, r: &ClaimRef) -> drover_core::Result<()> {
    match op {
        Op::Complete => h.store.item_complete(r).await,
        Op::Fail => h.store.item_fail(r, &fail_params(LONG)).await.map(|_| ()),
        Op::Defer => h.store.item_defer(r, LONG).await.map(|_| ()),
        Op::Release => h.store.item_release(r, Some("note")).await,
        Op::Extend => h.store.item_extend_lease(r, LONG).await.map(|_| ()),
        Op::Cancel => h.store.item_cancel_claimed(r, "moot").await,
    }
}

#[derive(Debug, Clone, Copy)]
enum Start {
    NeverClaimed,
    Released,
    ClaimedOtherToken,
    LeasePassed,
    Done,
    Failed,
    Cancelled,
}

/// Builds an item in `start` and returns the handle a stale holder would use.
async fn setup_start(h: &Harness, start: Start) -> ClaimRef {
    let item = put(h, new("a").with_max_attempts(1)).await;
    let fake = ClaimRef {
        tenant_id: Uuid::nil(),
        id: item.id,
        token: Uuid::new_v4(),
    };
    if let Start::NeverClaimed = start {
        return fake;
    }
    let lease = if matches!(start, Start::LeasePassed) {
        SHORT
    } else {
        LONG
    };
    let (_, r) = claim_one(h, lease).await;
    match start {
        Start::NeverClaimed => unreachable!("returned above"),
        Start::Released => h.store.item_release(&r, None).await.expect("release"),
        Start::ClaimedOtherToken => return fake,
        Start::LeasePassed => h.pass(PAST_SHORT).await,
        Start::Done => h.store.item_complete(&r).await.expect("complete"),
        Start::Failed => {
            let out = h
                .store
                .item_fail(&r, &fail_params(LONG))
                .await
                .expect("fail");
            assert_eq!(out, FailOutcome::DeadLettered);
        }
        Start::Cancelled => {
            h.store
                .item_cancel(Uuid::nil(), r.id, Uuid::nil())
                .await
                .expect("cancel");
        }
    }
    r
}

/// Every fenced write, from every starting state a stale holder can meet,
/// is refused with `Conflict` and leaves the row as it stood; from a live
/// claim each lands.
pub async fn token_writes_from_every_state(h: &Harness) {
    let ops = [
        Op::Complete,
        Op::Fail,
        Op::Defer,
        Op::Release,
        Op::Extend,
        Op::Cancel,
    ];
    let starts = [
        Start::NeverClaimed,
        Start::Released,
        Start::ClaimedOtherToken,
        Start::LeasePassed,
        Start::Done,
        Start::Failed,
        Start::Cancelled,
    ];
    for start in starts {
        for op in ops {
            let r = setup_start(h, start).await;
            let before = get(h, Uuid::nil(), r.id).await;
            assert_kind(
                apply(h, op, &r).await,
                ErrorKind::Conflict,
                &format!("{op:?} from {start:?}"),
            );
            let after = get(h, Uuid::nil(), r.id).await;
            assert_eq!(before, after, "{op:?} from {start:?} changed the row");
            // Leave nothing claimable behind for the next round.
            if !after.status.is_final() {
                h.store
                    .item_cancel(Uuid::nil(), r.id, Uuid::nil())
                    .await
                    .expect("cancel leftover");
            }
        }
    }
    let expect = [
        (Op::Complete, Status::Done),
        (Op::Fail, Status::Pending),
        (Op::Defer, Status::Pending),
        (Op::Release, Status::Pending),
        (Op::Extend, Status::Claimed),
        (Op::Cancel, Status::Cancelled),
    ];
    for (op, status) in expect {
        let item = put(h, new("a")).await;
        let (_, r) = claim_one(h, LONG).await;
        assert_eq!(r.id, item.id);
        apply(h, op, &r)
            .await
            .unwrap_or_else(|e| panic!("{op:?} on a live claim: {e}"));
        let after = get(h, Uuid::nil(), r.id).await;
        assert_eq!(after.status, status, "{op:?}");
        if status == Status::Pending {
            assert!(after.claim_token.is_none() && after.lease_expires_at.is_none());
        }
        h.store
            .item_cancel(Uuid::nil(), r.id, Uuid::nil())
            .await
            .ok();
    }
}

/// A failure below the budget spends one attempt and requeues after the delay.
pub async fn fail_requeues_with_delay(h: &Harness) {
    put(h, new("a")).await;
    let (_, r) = claim_one(h, LONG).await;
    let out = h
        .store
        .item_fail(&r, &fail_params(Duration::from_secs(120)))
        .await
        .expect("fail");
    let FailOutcome::Requeued { available_at } = out else {
        panic!("expected a requeue, got {out:?}");
    };
    let item = get(h, Uuid::nil(), r.id).await;
    assert_eq!(item.status, Status::Pending);
    assert_eq!(item.attempts, 1);
    assert_eq!(item.last_error.as_deref(), Some("boom"));
    assert!(item.claim_token.is_none());
    assert!(approx(item.available_at, available_at, 1));
    assert!(approx(
        item.available_at,
        item.updated_at + chrono::Duration::seconds(120),
        1000
    ));
    let got = h
        .store
        .item_claim(&claim_params("default", 1, LONG))
        .await
        .expect("claim");
    assert!(got.is_empty(), "not claimable during the retry delay");
}

/// With `max_attempts = 3`: two requeues, then the third failure
/// dead-letters, with one audit entry naming it.
pub async fn dead_letter_at_exactly_max_attempts(h: &Harness) {
    let item = put(h, new("a").with_max_attempts(3)).await;
    for attempt in 1..=3 {
        let (_, r) = claim_one(h, LONG).await;
        let out = h
            .store
            .item_fail(&r, &fail_params(Duration::ZERO))
            .await
            .expect("fail");
        let row = get(h, Uuid::nil(), item.id).await;
        assert_eq!(row.attempts, attempt);
        if attempt < 3 {
            assert!(
                matches!(out, FailOutcome::Requeued { .. }),
                "attempt {attempt}: {out:?}"
            );
            assert_eq!(row.status, Status::Pending);
        } else {
            assert_eq!(out, FailOutcome::DeadLettered);
            assert_eq!(row.status, Status::Failed);
        }
    }
    let audit = h
        .store
        .audit_list(Uuid::nil(), item.id)
        .await
        .expect("audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, "dead_letter");
    assert_eq!(audit[0].item_id, item.id);
    assert_eq!(audit[0].detail.as_deref(), Some("boom"));
}

/// A fatal failure dead-letters at once, whatever the budget.
pub async fn fatal_fail_dead_letters_now(h: &Harness) {
    let item = put(h, new("a").with_max_attempts(10)).await;
    let (_, r) = claim_one(h, LONG).await;
    let mut p = fail_params(LONG);
    p.fatal = true;
    assert_eq!(
        h.store.item_fail(&r, &p).await.expect("fail"),
        FailOutcome::DeadLettered
    );
    let row = get(h, Uuid::nil(), item.id).await;
    assert_eq!(row.status, Status::Failed);
    assert_eq!(row.attempts, 1);
    assert_eq!(
        h.store
            .audit_list(Uuid::nil(), item.id)
            .await
            .expect("audit")
            .len(),
        1
    );
}

/// Defer and release make the item pending again and spend no attempt.
pub async fn defer_and_release_spend_no_attempt(h: &Harness) {
    let item = put(h, new("a")).await;
    let (_, r) = claim_one(h, LONG).await;
    let at = h
        .store
        .item_defer(&r, Duration::from_secs(30))
        .await
        .expect("defer");
    let row = get(h, Uuid::nil(), item.id).await;
    assert_eq!(row.status, Status::Pending);
    assert_eq!(row.attempts, 0);
    assert!(approx(row.available_at, at, 1));
    assert!(approx(
        row.available_at,
        row.updated_at + chrono::Duration::seconds(30),
        1000
    ));
    if h.clock.is_some() {
        h.pass(Duration::from_secs(31)).await;
        let (_, r2) = claim_one(h, LONG).await;
        h.store
            .item_release(&r2, Some("shutting down"))
            .await
            .expect("release");
        let row = get(h, Uuid::nil(), item.id).await;
        assert_eq!(row.status, Status::Pending);
        assert_eq!(row.attempts, 0);
        assert_eq!(row.claim_seq, 2);
        assert_eq!(row.last_error.as_deref(), Some("shutting down"));
        let (again, _) = claim_one(h, LONG).await;
        assert_eq!(again.id, item.id, "released item is available at once");
    } else {
        // Real clock: release a second item instead of waiting 30 s.
        let other = put(h, new("b")).await;
        let (_, r2) = claim_one(h, LONG).await;
        assert_eq!(r2.id, other.id);
        h.store
            .item_release(&r2, Some("shutting down"))
            .await
            .expect("release");
        let row = get(h, Uuid::nil(), other.id).await;
        assert_eq!((row.status, row.attempts), (Status::Pending, 0));
        assert_eq!(row.last_error.as_deref(), Some("shutting down"));
        let (again, _) = claim_one(h, LONG).await;
        assert_eq!(again.id, other.id, "released item is available at once");
    }
}

/// An extended lease keeps the item past the original expiry.
pub async fn extend_lease_keeps_item(h: &Harness) {
    put(h, new("a")).await;
    let (item, r) = claim_one(h, SHORT).await;
    let until = h.store.item_extend_lease(&r, LONG).await.expect("extend");
    assert!(until > item.lease_expires_at.expect("lease"));
    h.pass(PAST_SHORT).await;
    let report = h
        .store
        .item_requeue_stale(Uuid::nil(), 100, &RetryPolicy::default())
        .await
        .expect("sweep");
    assert_eq!(report.requeued + report.dead_lettered, 0);
    h.store
        .item_complete(&r)
        .await
        .expect("complete under the extended lease");
}

/// Reads, key lookups and writes under tenant A never find or touch
/// tenant B's item.
pub async fn tenant_reads_and_writes_isolated(h: &Harness) {
    let b = put(h, new("a").with_tenant(tenant_b()).with_key("secret")).await;
    assert!(
        h.store
            .item_get(tenant_a(), b.id)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        h.store
            .item_get_by_key(tenant_a(), "secret")
            .await
            .expect("key")
            .is_none()
    );
    let listed = h
        .store
        .item_list(&ListFilter {
            tenant_id: Some(tenant_a()),
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("list");
    assert!(listed.is_empty());
    assert_kind(
        h.store.item_cancel(tenant_a(), b.id, Uuid::nil()).await,
        ErrorKind::NotFound,
        "cancel",
    );
    let (_, r) = claim_one(h, LONG).await;
    assert_eq!(r.tenant_id, tenant_b());
    let forged = ClaimRef {
        tenant_id: tenant_a(),
        ..r
    };
    for op in [
        Op::Complete,
        Op::Fail,
        Op::Defer,
        Op::Release,
        Op::Extend,
        Op::Cancel,
    ] {
        let res = apply(h, op, &forged).await;
        assert!(res.is_err(), "{op:?} under the wrong tenant landed");
    }
    assert!(
        h.store
            .audit_list(tenant_a(), b.id)
            .await
            .expect("audit")
            .is_empty()
    );
    let row = get(h, tenant_b(), b.id).await;
    assert_eq!(row.status, Status::Claimed);
    assert_eq!(row.claim_token, Some(r.token));
    h.store.item_complete(&r).await.expect("owner completes");
    assert_kind(
        h.store.item_retry(tenant_a(), b.id, Uuid::nil()).await,
        ErrorKind::NotFound,
        "retry",
    );
    assert_eq!(get(h, tenant_b(), b.id).await.status, Status::Done);
}

/// A batched completion lands every live claim and refuses the stale one.
pub async fn complete_many_refuses_stale_lands_others(h: &Harness) {
    let batch: Vec<NewItem> = (0..4).map(|_| new("a")).collect();
    h.store.item_insert_many(&batch).await.expect("bulk");
    let got = h
        .store
        .item_claim(&claim_params("default", 4, LONG))
        .await
        .expect("claim");
    let mut refs: Vec<ClaimRef> = got.iter().map(|i| ClaimRef::of(i).expect("t")).collect();
    let stale_id = refs[1].id;
    refs[1].token = Uuid::new_v4();
    let landed = h
        .store
        .item_complete_many(&refs)
        .await
        .expect("complete many");
    assert_eq!(landed.len(), 3);
    assert!(!landed.contains(&stale_id));
    for r in &refs {
        let row = get(h, Uuid::nil(), r.id).await;
        let want = if r.id == stale_id {
            Status::Claimed
        } else {
            Status::Done
        };
        assert_eq!(row.status, want);
    }
    assert!(
        h.store
            .item_complete_many(&[])
            .await
            .expect("empty")
            .is_empty()
    );
}

/// An orphaned item fails on its token alone, with no audit entry.
pub async fn fail_orphaned_is_fenced(h: &Harness) {
    let item = put(h, new("a").with_tenant(tenant_a())).await;
    let (_, r) = claim_one(h, LONG).await;
    assert_kind(
        h.store.item_fail_orphaned(item.id, Uuid::new_v4()).await,
        ErrorKind::Conflict,
        "orphan with a wrong token",
    );
    h.store
        .item_fail_orphaned(item.id, r.token)
        .await
        .expect("orphan");
    let row = get(h, tenant_a(), item.id).await;
    assert_eq!(row.status, Status::Failed);
    assert!(
        h.store
            .audit_list(tenant_a(), item.id)
            .await
            .expect("audit")
            .is_empty()
    );
}
