//! Contract cases for the writes after a claim (every fenced write from
//! every starting state), the sweep, tenant isolation, purge, gauges and
//! the operator's transitions.

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

async fn apply(h: &Harness, op: Op, r: &ClaimRef) -> crate::Result<()> {
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

/// A lease-expired item is handed back as a failed attempt, with
/// `last_error = "lease expired"`, and its holder's writes are refused.
pub async fn requeue_stale_counts_an_attempt(h: &Harness) {
    put(h, new("a")).await;
    let (_, r) = claim_one(h, SHORT).await;
    h.pass(PAST_SHORT).await;
    let policy = RetryPolicy {
        base: Duration::ZERO,
        ..RetryPolicy::default()
    };
    let report = h
        .store
        .item_requeue_stale(Uuid::nil(), 100, &policy)
        .await
        .expect("sweep");
    assert_eq!(report.requeued, 1);
    assert_eq!(report.dead_lettered, 0);
    let row = get(h, Uuid::nil(), r.id).await;
    assert_eq!(row.status, Status::Pending);
    assert_eq!(row.attempts, 1);
    assert_eq!(row.last_error.as_deref(), Some("lease expired"));
    assert!(row.claim_token.is_none());
    assert_kind(
        h.store.item_complete(&r).await,
        ErrorKind::Conflict,
        "holder after sweep",
    );
    let again = h
        .store
        .item_requeue_stale(Uuid::nil(), 100, &policy)
        .await
        .expect("sweep");
    assert_eq!(again.requeued, 0, "a second sweep finds nothing");
}

/// A sweep under tenant A leaves tenant B's stale item claimed.
pub async fn requeue_stale_is_per_tenant(h: &Harness) {
    put(h, new("a").with_tenant(tenant_a())).await;
    put(h, new("a").with_tenant(tenant_b())).await;
    let got = h
        .store
        .item_claim(&claim_params("default", 2, SHORT))
        .await
        .expect("claim");
    assert_eq!(got.len(), 2);
    h.pass(PAST_SHORT).await;
    let mut tenants = h.store.item_stale_tenants(10).await.expect("stale tenants");
    tenants.sort();
    assert_eq!(tenants, vec![tenant_a(), tenant_b()]);
    let report = h
        .store
        .item_requeue_stale(tenant_a(), 100, &RetryPolicy::default())
        .await
        .expect("sweep");
    assert_eq!(report.requeued, 1);
    let b = got
        .iter()
        .find(|i| i.tenant_id == tenant_b())
        .expect("b item");
    let row = get(h, tenant_b(), b.id).await;
    assert_eq!(row.status, Status::Claimed);
    assert_eq!(row.claim_token, b.claim_token);
    assert_eq!(row.attempts, 0);
}

/// A lease expiry that spends the last attempt dead-letters, with an audit
/// entry: a poison item that kills its worker every time still ends.
pub async fn requeue_stale_dead_letters_at_budget(h: &Harness) {
    let item = put(h, new("a").with_max_attempts(1)).await;
    claim_one(h, SHORT).await;
    h.pass(PAST_SHORT).await;
    let report = h
        .store
        .item_requeue_stale(Uuid::nil(), 100, &RetryPolicy::default())
        .await
        .expect("sweep");
    assert_eq!(report.dead_lettered, 1);
    let row = get(h, Uuid::nil(), item.id).await;
    assert_eq!(row.status, Status::Failed);
    assert_eq!(row.attempts, 1);
    let audit = h
        .store
        .audit_list(Uuid::nil(), item.id)
        .await
        .expect("audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].action, "dead_letter");
}

/// A sweep is bounded by its limit.
pub async fn requeue_stale_respects_limit(h: &Harness) {
    let batch: Vec<NewItem> = (0..5).map(|_| new("a")).collect();
    h.store.item_insert_many(&batch).await.expect("bulk");
    h.store
        .item_claim(&claim_params("default", 5, SHORT))
        .await
        .expect("claim");
    h.pass(PAST_SHORT).await;
    let policy = RetryPolicy::default();
    let first = h
        .store
        .item_requeue_stale(Uuid::nil(), 2, &policy)
        .await
        .expect("sweep");
    assert_eq!(first.requeued, 2);
    let rest = h
        .store
        .item_requeue_stale(Uuid::nil(), 10, &policy)
        .await
        .expect("sweep");
    assert_eq!(rest.requeued, 3);
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

/// Purge deletes final items older than the cutoff and nothing else.
pub async fn purge_leaves_pending_claimed_and_newer(h: &Harness) {
    let pending = put(h, new("p")).await;
    let claimed = put(h, new("c")).await;
    let done = put(h, new("d")).await;
    let failed = put(h, new("f").with_max_attempts(1)).await;
    let cancelled = put(h, new("x")).await;
    let mut p = claim_params("default", 1, LONG);
    for (kind, id) in [("d", done.id), ("f", failed.id), ("c", claimed.id)] {
        p.kinds = vec![kind.into()];
        let got = h.store.item_claim(&p).await.expect("claim");
        assert_eq!(got[0].id, id);
        let r = ClaimRef::of(&got[0]).expect("t");
        match kind {
            "d" => h.store.item_complete(&r).await.expect("complete"),
            "f" => {
                h.store
                    .item_fail(&r, &fail_params(LONG))
                    .await
                    .expect("fail");
            }
            _ => {}
        }
    }
    h.store
        .item_cancel(Uuid::nil(), cancelled.id, Uuid::nil())
        .await
        .expect("cancel");
    h.pass(Duration::from_millis(300)).await;
    // Real clock or manual, the cutoff sits between the old writes and the
    // newer item.
    let cutoff = match &h.clock {
        Some(c) => {
            use crate::store::Clock;
            c.now()
        }
        None => Utc::now(),
    };
    h.pass(Duration::from_millis(300)).await;
    let newer = put(h, new("n")).await;
    let p2 = ClaimParams {
        kinds: vec!["n".into()],
        ..claim_params("default", 1, LONG)
    };
    let got = h.store.item_claim(&p2).await.expect("claim");
    h.store
        .item_complete(&ClaimRef::of(&got[0]).expect("t"))
        .await
        .expect("complete");
    let purged = h.store.item_purge(cutoff, 2).await.expect("purge");
    assert_eq!(purged, 3);
    for (id, kept) in [
        (pending.id, true),
        (claimed.id, true),
        (done.id, false),
        (failed.id, false),
        (cancelled.id, false),
        (newer.id, true),
    ] {
        let row = h.store.item_get(Uuid::nil(), id).await.expect("get");
        assert_eq!(row.is_some(), kept, "{id}");
    }
}

/// The gauges: the oldest available pending item's age per lane, and the
/// dead-letter count.
pub async fn gauges_report_oldest_age_and_failed(h: &Harness) {
    let old = Utc::now() - chrono::Duration::seconds(100);
    put(h, new("a").with_available_at(old)).await;
    put(
        h,
        new("a")
            .with_lane("later")
            .with_available_at(Utc::now() + chrono::Duration::hours(1)),
    )
    .await;
    let f = put(h, new("f").with_lane("dead").with_max_attempts(1)).await;
    let got = h
        .store
        .item_claim(&claim_params("dead", 1, LONG))
        .await
        .expect("claim");
    assert_eq!(got[0].id, f.id);
    h.store
        .item_fail(&ClaimRef::of(&got[0]).expect("t"), &fail_params(LONG))
        .await
        .expect("fail");
    let g = h.store.gauges().await.expect("gauges");
    assert_eq!(g.failed, 1);
    let age = g
        .oldest_age_seconds
        .iter()
        .find(|(l, _)| l == "default")
        .map(|(_, a)| *a)
        .expect("default lane");
    assert!((99.0..200.0).contains(&age), "age {age}");
    let later = g
        .oldest_age_seconds
        .iter()
        .find(|(l, _)| l == "later")
        .map(|(_, a)| *a)
        .unwrap_or(0.0);
    assert_eq!(later, 0.0, "future items are not waiting");
}

/// Counts per lane, kind and status.
pub async fn counts_per_lane_kind_status(h: &Harness) {
    put(h, new("a")).await;
    put(h, new("a")).await;
    put(h, new("b").with_lane("l2")).await;
    claim_one(h, LONG).await;
    let rows = h.store.counts().await.expect("counts");
    let find = |lane: &str, kind: &str, st: Status| {
        rows.iter()
            .find(|r| r.lane == lane && r.kind == kind && r.status == st)
            .map(|r| r.count)
            .unwrap_or(0)
    };
    assert_eq!(find("default", "a", Status::Pending), 1);
    assert_eq!(find("default", "a", Status::Claimed), 1);
    assert_eq!(find("l2", "b", Status::Pending), 1);
    assert_eq!(rows.iter().map(|r| r.count).sum::<i64>(), 3);
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

/// An operator cancels a pending or claimed item, and retries a final one
/// with a fresh budget; both audited; wrong states are `Conflict`.
pub async fn cancel_and_retry_by_operator(h: &Harness) {
    let op = Uuid::from_u128(42);
    let item = put(h, new("a").with_max_attempts(1)).await;
    assert_kind(
        h.store.item_retry(Uuid::nil(), item.id, op).await,
        ErrorKind::Conflict,
        "retry pending",
    );
    let (_, r) = claim_one(h, LONG).await;
    h.store
        .item_fail(&r, &fail_params(LONG))
        .await
        .expect("fail");
    let retried = h
        .store
        .item_retry(Uuid::nil(), item.id, op)
        .await
        .expect("retry");
    assert_eq!(retried.status, Status::Pending);
    assert_eq!(retried.attempts, 0);
    assert_eq!(retried.updated_by, op);
    let (_, r2) = claim_one(h, LONG).await;
    let cancelled = h
        .store
        .item_cancel(Uuid::nil(), item.id, op)
        .await
        .expect("cancel");
    assert_eq!(cancelled.status, Status::Cancelled);
    assert!(cancelled.claim_token.is_none());
    assert_kind(
        h.store.item_complete(&r2).await,
        ErrorKind::Conflict,
        "holder after cancel",
    );
    assert_kind(
        h.store.item_cancel(Uuid::nil(), item.id, op).await,
        ErrorKind::Conflict,
        "cancel twice",
    );
    assert_kind(
        h.store.item_cancel(Uuid::nil(), Uuid::new_v4(), op).await,
        ErrorKind::NotFound,
        "cancel missing",
    );
    let actions: Vec<String> = h
        .store
        .audit_list(Uuid::nil(), item.id)
        .await
        .expect("audit")
        .into_iter()
        .map(|a| a.action)
        .collect();
    assert_eq!(actions, vec!["dead_letter", "retry", "cancel"]);
}

/// Listing filters by status, lane, kind and tenant, newest first, bounded.
pub async fn list_filters(h: &Harness) {
    let a1 = put(h, new("a")).await;
    let a2 = put(h, new("a")).await;
    put(h, new("b").with_lane("l2")).await;
    put(h, new("a").with_tenant(tenant_b())).await;
    let all = h
        .store
        .item_list(&ListFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(all.len(), 4);
    let a = h
        .store
        .item_list(&ListFilter {
            tenant_id: Some(Uuid::nil()),
            kind: Some("a".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(
        a.iter().map(|i| i.id).collect::<Vec<_>>(),
        vec![a2.id, a1.id]
    );
    let l2 = h
        .store
        .item_list(&ListFilter {
            lane: Some("l2".into()),
            status: Some(Status::Pending),
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(l2.len(), 1);
    let one = h
        .store
        .item_list(&ListFilter {
            limit: 1,
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(one.len(), 1);
}

/// A worker's beat inserts then updates its row.
pub async fn worker_beat_upserts(h: &Harness) {
    let now = Utc::now();
    let mut row = WorkerRow {
        id: "w-1".into(),
        host: "host".into(),
        pid: 42,
        lanes: vec!["default".into(), "mail".into()],
        capacity: 20,
        started_at: now,
        last_beat_at: now,
        state: "running".into(),
    };
    h.store.worker_beat(&row).await.expect("beat");
    row.state = "offline".into();
    row.last_beat_at = now + chrono::Duration::seconds(5);
    h.store.worker_beat(&row).await.expect("beat");
    let rows = h.store.worker_list().await.expect("list");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state, "offline");
    assert_eq!(
        rows[0].lanes,
        vec!["default".to_string(), "mail".to_string()]
    );
    assert!(approx(rows[0].last_beat_at, row.last_beat_at, 1));
}

/// An insert publishes a wake-up naming its lane.
pub async fn wakeup_after_insert(h: &Harness) {
    let mut rx = h.store.wakeups().await.expect("subscribe");
    put(h, new("a").with_lane("mail")).await;
    let lane = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match rx.recv().await {
                Ok(l) if l == "mail" => return l,
                Ok(_) => continue,
                Err(e) => panic!("wake-up channel: {e}"),
            }
        }
    })
    .await
    .expect("a wake-up within 5 s");
    assert_eq!(lane, "mail");
}

/// One sweeper at a time.
pub async fn sweep_lock_is_exclusive(h: &Harness) {
    assert!(h.store.sweep_try_lock().await.expect("lock"));
    assert!(!h.store.sweep_try_lock().await.expect("lock again"));
    h.store.sweep_unlock().await.expect("unlock");
    assert!(h.store.sweep_try_lock().await.expect("relock"));
    h.store.sweep_unlock().await.expect("unlock");
}
