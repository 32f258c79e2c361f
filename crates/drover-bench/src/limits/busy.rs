//! Part 2 of the limits mode: does a binding per-group limit keep its
//! slots busy?
//!
//! `G` groups under a per-group limit of 1 on the bench kind, in a lane of
//! their own; each group gets more items than the window can run even at
//! full speed (`busy_for / handler + 50`), enqueued interleaved (item `i`
//! in group `i mod G`), so every group has waiting work all through the
//! window. One in-process worker of the run's capacity (at least `G`)
//! drains them with a handler that sleeps `handler` and records, per
//! execution, its group, entry and exit (one monotonic clock).
//!
//! The window runs from the first handler entry for `busy_for`, or until
//! the first moment a group's last item was claimed, whichever is earlier
//! (after that, that group has nothing waiting). The figure is the
//! handler-busy time of each group inside the window, summed, over `G x
//! window`: 1.0 means every group's one slot had a handler running all the
//! time. Slot-time held without a handler running (the claim before the
//! entry, the completion's commit after the exit, a claimed item waiting
//! in the buffer) counts as idle: it is the cost the figure exists to show.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drover::NewItem;
use drover::Worker;
use drover::queue::{JobContext, Kind};
use drover::store::limits::LimitScope;
use drover::worker::{Done, Handler, Outcome, Strategy};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::limits::{LimitsSpec, operator};
use crate::report::Percentiles;
use crate::report::limits::Busy;
use crate::target::Target;
use crate::{BenchConfig, BenchError, KIND, Progress};

/// The lane of this part.
pub const BUSY_LANE: &str = "bench-busy";

/// The payload: which group, and the item's number in it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BusyJob {
    /// The group's number.
    pub g: u32,
    /// The item's number.
    pub n: u64,
}

impl Kind for BusyJob {
    const NAME: &'static str = KIND;
}

/// One execution: group, claim sent, handler entry and exit.
#[derive(Debug, Clone, Copy)]
struct Run {
    g: u32,
    claimed: Instant,
    entry: Instant,
    exit: Instant,
}

/// Sleeps, then records the run.
#[derive(Debug, Clone)]
struct SleepHandler {
    sleep: Duration,
    runs: Arc<Mutex<Vec<Run>>>,
}

impl Handler for SleepHandler {
    type Job = BusyJob;
    const STRATEGY: Strategy = Strategy {
        idempotency: "a sleep: a second run only costs time",
        retry: "default backoff (it never fails)",
        checkpoint: "none: one step",
        recovery: "a crashed run is swept after its lease and run again",
    };

    async fn handle(&self, cx: &JobContext, job: BusyJob) -> Outcome {
        let entry = Instant::now();
        tokio::time::sleep(self.sleep).await;
        let run = Run {
            g: job.g,
            claimed: cx.claimed_at(),
            entry,
            exit: Instant::now(),
        };
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(run);
        Ok(Done::Completed)
    }
}

pub(crate) async fn run(
    config: &BenchConfig,
    spec: &LimitsSpec,
    target: &Target,
    progress: &Progress,
) -> Result<Busy, BenchError> {
    let groups = spec.busy_groups;
    let per_group = (spec.busy_for.as_secs_f64() / spec.handler.as_secs_f64()).ceil() as u64 + 50;
    let producer = target.queue(2).await?;
    let scope = LimitScope::KindPerGroup(KIND.into());
    producer.limit_set(&operator(), &scope, 1).await?;
    let result = measure(config, spec, target, progress, &producer, per_group).await;
    producer.limit_clear(&operator(), &scope).await?;
    let (runs, poll) = result?;
    let b = figures(&runs, groups, per_group, spec.busy_for);
    let busy = Busy {
        groups,
        items_per_group: per_group,
        capacity: config.capacity,
        handler_ms: spec.handler.as_secs_f64() * 1e3,
        poll_interval_ms: poll.as_secs_f64() * 1e3,
        ..b
    };
    progress.note(&format!(
        "binding limit: busy fraction {:.3} over {:.2} s ({} runs)",
        busy.busy_fraction, busy.window_s, busy.runs
    ));
    Ok(busy)
}

