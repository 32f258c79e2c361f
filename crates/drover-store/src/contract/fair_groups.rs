//! Contract cases of fair share by group (a lane's option): inside a
//! tenant's share its groups take turns, so a small group is not left
//! behind a big group's backlog; a lane shared by tenant keeps priority
//! then age order inside a tenant; spreading over groups still gains a
//! tenant nothing against others; limits and the handover keep the mode;
//! idle group passes are collected.

use super::*;
use crate::Completion;
use crate::limits::{LimitScope, LimitSource, LimitSpec};

const LANE: &str = "default";

/// Enqueues `n` items of `tenant` (kind `job`) in group `group(i)`.
async fn fill(h: &Harness, tenant: Uuid, n: usize, group: impl Fn(usize) -> String) {
    let items: Vec<NewItem> = (0..n)
        .map(|i| new("job").with_tenant(tenant).with_group(group(i)))
        .collect();
    for chunk in items.chunks(500) {
        let out = h.store.item_insert_many(chunk).await.expect("insert");
        assert!(out.iter().all(|r| *r == InsertResult::Inserted));
    }
}

async fn by_group(h: &Harness, on: bool) {
    let l = h
        .store
        .fair_lane_set(LANE, true, on, Uuid::nil())
        .await
        .expect("lane");
    assert!(l.on && l.by_group == on);
    assert_eq!(
        h.store
            .fair_settings()
            .await
            .expect("settings")
            .by_group(LANE),
        on
    );
}

async fn claim_n(h: &Harness, n: u32) -> Vec<Item> {
    h.store
        .item_claim(&claim_params(LANE, n, LONG))
        .await
        .expect("claim")
}

fn in_group(items: &[Item], g: &str) -> usize {
    items
        .iter()
        .filter(|i| i.group.as_deref() == Some(g))
        .count()
}

/// The start (1-based) at which group `y`'s `n` items had all started,
/// claiming `rounds` claims of 4 through `step`.
async fn y_done_at<F, Fut>(rounds: usize, n: usize, mut step: F) -> Option<usize>
where
    F: FnMut(Vec<Item>) -> Fut,
    Fut: Future<Output = Vec<Item>>,
{
    let (mut started, mut seen, mut held) = (0, 0, Vec::new());
    for _ in 0..rounds {
        let got = step(std::mem::take(&mut held)).await;
        assert_eq!(got.len(), 4, "work-conserving: a full claim: {got:?}");
        started += got.len();
        seen += in_group(&got, "y");
        if seen == n {
            return Some(started);
        }
        held = got;
    }
    None
}

/// In a lane shared by group, one tenant's group X holds 300 items and
/// group Y 10 enqueued after: Y's ten start within the first 24 starts.
pub async fn fair_group_small_group_interleaved(h: &Harness) {
    by_group(h, true).await;
    let a = tenant_a();
    fill(h, a, 300, |_| "x".into()).await;
    fill(h, a, 10, |_| "y".into()).await;
    let at = y_done_at(10, 10, |_| claim_n(h, 4)).await;
    assert!(at.is_some_and(|at| at <= 24), "Y done at {at:?}");
}

/// The same backlog in a lane shared by tenant (the default) starts in
/// priority then age order: X's older items first.
pub async fn fair_group_by_tenant_lane_keeps_claim_order(h: &Harness) {
    by_group(h, false).await;
    let a = tenant_a();
    fill(h, a, 300, |_| "x".into()).await;
    fill(h, a, 10, |_| "y".into()).await;
    for _ in 0..6 {
        let got = claim_n(h, 4).await;
        assert_eq!(in_group(&got, "x"), 4, "priority then age: {got:?}");
    }
}

/// Tenant A spreads its backlog over 100 groups, B keeps one: in a lane
/// shared by group each still gets half the starts.
pub async fn fair_group_spreading_still_gains_nothing(h: &Harness) {
    by_group(h, true).await;
    let (a, b) = (tenant_a(), tenant_b());
    fill(h, a, 200, |i| format!("g{}", i % 100)).await;
    fill(h, b, 200, |_| "one".into()).await;
    let mut na = 0;
    for _ in 0..10 {
        na += claim_n(h, 4)
            .await
            .iter()
            .filter(|i| i.tenant_id == a)
            .count();
    }
    assert!((19..=21).contains(&na), "A (100 groups) got {na} of 40");
}

