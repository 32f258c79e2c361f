//! Contract cases of parking ([`crate::parking`]): a full group's deep
//! backlog, parked by the sweep's pass, neither holds back the other
//! groups' claims nor loses, doubles or reorders its own items as it
//! drains. The memory store parks nothing (its claim walks no index); the
//! same cases hold there, which is the point: parking is invisible but for
//! the claim's cost.

use super::*;
use crate::limits::{LimitScope, LimitSource, LimitSpec, OnDeadLetter};
use crate::parking::{deep, window};
use crate::{Backend, Completion};

const LANE: &str = "default";
const BIG: &str = "big";
/// Deeper than [`deep`] of a limit of one, so the pass parks.
const BIG_ITEMS: usize = 1_100;

/// A per-group limit of one on kind `job` (ordered or not), `BIG_ITEMS`
/// items of group `big` older than five groups' two items each; one item
/// of `big` claimed and held so its slot is full.
async fn setup(h: &Harness, ordered: bool) -> Item {
    let spec = if ordered {
        LimitSpec::ordered(OnDeadLetter::Continue)
    } else {
        LimitSpec::concurrency(1)
    };
    h.store
        .limit_set(
            &LimitScope::KindPerGroup("job".into()),
            LimitSource::Operator,
            spec,
            Uuid::nil(),
        )
        .await
        .expect("limit");
    let now = h.store.db_now().await.expect("now");
    let old = now - chrono::Duration::days(1);
    let big: Vec<NewItem> = (0..BIG_ITEMS)
        .map(|i| {
            NewItem::new("job", json!({ "n": i }))
                .with_group(BIG)
                .with_available_at(old + chrono::Duration::milliseconds(i as i64))
        })
        .collect();
    for chunk in big.chunks(500) {
        h.store.item_insert_many(chunk).await.expect("insert");
    }
    let others: Vec<NewItem> = (0..10)
        .map(|i| {
            new("job")
                .with_group(format!("g{}", i % 5))
                .with_available_at(now - chrono::Duration::hours(1))
        })
        .collect();
    h.store.item_insert_many(&others).await.expect("insert");
    let held = h
        .store
        .item_claim(&claim_params(LANE, 1, LONG))
        .await
        .expect("claim");
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].group.as_deref(), Some(BIG), "the oldest is big's");
    held.into_iter().next().expect("one")
}

fn n_of(it: &Item) -> i64 {
    it.payload["n"].as_i64().unwrap_or(-1)
}

/// Parks, checks the other groups are claimable at once, then drains the
/// lane (a pass whenever a claim comes back empty) and checks every item
/// of `big` ran once, in its order, and nothing is left parked.
async fn parked_drain(h: &Harness, ordered: bool) {
    let held = setup(h, ordered).await;
    let pass = h.store.park_pass().await.expect("pass");
    let expect_parked = if h.store.backend() == Backend::Memory {
        0
    } else {
        (BIG_ITEMS - 1 - window(1) as usize) as u64
    };
    assert!(BIG_ITEMS - 1 > deep(1) as usize);
    assert_eq!(pass.parked, expect_parked, "{pass:?}");
    assert_eq!(h.store.parked_count().await.expect("count"), expect_parked);
    // The five other groups are claimable now, one item each.
    let got = h
        .store
        .item_claim(&claim_params(LANE, 10, LONG))
        .await
        .expect("claim");
    let groups: std::collections::BTreeSet<_> =
        got.iter().filter_map(|i| i.group.clone()).collect();
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(!groups.contains(BIG));
    let mut big_order = vec![n_of(&held)];
    let mut open = got;
    open.push(held);
    let mut done = 0usize;
    loop {
        // Each round's completions hand their slots over (the handover
        // gives back too), then a pass and a plain claim when it took none.
        let finished: Vec<Completion> = open
            .drain(..)
            .map(|it| Completion {
                claim: ClaimRef::of(&it).expect("token"),
                result: None,
            })
            .collect();
        let mut next = Vec::new();
        if !finished.is_empty() {
            let handed = h
                .store
                .item_complete_then_claim(&finished, &claim_params(LANE, 10, LONG))
                .await
                .expect("handover");
            assert_eq!(handed.landed.len(), finished.len());
            done += finished.len();
            next = handed.claimed.expect("claimed");
        }
        if next.is_empty() {
            h.store.park_pass().await.expect("pass");
            next = h
                .store
                .item_claim(&claim_params(LANE, 10, LONG))
                .await
                .expect("claim");
            if next.is_empty() {
                break;
            }
        }
        for it in &next {
            assert!(
                !crate::parking::is_parked(it.available_at),
                "a claimed item shows its due time"
            );
            if it.group.as_deref() == Some(BIG) {
                big_order.push(n_of(it));
            }
        }
        open = next;
    }
    assert_eq!(done, BIG_ITEMS + 10, "every item ran once");
    let expect: Vec<i64> = (0..BIG_ITEMS as i64).collect();
    assert_eq!(big_order, expect, "big's items in their order");
    assert_eq!(h.store.parked_count().await.expect("count"), 0);
}

/// A full group's deep backlog is parked by the pass; the other groups
/// are claimable at once; the backlog then drains in claim order, each
/// item once, and nothing stays parked.
pub async fn parked_backlog_leaves_other_groups_claimable(h: &Harness) {
    parked_drain(h, false).await;
}

/// The same for an ordered group: its items run in enqueue order through
/// parking and giving back.
pub async fn parked_ordered_group_drains_in_enqueue_order(h: &Harness) {
    parked_drain(h, true).await;
}

/// Clearing the per-group limit gives every parked item back at the next
/// pass.
pub async fn parked_items_given_back_when_the_limit_is_cleared(h: &Harness) {
    let _held = setup(h, false).await;
    h.store.park_pass().await.expect("pass");
    h.store
        .limit_clear(
            &LimitScope::KindPerGroup("job".into()),
            LimitSource::Operator,
        )
        .await
        .expect("clear");
    // The store that cleared the limit forgets its cached limits, so its
    // next pass reads the change.
    h.store.park_pass().await.expect("pass");
    assert_eq!(h.store.parked_count().await.expect("count"), 0);
    let all = h
        .store
        .item_claim(&claim_params(LANE, 2_000, LONG))
        .await
        .expect("claim");
    assert_eq!(all.len(), BIG_ITEMS - 1 + 10, "everything claimable");
}
