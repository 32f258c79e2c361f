//! Soak mode: a fixed offered rate for a long duration on a throwaway
//! PostgreSQL cluster with stock settings ([`drover::testing::cluster`]), sampled
//! every [`WINDOW`](crate::WINDOW) into a CSV file and a PNG chart.
//!
//! What each sample holds (one CSV row per window, `t_s` its end):
//!
//! - `enqueued_per_s`, `throughput_per_s`: items offered and handlers
//!   entered in the window;
//! - `e2e_p50_ms`, `e2e_p99_ms`: enqueue call to handler entry of the items
//!   entered in the window;
//! - `claim_p50_ms`, `claim_p99_ms`, `claims`: a probe claims one item
//!   through the queue API every [`PROBE_EVERY`] (and completes it, so the
//!   item still counts as run once): the claim statement's round trip under
//!   the run's real contention and bloat;
//! - `ready`: items pending and available at the sample;
//! - `xmin_held`: 1 when the `--hold-xmin-*` session held its snapshot at
//!   any time in the window (not only at the sample's instant: a hold of
//!   one window's length, started a little late, straddles two samples);
//! - per drover table `<table>_live`, `<table>_dead`, `<table>_bytes`:
//!   `pg_stat_user_tables.n_live_tup`, `n_dead_tup` and
//!   `pg_total_relation_size`, plus `dead_total` over them all. A
//!   partitioned table (`items`, whose children come and go, and the
//!   outbox and event rings) is one table: its partitions summed.
//!
//! Beside the CSV, the run keeps a wait record ([`crate::waits`]: every
//! session's wait event every 20 ms, a commit probe and a `SELECT 1` probe
//! on sessions of their own, pressure and WAL counters) and writes, for
//! every window whose claim p99 passed ten times the run's median claim
//! p50, what every session waited on and whose the stall was
//! (`stalls.txt`, `waits.csv`; [`crate::stalls`]).
//!
//! Invariants: the sandbox and the cluster are dropped whether the run
//! succeeded or not; every item offered is run exactly once (the probe's
//! items are recorded like the workers'), or the report says otherwise.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::{Executor, PgPool, Row};
use tokio_util::sync::CancellationToken;

use crate::recorder::{Exec, Recorder};
use crate::report::{Percentiles, Report, SoakSummary};
use crate::stalls;
use crate::waits::Waits;
// The row type lives with the report so the chart can draw rows without
// depending on the soak run that samples them; `soak::SoakRow` stays.
pub use crate::report::SoakRow;
use crate::standard::{base_report, drain_until_empty};
use crate::sustained::produce;
use crate::target::Target;
use crate::workers::Fleet;
use crate::{BenchConfig, BenchError, LANE, Progress, WINDOW};
use drover::testing::cluster::Cluster;

/// The interval between the probe's claims.
pub const PROBE_EVERY: Duration = Duration::from_millis(50);
/// `--retention` in soak mode: final items are purged this long after they
/// finished, so the purge runs during even a short soak.
pub const SOAK_RETENTION_DEFAULT: Duration = Duration::from_secs(60);
/// `--sweep-interval` of the soak's workers (the purge runs on the sweep).
pub const SOAK_SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// A session holding a snapshot open mid-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldXmin {
    /// Seconds into the run it begins.
    pub at: Duration,
    /// How long it holds.
    pub hold: Duration,
}

/// What a soak run is told beyond the [`BenchConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct SoakSpec {
    /// Offered items per second.
    pub rate: f64,
    /// How long to offer them.
    pub duration: Duration,
    /// Final items kept this long before the sweep purges them. Default
    /// [`SOAK_RETENTION_DEFAULT`].
    pub retention: Duration,
    /// The held transaction, if any.
    pub hold_xmin: Option<HoldXmin>,
    /// Where `soak.csv` and `soak.png` are written (created if missing).
    pub out_dir: PathBuf,
}

/// One database sample.
#[derive(Debug, Clone, Default)]
struct Sample {
    t_ns: i64,
    ready: i64,
    /// `(table, live, dead, bytes)`, by table name.
    tables: Vec<(String, i64, i64, i64)>,
}

/// One probe claim: when it returned (unix ns) and how long it took (ms).
type ClaimSample = (i64, f64);

