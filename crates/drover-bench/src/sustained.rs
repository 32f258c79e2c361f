//! Sustained mode: producers offer a fixed rate for a duration while the
//! workers drain. Every [`SUSTAINED_TICK`](crate::SUSTAINED_TICK) one bulk
//! call enqueues the items due by then (so 2,000/s is 20 items per call);
//! calls run concurrently, at most [`MAX_CALLS_IN_FLIGHT`] at once, so one
//! slow commit does not shift the schedule. Each payload carries the time
//! of its call; the handler records entry minus that time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::Principal;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::recorder::Recorder;
use crate::report::{Percentiles, Report, Window};
use crate::standard::{base_report, drain_until_empty};
use crate::target::Target;
use crate::workers::Fleet;
use crate::{BenchConfig, BenchError, KIND, LANE, Progress, WINDOW};

/// Producer calls in flight at once.
pub const MAX_CALLS_IN_FLIGHT: usize = 8;

pub(crate) async fn run(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
    rate: f64,
    duration: Duration,
) -> Result<Report, BenchError> {
    let mut report = base_report(config, target, "sustained");
    let recorder = Recorder::new();
    let fleet = Fleet::start(config, target, &recorder).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (start_ns, log) = match produce(config, target, progress, rate, duration).await {
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

    let execs = recorder.since(0);
    let total = recorder.total();
    let window_ns = i64::try_from(WINDOW.as_nanos()).unwrap_or(i64::MAX);
    let n_windows = (duration.as_secs_f64() / WINDOW.as_secs_f64()).ceil() as usize;
    let mut windows = Vec::with_capacity(n_windows);
    for w in 0..n_windows {
        let lo = start_ns + window_ns * w as i64;
        let hi = lo + window_ns;
        let in_w: Vec<f64> = execs
            .iter()
            .filter(|e| e.at_ns >= lo && e.at_ns < hi)
            .filter_map(|e| e.lat_ns)
            .map(|ns| ns as f64 / 1e6)
            .collect();
        let count = in_w.len() as f64;
        let enq: u64 = log
            .iter()
            .filter(|(t, _)| *t >= lo && *t < hi)
            .map(|(_, n)| n)
            .sum();
        let p = Percentiles::of(in_w);
        windows.push(Window {
            start_s: (w as f64) * WINDOW.as_secs_f64(),
            enqueued_rate: enq as f64 / WINDOW.as_secs_f64(),
            achieved_rate: count / WINDOW.as_secs_f64(),
            lat_p50: p.p50,
            lat_p99: p.p99,
        });
    }
    let end_ns = start_ns + i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX);
    let within = execs.iter().filter(|e| e.at_ns < end_ns).count();
    let all = Percentiles::of(
        execs
            .iter()
            .filter_map(|e| e.lat_ns)
            .map(|ns| ns as f64 / 1e6)
            .collect(),
    );
    report.offered_rate = Some(rate);
    report.enqueued = Some(enqueued);
    report.duration_s = Some(duration.as_secs_f64());
    report.achieved_rate = Some(within as f64 / duration.as_secs_f64());
    report.executed = Some(total.executed);
    report.distinct = Some(total.distinct);
    report.duplicates = Some(total.executed - total.distinct);
    report.latency_executed = Some(all.count);
    report.lat_p50 = Some(all.p50);
    report.lat_p95 = Some(all.p95);
    report.lat_p99 = Some(all.p99);
    report.lat_max = Some(all.max);
    report.windows = Some(windows);
    Ok(report)
}

/// One producer call: when it was made (unix ns) and how many items.
type CallLog = Vec<(i64, u64)>;

/// Offers `rate` items/s for `duration`; returns the start (unix ns) and
/// the calls made.
pub(crate) async fn produce(
    _config: &BenchConfig,
    target: &Target,
    progress: &Progress,
    rate: f64,
    duration: Duration,
) -> Result<(i64, CallLog), BenchError> {
    let producer = target
        .queue(u32::try_from(MAX_CALLS_IN_FLIGHT).unwrap_or(8))
        .await?;
    let slots = Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT));
    let log: Arc<Mutex<CallLog>> = Arc::new(Mutex::new(Vec::new()));
    let mut calls = tokio::task::JoinSet::new();
    let bar = progress.bar(duration.as_secs(), "offer");
    let start = Instant::now();
    let start_ns = crate::unix_nanos();
    let mut tick = tokio::time::interval(crate::SUSTAINED_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent = 0u64;
    loop {
        tick.tick().await;
        let elapsed = start.elapsed();
        if elapsed >= duration {
            break;
        }
        bar.set_position(elapsed.as_secs());
        let due = (rate * elapsed.as_secs_f64()).floor() as u64;
        if due <= sent {
            continue;
        }
        let n = due - sent;
        sent = due;
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let q = producer.clone();
        let log = log.clone();
        calls.spawn(async move {
            let t = crate::unix_nanos();
            let items: Vec<NewItem> = (0..n)
                .map(|_| NewItem::new(KIND, json!({ "t_ns": t })).with_lane(LANE))
                .collect();
            let r = q.enqueue_many(&Principal::system(), items).await;
            drop(permit);
            if r.is_ok() {
                log.lock().unwrap_or_else(|p| p.into_inner()).push((t, n));
            }
            r.map(|_| ())
        });
    }
    while let Some(r) = calls.join_next().await {
        if let Ok(Err(e)) = r {
            return Err(e.into());
        }
    }
    bar.finish_and_clear();
    let log = std::mem::take(&mut *log.lock().unwrap_or_else(|p| p.into_inner()));
    Ok((start_ns, log))
}
