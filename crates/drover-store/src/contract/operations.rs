//! Contract cases for the system's and the operator's operations: the
//! sweep's stale requeue, purge, gauges and counts, the operator's cancel
//! and retry, listing, the workers table, and wake-ups.

// Test code shipped for backends to run: a failed expectation is the report.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use super::*;

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
            use crate::Clock;
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

/// Counts of one lane: the same rows as the lane's share of `counts`,
/// every status, and nothing of other lanes.
pub async fn counts_of_one_lane(h: &Harness) {
    put(h, new("a")).await;
    put(h, new("a")).await;
    put(h, new("b")).await;
    put(h, new("a").with_lane("l2")).await;
    let (_, r) = claim_one(h, LONG).await;
    h.store.item_complete(&r).await.expect("complete");
    claim_one(h, LONG).await;
    let rows = h.store.counts_lane("default").await.expect("counts_lane");
    assert!(rows.iter().all(|r| r.lane == "default"), "{rows:?}");
    assert_eq!(rows.iter().map(|r| r.count).sum::<i64>(), 3, "{rows:?}");
    let all = h.store.counts().await.expect("counts");
    let mut of_lane: Vec<_> = all.into_iter().filter(|r| r.lane == "default").collect();
    let mut rows = rows;
    let key = |r: &crate::CountRow| (r.kind.clone(), r.status);
    of_lane.sort_by_key(key);
    rows.sort_by_key(key);
    assert_eq!(rows, of_lane);
    assert!(rows.iter().any(|r| r.status == Status::Done), "{rows:?}");
    assert!(rows.iter().any(|r| r.status == Status::Claimed), "{rows:?}");
    assert!(
        h.store
            .counts_lane("nowhere")
            .await
            .expect("empty")
            .is_empty()
    );
}

/// Counts per (lane, kind, status) as a map, for comparing whole answers.
pub(super) async fn count_map(
    h: &Harness,
) -> std::collections::BTreeMap<(String, String, Status), i64> {
    let rows = h.store.counts().await.expect("counts");
    let mut m = std::collections::BTreeMap::new();
    for r in rows {
        assert!(r.count > 0, "a zero row is left out: {r:?}");
        assert!(
            m.insert((r.lane, r.kind, r.status), r.count).is_none(),
            "one row per lane, kind and status"
        );
    }
    m
}