pub(crate) async fn run(
    config: &BenchConfig,
    progress: &Progress,
    spec: &SoakSpec,
) -> Result<Report, BenchError> {
    std::fs::create_dir_all(&spec.out_dir)
        .map_err(|e| BenchError::io(format!("creating {}", spec.out_dir.display()), e))?;
    progress.note("starting a throwaway PostgreSQL cluster (stock settings)");
    let cluster = tokio::task::spawn_blocking(Cluster::start_stock)
        .await
        .map_err(|e| BenchError::io("initdb", std::io::Error::other(e)))?
        .map_err(|e| BenchError::io("starting a throwaway cluster", std::io::Error::other(e)))?;
    let target = Target::create(&cluster.url()).await?;
    progress.note(&format!(
        "sandbox: {} on {}",
        target.describe(),
        cluster.url()
    ));
    let result = soak(config, &target, progress, spec).await;
    let dropped = target.drop_sandbox().await;
    // The cluster's own log (checkpoints, slow statements, lock waits) beside
    // the figures, so a stall in them can be read against the server's side.
    let log_copy = spec.out_dir.join("postgres.log");
    match std::fs::copy(cluster.log_path(), &log_copy) {
        Ok(_) => progress.note(&format!("server log: {}", log_copy.display())),
        Err(e) => progress.note(&format!("no server log: {e}")),
    }
    drop(cluster);
    let report = result?;
    dropped?;
    Ok(report)
}

async fn soak(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
    spec: &SoakSpec,
) -> Result<Report, BenchError> {
    let mut report = base_report(config, target, "soak");
    let admin = target.admin()?.clone();
    let schema = target.schema.clone().unwrap_or_default();
    let recorder = Recorder::new();
    let mut fleet_config = config.clone();
    fleet_config.item_retention = Some(spec.retention);
    fleet_config.sweep_interval = Some(SOAK_SWEEP_INTERVAL);
    let fleet = Fleet::start(&fleet_config, target, &recorder).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let stop = CancellationToken::new();
    let start = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let waits = match Waits::start(&admin, &schema, &stop).await {
        Ok(w) => w,
        Err(e) => {
            fleet.stop().await;
            return Err(e);
        }
    };
    let sampler = tokio::spawn(sample_loop(
        admin.clone(),
        schema,
        start,
        samples.clone(),
        stop.clone(),
    ));
    let claims = Arc::new(Mutex::new(Vec::<ClaimSample>::new()));
    let probe_queue = target.queue(2).await?;
    let prober = tokio::spawn(probe_loop(
        probe_queue,
        recorder.clone(),
        claims.clone(),
        stop.clone(),
    ));
    // The held snapshot's start and end, unix ns (end `i64::MAX` while held).
    let held: Arc<Mutex<Option<(i64, i64)>>> = Arc::new(Mutex::new(None));
    let holder = spec.hold_xmin.map(|h| {
        tokio::spawn(hold_loop(
            admin.clone(),
            h,
            start,
            held.clone(),
            progress.clone(),
            stop.clone(),
        ))
    });

    let produced = produce(config, target, progress, spec.rate, spec.duration).await;
    // One last sample at the end of the offering, then stop the helpers.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.cancel();
    let _ = sampler.await;
    let _ = prober.await;
    let record = waits.finish().await;
    let held_result = match holder {
        Some(h) => h
            .await
            .unwrap_or_else(|e| Err(BenchError::io("held snapshot", std::io::Error::other(e)))),
        None => Ok(()),
    };
    let (start_ns, log) = match produced.and_then(|p| held_result.map(|()| p)) {
        Ok(p) => p,
        Err(e) => {
            fleet.stop().await;
            return Err(e);
        }
    };
    let enqueued = log.iter().map(|(_, n)| n).sum::<u64>();
    let bar = progress.bar(enqueued, "tail");
    let drained = drain_until_empty(target, &recorder, enqueued, config.timeout, &bar).await;
    bar.finish_and_clear();
    report.rss = Some(fleet.rss());
    fleet.stop().await;
    drained?;

    let samples = std::mem::take(&mut *samples.lock().unwrap_or_else(|p| p.into_inner()));
    let claims = std::mem::take(&mut *claims.lock().unwrap_or_else(|p| p.into_inner()));
    let held = held
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map(|(a, b)| {
            (
                (a - start_ns) as f64 / 1e9,
                (b.min(crate::unix_nanos()) - start_ns) as f64 / 1e9,
            )
        });
    let execs = recorder.since(0);
    let rows = rows(start_ns, &samples, &execs, &claims, &log, held);
    let mut soak_summary = write_outputs(spec, progress, start_ns, &rows, &claims, held)?;
    let window_ns = i64::try_from(WINDOW.as_nanos()).unwrap_or(i64::MAX);
    let found = stalls::analyse(&rows, &claims, &record, start_ns, window_ns);
    write_stalls(spec, progress, &found, &mut soak_summary);
    record_totals(&mut report, spec, enqueued, &recorder, &execs, start_ns);
    report.soak = Some(soak_summary);
    Ok(report)
}

