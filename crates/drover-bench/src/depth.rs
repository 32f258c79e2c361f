//! Depth mode (`drover bench --depth N --duration D`, PostgreSQL): a
//! third-party harness's "throughput cell", and the same cell with parts of
//! the items redesign switched off. This module owns the cell (producers
//! keeping a depth, the measured window, the drain after it), the variants
//! and their order, and the cell's database figures.
//!
//! One cell, in a sandbox schema of its own:
//!
//! 1. The workers start (capacity `--capacity`, in-process or child
//!    processes; handlers that sleep `--handler-ms` after recording their
//!    entry).
//! 2. [`DepthSpec::producers`] producer tasks keep `N` items waiting: each
//!    loops, and whenever the waiting depth is below `N` enqueues up to
//!    `--batch` items in one bulk call ([`top_up`]). The depth is counted
//!    in process, enqueued (calls in flight included) minus handled (the
//!    recorder's distinct handler entries), so no query counts rows on the
//!    hot path.
//! 3. The first [`DepthSpec::warmup`] ([`WARMUP_DEFAULT`], 5 s) is not
//!    counted; throughput = handler entries in the next `D` / `D`. The
//!    depth is sampled every 100 ms over the window.
//! 4. The producers stop; the rest drains (every item ran and none is
//!    pending or claimed), and exactly-once is checked over every item of
//!    the cell.
//! 5. The items partitions' dead tuples and vacuums are read, then `pgbench
//!    -i -s 10` and `pgbench -N -c 20 -j 2 -T 20` run against the same
//!    server ([`crate::pgbench`]); the cell's ratio is throughput / TPS.
//!
//! Variants ([`DepthVariant`]) switch settings that already exist, never a
//! switch added for the bench: the paced vacuum (`vacuum`), the rotation
//! of the items partitions within the run (a short `item_retention` and
//! sweep interval against the default seven days), and the wake-up spread
//! (`spread_fallback` 0, which matters only with several workers). Rounds
//! run every variant once, odd rounds in reverse order, so drift over the
//! run falls on every variant alike.
//!
//! With [`DepthSpec::stock_cluster`] every cell and pgbench run on a
//! throwaway cluster with stock settings (autovacuum on) that the run
//! starts and removes itself; otherwise on the database URL given.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use drover::NewItem;
use drover::queue::Principal;
use drover::testing::cluster::Cluster;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::recorder::Recorder;
use crate::report::depth::{DepthFigures, DepthRow};
use crate::report::{Percentiles, Report};
use crate::standard::{drain_until_empty, report_for};
use crate::target::Target;
use crate::workers::{Fleet, Rss};
use crate::{BenchConfig, BenchError, KIND, LANE, Progress};

/// `--depth`: the items kept waiting (the harness's 4,000).
pub const DEPTH_DEFAULT: u64 = 4_000;
/// The warm-up before the window, not counted.
pub const WARMUP_DEFAULT: Duration = Duration::from_secs(5);
/// Producer tasks topping the depth up.
pub const PRODUCERS_DEFAULT: usize = 4;
/// pgbench's clients (`BENCH.md`'s baseline).
pub const PGBENCH_CLIENTS_DEFAULT: usize = 20;
/// pgbench's run (`BENCH.md`'s baseline).
pub const PGBENCH_DURATION_DEFAULT: Duration = Duration::from_secs(20);
/// The rotation variant's item retention: the first items child (a
/// minute wide, the narrowest) is dropped about this long after its
/// window ends, so within a minute of the workers' start.
pub const SHORT_RETENTION: Duration = Duration::from_secs(2);
/// The rotation variant's sweep interval (the sweep rotates).
pub const SHORT_SWEEP: Duration = Duration::from_secs(1);
/// How long a producer that found the depth full waits before it looks
/// again.
const TOPUP_IDLE: Duration = Duration::from_millis(1);
/// How often the depth is sampled over the window.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// A part of the items redesign switched off (or, for the rotation, on)
/// in one cell; [`DepthVariant::Base`] is the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DepthVariant {
    /// The worker's defaults (the rotation effectively off: seven days'
    /// retention).
    Base,
    /// The paced vacuum off (`vacuum = false`, `DROVER_VACUUM=off`).
    NoVacuum,
    /// The rotation of the items partitions on within the run:
    /// [`SHORT_RETENTION`] and [`SHORT_SWEEP`].
    Rotation,
    /// No wake-up spread (`spread_fallback = 0`): every worker claims at
    /// every wake-up. Differs from the base only with several workers.
    NoSpread,
}