/// Counts stay exact across the store's rollup upkeep: before and after a
/// settlement, after a retry takes a settled row (and an unsettled one) out
/// of a final status, and after a purge; the dead-letter gauge agrees.
pub async fn counts_exact_through_settle_retry_and_purge(h: &Harness) {
    use std::collections::BTreeMap;
    let key = |l: &str, k: &str, s: Status| (l.to_owned(), k.to_owned(), s);
    let done1 = put(h, new("d")).await;
    put(h, new("d")).await;
    put(h, new("d").with_tenant(tenant_b())).await;
    let failed = put(h, new("f")).await;
    let cancelled = put(h, new("c").with_lane("l2")).await;
    put(h, new("p")).await;
    put(h, new("k")).await;
    let mut p = claim_params("default", 3, LONG);
    p.kinds = vec!["d".into()];
    let got = h.store.item_claim(&p).await.expect("claim d");
    assert_eq!(got.len(), 3);
    for i in &got {
        h.store
            .item_complete(&ClaimRef::of(i).expect("t"))
            .await
            .expect("complete");
    }
    p.kinds = vec!["f".into()];
    let got = h.store.item_claim(&p).await.expect("claim f");
    let dead = FailParams {
        fatal: true,
        ..fail_params(LONG)
    };
    h.store
        .item_fail(&ClaimRef::of(&got[0]).expect("t"), &dead)
        .await
        .expect("fail");
    h.store
        .item_cancel(Uuid::nil(), cancelled.id, Uuid::nil())
        .await
        .expect("cancel");
    p.kinds = vec!["k".into()];
    assert_eq!(h.store.item_claim(&p).await.expect("claim k").len(), 1);
    let mut want: BTreeMap<_, i64> = BTreeMap::from([
        (key("default", "d", Status::Done), 3),
        (key("default", "f", Status::Failed), 1),
        (key("l2", "c", Status::Cancelled), 1),
        (key("default", "p", Status::Pending), 1),
        (key("default", "k", Status::Claimed), 1),
    ]);
    assert_eq!(count_map(h).await, want, "before any settlement");
    // Past the rollup's safety margin, so a settlement may fold them in.
    h.pass(Duration::from_millis(1500)).await;
    h.store.counts_settle().await.expect("settle");
    assert_eq!(count_map(h).await, want, "after a settlement");
    assert_eq!(h.store.gauges().await.expect("gauges").failed, 1);

    // A retry of a row the settlement folded in, counted before and after
    // the next settlement.
    h.store
        .item_retry(Uuid::nil(), failed.id, Uuid::nil())
        .await
        .expect("retry failed");
    want.remove(&key("default", "f", Status::Failed));
    want.insert(key("default", "f", Status::Pending), 1);
    assert_eq!(count_map(h).await, want, "after a retry");
    assert_eq!(h.store.gauges().await.expect("gauges").failed, 0);
    h.store.counts_settle().await.expect("settle");
    assert_eq!(count_map(h).await, want, "after the retry's settlement");

    // A row finished and retried between two settlements.
    p.kinds = vec!["p".into()];
    let got = h.store.item_claim(&p).await.expect("claim p");
    h.store
        .item_complete(&ClaimRef::of(&got[0]).expect("t"))
        .await
        .expect("complete p");
    h.store
        .item_retry(Uuid::nil(), got[0].id, Uuid::nil())
        .await
        .expect("retry p");
    h.store
        .item_retry(Uuid::nil(), done1.id, Uuid::nil())
        .await
        .expect("retry done");
    *want.get_mut(&key("default", "d", Status::Done)).expect("d") -= 1;
    want.insert(key("default", "d", Status::Pending), 1);
    assert_eq!(count_map(h).await, want, "after the second retries");
    h.pass(Duration::from_millis(1500)).await;
    h.store.counts_settle().await.expect("settle");
    assert_eq!(count_map(h).await, want, "after their settlement");

    // The purge takes every final row; the rest stays counted.
    let cutoff = match &h.clock {
        Some(c) => {
            use crate::Clock;
            c.now()
        }
        None => Utc::now(),
    };
    let purged = h.store.item_purge(cutoff, 2).await.expect("purge");
    assert_eq!(purged, 3, "two done (tenants nil and B) and one cancelled");
    want.remove(&key("default", "d", Status::Done));
    want.remove(&key("l2", "c", Status::Cancelled));
    assert_eq!(count_map(h).await, want, "after the purge");
    h.store.counts_settle().await.expect("settle");
    assert_eq!(count_map(h).await, want, "after the purge's settlement");
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

fn worker_row(id: &str, beat_interval_ms: i32) -> WorkerRow {
    let now = Utc::now();
    WorkerRow {
        id: id.into(),
        host: "host".into(),
        pid: 42,
        lanes: vec!["default".into(), "mail".into()],
        capacity: 20,
        started_at: now,
        last_beat_at: now,
        state: "running".into(),
        beat_interval_ms,
        kinds: vec!["mail.send".into(), "report.build".into()],
        version: String::new(),
    }
}

/// A worker's beat inserts then updates its row, stamped with the store's
/// clock whatever the row carries.
pub async fn worker_beat_upserts(h: &Harness) {
    let mut row = worker_row("w-1", 5000);
    h.store.worker_beat(&row).await.expect("beat");
    let rows = h.store.worker_list().await.expect("list");
    assert_eq!(
        rows[0].kinds,
        vec!["mail.send".to_string(), "report.build".to_string()],
        "the kinds it handles are on the row"
    );
    assert!(rows[0].is_live() && rows[0].handles("mail.send") && !rows[0].handles("export"));
    row.state = "offline".into();
    row.last_beat_at = Utc::now() + chrono::Duration::hours(1);
    row.kinds = vec!["export".into()];
    h.store.worker_beat(&row).await.expect("beat");
    let rows = h.store.worker_list().await.expect("list");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state, "offline");
    assert!(!rows[0].is_live());
    assert_eq!(rows[0].beat_interval_ms, 5000);
    assert_eq!(
        rows[0].lanes,
        vec!["default".to_string(), "mail".to_string()]
    );
    assert_eq!(
        rows[0].kinds,
        vec!["export".to_string()],
        "a beat replaces the kinds"
    );
    assert!(
        approx(rows[0].last_beat_at, h.store.now(), 5_000),
        "the beat is the store's time, not the worker's: {:?}",
        rows[0].last_beat_at
    );
    // A row that records no kinds (beaten before migration 0035) is read
    // as handling any kind.
    let mut old = worker_row("w-old", 5000);
    old.kinds.clear();
    h.store.worker_beat(&old).await.expect("beat");
    let rows = h.store.worker_list().await.expect("list");
    let old = rows.iter().find(|r| r.id == "w-old").expect("listed");
    assert!(old.kinds.is_empty() && old.handles("anything"));
}