/// Under a per-group limit of 3 and a kind limit of 4, and on the
/// handover (`item_complete_then_claim`), the lane shared by group keeps
/// Y's ten within the first 24 starts (by tenant, X would take 3 of
/// every 4), and no group ever holds more than three slots.
pub async fn fair_group_under_a_limit_and_on_the_handover(h: &Harness) {
    for (scope, n) in [
        (LimitScope::Kind("job".into()), 4),
        (LimitScope::KindPerGroup("job".into()), 3),
    ] {
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
    by_group(h, true).await;
    let a = tenant_a();
    fill(h, a, 300, |_| "x".into()).await;
    fill(h, a, 10, |_| "y".into()).await;
    let at = y_done_at(8, 10, |held| async move {
        let got = if held.is_empty() {
            claim_n(h, 4).await
        } else {
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
            assert_eq!(out.landed.len(), done.len());
            out.claimed.expect("claim")
        };
        assert!(
            in_group(&got, "x") <= 3 && in_group(&got, "y") <= 3,
            "{got:?}"
        );
        got
    })
    .await;
    assert!(at.is_some_and(|at| at <= 24), "Y done at {at:?}");
    // Every slot is held: nothing more.
    assert!(claim_n(h, 4).await.is_empty(), "the kind limit holds");
}

/// A tenant's items with no group are a bucket of their own: 300 of them
/// enqueued before group Y's 10, Y's ten start within the first 24 starts,
/// on the plain claim and then on the limited one (a kind limit that
/// does not bind), and the ungrouped bucket takes its turns too.
pub async fn fair_group_ungrouped_items_are_one_bucket(h: &Harness) {
    by_group(h, true).await;
    let a = tenant_a();
    let plain: Vec<NewItem> = (0..300).map(|_| new("job").with_tenant(a)).collect();
    for chunk in plain.chunks(500) {
        h.store.item_insert_many(chunk).await.expect("insert");
    }
    fill(h, a, 10, |_| "y".into()).await;
    let (mut started, mut ys, mut none, mut done_at) = (0, 0, 0, None);
    for round in 0..8 {
        if round == 3 {
            // From here the claim is the limited one.
            h.store
                .limit_set(
                    &LimitScope::Kind("job".into()),
                    LimitSource::Operator,
                    LimitSpec::concurrency(1_000),
                    Uuid::nil(),
                )
                .await
                .expect("limit");
        }
        let got = claim_n(h, 4).await;
        assert_eq!(got.len(), 4, "work-conserving: {got:?}");
        started += got.len();
        ys += in_group(&got, "y");
        none += got.iter().filter(|i| i.group.is_none()).count();
        if ys == 10 && done_at.is_none() {
            done_at = Some(started);
        }
    }
    assert!(done_at.is_some_and(|at| at <= 24), "Y done at {done_at:?}");
    assert!(none >= 10, "the ungrouped bucket had its turns: {none}");
    let rows = h.store.fair_group_passes(LANE, a).await.expect("rows");
    assert!(
        rows.iter()
            .any(|r| r.0 == crate::fairness::groups::NO_GROUP),
        "the bucket's pass is stored under '': {rows:?}"
    );
}

/// A group another process enqueued for is shared in: within
/// `FAIR_CACHE_TTL` while the groups this process listed have due work,
/// and at once when they have none (the kept list is read again).
pub async fn fair_group_list_of_another_process(h: &Harness) {
    by_group(h, true).await;
    let a = tenant_a();
    fill(h, a, 6, |_| "x".into()).await;
    assert_eq!(claim_n(h, 2).await.len(), 2, "x listed and started");
    let peer = h.peer().await;
    let put = |g: &'static str, n: usize| {
        let peer = peer.clone();
        async move {
            let items: Vec<NewItem> = (0..n)
                .map(|_| new("job").with_tenant(a).with_group(g))
                .collect();
            peer.item_insert_many(&items).await.expect("insert");
        }
    };
    put("y", 10).await;
    tokio::time::sleep(crate::fairness::FAIR_CACHE_TTL + Duration::from_millis(100)).await;
    let got = claim_n(h, 4).await;
    assert!(
        in_group(&got, "y") >= 2,
        "y shared in after the TTL: {got:?}"
    );
    // Drain everything listed; then z comes from the other process: the
    // kept list names nothing due, so the claim reads it again at once.
    while !claim_n(h, 10).await.is_empty() {}
    put("z", 3).await;
    let got = claim_n(h, 4).await;
    assert_eq!(in_group(&got, "z"), 3, "z claimed at once: {got:?}");
}

/// Once every group's work has started, the purge leaves no group pass
/// behind, nor a tenant's group virtual time.
pub async fn fair_group_idle_passes_collected(h: &Harness) {
    by_group(h, true).await;
    let a = tenant_a();
    fill(h, a, 6, |i| format!("g{}", i % 3)).await;
    fill(h, tenant_b(), 2, |_| "b".into()).await;
    while !claim_n(h, 2).await.is_empty() {}
    let before = h.store.fair_group_passes(LANE, a).await.expect("rows");
    assert_eq!(
        before.len(),
        4,
        "three groups and the virtual time: {before:?}"
    );
    let mut total = 0;
    loop {
        let n = h.store.fair_passes_purge(2).await.expect("purge");
        if n == 0 {
            break;
        }
        total += n;
    }
    // 2 tenants' rows, 4 groups' rows and 2 group virtual times at most;
    // at least A's three groups' rows went.
    assert!(total >= 3, "purged {total}");
    assert_eq!(h.store.fair_passes_purge(100).await.expect("purge"), 0);
    for t in [a, tenant_b()] {
        let rows = h.store.fair_group_passes(LANE, t).await.expect("rows");
        assert!(rows.is_empty(), "no group pass rows left: {rows:?}");
    }
}
