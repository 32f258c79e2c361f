//! The worker runtime: drains lanes with a fixed capacity.
//!
//! | part | owns |
//! |---|---|
//! | this module | the worker, its start, drain-first shutdown |
//! | `claim_loop` | the claim loop: claims ahead into a buffer, hands items to free slots |
//! | `builder` | [`WorkerBuilder`]: order-independent knobs, the checks before a start |
//! | [`service`](self::Service) | [`Service`]: a role run beside the claim loop; the worker knows none by name |
//! | `knobs` | the roles' knobs as the builder keeps them (a slot per role, named by none), and the assembly hook that turns them into services |
//! | [`handler`](self::Handler) | handlers, outcomes, strategies, the registry |
//! | `executor` | one item's run: renewal, timeout, panic capture, outcome write |
//! | `completer` | batched, per-row fenced completion |
//! | `drain` | [`Worker::drain`]: a lane run once, inline, for tests ([`DrainReport`]) |
//! | `liveness` | the in-memory beat, the workers row, the Prometheus recorder |
//! | `listener` | the `/healthz`, `/readyz` and `/metrics` listener (feature `metrics-listener`; off by default for a library worker: [`WorkerBuilder::metrics_addr`] opts in) |
//! | `span` | the span of one run: a root, linked to the item's trace |
//! | `spread` | which worker of a lane claims at once on a wake-up |
//! | `roles` | the sweep's declared strategies, the runtime's share of a role's four, a roles-only worker's idle loop |
//! | [`WorkerSettings`] | every knob, its default, and their validation |
//!
//! The worker stands on the queue and the store and knows no role by name:
//! every role (the sweep in [`crate::maintenance`], the relay, the
//! scheduler, the vacuum, projectors, reconcilers) stands on it, is a
//! [`Service`] and adds its own builder calls; [`Worker::builder`] is defined
//! above them all (`crate::defaults`), where the default roles are assembled.
//!
//! Invariants: never more than `capacity` handlers run at once (a semaphore
//! permit is taken before an item is claimed); claiming stops at once on
//! shutdown; an item claimed ahead into the buffer never waits there past
//! half its lease (it is released, spending no attempt); a burst of
//! wake-ups costs one claim round; a worker a wake-up does not designate
//! (`spread`) claims after `spread_fallback`, the designated one and a
//! worker alone at once; no claim is made from a lane seen
//! paused (the set is re-read once per poll interval, `pause`); liveness
//! never pauses claiming; a
//! dropped `RunningWorker` (or a start that fails part-way) stops every
//! task it started, through one root cancellation token.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::Result;
use crate::queue::Queue;
use crate::store::WorkerRow;

mod builder;
mod claim_loop;
mod completer;
mod drain;
mod executor;
mod handler;
mod knobs;
#[cfg(feature = "metrics-listener")]
mod listener;
pub(crate) mod liveness;
mod pause;
mod roles;
mod service;
mod settings;
mod span;
mod spread;
pub mod testkit;

pub(crate) use builder::StatefulSetup;
pub use builder::WorkerBuilder;
pub use drain::{DRAIN_MAX_RUNS, DrainReport};
pub use handler::{
    Done, Handler, HandlerInfo, JobError, Outcome, ROLE_STRATEGIES, Registry, ResultExt, RoleInfo,
    Strategy,
};
pub(crate) use knobs::{Knobs, RoleKnobs};
pub use liveness::{Health, READY_CHECK_TIMEOUT, prometheus};
pub use roles::SWEEP_STRATEGY;
pub use service::{Service, ServiceContext, ServiceFn, ServiceFuture};
pub use settings::*;

use claim_loop::ClaimLoop;
use completer::Completer;
use executor::Executor;

/// A worker, built and checked, not yet running.
pub struct Worker {
    queue: Queue,
    settings: Arc<WorkerSettings>,
    registry: Arc<Registry>,
    /// Every role it runs beside its claim loop, defaults first.
    services: Vec<Box<dyn Service>>,
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
    /// Items still running when the grace period ended: their tokens
    /// fired, and each was released without spending an attempt unless
    /// its handler returned done, a defer or a cancel within the cancel
    /// grace.
    pub cancelled: usize,
}

impl Worker {
    /// The services it runs beside its claim loop (a role's module finds
    /// its own here).
    pub(crate) fn services(&self) -> &[Box<dyn Service>] {
        &self.services
    }

    /// The handlers' declared strategies.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The settings it runs with (the builder's base with its explicit
    /// calls applied).
    pub fn settings(&self) -> &WorkerSettings {
        &self.settings
    }