impl DepthVariant {
    /// Every variant but the base, in the order `all` runs them.
    pub const OTHERS: [DepthVariant; 3] = [
        DepthVariant::NoVacuum,
        DepthVariant::Rotation,
        DepthVariant::NoSpread,
    ];

    /// The variant's name (`base`, `no-vacuum`, `rotation`, `no-spread`).
    pub fn name(self) -> &'static str {
        match self {
            DepthVariant::Base => "base",
            DepthVariant::NoVacuum => "no-vacuum",
            DepthVariant::Rotation => "rotation",
            DepthVariant::NoSpread => "no-spread",
        }
    }

    /// What the variant changes from the defaults.
    pub fn settings(self) -> String {
        match self {
            DepthVariant::Base => "defaults".into(),
            DepthVariant::NoVacuum => "vacuum off".into(),
            DepthVariant::Rotation => format!(
                "item_retention {} s, sweep_interval {} s",
                SHORT_RETENTION.as_secs(),
                SHORT_SWEEP.as_secs()
            ),
            DepthVariant::NoSpread => "spread_fallback 0".into(),
        }
    }

    /// Parses a list (`no-vacuum,rotation`, or `all`): the base first,
    /// then each named variant once.
    ///
    /// # Errors
    /// [`drover::Error::InvalidInput`] on `depth_variants` naming an
    /// unknown variant.
    pub fn parse_list(names: &[String]) -> Result<Vec<DepthVariant>, BenchError> {
        let mut out = vec![DepthVariant::Base];
        for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            let add: Vec<DepthVariant> = match name {
                "all" => DepthVariant::OTHERS.to_vec(),
                "base" => vec![],
                _ => match DepthVariant::OTHERS.into_iter().find(|v| v.name() == name) {
                    Some(v) => vec![v],
                    None => {
                        return Err(drover::Error::invalid(
                            "depth_variants",
                            "is a list of no-vacuum, rotation, no-spread (or all)",
                        )
                        .into());
                    }
                },
            };
            for v in add {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        Ok(out)
    }

    /// The run's settings with this variant's changes.
    fn apply(self, config: &BenchConfig) -> BenchConfig {
        let mut c = config.clone();
        match self {
            DepthVariant::Base => {}
            DepthVariant::NoVacuum => c.vacuum = Some(false),
            DepthVariant::Rotation => {
                c.item_retention = Some(SHORT_RETENTION);
                c.sweep_interval = Some(SHORT_SWEEP);
            }
            DepthVariant::NoSpread => c.spread_fallback = Some(Duration::ZERO),
        }
        c
    }
}

/// The pgbench baseline run after each cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgbenchSpec {
    /// `-c`.
    pub clients: usize,
    /// `-T`, rounded up to whole seconds.
    pub duration: Duration,
    /// `pgbench -i -s`.
    pub scale: u32,
}

impl Default for PgbenchSpec {
    fn default() -> Self {
        PgbenchSpec {
            clients: PGBENCH_CLIENTS_DEFAULT,
            duration: PGBENCH_DURATION_DEFAULT,
            scale: crate::http::PGBENCH_SCALE_DEFAULT,
        }
    }
}

/// What depth mode runs.
#[derive(Debug, Clone, PartialEq)]
pub struct DepthSpec {
    /// Items kept waiting.
    pub depth: u64,
    /// The measured window.
    pub duration: Duration,
    /// The warm-up before it, not counted.
    pub warmup: Duration,
    /// Producer tasks.
    pub producers: usize,
    /// The variants of a round, in its order (the base first: see
    /// [`DepthVariant::parse_list`]).
    pub variants: Vec<DepthVariant>,
    /// Rounds; odd rounds run the variants in reverse order.
    pub rounds: u32,
    /// The pgbench baseline; `None` skips it.
    pub pgbench: Option<PgbenchSpec>,
    /// Run on a throwaway stock-settings cluster instead of the URL given.
    pub stock_cluster: bool,
}

