//! Chain mode (`drover bench --chain N`): how fast a chain of dependent
//! items runs end to end, each item waiting for the one before it.
//!
//! A worker of the run's capacity is started first and left idle; then
//! one [`Queue::enqueue_dag`] call writes `N` items, item `i` after item
//! `i - 1`, so only the first is claimable. Each completion releases the
//! next item in its own commit, which wakes the workers (the store's
//! wake-up after the commit), so a start waits for its dependency's commit
//! and a wake-up, never for the poll. The figures: the chain's rate (`N`
//! over the time from the enqueue's answer to the last start), the gap
//! from each start to the next (p50, p99, max) against the worker's poll
//! interval, and how many gaps reached the poll interval (a wake-up that
//! was missed and left to the poll).
//!
//! Invariants: every item runs exactly once and in chain order (a start
//! before its dependency's is reported as `out_of_order`, a second run as
//! `duplicates`); the sandbox is the caller's and is dropped by it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use drover::NewItem;
use drover::queue::Principal;
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

use crate::recorder::{BenchHandler, Recorder};
use crate::report::Percentiles;
use crate::target::Target;
use crate::{BenchError, KIND, LANE, Progress};

/// `--chain`'s default length.
pub const CHAIN_DEFAULT: u64 = 1_000;

/// How long the chain may take before the run gives up (a chain left to
/// the poll would take `N` poll intervals).
const CHAIN_TIMEOUT: Duration = Duration::from_secs(600);

/// What the chain mode runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainSpec {
    /// Items in the chain.
    pub items: u64,
    /// The worker's capacity.
    pub capacity: usize,
}

impl Default for ChainSpec {
    fn default() -> Self {
        ChainSpec {
            items: CHAIN_DEFAULT,
            capacity: crate::CAPACITY_DEFAULT,
        }
    }
}

/// The figures of a chain run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChainReport {
    /// The backend the run measured (`postgres` or `sqlite`).
    pub backend: String,
    /// Items in the chain.
    pub items: u64,
    /// The one enqueue call of the whole chain (ms).
    pub enqueue_ms: f64,
    /// From the enqueue's answer to the last item's start (s).
    pub elapsed_s: f64,
    /// Items over `elapsed_s` (target ≥ 200 on PostgreSQL).
    pub rate: f64,
    /// From each item's start to the next item's start (ms).
    pub gap_ms: Percentiles,
    /// The worker's poll interval (ms), what a missed wake-up would wait.
    pub poll_interval_ms: f64,
    /// Gaps as long as the poll interval or longer.
    pub gaps_at_poll: u64,
    /// Items started before the item they wait for.
    pub out_of_order: u64,
    /// Handler runs beyond one per item.
    pub duplicates: u64,
}

