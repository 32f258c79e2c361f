//! Contract cases of the lane state rows: a set records the state, the
//! actor and the store's clock from every starting state (no row, paused,
//! running), and the list answers every recorded lane by name.

use super::*;
use crate::lane::{LaneSetParams, LaneState};

fn set(lane: &str, paused: bool, actor: u128) -> LaneSetParams {
    LaneSetParams {
        lane: lane.into(),
        paused,
        actor: Uuid::from_u128(actor),
    }
}

async fn listed(h: &Harness) -> Vec<(String, bool)> {
    h.store
        .lane_list()
        .await
        .expect("lane list")
        .into_iter()
        .map(|l| (l.lane, l.paused))
        .collect()
}

/// From every starting state (no row, paused, running) a set lands as
/// asked, stamped with its actor and a clock that does not go back.
pub async fn lane_set_from_every_state(h: &Harness) {
    assert!(listed(h).await.is_empty(), "a fresh store records no lane");
    let before = h.store.db_now().await.expect("db now");
    // No row → paused.
    let a: LaneState = h
        .store
        .lane_set(&set("mail", true, 7))
        .await
        .expect("pause");
    assert!(a.paused);
    assert_eq!(a.lane, "mail");
    assert_eq!(a.changed_by, Uuid::from_u128(7));
    assert!(
        approx(a.changed_at, before, 5_000)
            && a.changed_at >= before - chrono::Duration::milliseconds(5),
        "stamped by the store's clock: {} vs {before}",
        a.changed_at
    );
    h.pass(Duration::from_millis(20)).await;
    // Paused → paused: still paused, the last asker recorded.
    let b = h
        .store
        .lane_set(&set("mail", true, 8))
        .await
        .expect("pause again");
    assert!(b.paused);
    assert_eq!(b.changed_by, Uuid::from_u128(8));
    assert!(b.changed_at >= a.changed_at);
    // Paused → running.
    h.pass(Duration::from_millis(20)).await;
    let c = h
        .store
        .lane_set(&set("mail", false, 9))
        .await
        .expect("resume");
    assert!(!c.paused);
    assert_eq!(c.changed_by, Uuid::from_u128(9));
    assert!(c.changed_at >= b.changed_at);
    // Running → running, then running → paused.
    let d = h
        .store
        .lane_set(&set("mail", false, 9))
        .await
        .expect("resume again");
    assert!(!d.paused);
    let e = h
        .store
        .lane_set(&set("mail", true, 10))
        .await
        .expect("pause after resume");
    assert!(e.paused);
    // No row → running records the lane as running.
    let f = h
        .store
        .lane_set(&set("bulk", false, 11))
        .await
        .expect("resume unknown");
    assert!(!f.paused);
    assert_eq!(
        listed(h).await,
        vec![("bulk".to_owned(), false), ("mail".to_owned(), true)],
        "one row per lane, by name"
    );
}

/// Each lane keeps its own state: pausing one leaves the others, and the
/// list reads back exactly what was set.
pub async fn lane_states_are_per_lane(h: &Harness) {
    for lane in ["c-lane", "a-lane", "b-lane"] {
        h.store.lane_set(&set(lane, true, 1)).await.expect("pause");
    }
    h.store
        .lane_set(&set("a-lane", false, 2))
        .await
        .expect("resume a");
    assert_eq!(
        listed(h).await,
        vec![
            ("a-lane".to_owned(), false),
            ("b-lane".to_owned(), true),
            ("c-lane".to_owned(), true),
        ]
    );
    let rows = h.store.lane_list().await.expect("list");
    assert_eq!(rows[0].changed_by, Uuid::from_u128(2));
    assert_eq!(rows[1].changed_by, Uuid::from_u128(1));
}