impl Default for DepthSpec {
    fn default() -> Self {
        DepthSpec {
            depth: DEPTH_DEFAULT,
            duration: Duration::from_secs(60),
            warmup: WARMUP_DEFAULT,
            producers: PRODUCERS_DEFAULT,
            variants: vec![DepthVariant::Base],
            rounds: 1,
            pgbench: Some(PgbenchSpec::default()),
            stock_cluster: false,
        }
    }
}

impl DepthSpec {
    /// Checks the settings together.
    pub(crate) fn validate(&self, config: &BenchConfig) -> Result<(), BenchError> {
        let bad = |field: &'static str, why: &str| Err(drover::Error::invalid(field, why).into());
        if !self.stock_cluster && !crate::target::is_postgres(&config.database_url) {
            return bad("depth", "runs on PostgreSQL (or --stock-cluster)");
        }
        if self.depth == 0 {
            return bad("depth", "must be at least 1");
        }
        if self.duration.is_zero() {
            return bad("duration", "must be longer than zero");
        }
        if self.producers == 0 || self.rounds == 0 || self.variants.is_empty() {
            return bad("depth", "needs a producer, a round and a variant");
        }
        if let Some(p) = &self.pgbench
            && (p.clients == 0 || p.duration.is_zero() || p.scale == 0)
        {
            return bad("pgbench", "clients, duration and scale must be above zero");
        }
        Ok(())
    }

    /// The variants of round `round`: odd rounds reversed.
    fn order(&self, round: u32) -> Vec<DepthVariant> {
        let mut v = self.variants.clone();
        if round % 2 == 1 {
            v.reverse();
        }
        v
    }
}

/// How many items one producer call enqueues: up to `batch`, enough to
/// bring the waiting depth (`enqueued - handled`) back to `depth`; zero
/// when it is there already.
pub(crate) fn top_up(depth: u64, enqueued: u64, handled: u64, batch: usize) -> u64 {
    let waiting = enqueued.saturating_sub(handled);
    depth.saturating_sub(waiting).min(batch as u64)
}

/// Runs depth mode: every round's cells, each in a sandbox of its own.
///
/// # Errors
/// A cluster that does not start; a cell's errors (see [`cell`]).
pub(crate) async fn run(
    config: &BenchConfig,
    progress: &Progress,
    spec: &DepthSpec,
) -> Result<Report, BenchError> {
    let cluster = if spec.stock_cluster {
        progress.note("starting a throwaway PostgreSQL cluster (stock settings)");
        Some(
            tokio::task::spawn_blocking(Cluster::start_stock)
                .await
                .map_err(|e| BenchError::io("initdb", std::io::Error::other(e)))?
                .map_err(|e| {
                    BenchError::io("starting a throwaway cluster", std::io::Error::other(e))
                })?,
        )
    } else {
        None
    };
    let url = cluster
        .as_ref()
        .map_or_else(|| config.database_url.clone(), |c| c.url());
    let mut figures = DepthFigures {
        depth: spec.depth,
        window_s: spec.duration.as_secs_f64(),
        warmup_s: spec.warmup.as_secs_f64(),
        producers: spec.producers,
        batch: config.batch,
        handler_ms: config.handler.as_secs_f64() * 1e3,
        rounds: spec.rounds,
        server: if spec.stock_cluster {
            "a throwaway stock cluster".into()
        } else {
            "the server given".into()
        },
        pgbench_clients: spec.pgbench.as_ref().map(|p| p.clients),
        pgbench_s: spec.pgbench.as_ref().map(|p| p.duration.as_secs_f64()),
        pgbench_scale: spec.pgbench.as_ref().map(|p| p.scale),
        ..DepthFigures::default()
    };
    let mut rss = Rss::default();
    for round in 0..spec.rounds {
        for variant in spec.order(round) {
            let (row, r, settings) = cell(config, progress, spec, &url, variant, round).await?;
            if figures.rows.is_empty() {
                figures.server = format!("{} ({settings})", figures.server);
            }
            rss = r;
            figures.rows.push(row);
        }
    }
    drop(cluster);
    figures.summarise();
    let mut report = report_for(config, drover::Backend::Postgres, "depth");
    let sum = |f: fn(&DepthRow) -> u64| figures.rows.iter().map(f).sum::<u64>();
    report.enqueued = Some(sum(|r| r.enqueued));
    report.jobs = sum(|r| r.enqueued);
    report.executed = Some(sum(|r| r.executed));
    report.distinct = Some(sum(|r| r.distinct));
    report.duplicates = Some(sum(|r| r.duplicates));
    report.duration_s = Some(spec.duration.as_secs_f64());
    report.achieved_rate = figures.medians.first().map(|m| m.throughput);
    report.rss = Some(rss);
    report.depth = Some(figures);
    Ok(report)
}

