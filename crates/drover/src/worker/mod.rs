//! The worker runtime: drains lanes with a fixed capacity.
//!
//! | part | owns |
//! |---|---|
//! | this module | the builder, the claim loop, drain-first shutdown |
//! | [`handler`](self::Handler) | handlers, outcomes, strategies, the registry |
//! | `executor` | one item's run: renewal, timeout, panic capture, outcome write |
//! | `completer` | batched, per-row fenced completion |
//! | `liveness` | the in-memory beat, the workers row, `/healthz` and `/metrics` |
//! | [`WorkerSettings`] | every knob, its default, and their validation |
//!
//! Invariants: never more than `capacity` handlers run at once (a semaphore
//! permit is taken before an item is claimed); claiming stops at once on
//! shutdown; a burst of wake-ups costs one claim round; liveness never
//! pauses claiming.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Semaphore, broadcast};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};
use crate::maintenance::{SweepConfig, SweepStep, Sweeper};
use crate::queue::Queue;
use crate::store::WorkerRow;

mod completer;
mod executor;
mod handler;
mod liveness;
mod settings;
pub mod testkit;

pub use handler::{Done, Handler, HandlerInfo, JobError, Outcome, Registry, ResultExt, Strategy};
pub use liveness::{Health, prometheus};
pub use settings::*;

use completer::Completer;
use executor::Executor;

/// Builds a [`Worker`]: one call per lane, handler and knob.
pub struct WorkerBuilder {
    queue: Queue,
    settings: WorkerSettings,
    lanes_named: bool,
    registry: Registry,
    errors: Vec<Error>,
    steps: Vec<Box<dyn SweepStep>>,
    sweep: bool,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("settings", &self.settings)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// Replaces every setting (lanes and capacity included).
    pub fn settings(mut self, settings: WorkerSettings) -> Self {
        self.settings = settings;
        self.lanes_named = true;
        self
    }

    /// Adds a lane to drain (the first call replaces the default lane).
    pub fn lane(mut self, lane: impl Into<String>) -> Self {
        if !self.lanes_named {
            self.settings.lanes.clear();
            self.lanes_named = true;
        }
        self.settings.lanes.push(lane.into());
        self
    }

    /// Sets how many handlers run at once.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.settings.capacity = capacity;
        self
    }

    /// Sets the lease (the renewal interval to a third of it, the renewal
    /// timeout to a fifteenth).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self.settings.renew_interval = lease / 3;
        self.settings.renew_timeout = lease / 15;
        self
    }

    /// Adds a handler for its kind.
    pub fn handler<H: Handler>(mut self, handler: H) -> Self {
        self.queue.register_kind::<H::Job>();
        if let Err(e) = self.registry.add(handler) {
            self.errors.push(e);
        }
        self
    }

    /// Adds the built-in diagnostic kinds (`drover.noop`, `drover.sleep`,
    /// `drover.fail`, `drover.panic`).
    pub fn builtins(self) -> Self {
        crate::builtin::register(self)
    }

    /// Adds a host step to the sweep.
    pub fn sweep_step(mut self, step: Box<dyn SweepStep>) -> Self {
        self.steps.push(step);
        self
    }

    /// Turns this worker's sweep off (another process sweeps).
    pub fn without_sweep(mut self) -> Self {
        self.sweep = false;
        self
    }

    /// Checks everything and builds the worker.
    ///
    /// # Errors
    /// [`Error::Config`] naming the first problem: a handler without a
    /// strategy, two handlers for a kind, no handler at all, settings that
    /// contradict each other, or a capacity the store's pool cannot serve.
    pub fn build(self) -> Result<Worker> {
        if let Some(e) = self.errors.into_iter().next() {
            return Err(e);
        }
        if self.registry.is_empty() {
            return Err(Error::Config("the worker has no handlers".into()));
        }
        self.registry.validate()?;
        self.settings.validate(self.queue.store().pool_size())?;
        let sweeper = Sweeper::new(
            self.queue.clone(),
            SweepConfig {
                interval: self.settings.sweep_interval,
                retention: self.settings.item_retention,
                ..SweepConfig::default()
            },
        )?;
        let sweeper = self
            .steps
            .into_iter()
            .fold(sweeper, |s, step| s.with_step(step));
        Ok(Worker {
            queue: self.queue,
            settings: Arc::new(self.settings),
            registry: Arc::new(self.registry),
            sweeper: self.sweep.then_some(sweeper),
        })
    }
}

/// A worker, built and checked, not yet running.
pub struct Worker {
    queue: Queue,
    settings: Arc<WorkerSettings>,
    registry: Arc<Registry>,
    sweeper: Option<Sweeper>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("settings", &self.settings)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

/// What a drain-first shutdown did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Items running when the shutdown began.
    pub in_flight: usize,
    /// Items still running when the grace period ended (cancelled and
    /// released without spending an attempt).
    pub cancelled: usize,
}

