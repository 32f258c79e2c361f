//! PostgreSQL's counts and lists at scale: the settlement folds final rows
//! into the rollup (and counts stay exact), and every count and list
//! statement the dashboard and the API run is planned as index scans, never
//! a scan of the items table, on a table with enough rows for the planner
//! to mean it, planned with the values as the store runs them (unprepared).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use drover::Status;
use drover::store::{ItemStore, ListFilter};
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use sqlx::{Connection, PgConnection, Row};
use uuid::Uuid;

const COUNTS: &str = include_str!("../../../drover-store/sql/postgres/counts.sql");
const GAUGES_FAILED: &str = include_str!("../../../drover-store/sql/postgres/gauges_failed.sql");
const LIST: &str = include_str!("../../../drover-store/sql/postgres/item_list.sql");

/// Rows loaded for the plan checks: enough that a scan of the table costs
/// the planner far more than the index paths.
const ROWS: i64 = 200_000;

const TENANT_A: Uuid = Uuid::from_u128(0xA);
const TENANT_B: Uuid = Uuid::from_u128(0xB);

/// Loads `n` items in one statement, as the owner: every 50th pending,
/// every 500th claimed, every 40th failed, every 100th cancelled, the rest
/// done; two tenants, three lanes, four kinds; final rows updated an hour
/// ago, so a settlement may fold them in at once.
async fn load(conn: &mut PgConnection, schema: &str, n: i64) {
    sqlx::query(&format!("SET search_path = \"{schema}\""))
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO items (id, tenant_id, kind, lane, payload, status, available_at, max_attempts,
                            claimed_by, claim_token, lease_expires_at, last_error,
                            created_by, created_at, updated_at, updated_by)
         SELECT uuid_generate_v7_like, CASE WHEN g % 3 = 0 THEN $2::uuid ELSE $3::uuid END,
                'kind' || (g % 4), 'lane' || (g % 3), '{}'::jsonb, st,
                now() - interval '2 hours', 5,
                CASE WHEN st = 'claimed' THEN 'w' END,
                CASE WHEN st = 'claimed' THEN gen_random_uuid() END,
                CASE WHEN st = 'claimed' THEN now() + interval '1 hour' END,
                CASE WHEN st = 'failed' THEN 'boom ' || g END,
                '00000000-0000-0000-0000-000000000000', now() - interval '2 hours',
                now() - interval '1 hour', '00000000-0000-0000-0000-000000000000'
         FROM (SELECT g,
                      CASE WHEN g % 500 = 0 THEN 'claimed' WHEN g % 50 = 0 THEN 'pending'
                           WHEN g % 40 = 0 THEN 'failed' WHEN g % 100 = 1 THEN 'cancelled'
                           ELSE 'done' END AS st,
                      -- Time-ordered ids, as UUIDv7 ones are: the sequence
                      -- number in the leading bytes. Every other one leads
                      -- with f, past every child's window: the rows fill
                      -- two partitions of items (the legacy child and the
                      -- default), so each is planned with rows in it.
                      (CASE WHEN g % 2 = 0 THEN 'f' ELSE '0' END || lpad(to_hex(g), 11, '0')
                       || '7000' || '8000' || substr(md5(g::text), 1, 12))::uuid
                          AS uuid_generate_v7_like
               FROM generate_series(1, $1) AS g) AS s",
    )
    .bind(n)
    .bind(TENANT_A)
    .bind(TENANT_B)
    .execute(&mut *conn)
    .await
    .unwrap();
    sqlx::query("ANALYZE items")
        .execute(&mut *conn)
        .await
        .unwrap();
}

/// The expected count of a status among `n` loaded rows.
fn loaded(n: i64, status: &str) -> i64 {
    (1..=n)
        .filter(|g| {
            let s = if g % 500 == 0 {
                "claimed"
            } else if g % 50 == 0 {
                "pending"
            } else if g % 40 == 0 {
                "failed"
            } else if g % 100 == 1 {
                "cancelled"
            } else {
                "done"
            };
            s == status
        })
        .count() as i64
}

fn total(rows: &[drover::store::CountRow], status: Status) -> i64 {
    rows.iter()
        .filter(|r| r.status == status)
        .map(|r| r.count)
        .sum()
}

#[tokio::test]
async fn settlement_folds_final_rows_and_counts_stay_exact() {
    let (store, schema) = pg_fresh_store().await;
    let url = pg_url().await;
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let n = 5_000;
    load(&mut conn, &schema, n).await;
    let before = store.counts().await.unwrap();
    for (s, name) in [
        (Status::Pending, "pending"),
        (Status::Claimed, "claimed"),
        (Status::Done, "done"),
        (Status::Failed, "failed"),
        (Status::Cancelled, "cancelled"),
    ] {
        assert_eq!(total(&before, s), loaded(n, name), "{name} before");
    }
    let finals = loaded(n, "done") + loaded(n, "failed") + loaded(n, "cancelled");
    // Rows updated an hour ago: the first settlement folds in all of them,
    // unless a transaction open for that long holds the mark back.
    assert_eq!(store.counts_settle().await.unwrap(), finals as u64);
    let rolled: i64 = sqlx::query_scalar("SELECT sum(n)::bigint FROM item_counts")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(rolled, finals);
    let mut after = store.counts().await.unwrap();
    let mut before = before;
    let key = |r: &drover::store::CountRow| (r.lane.clone(), r.kind.clone(), r.status);
    before.sort_by_key(key);
    after.sort_by_key(key);
    assert_eq!(after, before, "the rollup answers what the rows did");
    assert_eq!(store.gauges().await.unwrap().failed, loaded(n, "failed"));
    // Nothing new to fold in.
    assert_eq!(store.counts_settle().await.unwrap(), 0);
    drop(conn);
    pg_drop_schema(&url, &schema).await;
}

