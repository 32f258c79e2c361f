//! Scenario 3: the sweep racing a completion, and a fresh reclaim,
//! deterministic at the SQL level. The stores' stale requeue is one
//! conditional statement, so "the sweep reads, then writes" is modelled
//! with two real PostgreSQL sessions: session W holds the row lock in an
//! open transaction (a completion, or a requeue and a new claim); session S
//! runs the real `item_requeue_stale.sql`. The barrier is the lock itself
//! (S is seen waiting in `pg_locks`), never a sleep.
//!
//! The real statement locks `FOR UPDATE SKIP LOCKED`, so it passes a locked
//! row at once; to show the re-check after a lock wait (READ COMMITTED
//! re-evaluation), the same text is also run with `SKIP LOCKED` removed, so
//! S takes its snapshot while the row is claimed and expired, waits, and
//! must then re-check the committed row.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use drover::rules::RetryPolicy;
use drover::store::ClaimParams;
use drover::store::ItemStore;
use drover::testing::{pg_drop_schema, pg_fresh_store, pg_url};
use drover::{NewItem, Store};
use sqlx::{Connection, PgConnection, Row};
use uuid::Uuid;

const STALE_SQL: &str = include_str!("../../../drover-store/sql/postgres/item_requeue_stale.sql");
const COMPLETE_SQL: &str = include_str!("../../../drover-store/sql/postgres/item_complete.sql");

async fn session(url: &str, schema: &str, tenant: Uuid) -> PgConnection {
    let mut c = PgConnection::connect(url).await.expect("connect");
    let _ = (schema, tenant);
    c.ping().await.expect("ping");
    c
}

async fn begin_tenant(c: &mut PgConnection, schema: &str, tenant: Uuid) {
    sqlx::raw_sql(&format!(
        "BEGIN; SET LOCAL search_path TO \"{schema}\"; SET LOCAL drover.tenant_id = '{tenant}'; \
         SELECT set_config('role', (SELECT runtime_role FROM drover_roles()), true)"
    ))
    .execute(&mut *c)
    .await
    .expect("begin");
}

async fn run_stale(c: &mut PgConnection, sql: &str) -> (i64, i64) {
    let p = RetryPolicy::default();
    let r = sqlx::query(sql)
        .bind(1000i64)
        .bind(p.cap.as_secs_f64())
        .bind(p.base.as_secs_f64())
        .bind(p.factor)
        .bind(60i32)
        .fetch_one(&mut *c)
        .await
        .expect("stale statement");
    (r.get("requeued"), r.get("dead_lettered"))
}

/// Waits until backend `pid` waits on a lock.
/// Opens the sweeping session's transaction; returns its backend pid (to
/// see it wait on a row lock) and the sweep statement, with or without
/// `SKIP LOCKED`.
async fn begin_sweep(
    s: &mut PgConnection,
    schema: &str,
    tenant: Uuid,
    skip_locked: bool,
) -> (i32, String) {
    begin_tenant(s, schema, tenant).await;
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *s)
        .await
        .expect("pid");
    let sql = if skip_locked {
        STALE_SQL.to_owned()
    } else {
        STALE_SQL.replace("SKIP LOCKED", "")
    };
    (pid, sql)
}

async fn until_waiting(probe: &mut PgConnection, pid: i32) {
    for _ in 0..500 {
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)",
        )
        .bind(pid)
        .fetch_one(&mut *probe)
        .await
        .expect("pg_locks");
        if waiting {
            return;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("session {pid} never waited on the lock");
}

