//! [`Worker::drain`]: a test's way to run a lane once, inline, with the
//! worker's handlers: claim one item, run it as the claim loop would
//! (lease renewal, time limit, panic capture, fenced outcome writes), and
//! so on until nothing in the lane is due; then say what happened.
//!
//! Invariants: an item is claimed, run and settled before the next claim,
//! so no claimed item waits out its lease behind another; only kinds the
//! worker handles are claimed; an item made due by a run (a follow-up
//! enqueue, an orchestration's next step) is run by the same drain, an item
//! whose retry or snooze puts it in the future is not; the drain stops
//! after `DRAIN_MAX_RUNS` runs (a handler that keeps making work due),
//! saying so. Nothing else the worker would run (its roles: the scheduler,
//! the relay, the sweep) runs, and lane pauses are not consulted.

use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::Worker;
use super::completer::Completer;
use super::executor::Executor;
use crate::error::Result;

/// How many runs one [`Worker::drain`] makes at most before it stops with
/// [`DrainReport::stopped_at_limit`].
pub const DRAIN_MAX_RUNS: u64 = 10_000;

/// What one [`Worker::drain`] did: each run counted once by how it ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// Items run.
    pub ran: u64,
    /// Runs the handler finished (`Done::Completed` or `Done::Settled`).
    pub succeeded: u64,
    /// Runs that answered a retryable error (the item is pending again
    /// with its backoff, or in the dead letter when its budget is spent).
    pub retried: u64,
    /// Runs that answered a fatal error (the item is in the dead letter).
    pub failed: u64,
    /// Runs that asked to be snoozed.
    pub snoozed: u64,
    /// Runs that cancelled their item.
    pub cancelled: u64,
    /// Runs whose handler panicked (a retryable failure).
    pub panicked: u64,
    /// Runs past their time limit (a retryable failure).
    pub timed_out: u64,
    /// Runs whose lease was lost: nothing was written for them.
    pub lease_lost: u64,
    /// Items whose tenant is gone: failed as orphaned, never run.
    pub orphaned: u64,
    /// True when the drain stopped after [`DRAIN_MAX_RUNS`] runs with work
    /// still due.
    pub stopped_at_limit: bool,
}

impl DrainReport {
    fn count(&mut self, outcome: &str) {
        self.ran += 1;
        let slot = match outcome {
            "completed" => &mut self.succeeded,
            "retry" => &mut self.retried,
            "fatal" => &mut self.failed,
            "snoozed" => &mut self.snoozed,
            "cancelled" => &mut self.cancelled,
            "panicked" => &mut self.panicked,
            "timed_out" => &mut self.timed_out,
            // "lease_lost", and "shutdown", which a drain (never told to
            // stop) does not reach.
            _ => &mut self.lease_lost,
        };
        *slot += 1;
    }
}

impl Worker {
    /// Runs `lane` once, inline, with this worker's handlers (the ones
    /// added to its builder and every `register!`ed one): claims one due
    /// item of a kind it handles, runs it, writes its outcome, and again,
    /// until none is due; returns what happened. The counterpart in a test
    /// of starting the worker and polling: no task is left behind.
    ///
    /// ```
    /// # use drover::queue::{JobContext, Kind, Queue};
    /// # use drover::worker::{Done, Handler, Outcome, Strategy, Worker};
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping {}
    /// # impl Kind for Ping { const NAME: &'static str = "ping"; }
    /// # struct Pinger;
    /// # impl Handler for Pinger {
    /// #     type Job = Ping;
    /// #     const STRATEGY: Strategy = Strategy { idempotency: "i", retry: "r", checkpoint: "c", recovery: "v" };
    /// #     async fn handle(&self, _cx: &JobContext, _job: Ping) -> Outcome { Ok(Done::Completed) }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> drover::Result<()> {
    /// let queue = Queue::memory();
    /// queue.enqueue(Ping {}).await?;
    /// let worker = Worker::builder(queue.clone()).handler(Pinger).metrics_addr(None).build()?;
    /// let report = worker.drain("default").await?;
    /// assert_eq!((report.ran, report.succeeded), (1, 1));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) on `lane` for a
    /// name that is not a lane's; storage errors of a claim or of
    /// declaring the worker's limits.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped mid-run, the item being run stays claimed
    /// until its lease passes and the sweep hands it back.
    pub async fn drain(&self, lane: &str) -> Result<DrainReport> {
        for (scope, n) in self.registry.limits() {
            self.queue.limit_declare(scope, *n).await?;
        }
        for (scope, rate) in self.registry.rates() {
            self.queue.rate_declare(scope, *rate).await?;
        }
        let s = self.settings.clone();
        let (completer, completer_task) =
            Completer::start(self.queue.store().clone(), 1, std::time::Duration::ZERO);
        let exec = Executor {
            queue: self.queue.clone(),
            registry: self.registry.clone(),
            settings: s.clone(),
            completer,
            work: CancellationToken::new(),
            freed: Arc::new(tokio::sync::Notify::new()),
        };
        let kinds = self.registry.kinds();
        let id = format!("drain:{}", super::new_worker_id());
        let slot = Arc::new(Semaphore::new(1));
        let mut report = DrainReport::default();
        let result = loop {
            if report.ran >= DRAIN_MAX_RUNS {
                report.stopped_at_limit = true;
                break Ok(report);
            }
            let batch = match self.queue.claim(lane, &kinds, &id, s.lease, 1).await {
                Ok(b) => b,
                Err(e) => break Err(e),
            };
            report.orphaned += batch.orphaned;
            let Some(cx) = batch.items.into_iter().next() else {
                if batch.orphaned > 0 {
                    continue;
                }
                break Ok(report);
            };
            let Ok(permit) = slot.clone().acquire_owned().await else {
                // The semaphore is this function's and never closed.
                break Ok(report);
            };
            let outcome = exec.run(cx, permit).await;
            report.count(outcome);
        };
        // The completer writes what it holds once every handle is gone.
        drop(exec);
        let _ = completer_task.await;
        result
    }
}
