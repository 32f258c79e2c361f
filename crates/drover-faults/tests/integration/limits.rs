//! Scenario: flow control under faults. Three workers (capacity 20, a
//! prefetch of 20) drain items of one kind spread over groups of two
//! tenants (so the claims are the fair limited claim; fed in
//! rounds, one item per group each, as the backlog drains), under a kind
//! limit of 8 and a per-group limit of 1 set through the queue API, while
//! workers are killed (-9), one is stopped (SIGSTOP) until the sweep has
//! handed back what it held, the PostgreSQL server restarts, and every
//! worker is restarted in turn (SIGTERM, drain, start).
//!
//! The limits checker (`drover_faults::limits_checker`) then reads the
//! history: claims beyond a limit, runs of one group overlapping outside a
//! lease-loss window, groups started out of enqueue order; the checker of
//! the other scenarios gives lost items and duplicate completions. All five
//! must be 0. The per-group limit is ordered (`LimitSpec::ordered`), so
//! the order count is asserted too.
//!
//! `parking_under_faults_*` run the same with four groups thousands deep,
//! so the sweep parks their backlogs and claims give parked items back
//! while the faults strike.
//!
//! The last two tests break the limit on purpose (the worker's
//! `--break-limits`: every claim admits past it) and show the checker
//! reports it.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::support;

use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::Principal;
use drover::store::limits::{LimitScope, LimitSpec, OnDeadLetter};
use drover_faults::checker::Figures;
use drover_faults::limits_checker::{self, LimitConfig, LimitFigures};
use drover_faults::scale;
use rand::Rng;
use sqlx::ConnectOptions;
use support::{Db, Run, report};

const KIND: &str = "effects.grouped";
const KIND_LIMIT: u32 = 8;
const GROUP_LIMIT: u32 = 1;
/// How long each run works before its effect.
const RUN_MS: u64 = 20;
const LEASE: Duration = Duration::from_secs(2);
const FLAGS: [&str; 12] = [
    "--lease",
    "2s",
    "--sweep-interval",
    "1s",
    // A claim that comes back short (the limit full) idles the lane until
    // the next poll, and a slot freed elsewhere wakes no one: the poll
    // paces a limited drain, so it is short here.
    "--poll-interval",
    "100ms",
    "--capacity",
    "20",
    "--prefetch",
    "20",
    // A run hit by several faults waits out a retry delay that doubles
    // with its attempts: capped at 1 s, so the drain is about recovery.
    "--retry-cap",
    "1s",
];

/// The scenario's size: reduced by default, the with
/// `DROVER_FAULT_FULL=1`.
#[derive(Debug, Clone, Copy)]
struct Size {
    items: usize,
    groups: usize,
    /// At most this many items open while the producer feeds the rounds.
    backlog: i64,
    kills: usize,
    stops: usize,
    restarts: usize,
}

impl Size {
    fn pick(postgres: bool) -> Size {
        Size {
            items: scale::pick(2_000, 20_000),
            groups: scale::pick(40, 200),
            backlog: BACKLOG,
            kills: scale::pick(5, 50),
            stops: scale::pick(1, 2),
            restarts: if postgres { scale::pick(1, 3) } else { 0 },
        }
    }

    /// Few groups, each deeper than a parking pass's threshold
    /// (`drover_store::parking::deep`), so the sweep parks their backlogs
    /// and the claims give parked items back under the faults.
    fn parking(postgres: bool) -> Size {
        // Each group must still hold more than `deep(1)` due items once the
        // feed (one commit per round) is in: 2,000 each over two groups,
        // 1,500 each over four at full size.
        Size {
            items: scale::pick(4_000, 6_000),
            groups: scale::pick(2, 4),
            backlog: 6_000,
            kills: 5,
            stops: 1,
            restarts: if postgres { 1 } else { 0 },
        }
    }

