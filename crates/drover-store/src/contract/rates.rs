//! Contract cases of rate limits: a burst is admitted then the rate holds,
//! and no window of the starts concurrent claimers recorded exceeds the
//! bound;
//! an item over its rate is not claimed, spends no attempt, and becomes
//! claimable at the instant its cell allows (read on the store's clock);
//! concurrent claimers never start more than the bound between them; a
//! start takes its rate and its concurrency slot together or neither; the
//! operator's rate wins over the code's until cleared.
//!
//! On PostgreSQL time passes by sleeping, so a case asserts what holds
//! whatever the machine's speed: no item starts before its allowed
//! instant (its claim's `updated_at`, the database clock, against the
//! instant `rate_usage` reported), and only where the store's clock is
//! moved by hand that a claim just before the instant takes nothing.

use super::*;
use crate::limits::{LimitScope, LimitSource};
use crate::rates::{CELL_GRACE, Rate};

fn kind_scope(k: &str) -> LimitScope {
    LimitScope::Kind(k.into())
}

async fn claim_lane(h: &Harness, lane: &str, n: u32) -> Vec<Item> {
    h.store
        .item_claim(&claim_params(lane, n, LONG))
        .await
        .expect("claim")
}

fn of_kind(items: &[Item], kind: &str) -> usize {
    items.iter().filter(|i| i.kind == kind).count()
}

async fn set_rate(h: &Harness, scope: LimitScope, source: LimitSource, rate: Rate) {
    h.store
        .rate_set(&scope, source, rate, Uuid::nil())
        .await
        .expect("rate set");
}

/// When the rate of `scope` next allows a start, as the store reports it.
async fn next_start(h: &Harness, scope: &LimitScope) -> Option<DateTime<Utc>> {
    h.store
        .rate_usage()
        .await
        .expect("usage")
        .into_iter()
        .find(|u| &u.setting.scope == scope)
        .expect("the rate is in force")
        .next_start_at
}

