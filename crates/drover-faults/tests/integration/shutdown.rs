//! Scenario 7: drain-first shutdown under load. One worker process with
//! capacity 200 runs 200 items (half finish within the grace period, half
//! sleep far past it) and holds more in its prefetch buffer, with more still
//! pending; it gets SIGTERM after its leases have been renewed at least once
//! (so buffered items have waited past the lease they were claimed with).
//!
//! Expected: no claim by that worker after the SIGTERM, the items that
//! finish in time completed, every other item pending again with no attempt
//! spent (started ones cancelled and released, buffered ones released
//! unstarted), nothing left claimed, exit 0.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use support::{Db, Run, report};

const CAPACITY: usize = 200;
const GRACE: Duration = Duration::from_secs(4);

async fn scalar(
    run: &Run,
    pg: &str,
    lite: &str,
    pid: u32,
    at: chrono::DateTime<chrono::Utc>,
) -> i64 {
    let holder = format!("%:{pid}:%");
    match &run.db {
        Db::Pg { pool, .. } => sqlx::query_scalar(pg)
            .bind(holder)
            .bind(at)
            .fetch_one(pool)
            .await
            .expect("query"),
        Db::Sqlite { pool, .. } => sqlx::query_scalar(lite)
            .bind(holder)
            .bind(at.timestamp_micros())
            .fetch_one(pool)
            .await
            .expect("query"),
    }
}