/// One cell in a fresh sandbox on `url`, then pgbench; the sandbox is
/// dropped whether the cell succeeded or not.
///
/// # Errors
/// The sandbox cannot be made; a statement fails; the items do not all run
/// within the timeout ([`BenchError::Incomplete`]); pgbench fails.
async fn cell(
    config: &BenchConfig,
    progress: &Progress,
    spec: &DepthSpec,
    url: &str,
    variant: DepthVariant,
    round: u32,
) -> Result<(DepthRow, Rss, String), BenchError> {
    let target = Target::create(url).await?;
    progress.note(&format!(
        "round {round} {} ({}): {}",
        variant.name(),
        variant.settings(),
        target.describe()
    ));
    let cfg = variant.apply(config);
    let mut result = measure(&cfg, &target, progress, spec).await;
    if let (Ok((row, _)), Some(p)) = (&mut result, &spec.pgbench) {
        progress.note(&format!(
            "pgbench -i -s {} then -N -c {} -j 2 -T {}",
            p.scale,
            p.clients,
            crate::pgbench::whole_secs(p.duration)
        ));
        let tps = match target.admin() {
            Ok(admin) => crate::pgbench::tps(admin, url, p.clients, p.duration, p.scale).await,
            Err(e) => Err(e),
        };
        match tps {
            Ok(tps) => {
                row.pgbench_tps = Some(tps);
                row.ratio = (tps > 0.0).then(|| row.throughput / tps);
            }
            Err(e) => result = Err(e),
        }
    }
    let settings = server_settings(&target).await;
    let dropped = target.drop_sandbox().await;
    let (mut row, rss) = result?;
    dropped?;
    row.round = round;
    row.variant = variant.name().into();
    row.settings = variant.settings();
    progress.note(&format!(
        "round {round} {}: {:.0} items/s (depth mean {:.0}), pgbench {}",
        row.variant,
        row.throughput,
        row.depth_mean,
        row.pgbench_tps
            .map_or_else(|| "not run".into(), |t| format!("{t:.0} TPS"))
    ));
    Ok((row, rss, settings?))
}

/// The server's settings a figure depends on, as `name value` pairs.
async fn server_settings(target: &Target) -> Result<String, BenchError> {
    let (av, fsync, sc, sb): (String, String, String, String) = sqlx::query_as(
        "SELECT current_setting('autovacuum'), current_setting('fsync'), \
         current_setting('synchronous_commit'), current_setting('shared_buffers')",
    )
    .fetch_one(target.admin()?)
    .await?;
    Ok(format!(
        "autovacuum {av}, fsync {fsync}, synchronous_commit {sc}, shared_buffers {sb}"
    ))
}