impl Worker {
    /// Starts building a worker over `queue`.
    pub fn builder(queue: Queue) -> WorkerBuilder {
        WorkerBuilder {
            queue,
            settings: WorkerSettings::default(),
            lanes_named: false,
            registry: Registry::new(),
            errors: Vec::new(),
            steps: Vec::new(),
            sweep: true,
        }
    }

    /// The handlers' declared strategies.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Runs until `signal` resolves, then shuts down drain-first.
    ///
    /// # Errors
    /// As [`Worker::start`].
    ///
    /// # Cancel safety
    /// Dropping the future abandons in-flight items to the sweep; resolve
    /// `signal` instead.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<ShutdownReport> {
        let running = self.start().await?;
        signal.await;
        Ok(running.shutdown().await)
    }

    /// Starts claiming, the sweep, the heartbeat and the metrics listener.
    ///
    /// # Errors
    /// [`Error::Config`] when the metrics address cannot be bound; storage
    /// errors when the wake-up subscription fails.
    pub async fn start(self) -> Result<RunningWorker> {
        let id = format!(
            "{}:{}:{}",
            liveness::host_name(),
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        let s = self.settings.clone();
        let stale_after = (s.heartbeat_interval * 3)
            .max(s.poll_interval * 3)
            .max(Duration::from_secs(10));
        let health = Arc::new(liveness::Health::new(stale_after));
        let background = CancellationToken::new();
        let fetch = CancellationToken::new();
        let work = CancellationToken::new();
        let store = self.queue.store().clone();

        let metrics_addr = match s.metrics_addr {
            Some(addr) => Some(liveness::serve(addr, health.clone(), background.clone()).await?),
            None => None,
        };
        let wake = store.wakeups().await?;
        let (completer, completer_task) =
            Completer::start(store.clone(), s.complete_batch, s.complete_window);
        let exec = Executor {
            queue: self.queue.clone(),
            registry: self.registry.clone(),
            settings: s.clone(),
            completer,
            work: work.clone(),
        };
        let row = WorkerRow {
            id: id.clone(),
            host: liveness::host_name(),
            pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
            lanes: s.lanes.clone(),
            capacity: i32::try_from(s.capacity).unwrap_or(i32::MAX),
            started_at: Utc::now(),
            last_beat_at: Utc::now(),
            state: "running".into(),
        };
        let heartbeat = tokio::spawn(liveness::heartbeat(
            store.clone(),
            health.clone(),
            row.clone(),
            s.heartbeat_interval,
            background.clone(),
        ));
        let sweep = self.sweeper.map(|sw| {
            let stop = background.clone();
            tokio::spawn(async move { sw.run(stop).await })
        });
        let slots = Arc::new(Semaphore::new(s.capacity));
        let tracker = TaskTracker::new();
        let claim_loop = tokio::spawn(claim_loop(ClaimLoop {
            id: id.clone(),
            exec,
            slots: slots.clone(),
            tracker: tracker.clone(),
            fetch: fetch.clone(),
            health: health.clone(),
            wake,
            kinds: self.registry.kinds(),
        }));
        tracing::info!(worker = %id, lanes = ?s.lanes, capacity = s.capacity, "worker started");
        Ok(RunningWorker {
            id,
            queue: self.queue,
            settings: s,
            health,
            metrics_addr: metrics_addr.as_ref().map(|(a, _)| *a),
            http: metrics_addr.map(|(_, t)| t),
            background,
            fetch,
            work,
            slots,
            tracker,
            claim_loop,
            completer_task,
            heartbeat,
            sweep,
            row,
        })
    }
}

/// A running worker.
pub struct RunningWorker {
    id: String,
    queue: Queue,
    settings: Arc<WorkerSettings>,
    health: Arc<Health>,
    metrics_addr: Option<SocketAddr>,
    http: Option<tokio::task::JoinHandle<()>>,
    background: CancellationToken,
    fetch: CancellationToken,
    work: CancellationToken,
    slots: Arc<Semaphore>,
    tracker: TaskTracker,
    claim_loop: tokio::task::JoinHandle<()>,
    completer_task: tokio::task::JoinHandle<()>,
    heartbeat: tokio::task::JoinHandle<()>,
    sweep: Option<tokio::task::JoinHandle<()>>,
    row: WorkerRow,
}

impl std::fmt::Debug for RunningWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningWorker")
            .field("id", &self.id)
            .field("metrics_addr", &self.metrics_addr)
            .finish_non_exhaustive()
    }
}

impl RunningWorker {
    /// This run's worker id (stamped as `claimed_by`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The health `/healthz` reports.
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Where `/healthz` and `/metrics` listen, if anywhere.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Items running now.
    pub fn in_flight(&self) -> usize {
        self.settings.capacity - self.slots.available_permits()
    }