/// Claims one fresh item and moves its lease to "just passed" for a
/// session that begins afterwards, while W's transaction, begun first,
/// still sees it live (`now()` is the transaction's start).
async fn setup(store: &dyn Store) -> (Uuid, Uuid, Uuid) {
    let item = NewItem::new("race.item", serde_json::json!({}));
    store.item_insert(&item).await.expect("insert");
    let claimed = store
        .item_claim(&ClaimParams {
            lane: "default".into(),
            kinds: vec![],
            worker_id: "w".into(),
            lease: Duration::from_secs(30),
            limit: 1,
        })
        .await
        .expect("claim");
    let token = claimed[0].claim_token.expect("token");
    (item.tenant_id, item.id, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_racing_a_completion_reverts_nothing() {
    let url = pg_url().await;
    let (store, schema) = pg_fresh_store().await;
    for skip_locked in [true, false] {
        let (tenant, id, token) = setup(&*store).await;
        let mut w = session(&url, &schema, tenant).await;
        let mut s = session(&url, &schema, tenant).await;
        let mut probe = session(&url, &schema, tenant).await;
        // W begins first: its now() is before the lease passes.
        begin_tenant(&mut w, &schema, tenant).await;
        sqlx::query("SELECT now()")
            .execute(&mut w)
            .await
            .expect("pin W's now");
        sqlx::query(&format!(
            "UPDATE \"{schema}\".items SET lease_expires_at = clock_timestamp() WHERE id = $1"
        ))
        .bind(id)
        .execute(&mut probe)
        .await
        .expect("expire");
        // W completes (row locked, not committed).
        let done = sqlx::query(COMPLETE_SQL)
            .bind(id)
            .bind(token)
            .bind(None::<serde_json::Value>)
            .execute(&mut w)
            .await
            .expect("complete");
        assert_eq!(done.rows_affected(), 1, "W's lease was live at its now()");
        // S: the sweep, which sees the item claimed and expired.
        let (spid, sql) = begin_sweep(&mut s, &schema, tenant, skip_locked).await;
        let sweep = async {
            let r = run_stale(&mut s, &sql).await;
            sqlx::raw_sql("COMMIT")
                .execute(&mut s)
                .await
                .expect("commit S");
            r
        };
        let release = async {
            if !skip_locked {
                until_waiting(&mut probe, spid).await;
            }
            sqlx::raw_sql("COMMIT")
                .execute(&mut w)
                .await
                .expect("commit W");
        };
        let ((requeued, dead), ()) = tokio::join!(sweep, release);
        let item = store.item_get(tenant, id).await.expect("get").expect("row");
        support::report(
            "3a sweep racing a completion (PostgreSQL SQL)",
            if skip_locked {
                "real statement (SKIP LOCKED)"
            } else {
                "same statement, waiting on the lock"
            },
            &format!(
                "completed items reverted {} | requeued {requeued} dead {dead}",
                i32::from(item.status != drover::Status::Done)
            ),
        );
        assert_eq!((requeued, dead), (0, 0));
        assert_eq!(
            item.status,
            drover::Status::Done,
            "the sweep reverted a completed item"
        );
        assert_eq!(item.attempts, 0);
    }
    pg_drop_schema(&url, &schema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_after_a_fresh_reclaim_leaves_the_new_claim() {
    let url = pg_url().await;
    let (store, schema) = pg_fresh_store().await;
    for skip_locked in [true, false] {
        let (tenant, id, t1) = setup(&*store).await;
        let mut w = session(&url, &schema, tenant).await;
        let mut s = session(&url, &schema, tenant).await;
        let mut probe = session(&url, &schema, tenant).await;
        sqlx::query(&format!(
            "UPDATE \"{schema}\".items SET lease_expires_at = clock_timestamp() WHERE id = $1"
        ))
        .bind(id)
        .execute(&mut probe)
        .await
        .expect("expire");
        // W: another sweeper hands it back (row locked, not committed).
        begin_tenant(&mut w, &schema, tenant).await;
        let (requeued, _) = run_stale(&mut w, STALE_SQL).await;
        assert_eq!(requeued, 1);
        // S: a sweep that read the item with t1 as expired.
        let (spid, sql) = begin_sweep(&mut s, &schema, tenant, skip_locked).await;
        let sweep = async {
            let r = run_stale(&mut s, &sql).await;
            sqlx::raw_sql("COMMIT")
                .execute(&mut s)
                .await
                .expect("commit S");
            r
        };
        let reclaim = async {
            if !skip_locked {
                until_waiting(&mut probe, spid).await;
            }
            // W: the item becomes claimable now (the requeue's delay
            // cleared) and is claimed again with t2, in the same
            // transaction, as the claim statement would.
            let t2 = sqlx::query(
                "UPDATE items SET available_at = now(), status = 'claimed', claim_token = gen_random_uuid(), \
                 claim_seq = claim_seq + 1, claimed_by = 'w2', lease_expires_at = now() + interval '30 seconds' \
                 WHERE id = $1 AND status = 'pending' RETURNING claim_token",
            )
            .bind(id)
            .fetch_one(&mut w)
            .await
            .expect("reclaim")
            .get::<Uuid, _>(0);
            sqlx::raw_sql("COMMIT")
                .execute(&mut w)
                .await
                .expect("commit W");
            t2
        };
        let ((requeued, dead), t2) = tokio::join!(sweep, reclaim);
        let t2 = Some(t2);
        let item = store.item_get(tenant, id).await.expect("get").expect("row");
        let touched = item.claim_token != t2 || item.status != drover::Status::Claimed;
        support::report(
            "3b sweep after a fresh reclaim (PostgreSQL SQL)",
            if skip_locked {
                "real statement (SKIP LOCKED)"
            } else {
                "same statement, waiting on the lock"
            },
            &format!(
                "new claims touched {} | requeued {requeued} dead {dead}",
                i32::from(touched)
            ),
        );
        assert_ne!(t2, Some(t1));
        assert_eq!(
            (requeued, dead),
            (0, 0),
            "the late sweep handed back a live claim"
        );
        assert!(!touched, "the new claim was touched: {item:?}");
        assert_eq!(item.attempts, 1, "one attempt for the one rescue");
    }
    pg_drop_schema(&url, &schema).await;
}
