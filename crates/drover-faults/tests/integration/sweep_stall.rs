//! Scenario: a sweeper stopped (SIGSTOP) in the middle of its pass, holding
//! the sweep lease. Another worker must take the lease once it passes and
//! hand back a crashed worker's lease-expired items within lease + 2 sweep
//! intervals; the stopped sweeper, resumed, finds its lease gone and ends
//! its pass.
//!
//! Before the sweep lease, the right to sweep was a PostgreSQL session
//! advisory lock (and a process-local flag on SQLite): the stopped process
//! kept it as long as its connection lived, and no other worker ever
//! requeued an expired item again.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use drover::item::{NewItem, Status};
use drover::maintenance::{SweepConfig, Sweeper};
use drover::queue::Principal;
use support::{Db, Run};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The crashed worker's lease on its items.
const ITEM_LEASE: Duration = Duration::from_secs(3);
/// The other worker's sweep interval.
const INTERVAL: Duration = Duration::from_secs(1);

/// The sweep lease row's holder, read as the test's own (owner) session.
async fn lease_holder(run: &Run) -> Option<String> {
    match &run.db {
        Db::Pg { pool, .. } => sqlx::query_scalar("SELECT holder FROM drover.sweep_lease")
            .fetch_one(pool)
            .await
            .expect("lease row"),
        Db::Sqlite { pool, .. } => sqlx::query_scalar("SELECT holder FROM sweep_lease")
            .fetch_one(pool)
            .await
            .expect("lease row"),
    }
}

async fn wait_log(proc: &drover_faults::procs::Proc, needle: &str, within: Duration) {
    let until = Instant::now() + within;
    while !proc.log_text().contains(needle) {
        assert!(
            Instant::now() < until,
            "no `{needle}` in the worker's log within {within:?}:\n{}",
            proc.log_text()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn stopped_sweeper(run: Run) {
    // A sweeps every 500 ms; its host step sleeps 60 s, abandoned at its 2 s
    // timeout; its lease (2.5 s) outlasts one step.
    let a = run.spawn(&[
        "--sweep-interval",
        "500ms",
        "--sweep-step-sleep",
        "60s",
        "--sweep-step-timeout",
        "2s",
        "--sweep-lease",
        "2500ms",
    ]);
    wait_log(&a, "fault sweep step running", Duration::from_secs(30)).await;
    a.stop();
    let holder = lease_holder(&run).await;
    assert!(
        holder
            .as_deref()
            .is_some_and(|h| h.starts_with(&format!("sweeper:{}:", a.pid()))),
        "A is stopped mid-pass holding the lease (holder {holder:?})"
    );

    // A crashed worker's items, claimed now, expire after ITEM_LEASE.
    let items: Vec<NewItem> = (0..3)
        .map(|i| NewItem::new("sweep.stall", serde_json::json!({"i": i})))
        .collect();
    let ids: Vec<Uuid> = items.iter().map(|i| i.id).collect();
    run.queue
        .enqueue_many(&Principal::system(), items)
        .await
        .expect("enqueue");
    let claimed_at = Instant::now();
    let batch = run
        .queue
        .claim(
            "default",
            &["sweep.stall".to_owned()],
            "crashed",
            ITEM_LEASE,
            3,
        )
        .await
        .expect("claim");
    assert_eq!(batch.items.len(), 3);

    // B: another worker's sweep.
    let b = Sweeper::new(
        run.queue.clone(),
        SweepConfig {
            step_timeout: Duration::from_millis(500),
            lease: Duration::from_secs(2),
            ..SweepConfig::every(INTERVAL)
        },
    )
    .expect("sweeper");
    let stop = CancellationToken::new();
    let sweep = tokio::spawn({
        let stop = stop.clone();
        async move { b.run(stop).await }
    });
    let bound = ITEM_LEASE + 2 * INTERVAL;
    loop {
        let mut all = true;
        for id in &ids {
            let it = run
                .queue
                .store()
                .item_get(Uuid::nil(), *id)
                .await
                .expect("get")
                .expect("item");
            all &= it.status == Status::Pending && it.attempts == 1;
        }
        if all {
            break;
        }
        assert!(
            claimed_at.elapsed() < bound,
            "with A stopped holding the lease, the items were not requeued within {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = claimed_at.elapsed();
    support::report(
        "sweep-stall",
        "3 items",
        &format!("requeued {took:?} after the claim (bound {bound:?})"),
    );

    // A, resumed, meets a lease it no longer holds and ends its pass.
    a.cont();
    wait_log(
        &a,
        "the sweep lease is no longer held",
        Duration::from_secs(20),
    )
    .await;
    stop.cancel();
    sweep.await.expect("sweep task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_sweeper_loses_the_lease_postgres() {
    stopped_sweeper(Run::pg().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_sweeper_loses_the_lease_sqlite() {
    stopped_sweeper(Run::sqlite().await).await;
}
