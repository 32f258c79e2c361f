//! Scenario 2: a worker paused (SIGSTOP) past its lease. The sweep hands the
//! item back, another worker completes it; the resumed worker's renewal,
//! completion and effects write change nothing, it logs the lease lost and
//! drops the handler within one renewal interval, starting no new effect.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::Duration;

use support::{Run, report};

const LEASE: Duration = Duration::from_secs(2);

/// The timestamp of the first log line containing `needle` (tracing's
/// default format starts each line with an RFC 3339 time).
fn logged_at(log: &str, needle: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    log.lines().filter(|l| l.contains(needle)).find_map(|l| {
        let start = l.find("20")?;
        let ts = l[start..]
            .split(|c: char| c.is_whitespace() || c == '\u{1b}')
            .next()?;
        chrono::DateTime::parse_from_rfc3339(ts)
            .ok()
            .map(|t| t.to_utc())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_past_the_lease_postgres() {
    let run = Run::pg().await;
    // The handler's sleep ends while the worker is stopped: on resume the
    // handler would go straight to its effects write.
    run.enqueue("effects.write", 1, 3_000, 5).await;
    let flags = ["--lease", "2s", "--sweep-interval", "1s", "--capacity", "1"];
    // A does not sweep, so B's sweep hands the item back as soon as the
    // lease passes. (A stopped mid-sweep would hold the sweep lease until it
    // passed: `sweep_stall.rs` is that scenario.)
    let a_flags = [&flags[..], &["--no-sweep"]].concat();
    let a = run.spawn(&a_flags);
    let pool = run.pg_pool().clone();
    let started = async {
        loop {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM drover.starts")
                .fetch_one(&pool)
                .await
                .unwrap_or(0);
            if n > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), started)
        .await
        .expect("A starts the item");
    a.stop();
    let paused = tokio::time::Instant::now();
    let before_stop: i64 =
        sqlx::query_scalar("SELECT count(*) FROM drover.effect_log WHERE pid = $1")
            .bind(i32::try_from(a.pid()).unwrap_or(0))
            .fetch_one(&pool)
            .await
            .unwrap_or(-1);
    assert_eq!(
        before_stop, 0,
        "A reached its effect write before it was stopped (the scenario needs it stopped in its sleep)"
    );
    let mut b = run.spawn(&flags);
    // A stays stopped until B's sweep has handed the item back and B has
    // taken it under the next claim, and for at least twice the lease: on
    // a loaded machine B may need longer than that to start, sweep and
    // claim, and the resumed A must meet a claim that is not its own. The
    // claim is read from the transitions log, not the item's row, so a
    // poll starved past B's whole run still sees it.
    let b_holder = format!("%:{}:%", b.pid());
    let handed_to_b = async {
        loop {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM drover.transitions WHERE new_status = 'claimed' \
                 AND new_seq = 2 AND new_holder LIKE $1",
            )
            .bind(&b_holder)
            .fetch_one(&pool)
            .await
            .unwrap_or(0);
            if n > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(Duration::from_secs(60), handed_to_b)
        .await
        .is_err()
    {
        let row: Option<(String, i64, Option<String>, i32)> =
            sqlx::query_as("SELECT status, claim_seq, claimed_by, attempts FROM drover.items")
                .fetch_optional(&pool)
                .await
                .unwrap_or_default();
        let starts: Vec<(i64, i32)> =
            sqlx::query_as("SELECT fencing_token, pid FROM drover.starts ORDER BY seq")
                .fetch_all(&pool)
                .await
                .unwrap_or_default();
        panic!(
            "B's sweep hands the item back and B claims it while A is stopped: item {row:?}, \
             starts (token, pid) {starts:?}, A {} B {}",
            a.pid(),
            b.pid()
        );
    }
    tokio::time::sleep_until(paused + LEASE * 2).await;
    // Read before the signal: every write of the resumed A lands after it,
    // while a write A had sent just before the stop landed long before.
    let resumed_at = chrono::Utc::now();
    let paused_for = paused.elapsed();
    a.cont();
    assert!(
        run.wait_final(Duration::from_secs(30)).await,
        "the item is completed by B"
    );
    tokio::time::sleep(LEASE).await;
    let f = run.figures().await;
    let a_pid = i32::try_from(a.pid()).unwrap_or(0);
    let a_effects: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM drover.effect_log WHERE pid = $1 AND fencing_token = 1",
    )
    .bind(a_pid)
    .fetch_one(&pool)
    .await
    .unwrap_or(-1);
    let a_changed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM drover.effect_log WHERE pid = $1 AND fencing_token = 1 AND changed",
    )
    .bind(a_pid)
    .fetch_one(&pool)
    .await
    .unwrap_or(-1);
    let a_queue_writes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM drover.transitions WHERE writer LIKE $1 AND at > $2 AND old_seq = 1 \
         AND old_status = 'claimed' AND last_error IS DISTINCT FROM 'lease expired'",
    )
    .bind(format!("fw-{}%", a.pid()))
    .bind(resumed_at)
    .fetch_one(&pool)
    .await
    .unwrap_or(-1);
    let token: i64 = sqlx::query_scalar("SELECT fencing_token FROM drover.effects")
        .fetch_one(&pool)
        .await
        .unwrap_or(-1);
    let completer: String = sqlx::query_scalar(
        "SELECT coalesce(old_holder, '?') FROM drover.transitions WHERE new_status = 'done'",
    )
    .fetch_one(&pool)
    .await
    .unwrap_or_default();
    let by_b = completer.contains(&format!(":{}:", b.pid()));
    let log = a.log_text();
    let lost_at = logged_at(&log, "lease lost");
    let drop_secs = lost_at.map(|t| (t - resumed_at).num_milliseconds() as f64 / 1000.0);
    report(
        "2 paused past the lease (PostgreSQL)",
        "1 item, SIGSTOP >= 2 x lease (4 s), until B holds the item",
        &format!(
            "{} | paused {:.2}s | A effect attempts after resume {a_effects} (changed {a_changed}) | A queue writes after resume {a_queue_writes} | effect token {token} | completed by {} | lease lost logged {drop_secs:?}s after SIGCONT",
            f.row(),
            paused_for.as_secs_f64(),
            if by_b { "B" } else { &completer }
        ),
    );
    f.assert_promises_kept();
    assert_eq!(f.done, 1);
    assert_eq!(token, 2, "B's claim (the second) wrote the effect");
    assert!(by_b, "B completed the item (completed by {completer})");
    assert_eq!(a_changed, 0, "A's late effect write changed a row");
    assert_eq!(
        a_effects, 0,
        "A started a side effect after its lease was gone"
    );
    assert_eq!(
        a_queue_writes, 0,
        "a write of A's changed a queue row after the pause"
    );
    assert!(log.contains("lease lost"), "A logs the lease lost:\n{log}");
    let drop_secs =
        drop_secs.unwrap_or_else(|| panic!("a timestamp on the lease-lost line:\n{log}"));
    assert!(
        drop_secs <= (LEASE / 3).as_secs_f64() + 0.5,
        "A dropped the handler {drop_secs}s after SIGCONT"
    );
    b.term();
    let _ = b.wait_for(Duration::from_secs(10));
}