/// Steps 1 to 4 of a cell and its database figures (step 5's first half).
async fn measure(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
    spec: &DepthSpec,
) -> Result<(DepthRow, Rss), BenchError> {
    let recorder = Recorder::new();
    let fleet = Fleet::start(config, target, &recorder).await?;
    let producers = match Producers::start(config, target, spec, &recorder).await {
        Ok(p) => p,
        Err(e) => {
            fleet.stop().await;
            return Err(e);
        }
    };
    let window = observe(target, spec, &recorder, &producers, progress).await;
    let produced = producers.stop().await;
    let ran = match (window, produced) {
        (Ok(w), Ok((calls, enqueued))) => {
            let bar = progress.bar(enqueued, "tail");
            let r = drain_until_empty(target, &recorder, enqueued, config.timeout, &bar).await;
            bar.finish_and_clear();
            r.map(|()| (w, calls, enqueued))
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let rss = fleet.rss();
    fleet.stop().await;
    let (w, calls, enqueued) = ran?;
    let execs = recorder.since(0);
    let total = recorder.total();
    let in_window: Vec<_> = execs
        .iter()
        .filter(|e| e.at_ns >= w.lo_ns && e.at_ns < w.hi_ns)
        .collect();
    let handled = in_window.len() as u64;
    let e2e: Vec<f64> = in_window
        .iter()
        .filter_map(|e| e.lat_ns)
        .map(|ns| ns as f64 / 1e6)
        .collect();
    let (items_dead, items_vacuums) = items_stats(target).await?;
    let row = DepthRow {
        handled,
        throughput: handled as f64 / spec.duration.as_secs_f64(),
        e2e: Percentiles::of(e2e),
        depth_mean: w.depth_mean,
        depth_min: w.depth_min,
        calls,
        enqueued,
        executed: total.executed,
        distinct: total.distinct,
        duplicates: total.executed - total.distinct,
        children_dropped: w.children_dropped,
        items_dead,
        items_vacuums,
        ..DepthRow::default()
    };
    Ok((row, rss))
}

/// The measured window as [`observe`] saw it.
struct Window {
    lo_ns: i64,
    hi_ns: i64,
    depth_mean: f64,
    depth_min: u64,
    children_dropped: u64,
}

/// Waits out the warm-up, then samples the depth over the window; reads
/// the items children at both ends.
async fn observe(
    target: &Target,
    spec: &DepthSpec,
    recorder: &Recorder,
    producers: &Producers,
    progress: &Progress,
) -> Result<Window, BenchError> {
    tokio::time::sleep(spec.warmup).await;
    let before = children(target).await?;
    let bar = progress.bar(spec.duration.as_secs(), "depth");
    let lo_ns = crate::unix_nanos();
    let start = tokio::time::Instant::now();
    let end = start + spec.duration;
    let mut samples: Vec<u64> = Vec::new();
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = tokio::time::sleep_until(end) => break,
        }
        let waiting = producers
            .shared
            .reserved
            .load(Ordering::SeqCst)
            .saturating_sub(recorder.distinct() as u64);
        samples.push(waiting);
        bar.set_position(start.elapsed().as_secs());
    }
    let hi_ns = crate::unix_nanos();
    bar.finish_and_clear();
    let after = children(target).await?;
    Ok(Window {
        lo_ns,
        hi_ns,
        depth_mean: samples.iter().sum::<u64>() as f64 / samples.len().max(1) as f64,
        depth_min: samples.iter().copied().min().unwrap_or(0),
        children_dropped: before.difference(&after).count() as u64,
    })
}

/// The items children (range partitions) now.
async fn children(target: &Target) -> Result<BTreeSet<String>, BenchError> {
    let names: Vec<String> = sqlx::query_scalar("SELECT name FROM items_children()")
        .fetch_all(target.admin()?)
        .await?;
    Ok(names.into_iter().collect())
}

/// Dead tuples and manual vacuums over the items partitions.
async fn items_stats(target: &Target) -> Result<(i64, i64), BenchError> {
    let row: (Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT sum(n_dead_tup)::bigint, sum(vacuum_count)::bigint FROM pg_stat_user_tables \
         WHERE relid IN (SELECT relid FROM pg_partition_tree('items'))",
    )
    .fetch_one(target.admin()?)
    .await?;
    Ok((row.0.unwrap_or(0), row.1.unwrap_or(0)))
}

/// What the producers share: items enqueued or being enqueued, items
/// enqueued, calls made.
#[derive(Debug, Default)]
struct Shared {
    reserved: AtomicU64,
    enqueued: AtomicU64,
    calls: AtomicU64,
}

impl Shared {
    /// Reserves the items of one call by [`top_up`]'s rule (zero: the
    /// depth is full).
    fn reserve(&self, depth: u64, handled: u64, batch: usize) -> u64 {
        let mut cur = self.reserved.load(Ordering::SeqCst);
        loop {
            let n = top_up(depth, cur, handled, batch);
            if n == 0 {
                return 0;
            }
            match self
                .reserved
                .compare_exchange(cur, cur + n, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return n,
                Err(now) => cur = now,
            }
        }
    }
}