async fn drain_first(run: Run, backend: &str) {
    // 200 short (finish inside the grace), 200 long, interleaved by enqueue
    // order so the 200 started are a mix; then 200 more long ones that the
    // prefetch buffer takes and 100 that stay pending.
    for _ in 0..CAPACITY / 2 {
        run.enqueue("effects.write", 1, 7_000, 5).await;
        run.enqueue("effects.write", 1, 120_000, 5).await;
    }
    run.enqueue("effects.write", 300, 120_000, 5).await;
    let grace = format!("{}s", GRACE.as_secs());
    let mut w = run.spawn(&[
        "--lease",
        "4s",
        "--sweep-interval",
        "1s",
        "--poll-interval",
        "200ms",
        "--capacity",
        "200",
        "--shutdown-grace",
        &grace,
        "--effects-pool",
        "8",
    ]);
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let started = run.starts().await;
        if started >= CAPACITY as i64 {
            break;
        }
        assert!(
            Instant::now() < until,
            "only {started} started:\n{}",
            w.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Past one lease: buffered items were claimed more than a lease ago.
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    let in_flight = run.starts().await;
    let term_at = chrono::Utc::now();
    let t0 = Instant::now();
    w.term();
    let status = w.wait_for(GRACE + Duration::from_secs(20));
    let exit_secs = t0.elapsed().as_secs_f64();
    let pid = w.pid();
    let claims_after = scalar(
        &run,
        "SELECT count(*) FROM drover.transitions WHERE old_status = 'pending' \
         AND new_status = 'claimed' AND new_holder LIKE $1 AND at > $2",
        "SELECT count(*) FROM transitions WHERE old_status = 'pending' \
         AND new_status = 'claimed' AND new_holder LIKE ?1 AND at > ?2",
        pid,
        term_at,
    )
    .await;
    let claims_total = scalar(
        &run,
        "SELECT count(*) FROM drover.transitions WHERE old_status = 'pending' \
         AND new_status = 'claimed' AND new_holder LIKE $1 AND at > $2 - interval '1 day'",
        "SELECT count(*) FROM transitions WHERE old_status = 'pending' \
         AND new_status = 'claimed' AND new_holder LIKE ?1 AND at > ?2 - 86400000000",
        pid,
        term_at,
    )
    .await;
    let q = |pg: &'static str, lite: &'static str| scalar(&run, pg, lite, pid, term_at);
    let short_done = q(
        "SELECT count(*) FROM drover.items WHERE status = 'done' AND (payload->>'ms')::int = 7000 AND $1 <> '' AND $2 IS NOT NULL",
        "SELECT count(*) FROM items WHERE status = 'done' AND json_extract(payload, '$.ms') = 7000 AND ?1 <> '' AND ?2 IS NOT NULL",
    )
    .await;
    let short_started = q(
        "SELECT count(DISTINCT s.item_id) FROM drover.starts s JOIN drover.items i ON i.id = s.item_id \
         WHERE (i.payload->>'ms')::int = 7000 AND $1 <> '' AND $2 IS NOT NULL",
        "SELECT count(DISTINCT s.item_id) FROM starts s JOIN items i ON i.id = s.item_id \
         WHERE json_extract(i.payload, '$.ms') = 7000 AND ?1 <> '' AND ?2 IS NOT NULL",
    )
    .await;
    let attempts_spent = q(
        "SELECT coalesce(sum(attempts), 0)::bigint FROM drover.items WHERE $1 <> '' AND $2 IS NOT NULL",
        "SELECT coalesce(sum(attempts), 0) FROM items WHERE ?1 <> '' AND ?2 IS NOT NULL",
    )
    .await;
    let released_by_sweep = q(
        "SELECT count(*) FROM drover.transitions WHERE last_error = 'lease expired' AND $1 <> '' AND $2 IS NOT NULL",
        "SELECT count(*) FROM transitions WHERE last_error = 'lease expired' AND ?1 <> '' AND ?2 IS NOT NULL",
    )
    .await;
    let claimed = run.count_status("claimed").await;
    let pending = run.count_status("pending").await;
    let done = run.count_status("done").await;
    let f = run.figures().await;
    let log = w.log_text();
    if std::env::var("FAULT_SHOW_LOG").is_ok() {
        eprintln!(
            "--- worker log ({backend}) ---\n{}",
            log.lines().take(60).collect::<Vec<_>>().join("\n")
        );
    }
    report(
        &format!("7 drain-first shutdown ({backend})"),
        "capacity 200, 200 in flight (100 x 7 s, 100 x 120 s), 200 buffered, 100 pending; grace 4 s",
        &format!(
            "in flight at SIGTERM {in_flight} | claims after SIGTERM {claims_after} (claims before {claims_total}) | \
             short started {short_started}, done {short_done} | done {done} pending {pending} claimed {claimed} | \
             attempts spent {attempts_spent} | lease-expired hand-backs {released_by_sweep} | exit {status:?} after {exit_secs:.2}s | {}",
            f.row()
        ),
    );
    assert_eq!(in_flight, CAPACITY as i64, "exactly the capacity started");
    assert!(
        status.is_some_and(|s| s.success()),
        "exit 0 expected, got {status:?}:\n{log}"
    );
    assert!(
        exit_secs < GRACE.as_secs_f64() + 5.0,
        "exit took {exit_secs:.2}s"
    );
    assert_eq!(claims_after, 0, "claims after SIGTERM");
    assert_eq!(
        short_done, short_started,
        "items finishing in the grace completed"
    );
    assert_eq!(done, short_done, "only the short items completed");
    assert_eq!(claimed, 0, "items left claimed by a dead holder");
    assert_eq!(pending + done, f.enqueued);
    assert_eq!(attempts_spent, 0, "an attempt was spent on shutdown");
    assert_eq!(released_by_sweep, 0, "items expired in the buffer");
    assert_eq!(f.duplicate_completions, 0);
    assert_eq!(f.stale_writes_accepted(), 0, "{f:?}");
    assert_eq!(f.effects_mismatch, 0, "{f:?}");
    assert_eq!(f.duplicate_executions, 0, "{f:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_first_shutdown_postgres() {
    drain_first(Run::pg().await, "PostgreSQL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_first_shutdown_sqlite() {
    drain_first(Run::sqlite().await, "SQLite").await;
}
