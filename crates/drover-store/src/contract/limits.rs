//! Contract cases of concurrency limits: the operator's setting wins over
//! the code's until cleared; a limit on a kind, a lane or a kind per group
//! bounds what claims hold at once, counting claims that end; items held
//! back spend no attempt; concurrent claimers never admit past a limit.

use super::*;
use crate::limits::{LimitScope, LimitSource, effective};

fn kind_scope(k: &str) -> LimitScope {
    LimitScope::Kind(k.into())
}

async fn claim_n(h: &Harness, lane: &str, n: u32) -> Vec<Item> {
    h.store
        .item_claim(&claim_params(lane, n, LONG))
        .await
        .expect("claim")
}

fn count_kind(items: &[Item], kind: &str) -> usize {
    items.iter().filter(|i| i.kind == kind).count()
}

/// Settings: both sources are kept, the operator's is in force until it is
/// cleared, then the code's again; clearing what is not there says so.
pub async fn limit_operator_wins_until_cleared(h: &Harness) {
    let s = &h.store;
    let op = Uuid::from_u128(9);
    s.limit_set(
        &kind_scope("export"),
        LimitSource::Code,
        4.into(),
        Uuid::nil(),
    )
    .await
    .expect("code");
    let set = s
        .limit_set(&kind_scope("export"), LimitSource::Operator, 2.into(), op)
        .await
        .expect("operator");
    assert_eq!((set.concurrency, set.set_by), (2, op));
    let all = s.limit_settings().await.expect("settings");
    assert_eq!(all.len(), 2);
    let on = effective(&all);
    assert_eq!(
        (on[0].source, on[0].concurrency),
        (LimitSource::Operator, 2)
    );
    // A second set replaces the first of the same source.
    s.limit_set(&kind_scope("export"), LimitSource::Operator, 3.into(), op)
        .await
        .expect("again");
    assert_eq!(
        effective(&s.limit_settings().await.expect("settings"))[0].concurrency,
        3
    );
    assert!(
        s.limit_clear(&kind_scope("export"), LimitSource::Operator)
            .await
            .expect("clear")
    );
    assert!(
        !s.limit_clear(&kind_scope("export"), LimitSource::Operator)
            .await
            .expect("clear again")
    );
    let on = effective(&s.limit_settings().await.expect("settings"));
    assert_eq!((on[0].source, on[0].concurrency), (LimitSource::Code, 4));
}

