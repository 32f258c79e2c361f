//! Contract cases for the run history (migration 0040): every way a claim
//! ends leaves one run with its worker, times, outcome and error; an item
//! keeps its last `RUNS_KEPT`; a tenant reads only its own; the purge goes
//! by the cutoff.

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::runs::{ItemRun, RUNS_KEPT, RunOutcome};

async fn runs(h: &Harness, tenant: Uuid, id: Uuid) -> Vec<ItemRun> {
    h.store.item_runs(tenant, id).await.expect("runs")
}

/// Claims the only available item of lane `lane` for worker `w`.
async fn claim_in(h: &Harness, lane: &str, w: &str, lease: Duration) -> (Item, ClaimRef) {
    let mut p = claim_params(lane, 1, lease);
    p.worker_id = w.into();
    let got = h.store.item_claim(&p).await.expect("claim");
    assert_eq!(got.len(), 1, "one claimable item in {lane}");
    let item = got.into_iter().next().expect("one");
    let r = ClaimRef::of(&item).expect("token");
    (item, r)
}

/// Each ending of a claim leaves its run: retry (with the error), release
/// (with its note), done after a lease renewal (started at the claim, not
/// the renewal), snoozed, cancelled, dead-lettered, and the batched
/// completion; newest first; another tenant sees none.
pub async fn runs_record_each_way_a_claim_ends(h: &Harness) {
    let a = put(h, new("a").with_lane("ra").with_tenant(tenant_a())).await;
    let (c1, r) = claim_in(h, "ra", "w1", LONG).await;
    h.store
        .item_fail(&r, &fail_params(Duration::ZERO))
        .await
        .expect("fail");
    let (_, r) = claim_in(h, "ra", "w2", LONG).await;
    h.store
        .item_release(&r, Some("shutting down"))
        .await
        .expect("release");
    let (c3, r) = claim_in(h, "ra", "w3", LONG).await;
    h.store.item_extend_lease(&r, LONG).await.expect("renew");
    h.store.item_complete(&r).await.expect("complete");

    let got = runs(h, tenant_a(), a.id).await;
    let seen: Vec<(i64, Option<&str>, RunOutcome, Option<&str>)> = got
        .iter()
        .map(|r| {
            (
                r.claim_seq,
                r.worker.as_deref(),
                r.outcome,
                r.error.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (3, Some("w3"), RunOutcome::Done, None),
            (2, Some("w2"), RunOutcome::Released, Some("shutting down")),
            (1, Some("w1"), RunOutcome::Retry, Some("boom")),
        ]
    );
    assert!(
        approx(got[2].started_at, c1.updated_at, 1),
        "run 1 starts at its claim"
    );
    assert!(
        approx(got[0].started_at, c3.updated_at, 1),
        "a renewal does not move the start"
    );
    for run in &got {
        assert!(run.finished_at >= run.started_at, "{run:?}");
    }
    let row = get(h, tenant_a(), a.id).await;
    assert_eq!(
        (row.status, row.attempts, row.claim_seq),
        (Status::Done, 1, 3)
    );
    assert!(
        runs(h, tenant_b(), a.id).await.is_empty(),
        "another tenant reads no run"
    );

    let b = put(h, new("b").with_lane("rb")).await;
    let (_, r) = claim_in(h, "rb", "w1", LONG).await;
    h.store.item_defer(&r, LONG).await.expect("defer");
    let c = put(h, new("c").with_lane("rc")).await;
    let (_, r) = claim_in(h, "rc", "w1", LONG).await;
    h.store
        .item_cancel_claimed(&r, "moot")
        .await
        .expect("cancel");
    let d = put(h, new("d").with_lane("rd").with_max_attempts(1)).await;
    let (_, r) = claim_in(h, "rd", "w1", LONG).await;
    let out = h
        .store
        .item_fail(&r, &fail_params(LONG))
        .await
        .expect("fail");
    assert_eq!(out, FailOutcome::DeadLettered);
    let e = put(h, new("e").with_lane("re")).await;
    let (_, r) = claim_in(h, "re", "w1", LONG).await;
    let landed = h.store.item_complete_many(&[r]).await.expect("many");
    assert_eq!(landed, [e.id]);
    // A first claim that ends done writes no run: the item is that run.
    assert!(runs(h, Uuid::nil(), e.id).await.is_empty());
    for (id, outcome, error) in [
        (b.id, RunOutcome::Snoozed, None),
        (c.id, RunOutcome::Cancelled, Some("moot")),
        (d.id, RunOutcome::Failed, Some("boom")),
    ] {
        let got = runs(h, Uuid::nil(), id).await;
        assert_eq!(got.len(), 1, "{outcome:?}: {got:?}");
        assert_eq!(got[0].outcome, outcome);
        assert_eq!(got[0].error.as_deref(), error, "{outcome:?}");
        assert_eq!(got[0].worker.as_deref(), Some("w1"));
    }
    let never = put(h, new("n").with_lane("rn")).await;
    assert!(runs(h, Uuid::nil(), never.id).await.is_empty());
}

/// A claim whose lease passed and that the sweep handed back is a lost
/// lease (with the sweep's error); an operator's cancel of a claimed item
/// is a cancelled run.
pub async fn runs_lease_lost_and_operator_cancel(h: &Harness) {
    let a = put(h, new("a").with_lane("rl")).await;
    claim_in(h, "rl", "w1", SHORT).await;
    h.pass(PAST_SHORT).await;
    let report = h
        .store
        .item_requeue_stale(Uuid::nil(), 10, &RetryPolicy::default())
        .await
        .expect("requeue");
    assert_eq!(report.requeued, 1);
    let got = runs(h, Uuid::nil(), a.id).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].outcome, RunOutcome::LeaseLost);
    assert_eq!(got[0].error.as_deref(), Some("lease expired"));

    let b = put(h, new("b").with_lane("ro")).await;
    claim_in(h, "ro", "w9", LONG).await;
    h.store
        .item_cancel(Uuid::nil(), b.id, Uuid::from_u128(7))
        .await
        .expect("operator cancel");
    let got = runs(h, Uuid::nil(), b.id).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].outcome, RunOutcome::Cancelled);
    assert_eq!(got[0].worker.as_deref(), Some("w9"));
}

