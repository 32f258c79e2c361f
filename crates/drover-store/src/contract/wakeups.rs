//! Contract cases for wake-ups beyond the insert: every transition that
//! makes work available now wakes the lane's workers (a release, a
//! zero-delay defer or failure, an operator retry, a stale requeue whose
//! retry is due at once).

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::Wake;

/// Waits (bounded) for a wake-up naming `lane`, skipping others.
async fn woken(rx: &mut tokio::sync::broadcast::Receiver<Wake>, lane: &str, after: &str) {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match rx.recv().await {
                Ok(w) if w.lane == lane => return,
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(e) => panic!("wake-up channel: {e}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no wake-up for lane {lane} within 5 s after {after}"));
}

/// Claims the one pending item of `lane`.
async fn claim_in(h: &Harness, lane: &str) -> ClaimRef {
    let got = h
        .store
        .item_claim(&claim_params(lane, 1, LONG))
        .await
        .expect("claim");
    assert_eq!(got.len(), 1, "one claimable item in {lane}");
    ClaimRef::of(&got[0]).expect("claimed")
}

/// Release, zero-delay defer, zero-delay failure, operator retry and a
/// stale requeue due at once each wake the item's lane.
pub async fn wakeup_after_every_transition_that_makes_work_available(h: &Harness) {
    let mut rx = h.store.wakeups().await.expect("subscribe");

    put(h, new("a").with_lane("w-release")).await;
    let c = claim_in(h, "w-release").await;
    h.store.item_release(&c, None).await.expect("release");
    woken(&mut rx, "w-release", "a release").await;

    put(h, new("a").with_lane("w-defer")).await;
    let c = claim_in(h, "w-defer").await;
    h.store.item_defer(&c, Duration::ZERO).await.expect("defer");
    woken(&mut rx, "w-defer", "a zero-delay defer").await;

    put(h, new("a").with_lane("w-fail")).await;
    let c = claim_in(h, "w-fail").await;
    h.store
        .item_fail(&c, &fail_params(Duration::ZERO))
        .await
        .expect("fail");
    woken(&mut rx, "w-fail", "a zero-delay failure").await;

    let item = put(h, new("a").with_lane("w-retry")).await;
    let c = claim_in(h, "w-retry").await;
    h.store.item_complete(&c).await.expect("complete");
    h.store
        .item_retry(item.tenant_id, item.id, Uuid::nil())
        .await
        .expect("retry");
    woken(&mut rx, "w-retry", "an operator retry").await;

    put(h, new("a").with_lane("w-stale")).await;
    let got = h
        .store
        .item_claim(&claim_params("w-stale", 1, SHORT))
        .await
        .expect("claim");
    assert_eq!(got.len(), 1);
    h.pass(PAST_SHORT).await;
    let policy = RetryPolicy {
        base: Duration::ZERO,
        ..RetryPolicy::default()
    };
    let r = h
        .store
        .item_requeue_stale(Uuid::nil(), 10, &policy)
        .await
        .expect("requeue");
    assert_eq!(r.requeued, 1);
    woken(&mut rx, "w-stale", "a stale requeue due at once").await;
}