    /// Runs until `signal` resolves, then shuts down drain-first.
    ///
    /// # Errors
    /// As [`Worker::start`].
    ///
    /// # Cancel safety
    /// Dropping the future once the worker has started drops its
    /// [`RunningWorker`], which stops it without a grace period (see there);
    /// resolve `signal` instead for a drain-first shutdown.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<ShutdownReport> {
        let running = self.start().await?;
        signal.await;
        Ok(running.shutdown().await)
    }

    /// Starts claiming, the heartbeat, the metrics listener and every
    /// service the builder collected (the default roles among them, as the
    /// builder's assembly turned them on from the settings).
    ///
    /// # Errors
    /// [`Error::Config`](crate::Error::Config) when the metrics address cannot be bound; storage
    /// errors when the wake-up subscription fails; a service that cannot
    /// start (see [`Service::run`]).
    pub async fn start(self) -> Result<RunningWorker> {
        let id = new_worker_id();
        let s = self.settings.clone();
        // The code's limits are in force (unless an operator's wins) before
        // this worker claims anything.
        for (scope, n) in self.registry.limits() {
            self.queue.limit_declare(scope, *n).await?;
        }
        for (scope, rate) in self.registry.rates() {
            self.queue.rate_declare(scope, *rate).await?;
        }
        let stale_after = (s.heartbeat_interval * 3)
            .max(s.poll_interval * 3)
            .max(Duration::from_secs(10));
        let health = Arc::new(liveness::Health::new(stale_after));
        // Every token is a child of `root`, which the RunningWorker cancels
        // when dropped: a worker nobody shuts down still stops.
        let root = CancellationToken::new();
        let background = root.child_token();
        let fetch = root.child_token();
        let work = root.child_token();
        // Armed before anything starts, so a start that fails part-way (the
        // wake-up subscription after the listener bound) stops what it began.
        let stop_on_drop = root.drop_guard();
        let store = self.queue.store().clone();

        let metrics_addr = serve_metrics(s.metrics_addr, &health, &store, &background).await?;
        let wake = store.wakeups().await?;
        // Its task stops with `background`; it holds nothing to flush.
        let (paused, _refresher) = pause::start(
            store.clone(),
            s.lanes.clone(),
            s.poll_interval,
            background.clone(),
        )
        .await;
        // What the worker shows as paused: set by the claim loop once in effect.
        let (seen_tx, seen) = tokio::sync::watch::channel(paused.borrow().clone());
        let (completer, completer_task) =
            Completer::start(store.clone(), s.complete_batch, s.complete_window);
        let exec = Executor {
            queue: self.queue.clone(),
            registry: self.registry.clone(),
            settings: s.clone(),
            completer,
            work: work.clone(),
            freed: Arc::new(tokio::sync::Notify::new()),
        };
        let kinds = self.registry.kinds();
        let row = worker_row(&id, &s, &kinds);
        // Unknown until the first beat lands and the table is read: alone.
        let (peers_tx, peers) = tokio::sync::watch::channel(spread::Peers::default());
        let heartbeat = tokio::spawn(liveness::heartbeat(
            store.clone(),
            health.clone(),
            row.clone(),
            s.heartbeat_interval,
            peers_tx,
            background.clone(),
        ));
        let cx = ServiceContext {
            stop: background.clone(),
            health: health.clone(),
            worker_id: id.clone(),
        };
        let services = start_services(self.services, &cx)?;
        let slots = Arc::new(Semaphore::new(s.capacity));
        let tracker = TaskTracker::new();
        let claim_loop = if kinds.is_empty() {
            tokio::spawn(roles::claim_nothing(
                health.clone(),
                fetch.clone(),
                s.poll_interval,
            ))
        } else {
            tokio::spawn(claim_loop::claim_loop(ClaimLoop {
                id: id.clone(),
                exec,
                slots: slots.clone(),
                tracker: tracker.clone(),
                fetch: fetch.clone(),
                health: health.clone(),
                wake,
                paused,
                seen: seen_tx,
                peers: peers.clone(),
                kinds,
            }))
        };
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
            services,
            row,
            paused: seen,
            peers,
            _stop_on_drop: stop_on_drop,
        })
    }
}

/// The listener's bound address and task, when `addr` asks for one.
///
/// # Errors
/// [`Error::Config`](crate::Error::Config) when the address cannot be bound.
#[cfg(feature = "metrics-listener")]
async fn serve_metrics(
    addr: Option<SocketAddr>,
    health: &Arc<Health>,
    store: &Arc<dyn crate::store::Store>,
    stop: &CancellationToken,
) -> Result<Option<(SocketAddr, JoinHandle<()>)>> {
    let Some(addr) = addr else { return Ok(None) };
    let served = listener::serve(addr, health.clone(), store.clone(), stop.clone()).await?;
    tracing::info!(addr = %served.0, "serving /healthz, /readyz and /metrics");
    Ok(Some(served))
}

