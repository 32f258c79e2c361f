//! Contract cases of fair share on the claims a limit or a rate applies
//! to: the limited claim and the completion that hands its slots over
//! (`item_complete_then_claim`) share their starts between tenants by the
//! same stride rule as the plain claim, while the limits and rates still
//! hold; a tenant whose next items a full scope refuses keeps its turn
//! and the claim stays work-conserving.

use super::*;
use crate::Completion;
use crate::limits::{LimitScope, LimitSource, LimitSpec};
use crate::rates::Rate;

const LANE: &str = "default";

/// Enqueues `n` items of `tenant` (kind `job`), the i-th in group
/// `{prefix}{i % groups}`.
async fn fill(h: &Harness, tenant: Uuid, n: usize, prefix: &str, groups: usize) {
    let items: Vec<NewItem> = (0..n)
        .map(|i| {
            new("job")
                .with_tenant(tenant)
                .with_group(format!("{prefix}{}", i % groups))
        })
        .collect();
    for chunk in items.chunks(500) {
        let out = h.store.item_insert_many(chunk).await.expect("insert");
        assert!(out.iter().all(|r| *r == InsertResult::Inserted));
    }
}

async fn limit(h: &Harness, scope: LimitScope, n: u32) {
    h.store
        .limit_set(
            &scope,
            LimitSource::Operator,
            LimitSpec::concurrency(n),
            Uuid::nil(),
        )
        .await
        .expect("limit");
}

async fn claim_n(h: &Harness, n: u32) -> Vec<Item> {
    h.store
        .item_claim(&claim_params(LANE, n, LONG))
        .await
        .expect("claim")
}

async fn complete_all(h: &Harness, items: &[Item]) {
    for it in items {
        let c = ClaimRef::of(it).expect("token");
        h.store.item_complete(&c).await.expect("complete");
    }
}

/// Starts 40 items in claims of 4 (each completed before the next
/// claim, by `step`), with A's 300 items enqueued before B's 10: B's ten
/// must all start within the first 24 starts, every claim must be full
/// (work-conserving), and no claim may exceed `cap` in flight.
async fn b_interleaved<F, Fut>(mut step: F)
where
    F: FnMut(Vec<Item>) -> Fut,
    Fut: Future<Output = Vec<Item>>,
{
    let b = tenant_b();
    let mut started = 0;
    let mut b_seen = 0;
    let mut b_done_at = None;
    let mut held = Vec::new();
    while started < 40 {
        let got = step(std::mem::take(&mut held)).await;
        assert_eq!(got.len(), 4, "work-conserving: a full claim");
        started += got.len();
        b_seen += got.iter().filter(|i| i.tenant_id == b).count();
        if b_seen == 10 && b_done_at.is_none() {
            b_done_at = Some(started);
        }
        held = got;
    }
    let at = b_done_at.expect("B's ten items all started");
    assert!(
        at <= 24,
        "B's last item started at start {at}, not interleaved"
    );
}

/// Under a kind limit of 4 and a per-group limit of 1 (neither refusing
/// a claim of 4 whose predecessor completed), the limited claim shares
/// its starts between tenants: B's ten start interleaved with A's
/// backlog, not after it.
pub async fn fair_share_under_a_limit(h: &Harness) {
    limit(h, LimitScope::Kind("job".into()), 4).await;
    limit(h, LimitScope::KindPerGroup("job".into()), 1).await;
    fill(h, tenant_a(), 300, "a", 100).await;
    fill(h, tenant_b(), 10, "b", 10).await;
    b_interleaved(|held| async move {
        complete_all(h, &held).await;
        let got = claim_n(h, 4).await;
        let groups: std::collections::HashSet<_> = got.iter().map(|i| &i.group).collect();
        assert_eq!(groups.len(), got.len(), "one per group: {got:?}");
        got
    })
    .await;
    // The kind limit still holds: 4 in flight, nothing more.
    assert!(claim_n(h, 4).await.len() <= 4);
}

/// Under a rate that does not bind, the rated claim shares its starts
/// between tenants as well.
pub async fn fair_share_under_a_rate(h: &Harness) {
    h.store
        .rate_set(
            &LimitScope::Kind("job".into()),
            LimitSource::Operator,
            Rate::per(100_000, Duration::from_secs(1)).with_burst(1_000),
            Uuid::nil(),
        )
        .await
        .expect("rate");
    fill(h, tenant_a(), 300, "a", 100).await;
    fill(h, tenant_b(), 10, "b", 10).await;
    b_interleaved(|held| async move {
        complete_all(h, &held).await;
        claim_n(h, 4).await
    })
    .await;
}

/// The completion that hands its slots over claims by fair share too.
pub async fn fair_share_on_the_handover(h: &Harness) {
    limit(h, LimitScope::Kind("job".into()), 4).await;
    fill(h, tenant_a(), 300, "a", 100).await;
    fill(h, tenant_b(), 10, "b", 10).await;
    b_interleaved(|held| async move {
        if held.is_empty() {
            return claim_n(h, 4).await;
        }
        let done: Vec<Completion> = held
            .iter()
            .map(|it| Completion {
                claim: ClaimRef::of(it).expect("token"),
                result: None,
            })
            .collect();
        let out = h
            .store
            .item_complete_then_claim(&done, &claim_params(LANE, 4, LONG))
            .await
            .expect("handover");
        assert_eq!(out.landed.len(), done.len(), "every completion landed");
        out.claimed.expect("claim")
    })
    .await;
}

/// A tenant whose every due item a full scope refuses keeps its turn and
/// takes no slot: A's backlog is one group under a per-group limit of 1,
/// so each claim of 4 starts at most one of A's (while its slot is free)
/// and fills the rest from B, whatever the passes say.
pub async fn fair_refused_tenant_leaves_the_claim_to_others(h: &Harness) {
    limit(h, LimitScope::KindPerGroup("job".into()), 1).await;
    fill(h, tenant_a(), 50, "a", 1).await;
    fill(h, tenant_b(), 50, "b", 50).await;
    let first = claim_n(h, 4).await;
    assert_eq!(first.len(), 4, "work-conserving: {first:?}");
    let of_a = |got: &[Item]| got.iter().filter(|i| i.tenant_id == tenant_a()).count();
    assert_eq!(of_a(&first), 1, "A's group holds one slot: {first:?}");
    // A's slot is held: the next claim is all B's.
    let second = claim_n(h, 4).await;
    assert_eq!(second.len(), 4);
    assert_eq!(of_a(&second), 0, "A's group is full: {second:?}");
    complete_all(h, &first).await;
    let third = claim_n(h, 4).await;
    assert_eq!(third.len(), 4);
    assert_eq!(of_a(&third), 1, "A's group has its slot back: {third:?}");
}