/// A worker that stops beating is listed `lost` once two of its intervals
/// passed by the store's clock; one that keeps beating, or shut down
/// (offline), is listed as it said.
pub async fn worker_silent_two_intervals_is_lost(h: &Harness) {
    let dead = worker_row("w-dead", 1000);
    let live = worker_row("w-live", 1000);
    let mut gone = worker_row("w-gone", 1000);
    gone.state = "offline".into();
    for w in [&dead, &live, &gone] {
        h.store.worker_beat(w).await.expect("beat");
    }
    let state = |rows: &[WorkerRow], id: &str| {
        rows.iter()
            .find(|r| r.id == id)
            .map(|r| r.state.clone())
            .expect("listed")
    };
    let rows = h.store.worker_list().await.expect("list");
    assert_eq!(state(&rows, "w-dead"), "running", "one beat ago: alive");
    // Well past two intervals (2 s) for the dead one, while the live one
    // keeps beating.
    for _ in 0..4 {
        h.pass(Duration::from_millis(700)).await;
        h.store.worker_beat(&live).await.expect("beat");
    }
    let rows = h.store.worker_list().await.expect("list");
    assert_eq!(state(&rows, "w-dead"), "lost");
    assert_eq!(state(&rows, "w-live"), "running");
    assert_eq!(
        state(&rows, "w-gone"),
        "offline",
        "a clean shutdown is not lost"
    );
    // A lost worker that beats again is running again.
    h.store.worker_beat(&dead).await.expect("beat");
    let rows = h.store.worker_list().await.expect("list");
    assert_eq!(state(&rows, "w-dead"), "running");
}

/// The purge deletes the rows of workers silent for longer than the
/// retention and keeps the others.
pub async fn worker_purge_removes_only_long_silent(h: &Harness) {
    let old = worker_row("w-old", 100);
    h.store.worker_beat(&old).await.expect("beat");
    h.pass(Duration::from_millis(2500)).await;
    let fresh = worker_row("w-fresh", 100);
    h.store.worker_beat(&fresh).await.expect("beat");
    let n = h
        .store
        .worker_purge(Duration::from_millis(1500))
        .await
        .expect("purge");
    assert_eq!(n, 1);
    let rows = h.store.worker_list().await.expect("list");
    assert_eq!(
        rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec!["w-fresh"]
    );
}

/// An insert publishes a wake-up naming its lane, and every subscriber
/// reads the same nonce for it (what lets a lane's workers agree whose turn
/// it is to claim at once).
pub async fn wakeup_after_insert(h: &Harness) {
    let mut a = h.store.wakeups().await.expect("subscribe");
    let mut b = h.store.wakeups().await.expect("subscribe");
    put(h, new("a").with_lane("mail")).await;
    let na = nonce_for(&mut a, "mail").await;
    let nb = nonce_for(&mut b, "mail").await;
    assert_eq!(na, nb, "two subscribers read one wake-up's nonce alike");
}

/// The nonce of the first wake-up naming `lane` that carries one (bounded).
async fn nonce_for(rx: &mut tokio::sync::broadcast::Receiver<crate::Wake>, lane: &str) -> u64 {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match rx.recv().await {
                Ok(w) if w.lane == lane => {
                    if let Some(n) = w.nonce {
                        return n;
                    }
                }
                Ok(_) => continue,
                Err(e) => panic!("wake-up channel: {e}"),
            }
        }
    })
    .await
    .expect("a wake-up with a nonce within 5 s")
}
