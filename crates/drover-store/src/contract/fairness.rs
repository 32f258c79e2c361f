//! Contract cases of fair share between tenants inside a lane: a small
//! tenant's items start interleaved with a big backlog, not after it;
//! weights split the starts; a lone tenant takes the whole claim;
//! priorities order a tenant's own items; spreading a backlog over many
//! groups gains nothing; an idle tenant banks no credit; a lane with fair
//! share off claims in priority then age order; limits still hold; the
//! shares count waiting items up to the cap.

use super::*;
use crate::limits::{LimitScope, LimitSource, LimitSpec};

const LANE: &str = "default";

/// Enqueues `n` items of `tenant` (kind `job`), each shaped by `f(i)`.
async fn fill(h: &Harness, tenant: Uuid, n: usize, f: impl Fn(usize, NewItem) -> NewItem) {
    let items: Vec<NewItem> = (0..n)
        .map(|i| f(i, new("job").with_tenant(tenant)))
        .collect();
    for chunk in items.chunks(500) {
        let out = h.store.item_insert_many(chunk).await.expect("insert");
        assert!(out.iter().all(|r| *r == InsertResult::Inserted));
    }
}

async fn claim_n(h: &Harness, n: u32) -> Vec<Item> {
    h.store
        .item_claim(&claim_params(LANE, n, LONG))
        .await
        .expect("claim")
}

fn of(items: &[Item], tenant: Uuid) -> usize {
    items.iter().filter(|i| i.tenant_id == tenant).count()
}

/// Tenant A enqueues 300 items, then tenant B 10: B's ten start within
/// the first 24 starts (claims of 4 alternate the two), not after A's
/// backlog.
pub async fn fair_small_tenant_interleaved_with_a_backlog(h: &Harness) {
    let (a, b) = (tenant_a(), tenant_b());
    fill(h, a, 300, |_, i| i).await;
    fill(h, b, 10, |_, i| i).await;
    let mut started = 0;
    let mut b_done_at = None;
    let mut b_seen = 0;
    while started < 40 {
        let got = claim_n(h, 4).await;
        assert_eq!(got.len(), 4, "work-conserving: a full claim");
        started += got.len();
        b_seen += of(&got, b);
        if b_seen == 10 && b_done_at.is_none() {
            b_done_at = Some(started);
        }
    }
    let at = b_done_at.expect("B's ten items all started");
    assert!(
        at <= 24,
        "B's last item started at start {at}, not interleaved"
    );
}

/// Weights 3:1: over 40 starts in claims of 4, A gets 30 (±2).
pub async fn fair_weights_split_the_starts(h: &Harness) {
    let (a, b) = (tenant_a(), tenant_b());
    h.store
        .fair_weight_set(a, 3, Uuid::nil())
        .await
        .expect("weight");
    fill(h, a, 100, |_, i| i).await;
    fill(h, b, 100, |_, i| i).await;
    let mut na = 0;
    for _ in 0..10 {
        na += of(&claim_n(h, 4).await, a);
    }
    assert!((28..=32).contains(&na), "A got {na} of 40 at 3:1");
    let w = h.store.fair_settings().await.expect("settings");
    assert_eq!(w.weight(a), 3);
    assert!(h.store.fair_weight_clear(a).await.expect("clear"));
    assert_eq!(
        h.store.fair_settings().await.expect("settings").weight(a),
        1
    );
}

/// A lone tenant takes every start of a claim.
pub async fn fair_lone_tenant_takes_all(h: &Harness) {
    fill(h, tenant_a(), 30, |_, i| i).await;
    assert_eq!(claim_n(h, 10).await.len(), 10);
    assert_eq!(claim_n(h, 25).await.len(), 20);
}

/// With B competing, A's own items still start in priority order.
pub async fn fair_priorities_order_items_within_a_tenant(h: &Harness) {
    let (a, b) = (tenant_a(), tenant_b());
    // A's priorities run 9 down to 0 in enqueue order; lower starts first.
    fill(h, a, 10, |i, it| it.with_priority(9 - i as i16)).await;
    fill(h, b, 10, |_, i| i).await;
    let mut a_order = Vec::new();
    for _ in 0..20 {
        for it in claim_n(h, 1).await {
            if it.tenant_id == a {
                a_order.push(it.priority);
            }
        }
    }
    assert_eq!(a_order, (0..10).collect::<Vec<i16>>());
}

/// A tenant spreading its backlog over 100 groups gets no more than one
/// with one group: 20 ± 1 of 40 starts each.
pub async fn fair_spreading_over_groups_gains_nothing(h: &Harness) {
    let (a, b) = (tenant_a(), tenant_b());
    fill(h, a, 200, |i, it| it.with_group(format!("g{}", i % 100))).await;
    fill(h, b, 200, |_, it| it.with_group("one")).await;
    let mut na = 0;
    for _ in 0..10 {
        na += of(&claim_n(h, 4).await, a);
    }
    assert!((19..=21).contains(&na), "A (100 groups) got {na} of 40");
}