    fn describe(&self) -> String {
        format!(
            "{} items over {} groups (fed with <= {} open), kind limit {KIND_LIMIT}, per group {GROUP_LIMIT}, 3 workers x 20 (prefetch 20), {} kills, {} SIGSTOP past the lease, {} PG restarts, 1 rolling restart",
            self.items, self.groups, self.backlog, self.kills, self.stops, self.restarts
        )
    }
}

/// Sets the kind's and the per-group limit through the queue API (the
/// per-group one ordered when `ordered`); whether the per-group limit is
/// ordered, as the store reports the setting.
async fn set_limits(run: &Run, ordered: bool) -> bool {
    let p = Principal::system();
    run.queue
        .limit_set(&p, &LimitScope::Kind(KIND.into()), KIND_LIMIT)
        .await
        .expect("kind limit");
    let group = run
        .queue
        .limit_set(
            &p,
            &LimitScope::KindPerGroup(KIND.into()),
            if ordered {
                LimitSpec::ordered(OnDeadLetter::Continue)
            } else {
                LimitSpec::concurrency(GROUP_LIMIT)
            },
        )
        .await
        .expect("per-group limit");
    // Read from the setting as stored: the order is asserted only for a
    // limit the store says is ordered.
    serde_json::to_value(&group)
        .ok()
        .and_then(|v| v.get("ordered").and_then(serde_json::Value::as_bool))
        .unwrap_or(false)
}

/// At most this many items open (pending or claimed) while the producer
/// feeds the rounds. On SQLite a limited claim whose limit is full reads
/// every available pending item of its lane inside the write transaction
/// (pages of 256): with all 20,000 queued at once the claims held the
/// single writer's lock nearly all the time and the drain stalled (7 done
/// in 95 s; see docs/reliability.md). The reduced size stays under it.
const BACKLOG: i64 = 2_000;