/// Writes the run's CSV, chart and probe-claims file under `spec.out_dir`
/// and answers the summary that names them (a chart or claims file that
/// could not be written is noted, not an error).
fn write_outputs(
    spec: &SoakSpec,
    progress: &Progress,
    start_ns: i64,
    rows: &[SoakRow],
    claims: &[ClaimSample],
    held: Option<(f64, f64)>,
) -> Result<SoakSummary, BenchError> {
    let csv_path = spec.out_dir.join("soak.csv");
    std::fs::write(&csv_path, csv(rows))
        .map_err(|e| BenchError::io(format!("writing {}", csv_path.display()), e))?;
    let png_path = spec.out_dir.join("soak.png");
    let title = format!(
        "drover soak: {} items/s offered for {} s, retention {} s{}",
        spec.rate,
        spec.duration.as_secs(),
        spec.retention.as_secs(),
        spec.hold_xmin
            .map(|h| format!(
                ", snapshot held {}-{} s",
                h.at.as_secs(),
                (h.at + h.hold).as_secs()
            ))
            .unwrap_or_default()
    );
    let chart = crate::chart::soak_chart(&png_path, &title, rows, held);
    let claims_path = spec.out_dir.join("claims.csv");
    let claims_csv = match std::fs::write(&claims_path, claims_text(start_ns, claims)) {
        Ok(()) => Some(claims_path.display().to_string()),
        Err(e) => {
            progress.note(&format!("no claims csv: {e}"));
            None
        }
    };
    let by_5min = span_p99(start_ns, claims, SPAN);
    if let Err(e) = &chart {
        progress.note(&format!("no chart: {e}"));
    }
    let mut soak_summary = summary(rows, spec, &csv_path, chart.map(|()| png_path));
    soak_summary.claim_p99_by_5min_ms = by_5min;
    soak_summary.claims_csv = claims_csv;
    Ok(soak_summary)
}

/// Writes `stalls.txt` and `waits.csv` and puts their figures in the
/// summary (a file that could not be written is noted, not an error: the
/// run's figures stand without it).
fn write_stalls(
    spec: &SoakSpec,
    progress: &Progress,
    found: &stalls::Stalls,
    summary: &mut SoakSummary,
) {
    summary.stall_line_ms = found.line_ms;
    summary.stalled_windows = found.stalled().count();
    summary.stalls_by_place = stalls::by_place(&found.windows);
    let txt = spec.out_dir.join("stalls.txt");
    match std::fs::write(&txt, &found.text) {
        Ok(()) => summary.stalls_txt = Some(txt.display().to_string()),
        Err(e) => progress.note(&format!("no stalls.txt: {e}")),
    }
    let waits_csv = spec.out_dir.join("waits.csv");
    match std::fs::write(&waits_csv, stalls::csv(&found.windows)) {
        Ok(()) => summary.waits_csv = Some(waits_csv.display().to_string()),
        Err(e) => progress.note(&format!("no waits.csv: {e}")),
    }
}

/// The run's counts, rates and end-to-end latencies, from every execution
/// recorded.
fn record_totals(
    report: &mut Report,
    spec: &SoakSpec,
    enqueued: u64,
    recorder: &Recorder,
    execs: &[Exec],
    start_ns: i64,
) {
    let total = recorder.total();
    let all = Percentiles::of(
        execs
            .iter()
            .filter_map(|e| e.lat_ns)
            .map(|ns| ns as f64 / 1e6)
            .collect(),
    );
    let end_ns = start_ns + i64::try_from(spec.duration.as_nanos()).unwrap_or(i64::MAX);
    let within = execs.iter().filter(|e| e.at_ns < end_ns).count();
    report.offered_rate = Some(spec.rate);
    report.enqueued = Some(enqueued);
    report.duration_s = Some(spec.duration.as_secs_f64());
    report.achieved_rate = Some(within as f64 / spec.duration.as_secs_f64());
    report.executed = Some(total.executed);
    report.distinct = Some(total.distinct);
    report.duplicates = Some(total.executed - total.distinct);
    report.latency_executed = Some(all.count);
    report.lat_p50 = Some(all.p50);
    report.lat_p95 = Some(all.p95);
    report.lat_p99 = Some(all.p99);
    report.lat_max = Some(all.max);
}