/// A runs alone for 40 starts; B then arrives and gets half the next
/// starts, not all of them (no credit for its idle time), and A none of
/// them ahead either.
pub async fn fair_idle_tenant_banks_no_credit(h: &Harness) {
    let (a, b) = (tenant_a(), tenant_b());
    fill(h, a, 100, |_, i| i).await;
    for _ in 0..10 {
        assert_eq!(claim_n(h, 4).await.len(), 4);
    }
    fill(h, b, 50, |_, i| i).await;
    let mut nb = 0;
    for _ in 0..5 {
        nb += of(&claim_n(h, 4).await, b);
    }
    assert!((9..=11).contains(&nb), "B got {nb} of 20 after arriving");
    let shares = h.store.fair_shares().await.expect("shares");
    let sb = shares
        .iter()
        .find(|s| s.tenant == b && s.lane == LANE)
        .expect("B's share");
    assert_eq!(sb.waiting, 50 - nb as u64);
    assert_eq!(sb.started, nb as u64);
}

/// A lane with fair share off claims in priority then age order: A's
/// older backlog first.
pub async fn fair_off_lane_claims_in_priority_then_age_order(h: &Harness) {
    let (a, b) = (tenant_a(), tenant_b());
    let off = h
        .store
        .fair_lane_set(LANE, false, false, Uuid::nil())
        .await
        .expect("off");
    assert!(!off.on);
    fill(h, a, 10, |_, i| i).await;
    h.pass(Duration::from_millis(5)).await;
    fill(h, b, 5, |_, i| i).await;
    let got = claim_n(h, 10).await;
    assert_eq!(of(&got, a), 10, "priority then age order");
    assert!(!h.store.fair_settings().await.expect("settings").on(LANE));
    h.store
        .fair_lane_set(LANE, true, false, Uuid::nil())
        .await
        .expect("on");
    assert!(h.store.fair_settings().await.expect("settings").on(LANE));
}

/// A concurrency limit on the kind still holds with fair share on: 3 in
/// flight between both tenants.
pub async fn fair_limits_still_hold(h: &Harness) {
    let (a, b) = (tenant_a(), tenant_b());
    h.store
        .limit_set(
            &LimitScope::Kind("job".into()),
            LimitSource::Operator,
            LimitSpec::concurrency(3),
            Uuid::nil(),
        )
        .await
        .expect("limit");
    fill(h, a, 10, |_, i| i).await;
    fill(h, b, 10, |_, i| i).await;
    assert_eq!(claim_n(h, 10).await.len(), 3);
    assert!(claim_n(h, 10).await.is_empty(), "the limit holds");
}

/// Idle passes are collected: after everything started, a purge leaves
/// the lane's passes at or below its virtual time with nothing to keep.
pub async fn fair_idle_passes_collected(h: &Harness) {
    let (a, b) = (tenant_a(), tenant_b());
    fill(h, a, 4, |_, i| i).await;
    fill(h, b, 4, |_, i| i).await;
    while !claim_n(h, 2).await.is_empty() {}
    let before = h.store.fair_shares().await.expect("shares");
    assert!(before.iter().any(|s| s.started > 0), "{before:?}");
    // Neither tenant has pending work left: both passes are idle.
    let n = h.store.fair_passes_purge(1_000).await.expect("purge");
    assert!(n >= 1, "an idle pass was collected");
    let after = h.store.fair_shares().await.expect("shares");
    assert!(after.len() < before.len(), "{after:?}");
}

/// The shares count a tenant's due items per lane up to the cap: A, with
/// more than the cap due, reads as the cap; B reads its three; C, whose
/// items are all scheduled later, has no share at all; a second lane's
/// pair is its own.
pub async fn fair_waiting_counted_up_to_the_cap(h: &Harness) {
    let (a, b, c) = (tenant_a(), tenant_b(), Uuid::from_u128(0xC3));
    let cap = usize::try_from(crate::fairness::FAIR_WAITING_CAP).expect("cap");
    fill(h, a, cap + 5, |_, i| i).await;
    fill(h, b, 3, |_, i| i).await;
    fill(h, b, 2, |_, i| i.with_lane("other")).await;
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    fill(h, c, 4, |_, i| i.with_available_at(later)).await;
    let shares = h.store.fair_shares().await.expect("shares");
    let waiting = |t: Uuid, lane: &str| {
        shares
            .iter()
            .find(|s| s.tenant == t && s.lane == lane)
            .map(|s| s.waiting)
    };
    assert_eq!(waiting(a, LANE), Some(crate::fairness::FAIR_WAITING_CAP));
    assert_eq!(waiting(b, LANE), Some(3));
    assert_eq!(waiting(b, "other"), Some(2));
    assert_eq!(waiting(c, LANE), None, "nothing of C is due");
    assert_eq!(shares.len(), 3, "{shares:?}");
}