/// The running producer tasks.
struct Producers {
    shared: Arc<Shared>,
    stop: CancellationToken,
    tasks: tokio::task::JoinSet<Result<(), BenchError>>,
}

impl Producers {
    /// Starts [`DepthSpec::producers`] tasks over one queue.
    async fn start(
        config: &BenchConfig,
        target: &Target,
        spec: &DepthSpec,
        recorder: &Arc<Recorder>,
    ) -> Result<Producers, BenchError> {
        let queue = target
            .queue(u32::try_from(spec.producers).unwrap_or(4))
            .await?;
        let shared = Arc::new(Shared::default());
        let stop = CancellationToken::new();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..spec.producers {
            let (queue, shared, stop) = (queue.clone(), shared.clone(), stop.clone());
            let (recorder, depth, batch) = (recorder.clone(), spec.depth, config.batch);
            tasks.spawn(async move {
                let principal = Principal::system();
                while !stop.is_cancelled() {
                    let n = shared.reserve(depth, recorder.distinct() as u64, batch);
                    if n == 0 {
                        tokio::select! {
                            () = stop.cancelled() => break,
                            () = tokio::time::sleep(TOPUP_IDLE) => continue,
                        }
                    }
                    let t = crate::unix_nanos();
                    let items: Vec<NewItem> = (0..n)
                        .map(|_| NewItem::new(KIND, json!({ "t_ns": t })).with_lane(LANE))
                        .collect();
                    queue.enqueue_many(&principal, items).await?;
                    shared.enqueued.fetch_add(n, Ordering::SeqCst);
                    shared.calls.fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            });
        }
        Ok(Producers {
            shared,
            stop,
            tasks,
        })
    }

    /// Stops the producers after their calls in flight: the calls made
    /// and the items enqueued.
    async fn stop(mut self) -> Result<(u64, u64), BenchError> {
        self.stop.cancel();
        let mut failed = None;
        while let Some(r) = self.tasks.join_next().await {
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed = Some(e),
                Err(e) => {
                    failed = Some(BenchError::Incomplete(format!("a producer failed: {e}")));
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok((
                self.shared.calls.load(Ordering::SeqCst),
                self.shared.enqueued.load(Ordering::SeqCst),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_producer_tops_the_depth_up_to_n_in_calls_of_at_most_a_batch() {
        // Empty queue: one full batch.
        assert_eq!(top_up(4_000, 0, 0, 1_000), 1_000);
        // 3,990 waiting: only the 10 missing.
        assert_eq!(top_up(4_000, 5_000, 1_010, 1_000), 10);
        // Full, or over (handled lags a call in flight): nothing.
        assert_eq!(top_up(4_000, 4_000, 0, 1_000), 0);
        assert_eq!(top_up(4_000, 4_500, 0, 1_000), 0);
        // Handled ahead of enqueued (never in a run): the whole gap.
        assert_eq!(top_up(50, 10, 20, 1_000), 50);
    }

    #[test]
    fn concurrent_reservations_never_overshoot_the_depth() {
        let s = Shared::default();
        let mut got = 0;
        for _ in 0..10 {
            got += s.reserve(2_500, 0, 1_000);
        }
        assert_eq!(got, 2_500);
        assert_eq!(s.reserve(2_500, 300, 1_000), 300);
    }

    #[test]
    fn variants_parse_with_the_base_first_and_alternate_by_round() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let v = DepthVariant::parse_list(&names(&["rotation", "no-vacuum", "rotation"])).unwrap();
        assert_eq!(
            v,
            [
                DepthVariant::Base,
                DepthVariant::Rotation,
                DepthVariant::NoVacuum
            ]
        );
        assert_eq!(DepthVariant::parse_list(&names(&["all"])).unwrap().len(), 4);
        assert!(DepthVariant::parse_list(&names(&["fast"])).is_err());
        let spec = DepthSpec {
            variants: v,
            ..DepthSpec::default()
        };
        assert_eq!(spec.order(0)[0], DepthVariant::Base);
        assert_eq!(spec.order(1)[0], DepthVariant::NoVacuum);
        assert_eq!(spec.order(2)[0], DepthVariant::Base);
    }
}