fn summary(
    rows: &[SoakRow],
    spec: &SoakSpec,
    csv: &Path,
    png: Result<PathBuf, String>,
) -> SoakSummary {
    let items = |r: &SoakRow, f: fn(&(String, i64, i64, i64)) -> i64| {
        r.tables.iter().find(|t| t.0 == "items").map_or(0, f)
    };
    let (png, chart_error) = match png {
        Ok(p) => (Some(p.display().to_string()), None),
        Err(e) => (None, Some(e)),
    };
    SoakSummary {
        csv: csv.display().to_string(),
        png,
        chart_error,
        samples: rows.len(),
        retention_s: spec.retention.as_secs_f64(),
        hold_xmin: spec
            .hold_xmin
            .map(|h| (h.at.as_secs_f64(), h.hold.as_secs_f64())),
        items_dead_peak: rows.iter().map(|r| items(r, |t| t.2)).max().unwrap_or(0),
        dead_total_peak: rows.iter().map(SoakRow::dead_total).max().unwrap_or(0),
        items_bytes_last: rows.last().map_or(0, |r| items(r, |t| t.3)),
        items_bytes_peak: rows.iter().map(|r| items(r, |t| t.3)).max().unwrap_or(0),
        claim_p99_max_ms: rows.iter().map(|r| r.claim.p99).fold(0.0, f64::max),
        claim_p99_by_5min_ms: Vec::new(),
        claims_csv: None,
        e2e_p99_max_ms: rows.iter().map(|r| r.e2e.p99).fold(0.0, f64::max),
        throughput_min_per_s: rows
            .iter()
            .map(|r| r.throughput_per_s)
            .fold(f64::INFINITY, f64::min)
            .min(f64::MAX),
        ..SoakSummary::default()
    }
}

/// Samples the database at the end of every window until `stop`.
async fn sample_loop(
    admin: PgPool,
    schema: String,
    start: Instant,
    out: Arc<Mutex<Vec<Sample>>>,
    stop: CancellationToken,
) {
    let mut k = 1u32;
    loop {
        let due = start + WINDOW * k;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(due.into()) => {}
        }
        k += 1;
        match sample(&admin, &schema).await {
            Ok(s) => out.lock().unwrap_or_else(|p| p.into_inner()).push(s),
            Err(e) => tracing::warn!(error = %e, "soak sample failed"),
        }
    }
}

async fn sample(admin: &PgPool, schema: &str) -> Result<Sample, BenchError> {
    let t_ns = crate::unix_nanos();
    let ready: i64 = sqlx::query(
        "SELECT count(*) FROM items WHERE status = 'pending' AND available_at <= now()",
    )
    .fetch_one(admin)
    .await?
    .try_get(0)?;
    let rows = sqlx::query(
        // A partition counts under its parent (items' children, the outbox
        // and event rings): the table a user knows. A child dropped between
        // the listing and its size reads as no bytes.
        "SELECT coalesce(p.relname, c.relname)::text AS name, sum(s.n_live_tup)::bigint, \
                sum(s.n_dead_tup)::bigint, coalesce(sum(pg_total_relation_size(s.relid)), 0)::bigint \
         FROM pg_stat_user_tables s \
         JOIN pg_class c ON c.oid = s.relid \
         LEFT JOIN pg_inherits i ON i.inhrelid = c.oid \
         LEFT JOIN pg_class p ON p.oid = i.inhparent \
         WHERE s.schemaname = $1 AND c.relkind <> 'p' GROUP BY 1 ORDER BY 1",
    )
    .bind(schema)
    .fetch_all(admin)
    .await?;
    let mut tables = Vec::with_capacity(rows.len());
    for r in rows {
        tables.push((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?));
    }
    Ok(Sample {
        t_ns,
        ready,
        tables,
    })
}