/// Without the listener compiled, `build` refused a metrics address: none.
#[cfg(not(feature = "metrics-listener"))]
async fn serve_metrics(
    _addr: Option<SocketAddr>,
    _health: &Arc<Health>,
    _store: &Arc<dyn crate::store::Store>,
    _stop: &CancellationToken,
) -> Result<Option<(SocketAddr, JoinHandle<()>)>> {
    Ok(None)
}

/// A fresh worker id: host, process id, and a random suffix for this run.
fn new_worker_id() -> String {
    format!(
        "{}:{}:{}",
        liveness::host_name(),
        std::process::id(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// The workers row this run beats, with the kinds it claims (its
/// registry's: `why_waiting` reads them). A worker of roles only (`kinds`
/// empty) claims nothing, so it is no lane's peer: its row lists no lane.
fn worker_row(id: &str, s: &WorkerSettings, kinds: &[String]) -> WorkerRow {
    let claims = !kinds.is_empty();
    WorkerRow {
        id: id.to_owned(),
        host: liveness::host_name(),
        pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        lanes: if claims { s.lanes.clone() } else { Vec::new() },
        capacity: i32::try_from(s.capacity).unwrap_or(i32::MAX),
        started_at: Utc::now(),
        last_beat_at: Utc::now(),
        state: "running".into(),
        beat_interval_ms: i32::try_from(s.heartbeat_interval.as_millis())
            .unwrap_or(i32::MAX)
            .max(1),
        kinds: kinds.to_vec(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// Starts every service in order, each on a task of its own.
///
/// # Errors
/// The first service that cannot start; the tasks already spawned stop
/// with `cx.stop` (the caller's drop guard fires it).
fn start_services(
    services: Vec<Box<dyn Service>>,
    cx: &ServiceContext,
) -> Result<Vec<JoinHandle<()>>> {
    let mut tasks = Vec::with_capacity(services.len());
    for service in services {
        tasks.push(tokio::spawn(service.run(cx.clone())?));
    }
    Ok(tasks)
}

/// A running worker. Stop it with [`RunningWorker::shutdown`] (drain
/// first: in-flight items get the grace period to finish).
///
/// **Dropped** without `shutdown`, it stops abruptly and without waiting:
/// claiming stops at once, running handlers see their cancellation token
/// fire and get `cancel_grace` to return (an outcome they return is kept);
/// the rest are dropped and their items, like any claimed but not started,
/// are released with a fenced write that spends no attempt; the heartbeat,
/// every service and the metrics listener stop. Those last writes run on
/// the Tokio runtime after the drop returns (if the runtime is gone too,
/// the sweep hands the items back once their lease passes). The workers row is not marked offline:
/// it ages out by its heartbeat.
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
    claim_loop: JoinHandle<()>,
    completer_task: JoinHandle<()>,
    heartbeat: JoinHandle<()>,
    /// The services' tasks, in the order they started.
    services: Vec<JoinHandle<()>>,
    row: WorkerRow,
    /// The paused lanes as the claim loop has put them into effect (every
    /// claim issued before the change has come back).
    paused: tokio::sync::watch::Receiver<pause::PausedLanes>,
    /// This worker's places among the live workers of its lanes.
    peers: tokio::sync::watch::Receiver<spread::Peers>,
    /// Cancels every token above when the worker is dropped (and, harmlessly,
    /// at the very end of a shutdown, when all of it has stopped already).
    _stop_on_drop: tokio_util::sync::DropGuard,
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
    /// The worker's lanes it currently sees paused, as of its last read of
    /// the lane states (once per poll interval). A lane listed here is in
    /// effect: every claim issued before the pause was seen has come back,
    /// so nothing enqueued from now on is claimed from it by this worker.
    pub fn paused_lanes(&self) -> Vec<String> {
        let seen = self.paused.borrow();
        self.settings
            .lanes
            .iter()
            .zip(seen.iter())
            .filter(|(_, p)| **p)
            .map(|(l, _)| l.clone())
            .collect()
    }

    /// How many live workers, this one included, it counts on `lane` when it
    /// decides whose turn a wake-up is (read from the workers table on each
    /// heartbeat): 1 while it is alone, has not yet seen its own row, or
    /// does not drain `lane`.
    pub fn lane_peers(&self, lane: &str) -> usize {
        self.settings
            .lanes
            .iter()
            .position(|l| l == lane)
            .map_or(1, |i| self.peers.borrow().count(i))
    }

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
    /// let in-flight items finish within the grace period, fire the rest's
    /// tokens and give them `cancel_grace` to return, release what did not
    /// finish without spending an attempt, flush completions, stop the
    /// heartbeat, and mark the worker offline.
    pub async fn shutdown(self) -> ShutdownReport {
        // Draining first: `/readyz` and `/healthz` turn 503 before anything
        // else happens.
        self.health.set_draining();
        self.fetch.cancel();
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
        for s in self.services {
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
