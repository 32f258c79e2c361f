//! Contract cases of the schedule state rows: upsert never moves the last
//! tick, advance is a compare-and-set that inserts its items in the same
//! transaction, exactly one of many racing advances wins, purge removes only
//! rows unseen since the cut-off.

use std::sync::Arc;

use chrono::{DateTime, Duration as CDuration, SubsecRound, Utc};

use super::*;
use crate::schedule::{AdvanceOutcome, AdvanceParams, MisfirePolicy, ScheduleDecl, tick_key};

fn decl(name: &str) -> ScheduleDecl {
    ScheduleDecl {
        name: name.into(),
        cron: "* * * * *".into(),
        zone: "UTC".into(),
        kind: "tick".into(),
        lane: "default".into(),
        misfire: MisfirePolicy::Once,
    }
}

fn tick_item(name: &str, tick: DateTime<Utc>) -> NewItem {
    NewItem::new("tick", json!({})).with_key(tick_key(name, tick))
}

fn minute(n: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_800_000_000 + 60 * n, 0).expect("in range")
}

/// A declaration inserts a row with no last tick; a second one refreshes
/// the declaration and `seen_at` and keeps the last tick.
pub async fn schedule_upsert_never_moves_last_tick(h: &Harness) {
    let first = h.store.schedule_upsert(&decl("s1")).await.expect("upsert");
    assert_eq!(first.last_tick, None);
    assert_eq!(first.decl, decl("s1"));
    let out = h
        .store
        .schedule_advance(&AdvanceParams {
            name: "s1".into(),
            from: None,
            to: minute(1),
            items: vec![],
        })
        .await
        .expect("advance");
    assert_eq!(out, AdvanceOutcome::Advanced(vec![]));
    h.pass(Duration::from_millis(20)).await;
    let changed = ScheduleDecl {
        cron: "*/5 * * * *".into(),
        misfire: MisfirePolicy::All { max_backfill: 7 },
        ..decl("s1")
    };
    let again = h
        .store
        .schedule_upsert(&changed)
        .await
        .expect("upsert again");
    assert_eq!(again.last_tick, Some(minute(1)), "the last tick is kept");
    assert_eq!(again.decl, changed, "the declaration is refreshed");
    assert_eq!(again.created_at, first.created_at);
    assert!(again.seen_at > first.seen_at, "seen_at moves");
    let listed = h.store.schedule_list().await.expect("list");
    assert_eq!(listed, vec![again]);
}

/// An advance from a value the row no longer holds, or not forward,
/// changes nothing and inserts nothing.
pub async fn schedule_advance_is_compare_and_set(h: &Harness) {
    h.store.schedule_upsert(&decl("s2")).await.expect("upsert");
    let adv = |from, to: DateTime<Utc>| AdvanceParams {
        name: "s2".into(),
        from,
        to,
        items: vec![tick_item("s2", to)],
    };
    let ok = h
        .store
        .schedule_advance(&adv(None, minute(1)))
        .await
        .expect("advance");
    assert_eq!(ok, AdvanceOutcome::Advanced(vec![InsertResult::Inserted]));
    // A stale reader still believes the row is empty.
    let stale = h
        .store
        .schedule_advance(&adv(None, minute(2)))
        .await
        .expect("stale");
    assert_eq!(stale, AdvanceOutcome::Stale);
    // Not forward.
    let back = h
        .store
        .schedule_advance(&adv(Some(minute(1)), minute(1)))
        .await
        .expect("backwards");
    assert_eq!(back, AdvanceOutcome::Stale);
    // Unknown schedule.
    let unknown = h
        .store
        .schedule_advance(&AdvanceParams {
            name: "nope".into(),
            ..adv(None, minute(3))
        })
        .await
        .expect("unknown");
    assert_eq!(unknown, AdvanceOutcome::Stale);
    for t in [minute(2), minute(3)] {
        let key = tick_key("s2", t);
        assert!(
            h.store
                .item_get_by_key(Uuid::nil(), &key)
                .await
                .expect("get")
                .is_none(),
            "a refused advance inserted {key}"
        );
    }
    let row = &h.store.schedule_list().await.expect("list")[0];
    assert_eq!(row.last_tick, Some(minute(1)));
    let item = h
        .store
        .item_get_by_key(Uuid::nil(), &tick_key("s2", minute(1)))
        .await
        .expect("get")
        .expect("the advanced tick's item exists");
    assert_eq!(item.status, Status::Pending);
}