/// Enqueues `items` over `groups` in rounds, keeping at most [`BACKLOG`]
/// open: round `r` holds the `r`-th item of every group, one enqueue each,
/// each committed before the next, so every group's enqueue order is
/// unambiguous; records that order. A round is never in flight while
/// `quiet` is held (a server restart).
async fn enqueue_groups(
    run: &Run,
    items: usize,
    groups: usize,
    backlog: i64,
    quiet: &tokio::sync::Mutex<()>,
) {
    for pos in 0..items / groups {
        while run.open_items().await > backlog - groups as i64 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _round = quiet.lock().await;
        let mut batch = Vec::with_capacity(groups);
        let mut order = Vec::with_capacity(groups);
        for g in 0..groups {
            let group = format!("g{g:03}");
            let op = format!("op-{}", uuid::Uuid::new_v4().simple());
            // Two tenants, the groups alternating: the limited claim then
            // shares its starts between them (fair share is on by default),
            // so the fair limited claim is the one under faults.
            let tenant = if g % 2 == 0 {
                uuid::Uuid::nil()
            } else {
                uuid::Uuid::from_u128(0xB)
            };
            let mut item = NewItem::new(KIND, serde_json::json!({"op_id": op, "ms": RUN_MS}))
                .with_group(group.clone())
                .with_tenant(tenant);
            item.max_attempts = 25;
            order.push((item.id, group, i32::try_from(pos).unwrap()));
            batch.push(item);
        }
        run.queue
            .enqueue_many(&Principal::system(), batch)
            .await
            .expect("enqueue");
        run.record_order(&order).await;
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Kill,
    Stop,
    Restart,
    Rolling,
}

/// The faults, each at the share of the items done when it strikes: kills
/// at random, the others spread evenly.
fn plan(size: &Size) -> Vec<(f64, Fault)> {
    let mut rng = rand::rng();
    let mut plan: Vec<(f64, Fault)> = (0..size.kills)
        .map(|_| (rng.random_range(0.03..0.9), Fault::Kill))
        .collect();
    let spread = |n: usize, from: f64, to: f64| {
        (0..n).map(move |i| from + (to - from) * (i as f64 + 1.0) / (n as f64 + 1.0))
    };
    plan.extend(spread(size.stops, 0.1, 0.8).map(|f| (f, Fault::Stop)));
    plan.extend(spread(size.restarts, 0.05, 0.85).map(|f| (f, Fault::Restart)));
    plan.push((0.6, Fault::Rolling));
    plan.sort_by(|a, b| a.0.total_cmp(&b.0));
    plan
}

async fn done_count(run: &Run) -> i64 {
    loop {
        let n = run.count_status("done").await;
        if n >= 0 {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `target` items are done.
async fn wait_done(run: &Run, target: i64, fault: Fault) {
    let until = Instant::now() + Duration::from_secs(300);
    while done_count(run).await < target {
        assert!(
            Instant::now() < until,
            "the drain stalled before {fault:?} at {target} done: {:?}",
            run.figures().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the test's own pool answers again after a restart.
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

/// Runs of process `pid` started within the last second and not ended.
async fn running(run: &Run, pid: u32) -> i64 {
    let pid = i64::from(pid);
    match &run.db {
        Db::Pg { pool, .. } => sqlx::query_scalar(
            "SELECT count(*) FROM drover.runs WHERE pid = $1 AND ended_at IS NULL \
             AND started_at > clock_timestamp() - interval '1 second'",
        )
        .bind(i32::try_from(pid).unwrap_or(0))
        .fetch_one(pool)
        .await
        .unwrap_or(0),
        Db::Sqlite { pool, .. } => sqlx::query_scalar(
            "SELECT count(*) FROM runs WHERE pid = ?1 AND ended_at IS NULL \
             AND started_at > CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) - 1000000",
        )
        .bind(pid)
        .fetch_one(pool)
        .await
        .unwrap_or(0),
    }
}

/// SIGSTOPs `w` at a moment it holds no write lock of the database's.
///
/// On SQLite a process stopped inside a write transaction keeps the file's
/// only write lock: every writer, the sweep included, then waits for it to
/// run again, so no lease can be seen to pass. The stop is then undone and
/// tried again until the test's own connection can take the write lock
/// while the worker is stopped. (On PostgreSQL a stopped claim transaction
/// holds its scope locks, so other claims wait, but the sweep's hand-back
/// does not.)
async fn stop_outside_a_write(run: &Run, w: &drover_faults::procs::Proc) {
    let Db::Sqlite { path, .. } = &run.db else {
        w.stop();
        return;
    };
    let probe = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(Duration::from_secs(2));
    for _ in 0..50 {
        w.stop();
        let mut c = probe.connect().await.expect("probe connection");
        if sqlx::query("BEGIN IMMEDIATE").execute(&mut c).await.is_ok() {
            sqlx::query("ROLLBACK")
                .execute(&mut c)
                .await
                .expect("rollback");
            return;
        }
        w.cont();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the worker held the write lock at every one of 50 stops");
}

/// SIGSTOPs a worker (one in the middle of a run if possible) until its
/// lease has passed and the sweep has handed back everything it held, then
/// SIGCONTs it. Returns how many claims it held when stopped.
async fn stop_past_the_lease(run: &Run, workers: &[drover_faults::procs::Proc]) -> i64 {
    // A worker in the middle of a run, if one is within a few seconds: the
    // run then outlives its claim (a lease-loss window).
    let until = Instant::now() + Duration::from_secs(5);
    let mut victim = None;
    while victim.is_none() && Instant::now() < until {
        for (i, w) in workers.iter().enumerate() {
            if running(run, w.pid()).await > 0 {
                victim = Some(i);
                break;
            }
        }
    }
    let w = &workers[victim.unwrap_or(0)];
    stop_outside_a_write(run, w).await;
    let stopped = Instant::now();
    let held_at_stop = run.claimed_by(w.pid()).await;
    let until = stopped + Duration::from_secs(60);
    while stopped.elapsed() < LEASE * 2 || run.claimed_by(w.pid()).await != 0 {
        assert!(
            Instant::now() < until,
            "the sweep never handed back what the stopped worker held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    w.cont();
    held_at_stop
}

/// What the faults did, for the report.
#[derive(Debug, Default)]
struct Struck {
    kills: usize,
    stops: Vec<i64>,
    restarts: usize,
    rolled: usize,
}

async fn strike(
    run: &Run,
    workers: &mut [drover_faults::procs::Proc],
    fault: Fault,
    quiet: &tokio::sync::Mutex<()>,
    s: &mut Struck,
) {
    match fault {
        Fault::Kill => {
            let victim = rand::rng().random_range(0..workers.len());
            workers[victim].kill9();
            workers[victim] = run.spawn(&FLAGS);
            s.kills += 1;
        }
        Fault::Stop => s.stops.push(stop_past_the_lease(run, workers).await),
        Fault::Restart => {
            let _no_round = quiet.lock().await;
            run.cluster().restart_immediate().expect("restart");
            db_ready(run).await;
            s.restarts += 1;
        }
        Fault::Rolling => {
            for w in workers.iter_mut() {
                w.term();
                assert!(
                    w.wait_for(Duration::from_secs(30)).is_some(),
                    "a worker did not drain on SIGTERM:\n{}",
                    w.log_text()
                );
                *w = run.spawn(&FLAGS);
                s.rolled += 1;
            }
        }
    }
}

/// The checker's figures of the run, with the queue's.
async fn check(run: &Run) -> (Figures, LimitFigures, LimitConfig) {
    let cfg = LimitConfig {
        kind: KIND_LIMIT,
        per_group: GROUP_LIMIT,
        // Made on every run and reported; asserted once the limit is ordered.
        check_order: true,
    };
    let history = run.limit_history(KIND).await;
    (
        run.figures().await,
        limits_checker::check(&history, &cfg),
        cfg,
    )
}

/// `parks`: the groups are deep, so the sweep must have parked (sampled
/// from the store while they are).
async fn limits_under_faults(run: Run, backend: &str, size: Size, parks: bool) {
    let ordered = set_limits(&run, true).await;
    assert!(ordered, "the per-group limit reads back ordered");
    let started = Instant::now();
    let mut workers: Vec<_> = (0..3).map(|_| run.spawn(&FLAGS)).collect();
    let mut struck = Struck::default();
    let quiet = tokio::sync::Mutex::new(());
    let faults = async {
        for (share, fault) in plan(&size) {
            wait_done(&run, (size.items as f64 * share) as i64, fault).await;
            strike(&run, &mut workers, fault, &quiet, &mut struck).await;
        }
    };
    // While the groups are deep, how many items the sweep held parked at
    // most (read from the store, every 200 ms, until half are done).
    let parked_max = async {
        let mut max = 0u64;
        while parks && done_count(&run).await < (size.items / 2) as i64 {
            if let Ok(n) = run.queue.store().parked_count().await {
                max = max.max(n);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        max
    };
    let ((), (), parked_max) = tokio::join!(
        enqueue_groups(&run, size.items, size.groups, size.backlog, &quiet),
        faults,
        parked_max
    );
    let drained = run
        .wait_final(Duration::from_secs(scale::pick(300, 1800)))
        .await;
    let wall = started.elapsed().as_secs_f64();
    let (f, lf, cfg) = check(&run).await;
    report(
        &format!("limits under faults ({backend})"),
        &size.describe(),
        &format!(
            "{} | ordered limit {ordered} | {} | faults struck {struck:?} | lease lost logged {} | parked at most {parked_max} | wall {wall:.1}s",
            lf.summary(&f, &cfg),
            f.row(),
            run.log_count("lease lost")
        ),
    );
    assert!(drained, "not drained: {f:?}");
    assert_eq!(f.enqueued, size.items as i64);
    assert_eq!(
        (
            struck.kills,
            struck.stops.len(),
            struck.restarts,
            struck.rolled
        ),
        (size.kills, size.stops, size.restarts, 3),
        "every planned fault struck"
    );
    f.assert_promises_kept();
    assert!(lf.claims >= size.items, "a claim per item at least: {lf:?}");
    assert!(lf.kind_max_held >= 1, "the history holds claims: {lf:?}");
    assert_eq!(lf.beyond_limit(), 0, "claims beyond a limit: {lf:?}");
    assert_eq!(
        lf.group_overlaps, 0,
        "runs of one group overlapping: {lf:?}"
    );
    if ordered {
        assert_eq!(lf.out_of_order, Some(0), "groups out of order: {lf:?}");
    }
    if parks {
        assert!(parked_max > 0, "the sweep parked the deep groups");
        assert_eq!(
            run.queue.store().parked_count().await.expect("parked"),
            0,
            "nothing left parked once drained"
        );
    }
    for w in &mut workers {
        w.term();
    }
    for w in &mut workers {
        let _ = w.wait_for(Duration::from_secs(15));
    }
}

/// A small run with every worker's limits broken: the checker must see it.
async fn broken_limit_is_caught(run: Run, backend: &str) {
    // Not ordered: the head rule alone would keep a group's runs apart,
    // and this run shows the checker catching the broken slot.
    set_limits(&run, false).await;
    let (items, groups) = (400, 10);
    enqueue_groups(&run, items, groups, BACKLOG, &tokio::sync::Mutex::new(())).await;
    let flags = [&FLAGS[..], &["--break-limits"]].concat();
    let mut workers: Vec<_> = (0..3).map(|_| run.spawn(&flags)).collect();
    let drained = run.wait_final(Duration::from_secs(120)).await;
    let (f, lf, cfg) = check(&run).await;
    report(
        &format!("limits broken on purpose ({backend})"),
        &format!("{items} items over {groups} groups, 3 workers x 20, --break-limits"),
        &format!("{} | {}", lf.summary(&f, &cfg), f.row()),
    );
    assert!(drained, "not drained: {f:?}");
    assert!(
        run.log_count("concurrency limits broken on purpose") >= 3,
        "every worker runs with its limits broken"
    );
    assert!(lf.kind_max_held > u64::from(KIND_LIMIT), "{lf:?}");
    assert!(lf.beyond_kind_limit > 0, "the kind's limit: {lf:?}");
    assert!(lf.beyond_group_limit > 0, "a group's limit: {lf:?}");
    assert!(lf.group_overlaps > 0, "runs of one group at once: {lf:?}");
    for w in &mut workers {
        w.term();
    }
}

/// One scenario at a time: side by side, their worker processes and a
/// PostgreSQL server starve one another on two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_under_faults_postgres() {
    let _alone = ONE_AT_A_TIME.lock().await;
    limits_under_faults(
        Run::pg_durable().await,
        "PostgreSQL",
        Size::pick(true),
        false,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_under_faults_sqlite() {
    let _alone = ONE_AT_A_TIME.lock().await;
    limits_under_faults(Run::sqlite().await, "SQLite", Size::pick(false), false).await;
}

/// The scenario with four groups thousands deep: the sweep parks their
/// backlogs and the claims and handovers give parked items back, under the
/// same faults and the same checker (order, overlap, limits, lost, doubled).
async fn parking_under_faults(run: Run, backend: &str) {
    let size = Size::parking(backend == "PostgreSQL");
    limits_under_faults(run, &format!("{backend}, deep groups parked"), size, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parking_under_faults_postgres() {
    let _alone = ONE_AT_A_TIME.lock().await;
    parking_under_faults(Run::pg_durable().await, "PostgreSQL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parking_under_faults_sqlite() {
    let _alone = ONE_AT_A_TIME.lock().await;
    parking_under_faults(Run::sqlite().await, "SQLite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_limit_is_caught_postgres() {
    let _alone = ONE_AT_A_TIME.lock().await;
    broken_limit_is_caught(Run::pg().await, "PostgreSQL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_limit_is_caught_sqlite() {
    let _alone = ONE_AT_A_TIME.lock().await;
    broken_limit_is_caught(Run::sqlite().await, "SQLite").await;
}
