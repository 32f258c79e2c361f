//! The rules of the columns only an insert writes (migration 0054): a row
//! that breaks one is refused by the statement that writes it, with
//! `check_violation` and the rule's name, while a claim's and a
//! completion's updates no longer evaluate them (no CHECK constraint of
//! the items tree names them).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests state their expectations by panicking

use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use sqlx::{Connection, PgConnection};

/// Inserts one row with these values straight into `items` (past the
/// store's own validation) and returns the error's code and constraint.
async fn insert_raw(
    conn: &mut PgConnection,
    kind: &str,
    lane: &str,
    max_attempts: i32,
    key: Option<&str>,
) -> Answer {
    sqlx::query(
        "INSERT INTO items (id, tenant_id, kind, lane, payload, priority, status, available_at,
                            attempts, max_attempts, claim_seq, idempotency_key, created_by,
                            created_at, updated_at, updated_by)
         VALUES (gen_random_uuid(), gen_random_uuid(), $1, $2, '{}', 0, 'pending', now(),
                 0, $3, 0, $4, gen_random_uuid(), now(), now(), gen_random_uuid())",
    )
    .bind(kind)
    .bind(lane)
    .bind(max_attempts)
    .bind(key)
    .execute(&mut *conn)
    .await
    .map(|_| ())
    .map_err(refusal)
}

/// What a write answered: `Ok`, or the error's code and constraint.
type Answer = Result<(), (String, String)>;

fn refusal(e: sqlx::Error) -> (String, String) {
    let db = e.as_database_error().expect("a database error");
    (
        db.code().unwrap_or_default().into_owned(),
        db.constraint().unwrap_or_default().to_owned(),
    )
}

fn violation(rule: &str) -> Answer {
    Err(("23514".to_owned(), rule.to_owned()))
}

#[tokio::test]
async fn a_row_breaking_an_insert_rule_is_refused_and_updates_do_not_evaluate_them() {
    let (_store, schema) = pg_fresh_store().await;
    let mut conn = PgConnection::connect(&pg_url().await).await.unwrap();
    sqlx::query(&format!("SET search_path = \"{schema}\""))
        .execute(&mut conn)
        .await
        .unwrap();

    let long = "k".repeat(513);
    let cases: [(&str, &str, i32, Option<&str>, Answer); 7] = [
        ("send_email", "default", 5, None, Ok(())),
        (
            "Send Email",
            "default",
            5,
            None,
            violation("items_kind_name"),
        ),
        ("", "default", 5, None, violation("items_kind_name")),
        (
            "send_email",
            "bulk.lane",
            5,
            None,
            violation("items_lane_name"),
        ),
        (
            "send_email",
            "default",
            0,
            None,
            violation("items_max_attempts_positive"),
        ),
        (
            "send_email",
            "default",
            5,
            Some(&long),
            violation("items_key_bounded"),
        ),
        ("send_email", "default", 5, Some("k1"), Ok(())),
    ];
    for (kind, lane, max_attempts, key, want) in cases {
        assert_eq!(
            insert_raw(&mut conn, kind, lane, max_attempts, key).await,
            want,
            "insert of kind {kind:?}, lane {lane:?}, max_attempts {max_attempts}"
        );
    }

    // An update that names one of the columns is checked too.
    for (set, rule) in [
        ("lane = 'No Lane'", "items_lane_name"),
        ("max_attempts = 0", "items_max_attempts_positive"),
    ] {
        let r = sqlx::query(&format!("UPDATE items SET {set} WHERE kind = 'send_email'"))
            .execute(&mut conn)
            .await
            .map(|_| ())
            .map_err(refusal);
        assert_eq!(r, violation(rule), "UPDATE … SET {set}");
    }

    // No CHECK constraint of any table of the tree names the four rules
    // (an UPDATE evaluates every CHECK of its row, whatever it sets); the
    // claim's own rules stay constraints.
    let left: Vec<String> = sqlx::query_scalar(
        "SELECT c.conname::text FROM pg_constraint c
         JOIN pg_class t ON t.oid = c.conrelid
         WHERE t.relnamespace = current_schema()::regnamespace AND c.contype = 'c'
           AND t.relname LIKE 'items%'
           AND c.conname IN ('items_kind_name', 'items_lane_name',
                             'items_max_attempts_positive', 'items_key_bounded')",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(left.is_empty(), "CHECK constraints left: {left:?}");
    let kept: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_constraint
         WHERE conrelid = 'items'::regclass AND contype = 'c' AND conname = 'items_claim_fields'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(kept, 1);

    conn.close().await.unwrap();
    pg_drop_schema(&pg_url().await, &schema).await;
}
