//! Scenario: rate exactness under skewed worker clocks and a PostgreSQL
//! restart (issue 26's target). Three workers drain items of one kind over
//! a few groups of two tenants under a per-group rate (10/1s, burst 3), so
//! the claims are the fair limited claim: one on the
//! machine's clock, one with its clock 10 minutes ahead and one 10 minutes
//! behind (libfaketime: Debian's `faketime` package, which
//! `scripts/test.sh` installs), while the PostgreSQL server restarts once
//! midway.
//!
//! The rate checker (`drover_faults::rates_checker`) reads every claim's
//! transaction clock from the `transitions` log and counts, for every
//! group and every window of several lengths from every start, the windows
//! with more than `R·W/period + B` starts: it must be 0. It also reports
//! utilisation (the share of the starts the rate allowed after the burst
//! that each group took while its work waited). The last test breaks the
//! limiter on purpose (the worker's `--break-limits`) and shows the
//! checker counts violations.
//!
//! Reduced size by default (tens of seconds); `DROVER_FAULT_FULL=1` runs
//! the 10 minutes (6,000 starts per group).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::Principal;
use drover::store::limits::LimitScope;
use drover::store::rates::Rate;
use drover_faults::rates_checker::{self, RateFigures, RateSpec};
use drover_faults::scale;
use support::{Db, Run, report};

const KIND: &str = "effects.grouped";
const RATE: RateSpec = RateSpec {
    count: 10,
    period_ms: 1_000,
    burst: 3,
};
const GROUPS: usize = 4;
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const FLAGS: [&str; 10] = [
    "--lease",
    "5s",
    "--sweep-interval",
    "1s",
    "--poll-interval",
    "100ms",
    "--capacity",
    "20",
    "--retry-cap",
    "1s",
];

/// The environment of a worker whose wall clock is `offset` (`+10m`,
/// `-10m`) off the machine's (its monotonic clock left alone).
fn skewed(offset: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("LD_PRELOAD", LIBFAKETIME),
        ("FAKETIME", offset),
        ("DONT_FAKE_MONOTONIC", "1"),
    ]
}

/// Checks the skew takes: `date +%s` under it is `secs` off.
fn assert_skew(offset: &'static str, secs: i64) {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "libfaketime is needed (apt-get install faketime; scripts/test.sh does)"
    );
    let out = std::process::Command::new("date")
        .arg("+%s")
        .envs(skewed(offset))
        .output()
        .expect("date");
    let skewed: i64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a time");
    let off = skewed - chrono::Utc::now().timestamp();
    assert!((off - secs).abs() < 30, "{offset}: {off} s off");
}

async fn set_rate(run: &Run) {
    run.queue
        .rate_set(
            &Principal::system(),
            &LimitScope::KindPerGroup(KIND.into()),
            Rate::per(RATE.count, Duration::from_millis(RATE.period_ms)).with_burst(RATE.burst),
        )
        .await
        .expect("rate");
}

async fn enqueue(run: &Run, per_group: usize) {
    for chunk in 0..per_group.div_ceil(250) {
        let mut batch = Vec::new();
        for i in chunk * 250..((chunk + 1) * 250).min(per_group) {
            for g in 0..GROUPS {
                let mut item = NewItem::new(
                    KIND,
                    serde_json::json!({"op_id": format!("op-{g}-{i}-{}", uuid::Uuid::new_v4().simple()), "ms": 2}),
                )
                .with_group(format!("g{g}"))
                // Two tenants, the groups alternating: the rated claim
                // shares its starts between them (fair share is on by
                // default), so the fair limited claim is the one measured.
                .with_tenant(if g % 2 == 0 {
                    uuid::Uuid::nil()
                } else {
                    uuid::Uuid::from_u128(0xB)
                });
                item.max_attempts = 25;
                batch.push(item);
            }
        }
        run.queue
            .enqueue_many(&Principal::system(), batch)
            .await
            .expect("enqueue");
    }
}