/// A kind limit of 2: a claim takes 2 of the kind and every other item; a
/// held-back item stays pending with no attempt spent; a claim that ends
/// frees its slot for the next claim. The usage read says so.
pub async fn limit_on_a_kind_bounds_claims(h: &Harness) {
    let s = &h.store;
    s.limit_set(
        &kind_scope("export"),
        LimitSource::Operator,
        2.into(),
        Uuid::nil(),
    )
    .await
    .expect("set");
    for _ in 0..5 {
        put(h, new("export")).await;
    }
    for _ in 0..2 {
        put(h, new("mail")).await;
    }
    let first = claim_n(h, "default", 10).await;
    assert_eq!(count_kind(&first, "export"), 2, "{first:?}");
    assert_eq!(count_kind(&first, "mail"), 2);
    assert!(
        claim_n(h, "default", 10).await.is_empty(),
        "the kind is full"
    );
    let usage = s.limit_usage().await.expect("usage");
    assert_eq!((usage[0].in_use, usage[0].waiting), (2, 3), "{usage:?}");
    let pending = s
        .item_list(&ListFilter {
            status: Some(Status::Pending),
            limit: 100,
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(pending.len(), 3);
    assert!(
        pending.iter().all(|i| i.attempts == 0),
        "held back, not tried"
    );
    let done = first
        .iter()
        .find(|i| i.kind == "export")
        .expect("an export");
    s.item_complete(&ClaimRef::of(done).expect("claimed"))
        .await
        .expect("complete");
    let next = claim_n(h, "default", 10).await;
    assert_eq!(count_kind(&next, "export"), 1, "one slot came back");
}

/// A lane limit bounds the lane's claims, whatever the kind; another lane
/// is not bounded by it.
pub async fn limit_on_a_lane_bounds_claims(h: &Harness) {
    let s = &h.store;
    s.limit_set(
        &LimitScope::Lane("slow".into()),
        LimitSource::Code,
        3.into(),
        Uuid::nil(),
    )
    .await
    .expect("set");
    for i in 0..6 {
        put(h, new(if i % 2 == 0 { "a" } else { "b" }).with_lane("slow")).await;
        put(h, new("a").with_lane("fast")).await;
    }
    assert_eq!(claim_n(h, "slow", 10).await.len(), 3);
    assert!(claim_n(h, "slow", 10).await.is_empty());
    assert_eq!(claim_n(h, "fast", 10).await.len(), 6);
}

/// A per-group limit of 1 bounds each group of the kind separately; items
/// without a group and items of another tenant's same-named group are
/// their own; a released claim frees its group's slot.
pub async fn limit_per_group_bounds_each_group(h: &Harness) {
    let s = &h.store;
    s.limit_set(
        &LimitScope::KindPerGroup("sync".into()),
        LimitSource::Code,
        1.into(),
        Uuid::nil(),
    )
    .await
    .expect("set");
    for _ in 0..3 {
        put(h, new("sync").with_group("g1")).await;
        put(h, new("sync").with_group("g2")).await;
    }
    put(h, new("sync").with_group("g1").with_tenant(tenant_b())).await;
    put(h, new("sync")).await;
    put(h, new("sync")).await;
    let got = claim_n(h, "default", 20).await;
    let in_group = |g: &str, t: Uuid| {
        got.iter()
            .filter(|i| i.group.as_deref() == Some(g) && i.tenant_id == t)
            .count()
    };
    assert_eq!(in_group("g1", Uuid::nil()), 1, "{got:?}");
    assert_eq!(in_group("g2", Uuid::nil()), 1);
    assert_eq!(
        in_group("g1", tenant_b()),
        1,
        "another tenant's group is its own"
    );
    assert_eq!(got.iter().filter(|i| i.group.is_none()).count(), 2);
    assert_eq!(got.len(), 5);
    let g1 = got
        .iter()
        .find(|i| i.group.as_deref() == Some("g1") && i.tenant_id == Uuid::nil())
        .expect("g1");
    s.item_release(&ClaimRef::of(g1).expect("claimed"), None)
        .await
        .expect("release");
    let next = claim_n(h, "default", 20).await;
    assert_eq!(next.len(), 1, "{next:?}");
    assert_eq!(next[0].group.as_deref(), Some("g1"));
}

/// Many claimers at once never hold more than the limit between them.
pub async fn limit_exact_under_concurrent_claimers(h: &Harness) {
    let s = &h.store;
    s.limit_set(
        &kind_scope("pay"),
        LimitSource::Operator,
        3.into(),
        Uuid::nil(),
    )
    .await
    .expect("set");
    let batch: Vec<NewItem> = (0..60)
        .map(|n| NewItem::new("pay", json!({ "n": n })))
        .collect();
    s.item_insert_many(&batch).await.expect("bulk");
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = s.clone();
        tasks.push(tokio::spawn(async move {
            let p = ClaimParams {
                lane: "default".into(),
                kinds: vec![],
                worker_id: format!("w{w}"),
                lease: LONG,
                limit: 5,
            };
            store.item_claim(&p).await.expect("claim").len()
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.expect("claimer");
    }
    assert_eq!(total, 3, "claimed between the claimers");
}

/// A limit far from full lets concurrent claimers through whole (the
/// shortcut that skips admission item by item): every item is claimed
/// exactly once and no claim comes back short while items wait; lowered
/// to 5 while 60 are held, the same limit admits nothing more, and after
/// 57 completions exactly 2.
pub async fn limit_far_from_full_claims_each_item_once(h: &Harness) {
    let s = &h.store;
    s.limit_set(
        &kind_scope("wide"),
        LimitSource::Operator,
        crate::limits::MAX_CONCURRENCY.into(),
        Uuid::nil(),
    )
    .await
    .expect("set");
    let batch: Vec<NewItem> = (0..120)
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
    let mut held = Vec::new();
    for t in tasks {
        let got = t.await.expect("claimer");
        assert_eq!(got.len(), 10, "a claim came back short while items waited");
        for it in got {
            assert!(ids.insert(it.id), "claimed twice: {}", it.id);
            held.push(it);
        }
    }
    assert_eq!(ids.len(), 60);
    s.limit_set(
        &kind_scope("wide"),
        LimitSource::Operator,
        5.into(),
        Uuid::nil(),
    )
    .await
    .expect("lower");
    assert!(
        claim_n(h, "default", 10).await.is_empty(),
        "over a lowered limit"
    );
    let done: Vec<ClaimRef> = held
        .iter()
        .take(57)
        .map(|it| ClaimRef::of(it).expect("claimed"))
        .collect();
    s.item_complete_many(&done).await.expect("complete");
    assert_eq!(
        claim_n(h, "default", 10).await.len(),
        2,
        "the lowered limit's free slots"
    );
}

/// A full scope's backlog, larger than a page of candidates and ahead in
/// claim order, holds back only its own scope: claims take the one slot's
/// item of each full scope and every other item, never more of the
/// backlog (SQLite and memory in the first claim; PostgreSQL reads a
/// window of candidates per claim, so a claim may fill its window with a
/// backlog whose scope it then finds full, and the next leaves that scope
/// out); a claim after that takes the items enqueued since.
pub async fn limit_full_backlog_holds_back_only_its_scope(h: &Harness) {
    let s = &h.store;
    s.limit_set(
        &kind_scope("big"),
        LimitSource::Operator,
        1.into(),
        Uuid::nil(),
    )
    .await
    .expect("kind");
    s.limit_set(
        &LimitScope::KindPerGroup("grp".into()),
        LimitSource::Operator,
        1.into(),
        Uuid::nil(),
    )
    .await
    .expect("group");
    let big: Vec<NewItem> = (0..300)
        .map(|n| NewItem::new("big", json!({ "n": n })))
        .chain((0..300).map(|n| NewItem::new("grp", json!({ "n": n })).with_group("g1")))
        .collect();
    s.item_insert_many(&big).await.expect("backlog");
    for _ in 0..3 {
        put(h, new("small")).await;
    }
    put(h, new("grp").with_group("g2")).await;
    let mut got = Vec::new();
    for _ in 0..5 {
        let more = claim_n(h, "default", 20).await;
        if more.is_empty() {
            break;
        }
        got.extend(more);
    }
    assert_eq!(count_kind(&got, "big"), 1, "{got:?}");
    assert_eq!(count_kind(&got, "small"), 3);
    let mut groups: Vec<_> = got
        .iter()
        .filter(|i| i.kind == "grp")
        .filter_map(|i| i.group.clone())
        .collect();
    groups.sort();
    assert_eq!(
        groups,
        vec!["g1".to_owned(), "g2".to_owned()],
        "one of each group"
    );
    put(h, new("small")).await;
    put(h, new("grp").with_group("g3")).await;
    let next = claim_n(h, "default", 20).await;
    assert_eq!(next.len(), 2, "{next:?}");
    assert_eq!(count_kind(&next, "small"), 1);
    assert_eq!(
        next.iter()
            .find(|i| i.kind == "grp")
            .and_then(|i| i.group.as_deref()),
        Some("g3")
    );
}