    /// Shuts down drain-first: stop claiming at once (`/healthz` turns 503),
    /// let in-flight items finish within the grace period, cancel and
    /// release the rest without spending an attempt, flush completions, stop
    /// the heartbeat, and mark the worker offline.
    pub async fn shutdown(self) -> ShutdownReport {
        self.fetch.cancel();
        self.health.set_draining();
        let _ = self.claim_loop.await;
        let in_flight = self.settings.capacity - self.slots.available_permits();
        tracing::info!(worker = %self.id, in_flight, grace = ?self.settings.shutdown_grace, "draining");
        let all = u32::try_from(self.settings.capacity).unwrap_or(u32::MAX);
        let drained =
            tokio::time::timeout(self.settings.shutdown_grace, self.slots.acquire_many(all)).await;
        let cancelled = match drained {
            Ok(_) => 0,
            Err(_) => {
                let left = self.settings.capacity - self.slots.available_permits();
                tracing::warn!(left, "grace period over: cancelling and releasing the rest");
                self.work.cancel();
                left
            }
        };
        self.tracker.close();
        self.tracker.wait().await;
        // Every executor (and so every completer handle) is gone now; the
        // completer flushes what it holds and ends.
        let _ = self.completer_task.await;
        self.background.cancel();
        let _ = self.heartbeat.await;
        if let Some(s) = self.sweep {
            let _ = s.await;
        }
        if let Some(h) = self.http {
            let _ = h.await;
        }
        let mut row = self.row;
        row.state = "offline".into();
        row.last_beat_at = Utc::now();
        match tokio::time::timeout(
            self.settings.heartbeat_interval,
            self.queue.store().worker_beat(&row),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not mark the worker offline"),
            Err(_) => tracing::warn!("marking the worker offline timed out"),
        }
        tracing::info!(worker = %self.id, in_flight, cancelled, "worker stopped");
        ShutdownReport {
            in_flight,
            cancelled,
        }
    }
}

struct ClaimLoop {
    id: String,
    exec: Executor,
    slots: Arc<Semaphore>,
    tracker: TaskTracker,
    fetch: CancellationToken,
    health: Arc<Health>,
    wake: broadcast::Receiver<String>,
    kinds: Vec<String>,
}

/// Claims while a slot is free; waits on a wake-up, a freed slot, or the
/// jittered poll.
async fn claim_loop(mut l: ClaimLoop) {
    let s = l.exec.settings.clone();
    let mut start_lane = 0usize;
    let mut backoff = Duration::from_millis(50);
    loop {
        l.health.loop_tick();
        if l.fetch.is_cancelled() {
            return;
        }
        let mut claimed = 0usize;
        let mut failed = false;
        let free = l.slots.available_permits();
        if free > 0 {
            let Ok(mut permits) = l
                .slots
                .clone()
                .try_acquire_many_owned(u32::try_from(free).unwrap_or(u32::MAX))
            else {
                continue;
            };
            for i in 0..s.lanes.len() {
                let lane = &s.lanes[(start_lane + i) % s.lanes.len()];
                let n = permits.num_permits();
                if n == 0 || l.fetch.is_cancelled() {
                    break;
                }
                match l
                    .exec
                    .queue
                    .claim(
                        lane,
                        &l.kinds,
                        &l.id,
                        s.lease,
                        u32::try_from(n).unwrap_or(u32::MAX),
                    )
                    .await
                {
                    Ok(batch) => {
                        for cx in batch.items {
                            let Some(permit) = permits.split(1) else {
                                // A claim never returns more than asked for.
                                break;
                            };
                            claimed += 1;
                            let exec = l.exec.clone();
                            l.tracker.spawn(async move { exec.run(cx, permit).await });
                        }
                    }
                    Err(e) => {
                        failed = true;
                        tracing::warn!(error = %e, lane, "claim failed");
                    }
                }
            }
            start_lane = start_lane.wrapping_add(1);
            drop(permits);
        }
        if failed {
            tokio::select! {
                () = l.fetch.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(s.poll_interval.max(Duration::from_millis(100)));
            continue;
        }
        backoff = Duration::from_millis(50);
        if claimed > 0 && l.slots.available_permits() > 0 {
            // There may be more waiting; ask again before sleeping.
            continue;
        }
        let jitter = 1.0 + 0.1 * (2.0 * rand::random::<f64>() - 1.0);
        let poll = s.poll_interval.mul_f64(jitter);
        let full = l.slots.available_permits() == 0;
        tokio::select! {
            () = l.fetch.cancelled() => return,
            () = tokio::time::sleep(poll) => {}
            permit = l.slots.clone().acquire_owned(), if full => drop(permit),
            r = l.wake.recv(), if !full => {
                if let Err(broadcast::error::RecvError::Closed) = r {
                    // The store dropped its sender: fall back to polling.
                    tracing::warn!("wake-up channel closed; polling");
                }
            }
        }
        // Coalesce: a burst of wake-ups costs one claim round.
        while l.wake.try_recv().is_ok() {}
    }
}
