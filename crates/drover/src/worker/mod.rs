//! The worker runtime: drains lanes with a fixed capacity.
//!
//! | part | owns |
//! |---|---|
//! | this module | the worker, the claim loop, drain-first shutdown |
//! | `builder` | [`WorkerBuilder`]: order-independent knobs, the checks before a start |
//! | [`handler`](self::Handler) | handlers, outcomes, strategies, the registry |
//! | `executor` | one item's run: renewal, timeout, panic capture, outcome write |
//! | `completer` | batched, per-row fenced completion |
//! | `liveness` | the in-memory beat, the workers row, `/healthz`, `/readyz` and `/metrics` |
//! | `span` | the span of one run: a root, linked to the item's trace |
//! | `spread` | which worker of a lane claims at once on a wake-up |
//! | `roles` | the sweep's declared strategies, the runtime's share of a role's four, a roles-only worker's idle loop |
//! | [`WorkerSettings`] | every knob, its default, and their validation |
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
use tokio::sync::{Semaphore, broadcast};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::Result;
use crate::maintenance::Sweeper;
use crate::queue::Queue;
use crate::store::WorkerRow;

mod builder;
mod completer;
mod executor;
mod handler;
pub(crate) mod liveness;
mod pause;
mod roles;
mod settings;
mod span;
mod spread;
pub mod testkit;

pub use builder::{Service, ServiceContext, WorkerBuilder};
pub use handler::{
    Done, Handler, HandlerInfo, JobError, Outcome, ROLE_STRATEGIES, Registry, ResultExt, RoleInfo,
    Strategy,
};
pub use liveness::{Health, READY_CHECK_TIMEOUT, prometheus};
pub use roles::SWEEP_STRATEGY;
pub use settings::*;

use completer::Completer;
use executor::Executor;

/// A worker, built and checked, not yet running.
pub struct Worker {
    queue: Queue,
    settings: Arc<WorkerSettings>,
    registry: Arc<Registry>,
    sweeper: Option<Sweeper>,
    scheduler: Option<Arc<crate::periodic::Scheduler>>,
    services: Vec<Service>,
    relay: Option<Arc<crate::outbox::Relay>>,
    vacuumer: Option<crate::vacuum::Vacuumer>,
    projectors: Vec<Arc<dyn crate::projector::Projector>>,
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
    /// Starts building a worker over `queue`.
    /// Every [`register!`](crate::register)ed setup of the binary is applied.
    pub fn builder(queue: Queue) -> WorkerBuilder {
        crate::periodic::apply_registrations(WorkerBuilder::new(queue))
    }

