//! The `BENCH.md` workload: (1) bulk enqueue with no worker running, (2)
//! drain with worker start-up inside the clock, (3) latency of single-item
//! enqueues on a fixed 5 ms schedule after 2 s of idling; then, with
//! [`BenchConfig::bounds`], the raw bounds in the same sandbox
//! ([`crate::bounds`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::Principal;
use serde_json::json;

use crate::recorder::Recorder;
use crate::report::{Percentiles, Report};
use crate::target::Target;
use crate::workers::Fleet;
use crate::{BenchConfig, BenchError, KIND, LANE, Progress};

/// How often the drain end is checked in the database once every item ran.
const EMPTY_POLL: Duration = Duration::from_millis(2);

pub(crate) async fn run(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
) -> Result<Report, BenchError> {
    let producer = target.queue(2).await?;
    let principal = Principal::system();
    let mut report = base_report(config, target, "standard");

    // 1. Bulk enqueue.
    let bar = progress.bar(config.jobs, "enqueue");
    let t0 = Instant::now();
    let mut next = 0u64;
    while next < config.jobs {
        let n = (config.jobs - next).min(config.batch as u64);
        let items: Vec<NewItem> = (next..next + n)
            .map(|i| NewItem::new(KIND, json!({ "n": i })).with_lane(LANE))
            .collect();
        producer.enqueue_many(&principal, items).await?;
        next += n;
        bar.inc(n);
    }
    let enqueue_s = t0.elapsed().as_secs_f64();
    bar.finish_and_clear();
    report.enqueue_s = Some(enqueue_s);
    report.enqueue_rate = Some(config.jobs as f64 / enqueue_s);
    progress.note(&format!(
        "enqueued {} in {enqueue_s:.2} s ({:.0}/s)",
        config.jobs,
        config.jobs as f64 / enqueue_s
    ));

    // 2. Drain: the clock includes starting the workers.
    let recorder = Recorder::new();
    let bar = progress.bar(config.jobs, "drain");
    let t1 = Instant::now();
    let fleet = Fleet::start(config, target, &recorder).await?;
    let drained = drain_until_empty(target, &recorder, config.jobs, config.timeout, &bar).await;
    let drain_s = t1.elapsed().as_secs_f64();
    bar.finish_and_clear();
    report.rss = Some(fleet.rss());
    let drain_end = recorder.len();
    let tally = recorder.tally(0, drain_end);
    report.executed = Some(tally.executed);
    report.distinct = Some(tally.distinct);
    if let Err(e) = drained {
        // Report what ran: a run that did not finish is a finding too.
        fleet.stop().await;
        let total = recorder.total();
        report.duplicates = Some(total.executed - total.distinct);
        report.error = Some(e.to_string());
        progress.note(&format!("drain did not finish: {e}"));
        return Ok(report);
    }
    report.drain_s = Some(drain_s);
    report.drain_rate = Some(config.jobs as f64 / drain_s);
    progress.note(&format!(
        "drained {} in {drain_s:.2} s ({:.0}/s)",
        config.jobs,
        config.jobs as f64 / drain_s
    ));

    // 3. Latency.
    let lat = latency_phase(config, &producer, &recorder, progress).await;
    let total = recorder.total();
    fleet.stop().await;
    let lat = lat?;
    report.duplicates = Some(total.executed - total.distinct);
    report.latency_executed = Some(lat.count);
    report.lat_p50 = Some(lat.p50);
    report.lat_p95 = Some(lat.p95);
    report.lat_p99 = Some(lat.p99);
    report.lat_max = Some(lat.max);
    if config.bounds {
        report.bounds = Some(
            crate::bounds::run(
                config,
                target,
                progress,
                report.enqueue_rate,
                report.drain_rate,
            )
            .await?,
        );
    }
    Ok(report)
}

/// The report's identity fields.
pub(crate) fn base_report(config: &BenchConfig, target: &Target, mode: &str) -> Report {
    report_for(config, target.backend, mode)
}

/// The report's identity fields for a run on `backend` (a mode whose
/// sandboxes come and go within it).
pub(crate) fn report_for(config: &BenchConfig, backend: drover::Backend, mode: &str) -> Report {
    Report {
        mode: mode.to_owned(),
        backend: match backend {
            drover::Backend::Postgres => "postgres",
            drover::Backend::Sqlite => "sqlite",
            drover::Backend::Memory => "memory",
        }
        .to_owned(),
        jobs: config.jobs,
        batch: config.batch,
        capacity: config.capacity,
        workers: if config.processes > 0 {
            config.processes
        } else {
            config.workers
        },
        worker_mode: if config.processes > 0 {
            "processes"
        } else {
            "in-process"
        }
        .to_owned(),
        ..Report::default()
    }
}

/// Waits until `n` distinct items ran and the database holds none pending
/// or claimed.
pub(crate) async fn drain_until_empty(
    target: &Target,
    recorder: &Arc<Recorder>,
    n: u64,
    timeout: Duration,
    bar: &indicatif::ProgressBar,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + timeout;
    let ticker = {
        let rec = recorder.clone();
        let bar = bar.clone();
        tokio::spawn(async move {
            loop {
                bar.set_position(rec.distinct() as u64);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let want = usize::try_from(n).unwrap_or(usize::MAX);
    let ran = tokio::time::timeout(timeout, recorder.wait_distinct(want)).await;
    ticker.abort();
    if ran.is_err() {
        return Err(BenchError::Incomplete(format!(
            "only {} of {n} items ran within {timeout:?}",
            recorder.distinct()
        )));
    }
    loop {
        let open = target.open_items().await?;
        if open == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Incomplete(format!(
                "{open} items still pending or claimed after {timeout:?}"
            )));
        }
        tokio::time::sleep(EMPTY_POLL).await;
    }
}

async fn latency_phase(
    config: &BenchConfig,
    producer: &drover::Queue,
    recorder: &Arc<Recorder>,
    progress: &Progress,
) -> Result<Percentiles, BenchError> {
    if config.latency_jobs == 0 {
        return Ok(Percentiles::default());
    }
    tokio::time::sleep(crate::IDLE_BEFORE_LATENCY).await;
    let principal = Principal::system();
    let mark = recorder.len();
    let before = recorder.distinct();
    let bar = progress.bar(config.latency_jobs, "latency");
    let start = tokio::time::Instant::now();
    for k in 0..config.latency_jobs {
        let offset = crate::LATENCY_SPACING * u32::try_from(k).unwrap_or(u32::MAX);
        tokio::time::sleep_until(start + offset).await;
        let item = NewItem::new(KIND, json!({ "t_ns": crate::unix_nanos() })).with_lane(LANE);
        producer.enqueue_item(&principal, item).await?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let want = before + usize::try_from(config.latency_jobs).unwrap_or(usize::MAX);
    let wait = Duration::from_secs(30).min(config.timeout);
    if tokio::time::timeout(wait, recorder.wait_distinct(want))
        .await
        .is_err()
    {
        return Err(BenchError::Incomplete(format!(
            "only {} of {} latency items ran within {wait:?}",
            recorder.distinct() - before,
            config.latency_jobs
        )));
    }
    let samples: Vec<f64> = recorder
        .since(mark)
        .iter()
        .filter_map(|e| e.lat_ns)
        .map(|ns| ns as f64 / 1e6)
        .collect();
    Ok(Percentiles::of(samples))
}