/// Enqueues the groups' items, runs one worker over them for the window
/// (plus a margin) and returns every run and the worker's poll interval.
async fn measure(
    config: &BenchConfig,
    spec: &LimitsSpec,
    target: &Target,
    progress: &Progress,
    producer: &drover::Queue,
    per_group: u64,
) -> Result<(Vec<Run>, Duration), BenchError> {
    let groups = u64::from(spec.busy_groups);
    let total = groups * per_group;
    let mut next = 0u64;
    while next < total {
        let n = (total - next).min(config.batch as u64);
        let items: Vec<NewItem> = (next..next + n)
            .map(|i| {
                let g = i % groups;
                NewItem::new(KIND, json!({ "g": g, "n": i / groups }))
                    .with_lane(BUSY_LANE)
                    .with_group(format!("busy-{g}"))
            })
            .collect();
        producer.enqueue_many(&operator(), items).await?;
        next += n;
    }
    progress.note(&format!(
        "binding limit: {groups} groups x {per_group} items, per-group limit 1"
    ));
    let mut s = crate::workers::settings(config.capacity);
    s.lanes = vec![BUSY_LANE.to_owned()];
    let poll = s.poll_interval;
    let runs = Arc::new(Mutex::new(Vec::new()));
    let queue = target.queue(s.pool_size).await?;
    let worker = Worker::builder(queue)
        .settings(s)
        .handler(SleepHandler {
            sleep: spec.handler,
            runs: runs.clone(),
        })
        .build()?
        .start()
        .await?;
    // The window starts at the first entry: wait for it, then for the
    // window and one handler's length so runs crossing its end finish.
    let first = tokio::time::timeout(config.timeout, async {
        loop {
            if !runs.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    if first.is_ok() {
        tokio::time::sleep(spec.busy_for + spec.handler * 2).await;
    }
    worker.shutdown().await;
    if first.is_err() {
        return Err(BenchError::Incomplete(format!(
            "binding limit: no handler ran within {:?}",
            config.timeout
        )));
    }
    let runs = runs.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok((runs, poll))
}

/// The window and the busy fraction of `runs` (see the module docs).
fn figures(runs: &[Run], groups: u32, per_group: u64, busy_for: Duration) -> Busy {
    let Some(start) = runs.iter().map(|r| r.entry).min() else {
        return Busy::default();
    };
    // A group has nothing waiting once its last item is claimed.
    let mut end = start + busy_for;
    let mut all_waiting = true;
    for g in 0..groups {
        let mut claims: Vec<Instant> = runs
            .iter()
            .filter(|r| r.g == g)
            .map(|r| r.claimed)
            .collect();
        if claims.len() as u64 >= per_group {
            claims.sort();
            if let Some(last) = claims.last()
                && *last < end
            {
                end = *last;
                all_waiting = false;
            }
        }
    }
    let window = end.saturating_duration_since(start);
    let mut busy = Duration::ZERO;
    let mut started = 0u64;
    let mut gaps = Vec::new();
    let mut to_claim = Vec::new();
    let mut claim_to_entry = Vec::new();
    for g in 0..groups {
        let mut mine: Vec<&Run> = runs.iter().filter(|r| r.g == g).collect();
        mine.sort_by_key(|r| r.entry);
        for r in &mine {
            let (a, b) = (r.entry.max(start), r.exit.min(end));
            busy += b.saturating_duration_since(a);
            if r.entry >= start && r.entry < end {
                started += 1;
            }
        }
        for w in mine.windows(2) {
            if w[1].entry <= end {
                let ms =
                    |a: Instant, b: Instant| a.saturating_duration_since(b).as_secs_f64() * 1e3;
                gaps.push(ms(w[1].entry, w[0].exit));
                to_claim.push(ms(w[1].claimed, w[0].exit));
                claim_to_entry.push(ms(w[1].entry, w[1].claimed));
            }
        }
    }
    let denom = f64::from(groups) * window.as_secs_f64();
    Busy {
        window_s: window.as_secs_f64(),
        all_groups_waiting: all_waiting,
        runs: started,
        busy_s: busy.as_secs_f64(),
        busy_fraction: if denom > 0.0 {
            busy.as_secs_f64() / denom
        } else {
            0.0
        },
        gap_mean_ms: if gaps.is_empty() {
            0.0
        } else {
            gaps.iter().sum::<f64>() / gaps.len() as f64
        },
        gap: Percentiles::of(gaps),
        gap_to_claim: Percentiles::of(to_claim),
        claim_to_entry: Percentiles::of(claim_to_entry),
        ..Busy::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two groups, each with one 10 ms run per 20 ms: half busy.
    #[test]
    fn half_busy_slots_read_one_half() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut runs = Vec::new();
        for g in 0..2 {
            for k in 0..5 {
                runs.push(Run {
                    g,
                    claimed: ms(20 * k),
                    entry: ms(20 * k),
                    exit: ms(20 * k + 10),
                });
            }
        }
        let b = figures(&runs, 2, 100, Duration::from_millis(100));
        assert!((b.busy_fraction - 0.5).abs() < 1e-9, "{b:?}");
        assert_eq!(b.runs, 10);
        assert!(b.all_groups_waiting);
        assert_eq!(b.gap.count, 8);
        assert!((b.gap.p50 - 10.0).abs() < 1e-9);
    }

    /// A group whose last item was claimed ends the window there.
    #[test]
    fn the_window_ends_when_a_group_runs_out() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let runs = vec![
            Run {
                g: 0,
                claimed: ms(0),
                entry: ms(0),
                exit: ms(40),
            },
            Run {
                g: 1,
                claimed: ms(0),
                entry: ms(0),
                exit: ms(10),
            },
            Run {
                g: 1,
                claimed: ms(20),
                entry: ms(20),
                exit: ms(30),
            },
        ];
        let b = figures(&runs, 2, 2, Duration::from_millis(100));
        assert!(!b.all_groups_waiting);
        assert!((b.window_s - 0.020).abs() < 1e-9, "{b:?}");
        // Group 0 busy 20 ms, group 1 busy 10 ms, of 2 x 20 ms.
        assert!((b.busy_fraction - 0.75).abs() < 1e-9, "{b:?}");
    }
}