/// The plan of `sql` (with `$n` bound to `args`, inlined as literals) under
/// the given role and tenant, custom or generic.
async fn plan(
    conn: &mut PgConnection,
    role: &str,
    tenant: Option<Uuid>,
    sql: &str,
    args: &[&str],
    generic: bool,
) -> String {
    let mut tx = conn.begin().await.unwrap();
    sqlx::query(&format!("SET LOCAL ROLE \"{role}\""))
        .execute(&mut *tx)
        .await
        .unwrap();
    if let Some(t) = tenant {
        sqlx::query(&format!("SET LOCAL drover.tenant_id = '{t}'"))
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    let mode = if generic {
        "force_generic_plan"
    } else {
        "force_custom_plan"
    };
    sqlx::query(&format!("SET LOCAL plan_cache_mode = {mode}"))
        .execute(&mut *tx)
        .await
        .unwrap();
    let name = format!("p{}", Uuid::new_v4().simple());
    sqlx::query(&format!("PREPARE {name} AS {sql}"))
        .execute(&mut *tx)
        .await
        .unwrap();
    let rows = sqlx::query(&format!("EXPLAIN EXECUTE {name}({})", args.join(", ")))
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    rows.iter()
        .map(|r| r.get::<String, _>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

fn assert_no_items_scan(what: &str, plan: &str) {
    assert!(
        !plan.contains("Seq Scan on items"),
        "{what}: a scan of the items table\n{plan}"
    );
    // items_final leads with the status: a range on updated_at alone walks
    // every final row's entry.
    assert!(
        !plan.contains("Index Cond: ((updated_at"),
        "{what}: an updated_at range without its status reads the whole index\n{plan}"
    );
}

#[tokio::test]
async fn count_and_list_statements_never_scan_the_items_table() {
    let (store, schema) = pg_fresh_store().await;
    let url = pg_url().await;
    let mut conn = PgConnection::connect(&url).await.unwrap();
    load(&mut conn, &schema, ROWS).await;
    store.counts_settle().await.unwrap();
    sqlx::query("ANALYZE").execute(&mut conn).await.unwrap();
    let (rt, sys): (String, String) =
        sqlx::query_as("SELECT runtime_role::text, system_role::text FROM drover_roles()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let mark: String = sqlx::query_scalar("SELECT settled_to::text FROM item_counts_mark")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let mark = format!("'{mark}'::timestamptz");

    // Counts run unprepared (custom plans): every lane, and one.
    for lane in ["NULL", "'lane1'"] {
        let p = plan(&mut conn, &sys, None, COUNTS, &[&mark, lane], false).await;
        assert_no_items_scan(&format!("counts of lane {lane}"), &p);
    }
    let p = plan(&mut conn, &sys, None, GAUGES_FAILED, &[&mark], false).await;
    assert_no_items_scan("the dead-letter gauge", &p);

    // Lists run unprepared too (custom plans). $1 status, $2 lane, $3 kind,
    // $4 limit, $5 key, $6/$7 created range, $8 error text, $9 cursor,
    // $10 group.
    let variants = [
        ("pending", "'pending'"),
        ("claimed", "'claimed'"),
        ("failed", "'failed'"),
        ("cancelled", "'cancelled'"),
        ("done", "'done'"),
        ("any", "NULL"),
    ];
    let deep = "'00000000-7530-7000-8000-000000000000'::uuid";
    for (name, status) in variants {
        let sql = LIST;
        for (what, lane, kind, err, cursor, group) in [
            ("first page", "NULL", "NULL", "NULL", "NULL", "NULL"),
            ("deep page", "NULL", "NULL", "NULL", deep, "NULL"),
            (
                "lane and kind",
                "'lane1'",
                "'kind1'",
                "NULL",
                "NULL",
                "NULL",
            ),
            ("error text", "NULL", "NULL", "'boom'", "NULL", "NULL"),
            ("group", "NULL", "NULL", "NULL", "NULL", "'customer:1'"),
        ] {
            let args = [
                status, lane, kind, "50", "NULL", "NULL", "NULL", err, cursor, group,
            ];
            let p = plan(&mut conn, &sys, None, sql, &args, false).await;
            assert_no_items_scan(&format!("{name} list, {what}"), &p);
            let p = plan(&mut conn, &rt, Some(TENANT_A), sql, &args, false).await;
            assert_no_items_scan(&format!("{name} list of a tenant, {what}"), &p);
        }
    }
    let p = plan(
        &mut conn,
        &sys,
        None,
        LIST,
        &[
            "'failed'", "NULL", "NULL", "50", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL",
        ],
        false,
    )
    .await;
    assert!(
        p.contains("_stopped_list "),
        "the dead letter walks its index\n{p}"
    );

    // And the store's own list answers through those statements.
    let dead = store
        .item_list(&ListFilter {
            status: Some(Status::Failed),
            limit: 50,
            ..ListFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(dead.len(), 50);
    assert!(dead.iter().all(|i| i.status == Status::Failed));
    assert!(dead.windows(2).all(|w| w[0].id > w[1].id), "newest first");
    drop(conn);
    pg_drop_schema(&url, &schema).await;
}