/// Runs the chain on `target`.
///
/// # Errors
/// [`BenchError`] when the sandbox's queue cannot be opened, the enqueue
/// fails, or the chain does not finish within ten minutes.
pub(crate) async fn run(
    spec: &ChainSpec,
    target: &Target,
    progress: &Progress,
) -> Result<ChainReport, BenchError> {
    if spec.items == 0 {
        return Err(drover::Error::invalid("chain", "must be at least 1").into());
    }
    let recorder = Recorder::new();
    let settings = crate::workers::settings(spec.capacity);
    let poll = settings.poll_interval;
    let queue = target.queue(settings.pool_size).await?;
    let worker = drover::worker::Worker::builder(queue.clone())
        .settings(settings)
        .handler(BenchHandler::new(recorder.clone()))
        .build()?
        .start()
        .await?;

    let ids: Vec<Uuid> = (0..spec.items).map(|_| Uuid::now_v7()).collect();
    let items: Vec<NewItem> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let item = NewItem::new(KIND, json!({ "n": i }))
                .with_id(*id)
                .with_lane(LANE);
            match i.checked_sub(1) {
                Some(prev) => item.with_after([ids[prev]]),
                None => item,
            }
        })
        .collect();
    progress.note(&format!(
        "chain: {} items, each after the one before",
        spec.items
    ));
    let started = Instant::now();
    let enqueued = queue.enqueue_dag(&Principal::system(), items).await;
    let enqueue_ms = started.elapsed().as_secs_f64() * 1e3;
    let answered_ns = crate::unix_nanos();
    let enqueued = match enqueued {
        Ok(e) => e,
        Err(e) => {
            worker.shutdown().await;
            return Err(e.into());
        }
    };
    debug_assert_eq!(enqueued.len(), ids.len());
    let n = usize::try_from(spec.items).unwrap_or(usize::MAX);
    let finished = tokio::time::timeout(CHAIN_TIMEOUT, recorder.wait_distinct(n)).await;
    worker.shutdown().await;
    if finished.is_err() {
        return Err(drover::Error::invalid(
            "chain",
            format!(
                "{} of {} items started within {CHAIN_TIMEOUT:?}",
                recorder.distinct(),
                spec.items
            ),
        )
        .into());
    }
    let report = figures(&ids, &recorder.since(0), answered_ns, poll);
    Ok(ChainReport {
        backend: match target.backend {
            drover::Backend::Postgres => "postgres",
            drover::Backend::Sqlite => "sqlite",
            drover::Backend::Memory => "memory",
        }
        .to_owned(),
        items: spec.items,
        enqueue_ms,
        ..report
    })
}

/// The chain's figures from its executions: the first start of each item
/// in chain order, the gaps between consecutive starts, the rate from
/// `from_ns` to the last start.
fn figures(
    ids: &[Uuid],
    execs: &[crate::recorder::Exec],
    from_ns: i64,
    poll: Duration,
) -> ChainReport {
    let index: HashMap<Uuid, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut first: Vec<Option<i64>> = vec![None; ids.len()];
    let mut duplicates = 0u64;
    for e in execs {
        let Some(&i) = index.get(&e.id) else { continue };
        match first[i] {
            Some(_) => duplicates += 1,
            None => first[i] = Some(e.at_ns),
        }
    }
    let starts: Vec<i64> = first.iter().flatten().copied().collect();
    let mut gaps = Vec::with_capacity(starts.len());
    let mut out_of_order = 0u64;
    for w in starts.windows(2) {
        if w[1] < w[0] {
            out_of_order += 1;
        }
        gaps.push((w[1] - w[0]) as f64 / 1e6);
    }
    let poll_ms = poll.as_secs_f64() * 1e3;
    let gaps_at_poll = gaps.iter().filter(|g| **g >= poll_ms).count() as u64;
    let last = starts.iter().copied().max().unwrap_or(from_ns);
    let elapsed_s = ((last - from_ns) as f64 / 1e9).max(1e-9);
    ChainReport {
        elapsed_s,
        rate: starts.len() as f64 / elapsed_s,
        gap_ms: Percentiles::of(gaps),
        poll_interval_ms: poll_ms,
        gaps_at_poll,
        out_of_order,
        duplicates,
        ..ChainReport::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::Exec;

    fn exec(id: Uuid, at_ns: i64) -> Exec {
        Exec {
            id,
            at_ns,
            lat_ns: None,
        }
    }

    #[test]
    fn figures_count_gaps_order_and_duplicates() {
        let ids: Vec<Uuid> = (0..4).map(|_| Uuid::new_v4()).collect();
        let ms = 1_000_000;
        let execs = vec![
            exec(ids[0], 10 * ms),
            exec(ids[1], 14 * ms),
            exec(ids[1], 15 * ms),
            // The third starts before the second: out of order.
            exec(ids[2], 12 * ms),
            exec(ids[3], 1_012 * ms),
        ];
        let r = figures(&ids, &execs, 0, Duration::from_secs(1));
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.out_of_order, 1);
        assert_eq!(r.gaps_at_poll, 1);
        assert!((r.elapsed_s - 1.012).abs() < 1e-9);
        assert!((r.rate - 4.0 / 1.012).abs() < 1e-9);
    }
}
