//! Contract cases of closures (closing a group or a kind until a time): a
//! closed group is not claimed until its time (on the store's clock) while
//! the kind's other groups, and the same group of another tenant, are;
//! closing a kind holds all its groups; reopening takes effect at once;
//! concurrent claimers never take a closed group's item once the close has
//! returned; a handler's close only moves a closure later.
//!
//! On PostgreSQL time passes by sleeping, so a case asserts what holds
//! whatever the machine's speed: no item of a closed group starts before
//! the closure's time (its claim's `updated_at`, the database clock).

use super::*;
use crate::closures::Closure;
use crate::limits::{LimitScope, LimitSource};

const KIND: &str = "call";

async fn close(h: &Harness, tenant: Uuid, group: Option<&str>, until: DateTime<Utc>) -> Closure {
    h.store
        .close_until(KIND, tenant, group, until, None, Uuid::nil())
        .await
        .expect("close")
}

/// The store's clock to the microsecond (what every backend keeps).
async fn now_us(h: &Harness) -> DateTime<Utc> {
    use chrono::SubsecRound;
    h.store.db_now().await.expect("now").trunc_subsecs(6)
}

async fn claim_all(h: &Harness) -> Vec<Item> {
    h.store
        .item_claim(&claim_params("default", 100, LONG))
        .await
        .expect("claim")
}

fn groups_of(items: &[Item]) -> Vec<(Uuid, String)> {
    let mut g: Vec<_> = items
        .iter()
        .map(|i| (i.tenant_id, i.group.clone().unwrap_or_default()))
        .collect();
    g.sort();
    g
}

/// Group g1 of tenant A closed for an hour: tenant A's g1 waits unclaimed
/// with no attempt spent; A's g2, B's g1 and another kind start. The
/// closure is listed with its time and the store says how long until it
/// reopens. On a movable clock: nothing a microsecond before its time, the
/// item at it.
pub async fn closure_group_held_until_its_time(h: &Harness) {
    let now = now_us(h).await;
    let until = now + chrono::Duration::hours(1);
    let held = put(h, new(KIND).with_group("g1").with_tenant(tenant_a())).await;
    put(h, new(KIND).with_group("g2").with_tenant(tenant_a())).await;
    put(h, new(KIND).with_group("g1").with_tenant(tenant_b())).await;
    put(h, new("other").with_group("g1").with_tenant(tenant_a())).await;
    let c = close(h, tenant_a(), Some("g1"), until).await;
    assert_eq!((c.until, c.closed_by_item), (until, None));
    let got = claim_all(h).await;
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got.iter().all(|i| i.id != held.id),
        "the closed group started"
    );
    assert!(claim_all(h).await.is_empty());
    let row = h
        .store
        .item_get(tenant_a(), held.id)
        .await
        .expect("get")
        .expect("row");
    assert_eq!((row.status, row.attempts), (Status::Pending, 0));
    let listed = h.store.closures().await.expect("closures");
    assert_eq!(listed, vec![c.clone()]);
    let wait = h.store.rate_wait("default", &[]).await.expect("wait");
    assert!(
        wait.is_some_and(|w| w > Duration::from_secs(3500)),
        "claim again when it reopens: {wait:?}"
    );
    if let Some(clock) = &h.clock {
        clock.advance(Duration::from_secs(3600) - Duration::from_micros(1));
        assert!(claim_all(h).await.is_empty(), "a microsecond early");
        clock.advance(Duration::from_micros(1));
        let at = claim_all(h).await;
        assert_eq!(at.len(), 1, "claimable at its time");
        let started = chrono::SubsecRound::trunc_subsecs(at[0].updated_at, 6);
        assert_eq!((at[0].id, started), (held.id, until));
        assert!(h.store.closures().await.expect("closures").is_empty());
        return;
    }
    // PostgreSQL: a short closure passes by sleeping; the item never
    // starts before it.
    let soon = now_us(h).await + chrono::Duration::milliseconds(300);
    let c = close(h, tenant_a(), Some("g1"), soon).await;
    assert_eq!(c.until, soon, "an operator's close sets the time");
    let mut got = claim_all(h).await;
    for _ in 0..100 {
        if !got.is_empty() {
            break;
        }
        h.pass(Duration::from_millis(100)).await;
        got = claim_all(h).await;
    }
    assert_eq!(got.len(), 1, "claimed once it reopened");
    assert!(got[0].updated_at >= soon, "started while closed");
}