/// An item keeps its last `RUNS_KEPT` runs, newest first.
pub async fn runs_bounded_per_item(h: &Harness) {
    let a = put(h, new("a").with_lane("rk")).await;
    let total = RUNS_KEPT + 3;
    for _ in 0..total {
        let (_, r) = claim_in(h, "rk", "w1", LONG).await;
        h.store.item_release(&r, None).await.expect("release");
    }
    let got = runs(h, Uuid::nil(), a.id).await;
    assert_eq!(got.len() as i64, RUNS_KEPT);
    let seqs: Vec<i64> = got.iter().map(|r| r.claim_seq).collect();
    let want: Vec<i64> = (total - RUNS_KEPT + 1..=total).rev().collect();
    assert_eq!(seqs, want);
    assert!(
        got.iter()
            .all(|r| r.outcome == RunOutcome::Released && r.error.is_none())
    );
}

/// The purge deletes the runs that finished before its cutoff, no others.
pub async fn runs_purged_by_the_cutoff(h: &Harness) {
    let a = put(h, new("a").with_lane("rp")).await;
    // Released, then done on the second claim: two runs (a first claim
    // that ends done writes none).
    let (_, r) = claim_in(h, "rp", "w1", LONG).await;
    h.store.item_release(&r, None).await.expect("release");
    let (_, r) = claim_in(h, "rp", "w1", LONG).await;
    h.store.item_complete(&r).await.expect("complete");
    let now = h.store.db_now().await.expect("now");
    let gone = h
        .store
        .item_runs_purge(now - chrono::Duration::hours(1), 100)
        .await
        .expect("purge");
    assert_eq!(gone, 0);
    assert_eq!(runs(h, Uuid::nil(), a.id).await.len(), 2);
    let gone = h
        .store
        .item_runs_purge(now + chrono::Duration::hours(1), 100)
        .await
        .expect("purge");
    assert_eq!(gone, 2);
    assert!(runs(h, Uuid::nil(), a.id).await.is_empty());
}

/// Counts of one tenant: only its items, exact through a settlement, a
/// retry and another tenant's work (what a tenant-scoped overview shows).
pub async fn counts_of_one_tenant(h: &Harness) {
    let mine = |k: &str| new(k).with_lane("ct").with_tenant(tenant_a());
    put(h, mine("a")).await;
    put(h, mine("a")).await;
    put(h, new("a").with_lane("ct").with_tenant(tenant_b())).await;
    let (_, r) = claim_in(h, "ct", "w1", LONG).await;
    h.store.item_complete(&r).await.expect("complete");
    h.store.counts_settle().await.expect("settle");
    let d = put(h, mine("d").with_lane("ct2").with_max_attempts(1)).await;
    let (_, r) = claim_in(h, "ct2", "w1", LONG).await;
    h.store
        .item_fail(&r, &fail_params(LONG))
        .await
        .expect("fail");
    h.store.counts_settle().await.expect("settle");
    h.store
        .item_retry(tenant_a(), d.id, Uuid::from_u128(7))
        .await
        .expect("retry");
    let rows = h.store.counts_tenant(tenant_a()).await.expect("counts");
    let total: i64 = rows.iter().map(|r| r.count).sum();
    let done = h
        .store
        .item_list(&ListFilter {
            tenant_id: Some(tenant_a()),
            limit: 100,
            ..ListFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(total, done.len() as i64, "{rows:?}");
    assert_eq!(total, 3);
    assert!(rows.iter().all(|r| r.count > 0));
    let of = |lane: &str, status| {
        rows.iter()
            .filter(|r| r.lane == lane && r.status == status)
            .map(|r| r.count)
            .sum::<i64>()
    };
    assert_eq!(
        of("ct2", Status::Pending),
        1,
        "the retried dead letter is pending"
    );
    assert_eq!(of("ct2", Status::Failed), 0);
    assert_eq!(of("ct", Status::Done) + of("ct", Status::Pending), 2);
    let other: i64 = h
        .store
        .counts_tenant(tenant_b())
        .await
        .expect("b")
        .iter()
        .map(|r| r.count)
        .sum();
    assert_eq!(other, 1);
    assert!(
        h.store
            .counts_tenant(Uuid::from_u128(0xC))
            .await
            .expect("c")
            .is_empty()
    );
}