/// A burst of 3 against 1/1h on a kind: three start at once with every
/// other item, the rest wait unclaimed with no attempt spent, and the next
/// start is allowed one interval after the burst. A lane rate bounds the
/// lane the same way.
pub async fn rate_burst_admitted_then_the_rate_holds(h: &Harness) {
    let hour = Duration::from_secs(3600);
    set_rate(
        h,
        kind_scope("api"),
        LimitSource::Operator,
        Rate::per(1, hour).with_burst(3),
    )
    .await;
    for _ in 0..5 {
        put(h, new("api")).await;
    }
    for _ in 0..2 {
        put(h, new("mail")).await;
    }
    let first = claim_lane(h, "default", 10).await;
    assert_eq!(of_kind(&first, "api"), 3, "the burst: {first:?}");
    assert_eq!(of_kind(&first, "mail"), 2, "other kinds are not held");
    assert!(
        claim_lane(h, "default", 10).await.is_empty(),
        "over the rate"
    );
    let started = first
        .iter()
        .filter(|i| i.kind == "api")
        .map(|i| i.updated_at)
        .max()
        .expect("a start");
    // Three intervals ahead, less the tolerance of two: one hour on.
    assert_eq!(
        next_start(h, &kind_scope("api")).await,
        Some(started + chrono::Duration::hours(1))
    );
    let pending = h
        .store
        .item_list(&ListFilter {
            status: Some(Status::Pending),
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(pending.len(), 2);
    assert!(pending.iter().all(|i| i.attempts == 0), "held, not tried");

    set_rate(
        h,
        LimitScope::Lane("paced".into()),
        LimitSource::Operator,
        Rate::per(2, hour).with_burst(2),
    )
    .await;
    for _ in 0..3 {
        put(h, new("mail").with_lane("paced")).await;
    }
    assert_eq!(
        claim_lane(h, "paced", 10).await.len(),
        2,
        "the lane's burst"
    );
    assert!(claim_lane(h, "paced", 10).await.is_empty());
}

/// A per-group rate of 1/2s: each group starts one item; the second item
/// of a group becomes claimable at its cell's instant and not before (on
/// a store whose clock is moved by hand: nothing a microsecond before,
/// the item at the instant; on PostgreSQL: its start is never earlier).
pub async fn rate_over_rate_item_claimable_at_its_instant(h: &Harness) {
    let scope = LimitScope::KindPerGroup("call".into());
    set_rate(
        h,
        scope.clone(),
        LimitSource::Operator,
        Rate::per(1, Duration::from_secs(2)),
    )
    .await;
    put(h, new("call").with_group("g1")).await;
    put(h, new("call").with_group("g1")).await;
    put(h, new("call").with_group("g2")).await;
    let first = claim_lane(h, "default", 10).await;
    let mut groups: Vec<_> = first.iter().filter_map(|i| i.group.clone()).collect();
    groups.sort();
    assert_eq!(groups, ["g1", "g2"], "one start per group");
    let started = first
        .iter()
        .find(|i| i.group.as_deref() == Some("g1"))
        .map(|i| i.updated_at)
        .expect("g1 started");
    let allowed = next_start(h, &scope).await.expect("a group is held back");
    assert!(
        allowed >= started + chrono::Duration::seconds(2),
        "{allowed} {started}"
    );
    let usage = h.store.rate_usage().await.expect("usage");
    assert!(usage[0].held_back >= 1, "{usage:?}");
    if let Some(clock) = &h.clock {
        assert_eq!(allowed, started + chrono::Duration::seconds(2));
        clock.advance(Duration::from_micros(1_999_999));
        assert!(
            claim_lane(h, "default", 10).await.is_empty(),
            "a microsecond early"
        );
        clock.advance(Duration::from_micros(1));
        let next = claim_lane(h, "default", 10).await;
        assert_eq!(next.len(), 1, "claimable at the instant");
        assert_eq!(next[0].updated_at, allowed);
        return;
    }
    let early = claim_lane(h, "default", 10).await;
    assert!(early.iter().all(|i| i.updated_at >= allowed), "{early:?}");
    let mut got = early;
    for _ in 0..100 {
        if !got.is_empty() {
            break;
        }
        h.pass(Duration::from_millis(100)).await;
        got = claim_lane(h, "default", 10).await;
    }
    assert_eq!(got.len(), 1, "claimed once the cell allowed it");
    assert!(got[0].updated_at >= allowed, "started before its instant");
}

/// Six claimers at once against a burst of 10 at 5/1h: ten start between
/// them, each once. With a concurrency limit of 3 beside a rate of burst
/// 5, the slots bind first and a start held back by a full slot leaves
/// the rate untouched: 3, then (the slots freed) 2 more, then none.
pub async fn rate_exact_under_concurrent_claimers(h: &Harness) {
    let s = &h.store;
    let hour = Duration::from_secs(3600);
    set_rate(
        h,
        kind_scope("wide"),
        LimitSource::Operator,
        Rate::per(5, hour).with_burst(10),
    )
    .await;
    let batch: Vec<NewItem> = (0..100)
        .map(|n| NewItem::new("wide", json!({ "n": n })))
        .collect();
    s.item_insert_many(&batch).await.expect("bulk");
    let mut tasks = Vec::new();
    for w in 0..6 {
        let store = s.clone();
        tasks.push(tokio::spawn(async move {
            let p = ClaimParams {
                lane: "default".into(),
                kinds: vec!["wide".into()],
                worker_id: format!("w{w}"),
                lease: LONG,
                limit: 10,
            };
            store.item_claim(&p).await.expect("claim")
        }));
    }
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        for it in t.await.expect("claimer") {
            assert!(ids.insert(it.id), "claimed twice: {}", it.id);
        }
    }
    assert_eq!(ids.len(), 10, "the burst between all claimers");

    set_rate(
        h,
        kind_scope("both"),
        LimitSource::Operator,
        Rate::per(1, hour).with_burst(5),
    )
    .await;
    s.limit_set(
        &kind_scope("both"),
        LimitSource::Operator,
        3.into(),
        Uuid::nil(),
    )
    .await
    .expect("concurrency");
    let batch: Vec<NewItem> = (0..10)
        .map(|n| NewItem::new("both", json!({ "n": n })))
        .collect();
    s.item_insert_many(&batch).await.expect("bulk");
    let both = |w: &str| ClaimParams {
        lane: "default".into(),
        kinds: vec!["both".into()],
        worker_id: w.into(),
        lease: LONG,
        limit: 10,
    };
    let first = s.item_claim(&both("a")).await.expect("claim");
    assert_eq!(first.len(), 3, "the slots bind first");
    let done: Vec<ClaimRef> = first
        .iter()
        .map(|i| ClaimRef::of(i).expect("claimed"))
        .collect();
    s.item_complete_many(&done).await.expect("complete");
    let second = s.item_claim(&both("b")).await.expect("claim");
    assert_eq!(second.len(), 2, "the rest of the burst, not more");
    let done: Vec<ClaimRef> = second
        .iter()
        .map(|i| ClaimRef::of(i).expect("claimed"))
        .collect();
    s.item_complete_many(&done).await.expect("complete");
    assert!(s.item_claim(&both("c")).await.expect("claim").is_empty());
}

/// The operator's rate wins over the code's until cleared, and clearing
/// restores the code's: claims follow each setting.
pub async fn rate_operator_wins_until_cleared(h: &Harness) {
    let s = &h.store;
    let scope = kind_scope("export");
    let code = Rate::per(100, Duration::from_secs(1)).with_burst(100);
    let op = Rate::per(1, Duration::from_secs(3600));
    set_rate(h, scope.clone(), LimitSource::Code, code).await;
    s.rate_set(&scope, LimitSource::Operator, op, Uuid::from_u128(9))
        .await
        .expect("operator");
    let all = s.rate_settings().await.expect("settings");
    assert_eq!(all.len(), 2);
    let on = crate::rates::effective(&all);
    assert_eq!((on[0].source, on[0].rate), (LimitSource::Operator, op));
    for _ in 0..4 {
        put(h, new("export")).await;
    }
    assert_eq!(
        claim_lane(h, "default", 10).await.len(),
        1,
        "the operator's"
    );
    assert!(claim_lane(h, "default", 10).await.is_empty());
    assert!(
        s.rate_clear(&scope, LimitSource::Operator)
            .await
            .expect("clear")
    );
    assert!(
        !s.rate_clear(&scope, LimitSource::Operator)
            .await
            .expect("again")
    );
    let on = crate::rates::effective(&s.rate_settings().await.expect("settings"));
    assert_eq!((on[0].source, on[0].rate), (LimitSource::Code, code));
    assert_eq!(
        claim_lane(h, "default", 10).await.len(),
        3,
        "the code's again"
    );
    assert!(s.rate_clear(&scope, LimitSource::Code).await.expect("code"));
    assert!(s.rate_usage().await.expect("usage").is_empty());
}

/// Four claimers at once, claiming for a while (on a moved clock: each
/// moves it 7 ms after every claim; on PostgreSQL: for 1.5 s of real
/// time) against 20/1s with a burst of 5: over the starts recorded by the
/// claims (each claimed item's `updated_at`, the store's clock in the
/// claim), no window of length W holds more than W·20/s + 5 of them. (The
/// check is tight: with + 4 in place of + 5 the memory run fails on the
/// burst itself.)
pub async fn rate_bound_holds_in_every_window(h: &Harness) {
    let s = &h.store;
    let rate = Rate::per(20, Duration::from_secs(1)).with_burst(5);
    set_rate(h, kind_scope("paced"), LimitSource::Operator, rate).await;
    let batch: Vec<NewItem> = (0..400)
        .map(|n| NewItem::new("paced", json!({ "n": n })))
        .collect();
    s.item_insert_many(&batch).await.expect("bulk");
    let deadline = std::time::Instant::now() + Duration::from_millis(1_500);
    let mut tasks = Vec::new();
    for w in 0..4 {
        let store = s.clone();
        let clock = h.clock.clone();
        tasks.push(tokio::spawn(async move {
            let p = ClaimParams {
                lane: "default".into(),
                kinds: vec!["paced".into()],
                worker_id: format!("w{w}"),
                lease: LONG,
                limit: 3,
            };
            let mut starts = Vec::new();
            for _ in 0..60 {
                let got = store.item_claim(&p).await.expect("claim");
                starts.extend(got.iter().map(|i| i.updated_at));
                match &clock {
                    Some(c) => c.advance(Duration::from_millis(7)),
                    None if std::time::Instant::now() >= deadline => break,
                    None => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
            starts
        }));
    }
    let mut starts = Vec::new();
    for t in tasks {
        starts.extend(t.await.expect("claimer"));
    }
    starts.sort();
    assert!(starts.len() > 5, "past the burst: {}", starts.len());
    let interval_us = rate.interval_us();
    for (i, first) in starts.iter().enumerate() {
        for w_ms in [0i64, 10, 50, 200, 1_000] {
            let end = *first + chrono::Duration::milliseconds(w_ms);
            let n = starts[i..].iter().take_while(|t| **t <= end).count() as i64;
            let bound = w_ms * 1_000 / interval_us + 5;
            assert!(
                n <= bound,
                "{n} starts in {w_ms} ms from {first} (bound {bound}): {starts:?}"
            );
        }
    }
}

/// The sweep's purge deletes cells behind the clock only: a cell a claim
/// just moved ahead is kept (deleting it would admit a second burst); a
/// cell the clock passed less than [`CELL_GRACE`] ago is kept too (a claim
/// that began before its time may still lock it and admit on its older
/// clock); once the clock is past it by the grace, it goes, and the scope
/// starts afresh.
pub async fn rate_idle_cells_purged(h: &Harness) {
    let s = &h.store;
    let scope = LimitScope::KindPerGroup("once".into());
    set_rate(
        h,
        scope.clone(),
        LimitSource::Operator,
        Rate::per(1, Duration::from_secs(1)),
    )
    .await;
    put(h, new("once").with_group("g1")).await;
    put(h, new("once").with_group("g1")).await;
    assert_eq!(claim_lane(h, "default", 10).await.len(), 1);
    assert_eq!(s.rate_cells_purge(100).await.expect("purge"), 0, "ahead");
    assert!(claim_lane(h, "default", 10).await.is_empty(), "still held");
    h.pass(Duration::from_millis(1_100)).await;
    assert_eq!(
        s.rate_cells_purge(100).await.expect("purge"),
        0,
        "behind the clock by less than the grace"
    );
    h.pass(CELL_GRACE).await;
    assert_eq!(s.rate_cells_purge(100).await.expect("purge"), 1, "idle");
    assert_eq!(s.rate_cells_purge(100).await.expect("purge"), 0, "gone");
    assert_eq!(next_start(h, &scope).await, None);
    assert_eq!(claim_lane(h, "default", 10).await.len(), 1, "afresh");
}
