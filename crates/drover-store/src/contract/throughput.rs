//! Contract cases of [`ThroughputStore`](crate::throughput::ThroughputStore):
//! the minutes rollup after a settlement, and the claimed rows.

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::throughput::{ThroughputBy, ThroughputQuery};

/// Done and failed items reach the rollup of their minute, lane and kind
/// once settled (memory reads its items at once), with their latency; a
/// tenant filter confines the read; the claimed items are listed with
/// their worker.
pub async fn throughput_rollup_after_settle_and_running_rows(h: &Harness) {
    for _ in 0..3 {
        put(h, new("mail").with_lane("default")).await;
    }
    put(h, new("sms").with_lane("default").with_tenant(tenant_b())).await;
    let claims = h
        .store
        .item_claim(&claim_params("default", 4, LONG))
        .await
        .expect("claim");
    assert_eq!(claims.len(), 4);
    let running = h.store.items_running().await.expect("running");
    assert_eq!(running.len(), 4, "every claimed item is running");
    assert!(running.iter().all(|r| r.worker == "w1"));
    let mut mail = claims.iter().filter(|i| i.kind == "mail");
    for i in mail.by_ref().take(2) {
        let r = ClaimRef::of(i).expect("token");
        h.store.item_complete(&r).await.expect("complete");
    }
    let last_mail = mail.next().expect("a third mail");
    let r = ClaimRef::of(last_mail).expect("token");
    let fatal = FailParams {
        error: "boom".into(),
        retry_delay: Duration::ZERO,
        fatal: true,
    };
    h.store.item_fail(&r, &fatal).await.expect("fail");
    let running = h.store.items_running().await.expect("running");
    assert_eq!(running.len(), 1, "only the sms item runs still");
    assert_eq!(running[0].kind, "sms");
    let since = h.store.db_now().await.expect("now") - chrono::TimeDelta::hours(1);
    let q = |by, tenant_id| ThroughputQuery {
        since,
        tenant_id,
        by,
    };
    // The settlement stops a second short of its clock and, on
    // PostgreSQL, of the oldest transaction still open (other cases run
    // beside this one): settle until the three outcomes are in.
    let mut minutes = Vec::new();
    for _ in 0..150 {
        h.pass(Duration::from_millis(200)).await;
        h.store.counts_settle().await.expect("settle");
        minutes = h
            .store
            .throughput(&q(ThroughputBy::Minute, None))
            .await
            .expect("minutes");
        if minutes.iter().map(|r| r.done + r.failed).sum::<i64>() >= 3 {
            break;
        }
    }
    assert_eq!(minutes.iter().map(|r| r.done).sum::<i64>(), 2);
    assert_eq!(minutes.iter().map(|r| r.failed).sum::<i64>(), 1);
    assert!(
        minutes
            .iter()
            .all(|r| r.lane.is_empty() && r.kind.is_empty())
    );
    let groups = h
        .store
        .throughput(&q(ThroughputBy::LaneKind, None))
        .await
        .expect("groups");
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(
        (groups[0].lane.as_str(), groups[0].kind.as_str()),
        ("default", "mail")
    );
    assert_eq!((groups[0].done, groups[0].failed), (2, 1));
    assert!(groups[0].latency_ms_max >= groups[0].latency_ms_mean());
    let other = h
        .store
        .throughput(&q(ThroughputBy::LaneKind, Some(tenant_b())))
        .await
        .expect("tenant b");
    assert!(other.is_empty(), "tenant b finished nothing: {other:?}");
    // A second settlement adds nothing twice.
    h.pass(Duration::from_millis(1100)).await;
    h.store.counts_settle().await.expect("settle again");
    let again = h
        .store
        .throughput(&q(ThroughputBy::LaneKind, None))
        .await
        .expect("groups");
    assert_eq!((again[0].done, again[0].failed), (2, 1));
}

/// The queue wait rollup keeps, per minute and lane, the largest oldest
/// waiting age the minute's passes recorded; a record deletes the minutes
/// older than [`WAIT_KEEP`](crate::throughput::WAIT_KEEP) before its own;
/// a read starts at its `since`.
pub async fn queue_wait_minutes_keep_the_largest_and_purge_old(h: &Harness) {
    let now = h.store.db_now().await.expect("now");
    let old = now - chrono::TimeDelta::hours(26);
    let purged = h
        .store
        .wait_record(old, &[("default".into(), 9.0)])
        .await
        .expect("record old");
    assert_eq!(purged, 0, "nothing older than the old minute");
    let all = h
        .store
        .wait_history(old - chrono::TimeDelta::minutes(1))
        .await
        .expect("history");
    assert_eq!(all.len(), 1, "the old minute is kept until a later record");
    assert_eq!(all[0].oldest_ms, 9000);
    let purged = h
        .store
        .wait_record(now, &[("default".into(), 1.5), ("mail".into(), 0.2)])
        .await
        .expect("record");
    assert_eq!(purged, 1, "the minute 26 hours back is past the keep");
    let purged = h
        .store
        .wait_record(now, &[("default".into(), 0.5), ("mail".into(), 3.0)])
        .await
        .expect("record again");
    assert_eq!(purged, 0, "the minute of now is kept");
    let rows = h
        .store
        .wait_history(old - chrono::TimeDelta::minutes(1))
        .await
        .expect("history");
    let got: Vec<(&str, i64)> = rows
        .iter()
        .map(|r| (r.lane.as_str(), r.oldest_ms))
        .collect();
    assert_eq!(got, vec![("default", 1500), ("mail", 3000)]);
    let minute = crate::throughput::minute_of(now);
    assert!(rows.iter().all(|r| r.minute == minute), "{rows:?}");
    let later = h
        .store
        .wait_history(minute + chrono::TimeDelta::minutes(1))
        .await
        .expect("history");
    assert!(later.is_empty(), "nothing recorded after this minute");
    h.store
        .wait_record(now, &[])
        .await
        .expect("a pass with nothing waiting writes nothing");
    assert_eq!(
        h.store.wait_history(minute).await.expect("history").len(),
        2
    );
}