/// Claims one item every [`PROBE_EVERY`], timing the claim, and completes
/// what it got, recording it as run.
async fn probe_loop(
    queue: drover::Queue,
    recorder: Arc<Recorder>,
    out: Arc<Mutex<Vec<ClaimSample>>>,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(PROBE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let t = Instant::now();
        let got = match queue
            .claim(LANE, &[], "soak-probe", Duration::from_secs(30), 1)
            .await
        {
            Ok(g) => g,
            Err(e) => {
                // Recorded with its time: a stall that ends in errors must
                // show in the claims file as the long waits it was, not as
                // a gap.
                let ms = t.elapsed().as_secs_f64() * 1e3;
                out.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((crate::unix_nanos(), ms));
                tracing::warn!(error = %e, ms, "soak probe claim failed");
                continue;
            }
        };
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let at_ns = crate::unix_nanos();
        out.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((at_ns, ms));
        let refs: Vec<&drover::JobContext> = got.items.iter().collect();
        if refs.is_empty() {
            continue;
        }
        for cx in &refs {
            let t_ns = cx.item().payload.get("t_ns").and_then(|v| v.as_i64());
            recorder.record(Exec {
                id: cx.id(),
                at_ns,
                lat_ns: t_ns.map(|t| at_ns - t),
            });
        }
        // A failed completion leaves the item to its lease and the sweep;
        // it then runs again and is counted as a duplicate, never hidden.
        if let Err(e) = queue.complete_many(&refs).await {
            tracing::warn!(error = %e, "soak probe completion failed");
        }
    }
}

/// Holds a snapshot open from `h.at` for `h.hold` (or until `stop`).
async fn hold_loop(
    admin: PgPool,
    h: HoldXmin,
    start: Instant,
    held: Arc<Mutex<Option<(i64, i64)>>>,
    progress: Progress,
    stop: CancellationToken,
) -> Result<(), BenchError> {
    tokio::select! {
        () = stop.cancelled() => return Ok(()),
        () = tokio::time::sleep_until((start + h.at).into()) => {}
    }
    let mut conn = admin.acquire().await?.detach();
    // The snapshot, not the BEGIN, pins the xmin horizon: REPEATABLE READ
    // takes it at the first statement and keeps it to the end.
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;")
        .await?;
    let began = crate::unix_nanos();
    progress.note(&format!(
        "holding a snapshot open from {:.0} s",
        start.elapsed().as_secs_f64()
    ));
    *held.lock().unwrap_or_else(|p| p.into_inner()) = Some((began, i64::MAX));
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(h.hold) => {}
    }
    conn.execute("ROLLBACK").await?;
    *held.lock().unwrap_or_else(|p| p.into_inner()) = Some((began, crate::unix_nanos()));
    progress.note(&format!(
        "released the snapshot at {:.0} s",
        start.elapsed().as_secs_f64()
    ));
    let _ = sqlx::Connection::close(conn).await;
    Ok(())
}

/// The span the claim target is stated over (issue targets: "claim p99 in
/// every 5-minute window").
const SPAN: Duration = Duration::from_secs(300);

/// The p99 of the probe's claims in each `span` from the start (the last
/// span may be partial; an empty span is skipped).
fn span_p99(start_ns: i64, claims: &[ClaimSample], span: Duration) -> Vec<f64> {
    let span_ns = i64::try_from(span.as_nanos()).unwrap_or(i64::MAX).max(1);
    let mut spans: std::collections::BTreeMap<i64, Vec<f64>> = std::collections::BTreeMap::new();
    for &(t, ms) in claims {
        spans
            .entry((t - start_ns).max(0) / span_ns)
            .or_default()
            .push(ms);
    }
    spans
        .into_values()
        .map(|v| Percentiles::of(v).p99)
        .collect()
}

/// Every probe claim: seconds into the run, and its time in ms.
fn claims_text(start_ns: i64, claims: &[ClaimSample]) -> String {
    let mut out = String::from("t_s,claim_ms\n");
    for &(t, ms) in claims {
        let _ = writeln!(out, "{:.3},{ms:.3}", (t - start_ns) as f64 / 1e9);
    }
    out
}