    /// The scheduler this worker runs beside its claim loop, if it has
    /// schedules.
    pub fn scheduler(&self) -> Option<&Arc<crate::periodic::Scheduler>> {
        self.scheduler.as_ref()
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

    /// Starts claiming, the sweep, the heartbeat, the paced vacuum
    /// (PostgreSQL) and the metrics listener.
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

        let metrics_addr = match s.metrics_addr {
            Some(addr) => Some(
                liveness::serve(addr, health.clone(), store.clone(), background.clone()).await?,
            ),
            None => None,
        };
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
        };
        // A worker of roles only claims nothing, so it is no lane's peer.
        let kinds = self.registry.kinds();
        let row = WorkerRow {
            id: id.clone(),
            host: liveness::host_name(),
            pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
            lanes: if kinds.is_empty() {
                Vec::new()
            } else {
                s.lanes.clone()
            },
            capacity: i32::try_from(s.capacity).unwrap_or(i32::MAX),
            started_at: Utc::now(),
            last_beat_at: Utc::now(),
            state: "running".into(),
            beat_interval_ms: i32::try_from(s.heartbeat_interval.as_millis())
                .unwrap_or(i32::MAX)
                .max(1),
        };
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
        let sweep = self.sweeper.map(|sw| {
            let stop = background.clone();
            tokio::spawn(async move { sw.run(stop).await })
        });
        let scheduler = self.scheduler.map(|sc| {
            let stop = background.clone();
            tokio::spawn(async move { sc.run(stop).await })
        });
        let services: Vec<_> = self
            .services
            .into_iter()
            .map(|f| {
                tokio::spawn(f(ServiceContext {
                    stop: background.clone(),
                    health: health.clone(),
                }))
            })
            .collect();
        let relay = self.relay.map(|r| {
            let stop = background.clone();
            tokio::spawn(async move { r.run(stop).await })
        });
        let vacuum = self.vacuumer.map(|v| {
            let stop = background.clone();
            tokio::spawn(async move { v.run(stop).await })
        });
        let mut projectors = Vec::with_capacity(self.projectors.len());
        for p in self.projectors {
            let sink_health = health.clone();
            let runner = crate::projector::ProjectorRunner::new(
                store.clone(),
                p,
                crate::projector::ProjectorConfig {
                    holder: id.clone(),
                    ..crate::projector::ProjectorConfig::for_backend(store.backend())
                },
            )?
            .with_failing_sink(Arc::new(move |name, n| {
                let detail = (n > 0).then(|| format!("{n} tenants failing"));
                sink_health.set_failing(&format!("projector {name}"), detail);
            }));
            let stop = background.clone();
            projectors.push(tokio::spawn(async move { runner.run(stop).await }));
        }
        let slots = Arc::new(Semaphore::new(s.capacity));
        let tracker = TaskTracker::new();
        let claim_loop = if kinds.is_empty() {
            tokio::spawn(roles::claim_nothing(
                health.clone(),
                fetch.clone(),
                s.poll_interval,
            ))
        } else {
            tokio::spawn(claim_loop(ClaimLoop {
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
            sweep,
            scheduler,
            services,
            relay,
            vacuum,
            projectors,
            row,
            paused: seen,
            peers,
            _stop_on_drop: stop_on_drop,
        })
    }
}

/// A running worker. Stop it with [`RunningWorker::shutdown`] (drain
/// first: in-flight items get the grace period to finish).
///
/// **Dropped** without `shutdown`, it stops abruptly and without waiting:
/// claiming stops at once, running handlers see their cancellation token
/// fire and get `cancel_grace` to return (an outcome they return is kept);
/// the rest are dropped and their items, like any claimed but not started,
/// are released with a fenced write that spends no attempt; the heartbeat, sweep and
/// metrics listener stop. Those last writes run on the Tokio runtime after
/// the drop returns (if the runtime is gone too, the sweep hands the items
/// back once their lease passes). The workers row is not marked offline:
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
    claim_loop: tokio::task::JoinHandle<()>,
    completer_task: tokio::task::JoinHandle<()>,
    heartbeat: tokio::task::JoinHandle<()>,
    sweep: Option<tokio::task::JoinHandle<()>>,
    scheduler: Option<tokio::task::JoinHandle<()>>,
    services: Vec<tokio::task::JoinHandle<()>>,
    relay: Option<tokio::task::JoinHandle<()>>,
    vacuum: Option<tokio::task::JoinHandle<()>>,
    projectors: Vec<tokio::task::JoinHandle<()>>,
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
        if let Some(s) = self.sweep {
            let _ = s.await;
        }
        if let Some(s) = self.scheduler {
            let _ = s.await;
        }
        for s in self.services {
            let _ = s.await;
        }
        if let Some(r) = self.relay {
            let _ = r.await;
        }
        if let Some(v) = self.vacuum {
            let _ = v.await;
        }
        for p in self.projectors {
            let _ = p.await;
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

/// How much work the adaptive prefetch holds ready: the items this worker
/// starts in this long.
const PREFETCH_HORIZON: Duration = Duration::from_millis(20);
/// How often the adaptive prefetch re-measures the start rate.
const PREFETCH_WINDOW: Duration = Duration::from_millis(50);
/// The adaptive prefetch never holds more than this many times the capacity.
const PREFETCH_MAX_FACTOR: usize = 10;

struct ClaimLoop {
    id: String,
    exec: Executor,
    slots: Arc<Semaphore>,
    tracker: TaskTracker,
    fetch: CancellationToken,
    health: Arc<Health>,
    wake: broadcast::Receiver<crate::store::Wake>,
    /// Which lanes are paused, refreshed once per poll interval.
    paused: tokio::sync::watch::Receiver<pause::PausedLanes>,
    /// Where the claim loop shows the set it has put into effect.
    seen: tokio::sync::watch::Sender<pause::PausedLanes>,
    /// Its places among the live workers of its lanes, refreshed each beat.
    peers: tokio::sync::watch::Receiver<spread::Peers>,
    kinds: Vec<String>,
}

/// A claim in flight: from which lane, how many it asked for, the paused
/// set's generation it was issued under, and its answer.
type ClaimFuture = std::pin::Pin<
    Box<dyn Future<Output = (usize, usize, u64, Result<crate::queue::ClaimBatch>)> + Send>,
>;

/// Claims ahead of the free slots into a small ready buffer, with up to
/// `claimers` claims in flight, and hands buffered items to free slots.
///
/// Why a buffer: a claim costs one commit, and a commit costs one WAL flush;
/// claiming only for the slots free at that instant makes batches tiny when
/// handlers are quick. Why several claims in flight: concurrent commits share
/// a WAL flush. Neither loosens a fence: a buffered item's lease runs from
/// its claim, and the executor drops one that waited past it.
async fn claim_loop(l: ClaimLoop) {
    use futures::StreamExt;
    use std::collections::VecDeque;

    let ClaimLoop {
        id,
        exec,
        slots,
        tracker,
        fetch,
        health,
        mut wake,
        mut paused,
        seen,
        peers,
        kinds,
    } = l;
    let s = exec.settings.clone();
    let lanes = s.lanes.clone();
    // Fixed when set; otherwise adaptive: about PREFETCH_HORIZON of work at
    // the rate items are being started, so quick handlers get large claims
    // (one commit for many items) and slow ones claim only for free slots
    // (nothing waits claimed that another worker could run).
    let adaptive = s.prefetch.is_none();
    let max_ahead = s.capacity.saturating_mul(PREFETCH_MAX_FACTOR);
    let mut prefetch = s.prefetch.unwrap_or(s.capacity);
    let mut window_start = std::time::Instant::now();
    let mut window_started = 0usize;
    let mut start_rate = 0.0f64;
    // A second claim in flight must be worth its commit.
    let min_extra = (s.capacity / 4).max(1);
    let mut buffer: VecDeque<crate::queue::JobContext> = VecDeque::new();
    let mut outstanding: futures::stream::FuturesUnordered<ClaimFuture> =
        futures::stream::FuturesUnordered::new();
    let mut requested = 0usize;
    // Lanes whose last claim came back short: wait for a wake-up or the poll.
    let mut idle = vec![false; lanes.len()];
    // Lanes woken on another worker's turn (`spread`): claimed when the
    // instant comes, unless a claim on the lane runs first.
    let mut deferred: Vec<Option<tokio::time::Instant>> = vec![None; lanes.len()];
    // Paused lanes are skipped, whatever their wake-ups say.
    let mut paused_now = pause::Applied::new(paused.borrow_and_update().clone(), seen);
    let mut paused_open = true;
    let mut next_lane = 0usize;
    let mut backoff = Duration::from_millis(50);
    // Consecutive failed claims: the outage is logged when it begins and ends.
    let mut claim_failures: u64 = 0;
    let mut failing_until: Option<tokio::time::Instant> = None;
    let jittered_poll = || {
        let jitter = 1.0 + 0.1 * (2.0 * rand::random::<f64>() - 1.0);
        tokio::time::Instant::now() + s.poll_interval.mul_f64(jitter)
    };
    let mut poll_at = jittered_poll();

    let spawn = |cx: crate::queue::JobContext, permit: tokio::sync::OwnedSemaphorePermit| {
        let exec = exec.clone();
        tracker.spawn(async move { exec.run(cx, permit).await });
    };
    // A buffered item is handed back (no attempt spent) once it has waited
    // half its lease for a slot: left to expire, the sweep would charge it
    // an attempt it never ran (slow handlers would dead-letter items that
    // never started). After such a hand-back, claims ask only for free
    // slots until a buffered item starts again.
    let buffer_limit = s.lease / 2;
    let mut prefetch_on = true;
    let release_unstarted = |cx: crate::queue::JobContext, note: &'static str| {
        let queue = exec.queue.clone();
        tracker.spawn(async move {
            if let Err(e) = queue.release_retried(&cx, Some(note)).await {
                tracing::warn!(item = %cx.id(), error = %e, "release of an unstarted item failed; the sweep will hand it back");
            }
        });
    };

    loop {
        health.loop_tick();
        if fetch.is_cancelled() {
            break;
        }
        while !buffer.is_empty() {
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                break;
            };
            if let Some(cx) = buffer.pop_front() {
                prefetch_on = true;
                window_started += 1;
                spawn(cx, permit);
            }
        }
        if adaptive && window_start.elapsed() >= PREFETCH_WINDOW {
            let r = window_started as f64 / window_start.elapsed().as_secs_f64();
            start_rate = if start_rate == 0.0 {
                r
            } else {
                0.7 * start_rate + 0.3 * r
            };
            prefetch = ((start_rate * PREFETCH_HORIZON.as_secs_f64()) as usize).min(max_ahead);
            window_start = std::time::Instant::now();
            window_started = 0;
        }
        while buffer
            .front()
            .is_some_and(|cx| cx.claimed_at().elapsed() >= buffer_limit)
        {
            if let Some(cx) = buffer.pop_front() {
                prefetch_on = false;
                release_unstarted(cx, "released unstarted: no slot within half the lease");
            }
        }
        let now = tokio::time::Instant::now();
        if failing_until.is_some_and(|t| now >= t) {
            failing_until = None;
        }
        // A change the refresher published is in effect before the next
        // claim goes out, whichever select branch woke the loop.
        if paused_open && paused.has_changed().unwrap_or(false) {
            let next = paused.borrow_and_update().clone();
            paused_now.apply(next, outstanding.len(), &mut idle);
        }
        if now >= poll_at {
            idle.iter_mut().for_each(|i| *i = false);
            deferred.iter_mut().for_each(|d| *d = None);
            poll_at = jittered_poll();
        }
        // Ask for more while the buffer and the claims in flight fall short
        // of the free slots plus the prefetch.
        let free = slots.available_permits();
        let ahead = if prefetch_on { prefetch } else { 0 };
        let want = (free + ahead).saturating_sub(buffer.len() + requested);
        let lane = (0..lanes.len())
            .map(|i| (next_lane + i) % lanes.len())
            .find(|&i| !idle[i] && !paused_now.is_paused(i));
        let worth = if outstanding.is_empty() {
            want > 0
        } else {
            want >= min_extra
        };
        if let (Some(li), true, true, None) =
            (lane, worth, outstanding.len() < s.claimers, failing_until)
        {
            next_lane = li + 1;
            // This claim covers whatever a deferred wake-up announced.
            deferred[li] = None;
            requested += want;
            let queue = exec.queue.clone();
            let (lane_name, kinds, id, lease) =
                (lanes[li].clone(), kinds.clone(), id.clone(), s.lease);
            let n = u32::try_from(want).unwrap_or(u32::MAX);
            let generation = paused_now.generation();
            outstanding.push(Box::pin(async move {
                let r = queue.claim(&lane_name, &kinds, &id, lease, n).await;
                (li, want, generation, r)
            }));
            continue;
        }
        let full = free == 0;
        let waiting_for_work = lane.is_none() || failing_until.is_some();
        let next_deferred = deferred.iter().flatten().min().copied();
        tokio::select! {
            () = fetch.cancelled() => break,
            Some((li, asked, generation, r)) = outstanding.next(), if !outstanding.is_empty() => {
                requested -= asked;
                paused_now.settled(generation);
                match r {
                    Ok(batch) => {
                        if claim_failures > 0 {
                            tracing::info!(failures = claim_failures, "claims succeed again");
                            claim_failures = 0;
                        }
                        backoff = Duration::from_millis(50);
                        if batch.items.len() < asked {
                            idle[li] = true;
                        }
                        buffer.extend(batch.items);
                    }
                    Err(e) => {
                        // Once per outage, not once per retry.
                        if claim_failures == 0 {
                            tracing::warn!(error = %e, lane = %lanes[li], "claim failed; retrying with backoff, logged once until a claim succeeds");
                        } else {
                            tracing::debug!(error = %e, lane = %lanes[li], failures = claim_failures + 1, "claim still failing");
                        }
                        claim_failures += 1;
                        failing_until = Some(tokio::time::Instant::now() + backoff);
                        backoff = (backoff * 2).min(s.poll_interval.max(Duration::from_millis(100)));
                    }
                }
            }
            permit = slots.clone().acquire_owned(), if full => {
                if let (Ok(permit), Some(cx)) = (permit, buffer.pop_front()) {
                    prefetch_on = true;
                    window_started += 1;
                    spawn(cx, permit);
                }
            }
            () = tokio::time::sleep_until(
                buffer.front().map_or(poll_at, |cx| tokio::time::Instant::from_std(cx.claimed_at() + buffer_limit)),
            ), if !buffer.is_empty() => {}
            () = tokio::time::sleep_until(next_deferred.unwrap_or(poll_at)), if next_deferred.is_some() => {
                let now = tokio::time::Instant::now();
                for (i, d) in deferred.iter_mut().enumerate() {
                    if d.is_some_and(|t| t <= now) {
                        *d = None;
                        idle[i] = false;
                    }
                }
            }
            r = wake.recv(), if waiting_for_work => {
                match r {
                    Ok(w) => {
                        let view = peers.borrow();
                        take_turn(&w, &lanes, &view, s.spread_fallback, &mut idle, &mut deferred);
                    }
                    // Lagged: wake-ups were lost, so any lane may have work.
                    Err(broadcast::error::RecvError::Lagged(_)) => idle.iter_mut().for_each(|i| *i = false),
                    Err(broadcast::error::RecvError::Closed) => {
                        tracing::warn!("wake-up channel closed; polling");
                        // Without wake-ups, only the poll (and backoff) wakes the loop.
                        let until = poll_at;
                        tokio::select! {
                            () = fetch.cancelled() => break,
                            () = tokio::time::sleep_until(until) => {}
                        }
                    }
                }
                // Coalesce: a burst of wake-ups costs one claim round.
                let view = peers.borrow();
                while let Ok(w) = wake.try_recv() {
                    take_turn(&w, &lanes, &view, s.spread_fallback, &mut idle, &mut deferred);
                }
            }
            r = paused.changed(), if paused_open => {
                if r.is_err() {
                    paused_open = false;
                } else {
                    let next = paused.borrow_and_update().clone();
                    paused_now.apply(next, outstanding.len(), &mut idle);
                }
            }
            () = tokio::time::sleep_until(failing_until.unwrap_or(poll_at).min(poll_at)) => {}
        }
    }
    // Stop claiming: settle the claims in flight, then hand back everything
    // claimed but never started, spending no attempt.
    while let Some((_, _, _, r)) = outstanding.next().await {
        if let Ok(batch) = r {
            buffer.extend(batch.items);
        }
    }
    for cx in buffer {
        release_unstarted(cx, "released unstarted: worker shutting down");
    }
}

/// Applies one wake-up to the claim loop's lanes: on this worker's turn
/// (`spread`), or with no fallback configured, the lane claims now;
/// otherwise it claims once `fallback` has passed, the earliest such
/// instant kept. A lane this worker does not drain is ignored.
fn take_turn(
    w: &crate::store::Wake,
    lanes: &[String],
    peers: &spread::Peers,
    fallback: Duration,
    idle: &mut [bool],
    deferred: &mut [Option<tokio::time::Instant>],
) {
    let Some(i) = lanes.iter().position(|l| *l == w.lane) else {
        return;
    };
    if fallback.is_zero() || peers.turn(i, w.nonce) == spread::Turn::Now {
        idle[i] = false;
        deferred[i] = None;
    } else if deferred[i].is_none() {
        deferred[i] = Some(tokio::time::Instant::now() + fallback);
    }
}