/// Closing the kind holds every group of it (and its items without a
/// group) for every tenant; another kind starts. Reopening takes effect at
/// once: the next claim takes them all. Reopening what is open says so.
pub async fn closure_of_kind_holds_all_groups_and_reopens_at_once(h: &Harness) {
    let now = now_us(h).await;
    for g in ["g1", "g2"] {
        put(h, new(KIND).with_group(g).with_tenant(tenant_a())).await;
        put(h, new(KIND).with_group(g).with_tenant(tenant_b())).await;
    }
    put(h, new(KIND)).await;
    put(h, new("other")).await;
    close(h, Uuid::nil(), None, now + chrono::Duration::hours(1)).await;
    let got = claim_all(h).await;
    assert_eq!(got.len(), 1, "only the other kind: {got:?}");
    assert_eq!(got[0].kind, "other");
    assert!(
        h.store
            .reopen(KIND, Uuid::nil(), None)
            .await
            .expect("reopen"),
        "it was closed"
    );
    let all = claim_all(h).await;
    assert_eq!(all.len(), 5, "reopened at once: {all:?}");
    assert_eq!(groups_of(&all).len(), 5, "each of the kind's items once");
    assert!(
        !h.store
            .reopen(KIND, Uuid::nil(), None)
            .await
            .expect("reopen"),
        "nothing to reopen"
    );
    assert!(h.store.closures().await.expect("closures").is_empty());
}

/// A handler's close (by an item) only moves a closure later: a shorter
/// one keeps the time in force and its closer; a longer one replaces both.
/// An operator's close sets the time either way.
pub async fn closure_handler_close_only_moves_later(h: &Harness) {
    let now = now_us(h).await;
    let (x, y) = (Uuid::new_v4(), Uuid::new_v4());
    let t1 = now + chrono::Duration::minutes(10);
    let s = &h.store;
    let first = s
        .close_until(KIND, tenant_a(), Some("g"), t1, Some(x), tenant_a())
        .await
        .expect("close");
    assert_eq!((first.until, first.closed_by_item), (t1, Some(x)));
    let shorter = s
        .close_until(
            KIND,
            tenant_a(),
            Some("g"),
            now + chrono::Duration::minutes(1),
            Some(y),
            tenant_a(),
        )
        .await
        .expect("close");
    assert_eq!((shorter.until, shorter.closed_by_item), (t1, Some(x)));
    let t2 = now + chrono::Duration::minutes(20);
    let longer = s
        .close_until(KIND, tenant_a(), Some("g"), t2, Some(y), tenant_a())
        .await
        .expect("close");
    assert_eq!((longer.until, longer.closed_by_item), (t2, Some(y)));
    let t3 = now + chrono::Duration::minutes(2);
    let op = close(h, tenant_a(), Some("g"), t3).await;
    assert_eq!((op.until, op.closed_by_item), (t3, None));
}

/// Six claimers take one item at a time while the group is closed midway:
/// no claim that began after the close returned takes an item of the
/// group, and none is taken twice.
pub async fn closure_concurrent_claimers_never_take_a_closed_group(h: &Harness) {
    let s = &h.store;
    let batch: Vec<NewItem> = (0..2_000)
        .map(|n| NewItem::new(KIND, json!({ "n": n })).with_group(format!("g{}", n % 2)))
        .collect();
    s.item_insert_many(&batch).await.expect("bulk");
    let closed_at: Arc<std::sync::Mutex<Option<std::time::Instant>>> = Arc::default();
    let mut tasks = Vec::new();
    for w in 0..6 {
        let store = s.clone();
        let closed_at = closed_at.clone();
        tasks.push(tokio::spawn(async move {
            let p = ClaimParams {
                lane: "default".into(),
                kinds: vec![],
                worker_id: format!("w{w}"),
                lease: LONG,
                limit: 1,
            };
            let mut out = Vec::new();
            let mut after_close = 0;
            for _ in 0..300 {
                let began = std::time::Instant::now();
                let after = closed_at
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_some_and(|c| began > c);
                after_close += usize::from(after);
                for it in store.item_claim(&p).await.expect("claim") {
                    out.push((after, it));
                }
                if after_close == 20 {
                    break;
                }
                tokio::task::yield_now().await;
            }
            out
        }));
    }
    tokio::task::yield_now().await;
    let now = now_us(h).await;
    s.close_until(
        KIND,
        Uuid::nil(),
        Some("g0"),
        now + chrono::Duration::hours(1),
        None,
        Uuid::nil(),
    )
    .await
    .expect("close");
    *closed_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
    let mut ids = std::collections::HashSet::new();
    let mut after_close = 0;
    for t in tasks {
        for (after, it) in t.await.expect("claimer") {
            assert!(ids.insert(it.id), "claimed twice: {}", it.id);
            if after {
                after_close += 1;
                assert_eq!(it.group.as_deref(), Some("g1"), "a closed group's item");
            }
        }
    }
    assert!(after_close > 0, "claims ran after the close");
}