/// One row per sample: the window ending at the sample.
fn rows(
    start_ns: i64,
    samples: &[Sample],
    execs: &[Exec],
    claims: &[ClaimSample],
    log: &[(i64, u64)],
    held: Option<(f64, f64)>,
) -> Vec<SoakRow> {
    let window_ns = i64::try_from(WINDOW.as_nanos()).unwrap_or(i64::MAX);
    let secs = WINDOW.as_secs_f64();
    samples
        .iter()
        .map(|s| {
            let (lo, hi) = (s.t_ns - window_ns, s.t_ns);
            let inside = |t: i64| t >= lo && t < hi;
            let entered: Vec<&Exec> = execs.iter().filter(|e| inside(e.at_ns)).collect();
            let e2e = entered
                .iter()
                .filter_map(|e| e.lat_ns)
                .map(|ns| ns as f64 / 1e6)
                .collect();
            let claim = claims.iter().filter(|c| inside(c.0)).map(|c| c.1).collect();
            let offered: u64 = log.iter().filter(|(t, _)| inside(*t)).map(|(_, n)| n).sum();
            let t_s = (s.t_ns - start_ns) as f64 / 1e9;
            SoakRow {
                t_s,
                enqueued_per_s: offered as f64 / secs,
                throughput_per_s: entered.len() as f64 / secs,
                e2e: Percentiles::of(e2e),
                claim: Percentiles::of(claim),
                ready: s.ready,
                xmin_held: held.is_some_and(|(a, b)| a <= t_s && b >= t_s - secs),
                tables: s.tables.clone(),
            }
        })
        .collect()
}

/// The CSV text: a header naming every column, one line per row. The
/// table columns come from the first row (the set of drover tables does
/// not change during a run).
pub fn csv(rows: &[SoakRow]) -> String {
    let tables: Vec<String> = rows
        .first()
        .map(|r| r.tables.iter().map(|t| t.0.clone()).collect())
        .unwrap_or_default();
    let mut out = String::from(
        "t_s,enqueued_per_s,throughput_per_s,e2e_p50_ms,e2e_p99_ms,claim_p50_ms,claim_p99_ms,claims,ready,xmin_held,dead_total",
    );
    for t in &tables {
        let _ = write!(out, ",{t}_live,{t}_dead,{t}_bytes");
    }
    out.push('\n');
    for r in rows {
        let _ = write!(
            out,
            "{:.1},{:.1},{:.1},{:.3},{:.3},{:.3},{:.3},{},{},{},{}",
            r.t_s,
            r.enqueued_per_s,
            r.throughput_per_s,
            r.e2e.p50,
            r.e2e.p99,
            r.claim.p50,
            r.claim.p99,
            r.claim.count,
            r.ready,
            u8::from(r.xmin_held),
            r.dead_total()
        );
        for t in &tables {
            match r.tables.iter().find(|x| &x.0 == t) {
                Some((_, live, dead, bytes)) => {
                    let _ = write!(out, ",{live},{dead},{bytes}");
                }
                None => out.push_str(",,,"),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_p99_counts_every_claim_of_each_span() {
        let s = 1_000_000_000_000i64;
        let sec = 1_000_000_000i64;
        // Span 0: 100 claims of 1 ms and one of 50 ms; span 2: one of 3 ms;
        // span 1 is empty and skipped.
        let mut claims: Vec<ClaimSample> = (0..100).map(|i| (s + i * sec, 1.0)).collect();
        claims.push((s + 299 * sec, 50.0));
        claims.push((s + 601 * sec, 3.0));
        let p = span_p99(s, &claims, Duration::from_secs(300));
        assert_eq!(p.len(), 2);
        // One slow claim in 101 is under the 1 % the p99 leaves out.
        assert_eq!(p[0], 1.0);
        assert_eq!(p[1], 3.0);
        let text = claims_text(s, &claims[..1]);
        assert_eq!(text, "t_s,claim_ms\n0.000,1.000\n");
    }

    #[test]
    fn csv_names_every_table_column_and_writes_one_line_per_row() {
        let row = SoakRow {
            t_s: 5.0,
            tables: vec![("audit".into(), 0, 0, 8192), ("items".into(), 10, 4, 65536)],
            ..SoakRow::default()
        };
        let text = csv(&[row.clone(), row]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with(
            ",dead_total,audit_live,audit_dead,audit_bytes,items_live,items_dead,items_bytes"
        ));
        assert_eq!(
            lines[0].split(',').count(),
            lines[1].split(',').count(),
            "every row has every column"
        );
        assert!(lines[1].ends_with(",4,0,0,8192,10,4,65536"));
    }
}
