//! The room a lane or kind limit has left (`claim_limited_room`, migration
//! 0055): counted from the claimed rows of the lane and of the limited
//! kinds, per limit, as the scope keys of `claim_limited_held` count them.
//! Checked against a count in Rust over the same rows, for a lane limit, a
//! kind limit in any lane, both, a claim narrowed to some kinds, and none.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use sqlx::{Connection, PgConnection};

/// Claimed rows (lane, kind, how many), and pending rows that must not
/// count.
const CLAIMED: &[(&str, &str, i64)] = &[
    ("default", "a", 7),
    ("default", "b", 5),
    ("default", "c", 3),
    ("other", "a", 4),
    ("other", "d", 6),
];

async fn insert(conn: &mut PgConnection, lane: &str, kind: &str, n: i64, claimed: bool) {
    let status = if claimed { "claimed" } else { "pending" };
    sqlx::query(
        "INSERT INTO items (id, tenant_id, kind, lane, payload, priority, status, available_at,
                            attempts, max_attempts, claim_seq, claimed_by, claim_token,
                            lease_expires_at, created_by, created_at, updated_at, updated_by)
         SELECT gen_random_uuid(), gen_random_uuid(), $1, $2, '{}', 0, $3, now(), 0, 5,
                CASE WHEN $3 = 'claimed' THEN 1 ELSE 0 END,
                CASE WHEN $3 = 'claimed' THEN 'w' END,
                CASE WHEN $3 = 'claimed' THEN gen_random_uuid() END,
                CASE WHEN $3 = 'claimed' THEN now() + interval '1 hour' END,
                gen_random_uuid(), now(), now(), gen_random_uuid()
         FROM generate_series(1, $4)",
    )
    .bind(kind)
    .bind(lane)
    .bind(status)
    .bind(n)
    .execute(&mut *conn)
    .await
    .unwrap();
}

/// The room as the rule reads: the least of each applying limit minus the
/// claimed rows its scope key counts (the lane's: the lane's rows; a
/// kind's: the kind's rows in any lane); no limit: i64::MAX.
fn expected(
    lane: &str,
    kinds: &[&str],
    lane_limit: Option<i64>,
    kind_limits: &[(&str, i64)],
) -> i64 {
    let held = |f: &dyn Fn(&str, &str) -> bool| -> i64 {
        CLAIMED
            .iter()
            .filter(|(l, k, _)| f(l, k))
            .map(|(_, _, n)| n)
            .sum()
    };
    let mut room = i64::MAX;
    if let Some(n) = lane_limit {
        room = room.min(n - held(&|l, _| l == lane));
    }
    for (kn, kl) in kind_limits {
        if kinds.is_empty() || kinds.contains(kn) {
            room = room.min(kl - held(&|_, k| k == *kn));
        }
    }
    room
}

#[tokio::test]
async fn the_room_of_lane_and_kind_limits_counts_their_claimed_rows() {
    let (_store, schema) = pg_fresh_store().await;
    let mut conn = PgConnection::connect(&pg_url().await).await.unwrap();
    sqlx::query(&format!("SET search_path = \"{schema}\""))
        .execute(&mut conn)
        .await
        .unwrap();
    for (lane, kind, n) in CLAIMED {
        insert(&mut conn, lane, kind, *n, true).await;
        insert(&mut conn, lane, kind, 2 * n, false).await;
    }
    type Case<'a> = (&'a str, &'a [&'a str], Option<i64>, &'a [(&'a str, i64)]);
    let cases: &[Case] = &[
        ("default", &[], Some(20), &[]),
        ("default", &[], Some(100), &[("a", 12)]),
        ("default", &[], None, &[("a", 30), ("d", 8)]),
        ("default", &["b"], None, &[("a", 11), ("b", 9)]),
        ("other", &[], Some(5), &[("a", 400), ("c", 3)]),
        ("empty", &[], Some(3), &[("d", 10)]),
        ("default", &[], None, &[]),
    ];
    for (lane, kinds, lane_limit, kind_limits) in cases {
        let names: Vec<&str> = kind_limits.iter().map(|(k, _)| *k).collect();
        let limits: Vec<i32> = kind_limits.iter().map(|(_, n)| *n as i32).collect();
        let room: i64 = sqlx::query_scalar("SELECT claim_limited_room($1, $2, $3, $4, $5)")
            .bind(lane)
            .bind(kinds)
            .bind(lane_limit.map(|n| n as i32))
            .bind(&names)
            .bind(&limits)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            room,
            expected(lane, kinds, *lane_limit, kind_limits),
            "lane {lane}, kinds {kinds:?}, lane limit {lane_limit:?}, kind limits {kind_limits:?}"
        );
    }
    pg_drop_schema(&pg_url().await, &schema).await;
}