/// An advance whose tick already has an item reports `KeyExists` for it and
/// still moves the row; the existing item is untouched.
pub async fn schedule_advance_never_overwrites_an_item(h: &Harness) {
    h.store.schedule_upsert(&decl("s3")).await.expect("upsert");
    let first = put(h, tick_item("s3", minute(1))).await;
    let out = h
        .store
        .schedule_advance(&AdvanceParams {
            name: "s3".into(),
            from: None,
            to: minute(2),
            items: vec![tick_item("s3", minute(1)), tick_item("s3", minute(2))],
        })
        .await
        .expect("advance");
    assert_eq!(
        out,
        AdvanceOutcome::Advanced(vec![InsertResult::KeyExists, InsertResult::Inserted])
    );
    let again = get(h, Uuid::nil(), first.id).await;
    assert_eq!(again.payload, first.payload);
    assert_eq!(
        h.store.schedule_list().await.expect("list")[0].last_tick,
        Some(minute(2))
    );
}

/// Many schedulers advancing the same range at once: exactly one moves the
/// row, and exactly one item exists for the tick.
pub async fn schedule_advance_one_winner_under_concurrency(h: &Harness) {
    h.store.schedule_upsert(&decl("s4")).await.expect("upsert");
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&h.store);
        tasks.push(tokio::spawn(async move {
            store
                .schedule_advance(&AdvanceParams {
                    name: "s4".into(),
                    from: None,
                    to: minute(1),
                    items: vec![tick_item("s4", minute(1))],
                })
                .await
                .expect("advance")
        }));
    }
    let mut won = 0;
    for t in tasks {
        if matches!(t.await.expect("join"), AdvanceOutcome::Advanced(_)) {
            won += 1;
        }
    }
    assert_eq!(won, 1, "exactly one advance wins");
    let items = h
        .store
        .item_list(&ListFilter {
            tenant_id: Some(Uuid::nil()),
            kind: Some("tick".into()),
            limit: 100,
            ..ListFilter::default()
        })
        .await
        .expect("list");
    assert_eq!(items.len(), 1);
}

/// Purge removes rows not seen since the cut-off and keeps the others.
pub async fn schedule_purge_removes_only_unseen_rows(h: &Harness) {
    h.store.schedule_upsert(&decl("old")).await.expect("upsert");
    h.pass(PAST_SHORT).await;
    let cut = h.store.db_now().await.expect("now");
    h.pass(Duration::from_millis(20)).await;
    h.store.schedule_upsert(&decl("new")).await.expect("upsert");
    let n = h.store.schedule_purge(cut).await.expect("purge");
    assert_eq!(n, 1);
    let names: Vec<String> = h
        .store
        .schedule_list()
        .await
        .expect("list")
        .into_iter()
        .map(|r| r.decl.name)
        .collect();
    assert_eq!(names, vec!["new".to_owned()]);
}

/// The store's clock moves with time and agrees with the rows it stamps.
pub async fn db_now_is_the_stores_clock(h: &Harness) {
    let a = h.store.db_now().await.expect("now");
    let row = h
        .store
        .schedule_upsert(&decl("clock"))
        .await
        .expect("upsert");
    h.pass(Duration::from_millis(50)).await;
    let b = h.store.db_now().await.expect("now");
    assert!(b > a, "{a} then {b}");
    assert!(
        row.created_at >= a.trunc_subsecs(3) - CDuration::milliseconds(1) && row.created_at <= b,
        "the row is stamped by the same clock: {a} <= {} <= {b}",
        row.created_at
    );
}