/// A second store over the same database (another process: caches of its
/// own, warmed before the change) claims right after this store closes a
/// group, reopens it or sets a rate, and its very next claim follows the
/// change: no cache lag. Through each of its claims' paths: no limit or
/// rate applies (kind `call`), a concurrency limit does (`capped`), a rate
/// does (`paced`).
pub async fn closure_seen_at_once_by_another_store(h: &Harness) {
    let s = &h.store;
    s.limit_set(
        &LimitScope::Kind("capped".into()),
        LimitSource::Operator,
        1_000.into(),
        Uuid::nil(),
    )
    .await
    .expect("limit");
    let fast = crate::rates::Rate::per(1_000, Duration::from_secs(1)).with_burst(1_000);
    s.rate_set(
        &LimitScope::Kind("paced".into()),
        LimitSource::Operator,
        fast,
        Uuid::nil(),
    )
    .await
    .expect("rate");
    const KINDS: [&str; 3] = ["call", "capped", "paced"];
    let batch: Vec<NewItem> = KINDS
        .iter()
        .flat_map(|k| {
            (0..6)
                .map(move |n| NewItem::new(*k, json!({ "n": n })).with_group(format!("g{}", n % 2)))
        })
        .collect();
    s.item_insert_many(&batch).await.expect("bulk");
    let peer = h.peer().await;
    let claim = |kind: &'static str, limit: u32| {
        let peer = peer.clone();
        async move {
            let p = ClaimParams {
                lane: "default".into(),
                kinds: vec![kind.to_owned()],
                worker_id: "peer".into(),
                lease: LONG,
                limit,
            };
            peer.item_claim(&p).await.expect("peer claim")
        }
    };
    // The peer reads (and caches) the settings: nothing is closed.
    assert!(claim("warm", 10).await.is_empty());
    let until = now_us(h).await + chrono::Duration::hours(1);
    for k in KINDS {
        s.close_until(k, Uuid::nil(), Some("g0"), until, None, Uuid::nil())
            .await
            .expect("close");
    }
    for k in KINDS {
        let got = claim(k, 100).await;
        assert_eq!(got.len(), 3, "{k}: the open group's items: {got:?}");
        assert!(
            got.iter().all(|i| i.group.as_deref() == Some("g1")),
            "{k}: the peer claimed from the closed group: {got:?}"
        );
    }
    for k in KINDS {
        assert!(
            s.reopen(k, Uuid::nil(), Some("g0")).await.expect("reopen"),
            "{k}"
        );
        let got = claim(k, 100).await;
        assert_eq!(got.len(), 3, "{k}: reopened at once: {got:?}");
    }
    // A rate set by this store binds the peer's next claim.
    let slow = crate::rates::Rate::per(1, Duration::from_secs(3_600));
    s.rate_set(
        &LimitScope::Kind("call".into()),
        LimitSource::Operator,
        slow,
        Uuid::nil(),
    )
    .await
    .expect("rate");
    let more: Vec<NewItem> = (0..3)
        .map(|n| NewItem::new("call", json!({ "m": n })))
        .collect();
    s.item_insert_many(&more).await.expect("bulk");
    assert_eq!(claim("call", 100).await.len(), 1, "one start of 1/1h");
}