async fn db_ready(run: &Run) {
    let until = Instant::now() + Duration::from_secs(60);
    while sqlx::query("SELECT 1")
        .execute(run.pg_pool())
        .await
        .is_err()
    {
        assert!(Instant::now() < until, "the server never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn done(run: &Run) -> i64 {
    run.count_status("done").await
}

async fn claims(run: &Run) -> std::collections::BTreeMap<String, Vec<i64>> {
    let Db::Pg { pool, .. } = &run.db else {
        panic!("PostgreSQL only");
    };
    rates_checker::pg_claims(pool, support::SCHEMA, KIND)
        .await
        .expect("claims")
}

/// Claims the worker process `pid` made (its worker id is
/// `host:pid:suffix`).
async fn claims_by(run: &Run, pid: u32) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM drover.transitions WHERE new_status = 'claimed' \
         AND new_seq IS DISTINCT FROM old_seq AND new_holder LIKE $1",
    )
    .bind(format!("%:{pid}:%"))
    .fetch_one(run.pg_pool())
    .await
    .expect("claims by worker")
}

/// Drains `per_group` items per group with three workers, two of them
/// skewed, restarting the server once midway when `restart`.
/// Returns the checker's figures, the wall time and how many claims each
/// worker (on its clock: +0, +10 min, -10 min) made.
async fn drain(
    run: &Run,
    per_group: usize,
    restart: bool,
    extra: &[&str],
) -> (RateFigures, f64, Vec<i64>) {
    set_rate(run).await;
    enqueue(run, per_group).await;
    let flags: Vec<&str> = FLAGS.iter().copied().chain(extra.iter().copied()).collect();
    let started = Instant::now();
    let workers = [
        run.spawn(&flags),
        run.spawn_env(&flags, &skewed("+10m")),
        run.spawn_env(&flags, &skewed("-10m")),
    ];
    let total = (per_group * GROUPS) as i64;
    if restart {
        let until = Instant::now() + Duration::from_secs(600);
        while done(run).await < total / 2 {
            assert!(Instant::now() < until, "stalled before the restart");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        run.cluster().restart_immediate().expect("restart");
        db_ready(run).await;
    }
    let limit = Duration::from_secs(scale::pick(300, 1_800));
    assert!(
        run.wait_final(limit).await,
        "not drained: {:?}",
        run.figures().await
    );
    let wall = started.elapsed().as_secs_f64();
    let mut by_worker = Vec::new();
    for w in &workers {
        by_worker.push(claims_by(run, w.pid()).await);
    }
    (
        rates_checker::check(&claims(run).await, &RATE),
        wall,
        by_worker,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rates_hold_under_skewed_clocks_and_a_restart() {
    assert_skew("+10m", 600);
    assert_skew("-10m", -600);
    // 10/s per group: 150 per group is about 15 s; the full size 10 min.
    let per_group = scale::pick(150, 6_000);
    // Durable: over the immediate restart no acknowledged commit is lost.
    let run = Run::pg_durable().await;
    let (f, wall, by_worker) = drain(&run, per_group, true, &[]).await;
    let figures = run.figures().await;
    report(
        "rate exactness (PostgreSQL)",
        &format!(
            "{GROUPS} groups x {per_group} items, per-group rate 10/1s burst 3, 3 workers (clocks +0, +10 min, -10 min), 1 PG restart"
        ),
        &format!(
            "{} | claims by worker (+0, +10 min, -10 min) {by_worker:?} | {} | wall {wall:.1}s",
            f.summary(),
            figures.row()
        ),
    );
    figures.assert_promises_kept();
    assert!(f.starts >= per_group * GROUPS, "a claim per item: {f:?}");
    assert_eq!(f.violations, 0, "starts over the rate: {f:?}");
    assert!(
        by_worker.iter().all(|n| *n > 0),
        "every worker claimed, the skewed ones too: {by_worker:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_limiter_is_caught() {
    assert_skew("+10m", 600);
    let run = Run::pg().await;
    let (f, _, _) = drain(&run, 60, false, &["--break-limits"]).await;
    report(
        "rate exactness, broken limiter (PostgreSQL)",
        &format!("{GROUPS} groups x 60 items, 3 workers with --break-limits"),
        &f.summary(),
    );
    assert!(
        f.violations > 0,
        "the checker missed a broken limiter: {f:?}"
    );
}
