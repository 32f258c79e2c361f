//! Contract cases for the sweep lease: one holder at a time, a stalled
//! holder's lease passes to another, and a stale holder's renewal and
//! release change nothing.

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;

/// One holder at a time, not re-entrant; a release frees it at once.
pub async fn sweep_lease_is_exclusive(h: &Harness) {
    let a = h
        .store
        .sweep_lease_take("a", LONG)
        .await
        .expect("take")
        .expect("a free lease is taken");
    assert_eq!(
        h.store.sweep_lease_take("b", LONG).await.expect("take"),
        None
    );
    assert_eq!(
        h.store.sweep_lease_take("a", LONG).await.expect("take"),
        None,
        "not re-entrant, even for its holder"
    );
    h.store
        .sweep_lease_release(a, false)
        .await
        .expect("release");
    let b = h
        .store
        .sweep_lease_take("b", LONG)
        .await
        .expect("take")
        .expect("a released lease is taken at once");
    assert_ne!(a, b, "every take gets a fresh token");
    h.store
        .sweep_lease_release(b, false)
        .await
        .expect("release");
}

/// A holder that stops renewing loses the lease when it passes; another
/// takes it, and the stalled holder's renewal is refused and its release
/// changes nothing.
pub async fn sweep_lease_passes_from_a_stalled_holder(h: &Harness) {
    let stalled = h
        .store
        .sweep_lease_take("stalled", SHORT)
        .await
        .expect("take")
        .expect("taken");
    h.store
        .sweep_lease_renew(stalled, SHORT)
        .await
        .expect("the holder renews while its lease runs");
    assert_eq!(
        h.store.sweep_lease_take("next", LONG).await.expect("take"),
        None
    );
    h.pass(PAST_SHORT).await;
    assert_kind(
        h.store.sweep_lease_renew(stalled, LONG).await,
        ErrorKind::Conflict,
        "renewal of a passed lease",
    );
    let next = h
        .store
        .sweep_lease_take("next", LONG)
        .await
        .expect("take")
        .expect("a passed lease is taken");
    assert_kind(
        h.store.sweep_lease_renew(stalled, LONG).await,
        ErrorKind::Conflict,
        "renewal by the stale holder",
    );
    assert!(
        !h.store
            .sweep_lease_release(stalled, true)
            .await
            .expect("a stale release is a no-op, not an error"),
        "the stale holder is told its lease was gone"
    );
    assert_eq!(
        h.store.sweep_lease_take("third", LONG).await.expect("take"),
        None,
        "the stale holder's release did not free the new holder's lease"
    );
    assert_eq!(
        h.store.sweep_last_pass().await.expect("last pass"),
        None,
        "the stale holder's release recorded no pass"
    );
    h.store.sweep_lease_renew(next, LONG).await.expect("renew");
    h.store
        .sweep_lease_release(next, false)
        .await
        .expect("release");
}

/// Only a completed pass's release records the last pass.
pub async fn sweep_last_pass_is_recorded_by_a_completed_release(h: &Harness) {
    assert_eq!(h.store.sweep_last_pass().await.expect("read"), None);
    let t = h
        .store
        .sweep_lease_take("a", LONG)
        .await
        .expect("take")
        .expect("taken");
    h.store
        .sweep_lease_release(t, false)
        .await
        .expect("release");
    assert_eq!(
        h.store.sweep_last_pass().await.expect("read"),
        None,
        "an incomplete pass records nothing"
    );
    let before = h.store.now();
    let t = h
        .store
        .sweep_lease_take("a", LONG)
        .await
        .expect("take")
        .expect("taken");
    assert!(h.store.sweep_lease_release(t, true).await.expect("release"));
    let at = h
        .store
        .sweep_last_pass()
        .await
        .expect("read")
        .expect("a completed pass is recorded");
    assert!(
        approx(at, before, 5_000),
        "recorded at the release ({at}), not {before}"
    );
    assert_kind(
        h.store.sweep_lease_renew(t, LONG).await,
        ErrorKind::Conflict,
        "renewal after release",
    );
}
