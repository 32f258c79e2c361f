//! The claim loop: claims ahead of the free slots into a small ready
//! buffer, with up to `claimers` claims in flight, and hands buffered items
//! to free slots.
//!
//! Invariants: a permit is taken before an item starts (never more than
//! `capacity` run); claiming stops at once when `fetch` fires, and what was
//! claimed but never started is handed back spending no attempt; an item
//! never waits in the buffer past half its lease; no claim goes to a lane
//! seen paused; a burst of wake-ups costs one claim round.

use std::collections::VecDeque;
use std::future::Future;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::{Semaphore, broadcast};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::completer::{Handed, Handover};
use super::executor::Executor;
use super::{Health, WorkerSettings, pause, spread};
use crate::error::Result;
use crate::queue::JobContext;

/// How much work the adaptive prefetch holds ready: the items this worker
/// starts in this long.
const PREFETCH_HORIZON: Duration = Duration::from_millis(20);
/// How often the adaptive prefetch re-measures the start rate.
const PREFETCH_WINDOW: Duration = Duration::from_millis(50);
/// The adaptive prefetch never holds more than this many times the
/// capacity: a guard against a mismeasured start rate. The horizon is what
/// bounds it in a drain (about 20 ms of work); at 10 times the capacity the
/// guard bound first and a quick drain claimed 72 items a claim where its
/// horizon asked for 600 (`drover bench`, capacity 20: PostgreSQL drained
/// 34,300 items/s capped, 45,400 with 1,000 ahead, SQLite 28,800 and
/// 35,400).
const PREFETCH_MAX_FACTOR: usize = 50;

/// What the claim loop runs with.
pub(super) struct ClaimLoop {
    pub(super) id: String,
    pub(super) exec: Executor,
    pub(super) slots: Arc<Semaphore>,
    pub(super) tracker: TaskTracker,
    pub(super) fetch: CancellationToken,
    pub(super) health: Arc<Health>,
    pub(super) wake: broadcast::Receiver<crate::store::Wake>,
    /// Which lanes are paused, refreshed once per poll interval.
    pub(super) paused: tokio::sync::watch::Receiver<pause::PausedLanes>,
    /// Where the claim loop shows the set it has put into effect.
    pub(super) seen: tokio::sync::watch::Sender<pause::PausedLanes>,
    /// Its places among the live workers of its lanes, refreshed each beat.
    pub(super) peers: tokio::sync::watch::Receiver<spread::Peers>,
    pub(super) kinds: Vec<String>,
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
pub(super) async fn claim_loop(l: ClaimLoop) {
    let mut c = Claimer::new(l);
    loop {
        c.health.loop_tick();
        if c.fetch.is_cancelled() {
            break;
        }
        c.start_buffered();
        c.prefetch.remeasure();
        c.release_overdue();
        c.refresh();
        match c.try_claim() {
            Next::Claimed => continue,
            Next::Wait(w) => {
                if c.wait(w).await.is_break() {
                    break;
                }
            }
        }
    }
    c.stop().await;
}

/// The adaptive prefetch: how many items to hold ready beyond the free
/// slots. Fixed when set; otherwise about PREFETCH_HORIZON of work at the
/// rate items are being started, so quick handlers get large claims (one
/// commit for many items) and slow ones claim only for free slots (nothing
/// waits claimed that another worker could run).
struct Prefetch {
    adaptive: bool,
    max_ahead: usize,
    size: usize,
    window_start: std::time::Instant,
    window_started: usize,
    start_rate: f64,
    /// False after a buffered item was handed back unstarted: claims then
    /// ask only for free slots until a buffered item starts again.
    on: bool,
}

impl Prefetch {
    fn new(s: &WorkerSettings) -> Self {
        Prefetch {
            adaptive: s.prefetch.is_none(),
            max_ahead: s.capacity.saturating_mul(PREFETCH_MAX_FACTOR),
            size: s.prefetch.unwrap_or(s.capacity),
            window_start: std::time::Instant::now(),
            window_started: 0,
            start_rate: 0.0,
            on: true,
        }
    }

    /// A buffered item started.
    fn started(&mut self) {
        self.on = true;
        self.window_started += 1;
    }

    /// Re-measures the start rate once a window has passed.
    fn remeasure(&mut self) {
        if !self.adaptive || self.window_start.elapsed() < PREFETCH_WINDOW {
            return;
        }
        let r = self.window_started as f64 / self.window_start.elapsed().as_secs_f64();
        self.start_rate = if self.start_rate == 0.0 {
            r
        } else {
            0.7 * self.start_rate + 0.3 * r
        };
        self.size =
            ((self.start_rate * PREFETCH_HORIZON.as_secs_f64()) as usize).min(self.max_ahead);
        self.window_start = std::time::Instant::now();
        self.window_started = 0;
    }

    /// How many to claim beyond the free slots.
    fn ahead(&self) -> usize {
        if self.on { self.size } else { 0 }
    }
}

/// What the loop does after deciding on a claim.
enum Next {
    /// A claim went out: decide again at once.
    Claimed,
    /// Nothing to claim now: wait for one of the loop's events.
    Wait(Waiting),
}

/// Why the loop waits.
struct Waiting {
    /// No free slot: a freed one may start a buffered item.
    full: bool,
    /// No lane to claim from (all idle or paused) or claims failing: a
    /// wake-up may give one.
    for_work: bool,
}

/// The claim loop's state between rounds.
struct Claimer {
    id: String,
    exec: Executor,
    slots: Arc<Semaphore>,
    tracker: TaskTracker,
    fetch: CancellationToken,
    health: Arc<Health>,
    wake: broadcast::Receiver<crate::store::Wake>,
    paused: tokio::sync::watch::Receiver<pause::PausedLanes>,
    peers: tokio::sync::watch::Receiver<spread::Peers>,
    kinds: Vec<String>,
    s: Arc<WorkerSettings>,
    lanes: Vec<String>,
    prefetch: Prefetch,
    /// A second claim in flight must be worth its commit.
    min_extra: usize,
    buffer: VecDeque<JobContext>,
    outstanding: FuturesUnordered<ClaimFuture>,
    requested: usize,
    /// Lanes whose last claim came back short: wait for a wake-up or the poll.
    idle: Vec<bool>,
    /// Lanes whose last short claim had a limit applying
    /// ([`ClaimBatch::limited`](crate::queue::ClaimBatch)): a run of ours
    /// ending frees a slot that may admit their held-back work.
    held: Vec<bool>,
    /// Lanes whose last claim had a concurrency limit applying
    /// ([`ClaimBatch::serial`](crate::queue::ClaimBatch)): PostgreSQL takes
    /// such claims under the limit's scope lock, so a second one in flight
    /// would only wait on the first, holding its transaction open; one at
    /// a time is claimed for them (a kind limit that never bound drained
    /// at 0.80-0.83 of no limit with two in flight, 0.91 with one).
    serial: Vec<bool>,
    /// Claims in flight per lane.
    flying: Vec<usize>,
    /// The completer's handover: a run's completion in a lane of `held`
    /// claims the slots it frees in the same call; its items arrive on
    /// `handed`.
    handover: Option<Arc<Handover>>,
    handed: Option<tokio::sync::mpsc::UnboundedReceiver<Handed>>,
    /// Lanes woken on another worker's turn (`spread`), or held back by a
    /// rate until the instant it allows the next start: claimed when the
    /// instant comes, unless a claim on the lane runs first.
    deferred: Vec<Option<tokio::time::Instant>>,
    /// Paused lanes are skipped, whatever their wake-ups say.
    paused_now: pause::Applied,
    paused_open: bool,
    next_lane: usize,
    backoff: Duration,
    /// Consecutive failed claims: the outage is logged when it begins and ends.
    claim_failures: u64,
    failing_until: Option<tokio::time::Instant>,
    poll_at: tokio::time::Instant,
    /// A buffered item is handed back (no attempt spent) once it has waited
    /// this long (half its lease) for a slot: left to expire, the sweep
    /// would charge it an attempt it never ran (slow handlers would
    /// dead-letter items that never started).
    buffer_limit: Duration,
}

impl Claimer {
    fn new(l: ClaimLoop) -> Self {
        let ClaimLoop {
            id,
            exec,
            slots,
            tracker,
            fetch,
            health,
            wake,
            mut paused,
            seen,
            peers,
            kinds,
        } = l;
        let s = exec.settings.clone();
        let lanes = s.lanes.clone();
        let paused_now = pause::Applied::new(paused.borrow_and_update().clone(), seen);
        let (handover, handed) =
            match exec
                .completer
                .handover(lanes.clone(), kinds.clone(), id.clone(), s.lease)
            {
                Some((h, rx)) => (Some(h), Some(rx)),
                None => (None, None),
            };
        Claimer {
            handover,
            handed,
            prefetch: Prefetch::new(&s),
            min_extra: (s.capacity / 4).max(1),
            buffer: VecDeque::new(),
            outstanding: FuturesUnordered::new(),
            requested: 0,
            idle: vec![false; lanes.len()],
            held: vec![false; lanes.len()],
            serial: vec![false; lanes.len()],
            flying: vec![0; lanes.len()],
            deferred: vec![None; lanes.len()],
            paused_now,
            paused_open: true,
            next_lane: 0,
            backoff: Duration::from_millis(50),
            claim_failures: 0,
            failing_until: None,
            poll_at: jittered_poll(s.poll_interval),
            buffer_limit: s.lease / 2,
            id,
            exec,
            slots,
            tracker,
            fetch,
            health,
            wake,
            paused,
            peers,
            kinds,
            s,
            lanes,
        }
    }

    /// Runs `cx` on a slot.
    fn spawn(&mut self, cx: JobContext, permit: tokio::sync::OwnedSemaphorePermit) {
        self.prefetch.started();
        let exec = self.exec.clone();
        self.tracker.spawn(async move {
            exec.run(cx, permit).await;
        });
    }

    /// Hands `cx` back, spending no attempt.
    fn release_unstarted(&self, cx: JobContext, note: &'static str) {
        let queue = self.exec.queue.clone();
        self.tracker.spawn(async move {
            if let Err(e) = queue.release_retried(&cx, Some(note)).await {
                tracing::warn!(item = %cx.id(), error = %e, "release of an unstarted item failed; the sweep will hand it back");
            }
        });
    }

    /// Starts buffered items on the slots free now.
    fn start_buffered(&mut self) {
        while !self.buffer.is_empty() {
            let Ok(permit) = self.slots.clone().try_acquire_owned() else {
                break;
            };
            if let Some(cx) = self.buffer.pop_front() {
                self.spawn(cx, permit);
            }
        }
    }

    /// Hands back the buffered items that waited half their lease; claims
    /// then ask only for free slots until a buffered item starts again.
    fn release_overdue(&mut self) {
        while self
            .buffer
            .front()
            .is_some_and(|cx| cx.claimed_at().elapsed() >= self.buffer_limit)
        {
            if let Some(cx) = self.buffer.pop_front() {
                self.prefetch.on = false;
                self.release_unstarted(cx, "released unstarted: no slot within half the lease");
            }
        }
    }

    /// Ends a backoff that has passed, puts a published pause change into
    /// effect, and on the poll forgets which lanes were idle or deferred.
    fn refresh(&mut self) {
        let now = tokio::time::Instant::now();
        if self.failing_until.is_some_and(|t| now >= t) {
            self.failing_until = None;
        }
        // A change the refresher published is in effect before the next
        // claim goes out, whichever select branch woke the loop.
        if self.paused_open && self.paused.has_changed().unwrap_or(false) {
            self.apply_paused();
        }
        if now >= self.poll_at {
            self.idle.iter_mut().for_each(|i| *i = false);
            self.deferred.iter_mut().for_each(|d| *d = None);
            self.poll_at = jittered_poll(self.s.poll_interval);
        }
    }

    /// Puts the refresher's latest paused set into effect.
    fn apply_paused(&mut self) {
        let next = self.paused.borrow_and_update().clone();
        self.paused_now
            .apply(next, self.outstanding.len(), &mut self.idle);
    }

    /// Sends a claim when the buffer and the claims in flight fall short of
    /// the free slots plus the prefetch, from the next lane neither idle
    /// nor paused.
    fn try_claim(&mut self) -> Next {
        let free = self.slots.available_permits();
        let handing = self.handover.as_ref().map_or(0, |h| h.in_flight());
        let want = (free + self.prefetch.ahead())
            .saturating_sub(self.buffer.len() + self.requested + handing);
        let lane = (0..self.lanes.len())
            .map(|i| (self.next_lane + i) % self.lanes.len())
            .find(|&i| {
                !self.idle[i]
                    && !self.paused_now.is_paused(i)
                    && (!self.serial[i] || self.flying[i] == 0)
            });
        // A second claim in flight while the first is out must be worth
        // its commit, and while claims are large (a quick drain) half a
        // claim: two claims racing for the same head of the lane cost more
        // than they overlap (PostgreSQL's SKIP LOCKED walks past the
        // other's rows; SQLite's one writer runs them in turn).
        let worth = if self.outstanding.is_empty() {
            want > 0
        } else {
            want >= self.min_extra.max(self.prefetch.ahead() / 2)
        };
        let room = self.outstanding.len() < self.s.claimers;
        if let (Some(li), true, true, None) = (lane, worth, room, self.failing_until) {
            self.claim(li, want);
            return Next::Claimed;
        }
        Next::Wait(Waiting {
            full: free == 0,
            for_work: lane.is_none() || self.failing_until.is_some(),
        })
    }

    /// Sends a claim for `want` items on lane `li`.
    fn claim(&mut self, li: usize, want: usize) {
        self.next_lane = li + 1;
        // This claim covers whatever a deferred wake-up announced.
        self.deferred[li] = None;
        self.requested += want;
        self.flying[li] += 1;
        let queue = self.exec.queue.clone();
        let (lane_name, kinds, id, lease) = (
            self.lanes[li].clone(),
            self.kinds.clone(),
            self.id.clone(),
            self.s.lease,
        );
        let n = u32::try_from(want).unwrap_or(u32::MAX);
        let generation = self.paused_now.generation();
        self.outstanding.push(Box::pin(async move {
            let r = queue.claim(&lane_name, &kinds, &id, lease, n).await;
            (li, want, generation, r)
        }));
    }

    /// Waits for the first of: shutdown, a claim's answer, a free slot
    /// (when full), a buffered item's deadline, a deferred wake-up's
    /// instant, a wake-up (when waiting for work), a pause change, the poll
    /// or the end of a backoff. Breaks on shutdown.
    async fn wait(&mut self, w: Waiting) -> ControlFlow<()> {
        let next_deferred = self.deferred.iter().flatten().min().copied();
        let poll_at = self.poll_at;
        let buffer_due = self.buffer.front().map_or(poll_at, |cx| {
            tokio::time::Instant::from_std(cx.claimed_at() + self.buffer_limit)
        });
        let backoff_due = self.failing_until.unwrap_or(poll_at).min(poll_at);
        let freed = self.exec.freed.clone();
        tokio::select! {
            () = self.fetch.cancelled() => return ControlFlow::Break(()),
            Some((li, asked, generation, r)) = self.outstanding.next(), if !self.outstanding.is_empty() => {
                self.answered(li, asked, generation, r);
            }
            permit = self.slots.clone().acquire_owned(), if w.full => {
                if let (Ok(permit), Some(cx)) = (permit, self.buffer.pop_front()) {
                    self.spawn(cx, permit);
                }
            }
            () = tokio::time::sleep_until(buffer_due), if !self.buffer.is_empty() => {}
            () = tokio::time::sleep_until(next_deferred.unwrap_or(poll_at)), if next_deferred.is_some() => {
                let now = tokio::time::Instant::now();
                for (i, d) in self.deferred.iter_mut().enumerate() {
                    if d.is_some_and(|t| t <= now) {
                        *d = None;
                        self.idle[i] = false;
                    }
                }
            }
            Some(h) = recv_handed(&mut self.handed) => self.take_handed(h).await,
            r = self.wake.recv(), if w.for_work => return self.woken(r).await,
            // A run of ours ended: the slot it held of a limit is free, so
            // a lane a full limit left idle may have claimable work again
            // (a burst of endings costs one claim round). A lane whose
            // short claim no limit touched is empty: re-claiming it on
            // every ending would cost a round each and take the next
            // wake-up's item out of its designated worker's turn.
            () = freed.notified(), if w.for_work => {
                for (idle, held) in self.idle.iter_mut().zip(&self.held) {
                    if *held {
                        *idle = false;
                    }
                }
            }
            r = self.paused.changed(), if self.paused_open => {
                if r.is_err() {
                    self.paused_open = false;
                } else {
                    self.apply_paused();
                }
            }
            () = tokio::time::sleep_until(backoff_due) => {}
        }
        ControlFlow::Continue(())
    }

    /// A claim came back: buffer its items, or back off on a failure.
    fn answered(
        &mut self,
        li: usize,
        asked: usize,
        generation: u64,
        r: Result<crate::queue::ClaimBatch>,
    ) {
        self.requested -= asked;
        self.flying[li] = self.flying[li].saturating_sub(1);
        self.paused_now.settled(generation);
        match r {
            Ok(batch) => {
                if self.claim_failures > 0 {
                    tracing::info!(failures = self.claim_failures, "claims succeed again");
                    self.claim_failures = 0;
                }
                self.backoff = Duration::from_millis(50);
                let short = batch.items.len() < asked;
                if short {
                    self.idle[li] = true;
                }
                self.held[li] = short && batch.limited;
                self.serial[li] = batch.serial;
                if let Some(h) = &self.handover {
                    h.set_held(li, self.held[li]);
                }
                // A rate held work back: claim the lane again at the
                // instant it allows the next start, not at the poll.
                if let (true, Some(wait)) = (short, batch.rate_wait) {
                    let at = tokio::time::Instant::now() + wait;
                    let d = &mut self.deferred[li];
                    *d = Some(d.map_or(at, |t| t.min(at)));
                }
                self.exec.completer.set_eager(short);
                self.buffer.extend(batch.items);
            }
            Err(e) => {
                let lane = &self.lanes[li];
                // Once per outage, not once per retry.
                if self.claim_failures == 0 {
                    tracing::warn!(error = %e, lane = %lane, "claim failed; retrying with backoff, logged once until a claim succeeds");
                } else {
                    tracing::debug!(error = %e, lane = %lane, failures = self.claim_failures + 1, "claim still failing");
                }
                self.claim_failures += 1;
                self.failing_until = Some(tokio::time::Instant::now() + self.backoff);
                self.backoff =
                    (self.backoff * 2).min(self.s.poll_interval.max(Duration::from_millis(100)));
            }
        }
    }

    /// Items a completion's handover claimed: buffered as a claim's are.
    async fn take_handed(&mut self, h: Handed) {
        if let Some(ho) = &self.handover {
            ho.taken(h.asked);
        }
        let n = u32::try_from(h.asked).unwrap_or(u32::MAX);
        let lane = self.lanes[h.lane].clone();
        match self
            .exec
            .queue
            .claimed(h.items, h.sent, &lane, &self.kinds, n)
            .await
        {
            Ok(batch) => self.buffer.extend(batch.items),
            Err(e) => tracing::warn!(error = %e, lane = %lane, "handed-over items not taken"),
        }
    }

    /// A wake-up arrived (or the channel lagged or closed): mark the lanes
    /// it concerns, then coalesce the burst behind it into this round.
    /// Breaks on shutdown while the channel is closed.
    async fn woken(
        &mut self,
        r: std::result::Result<crate::store::Wake, broadcast::error::RecvError>,
    ) -> ControlFlow<()> {
        match r {
            Ok(w) => {
                let view = self.peers.borrow();
                take_turn(
                    &w,
                    &self.lanes,
                    &view,
                    self.s.spread_fallback,
                    &mut self.idle,
                    &mut self.deferred,
                );
            }
            // Lagged: wake-ups were lost, so any lane may have work.
            Err(broadcast::error::RecvError::Lagged(_)) => {
                self.idle.iter_mut().for_each(|i| *i = false)
            }
            Err(broadcast::error::RecvError::Closed) => {
                tracing::warn!("wake-up channel closed; polling");
                // Without wake-ups, only the poll (and backoff) wakes the loop.
                let until = self.poll_at;
                tokio::select! {
                    () = self.fetch.cancelled() => return ControlFlow::Break(()),
                    () = tokio::time::sleep_until(until) => {}
                }
            }
        }
        // Coalesce: a burst of wake-ups costs one claim round.
        let view = self.peers.borrow();
        while let Ok(w) = self.wake.try_recv() {
            take_turn(
                &w,
                &self.lanes,
                &view,
                self.s.spread_fallback,
                &mut self.idle,
                &mut self.deferred,
            );
        }
        ControlFlow::Continue(())
    }

    /// Stops claiming: settles the claims in flight, then hands back
    /// everything claimed but never started, spending no attempt.
    async fn stop(mut self) {
        // No more handovers, and none delivered from now on (one in flight
        // is handed back by the completer, whose send fails on the closed
        // channel); what was delivered already is handed back below.
        if let Some(h) = &self.handover {
            (0..self.lanes.len()).for_each(|li| h.set_held(li, false));
        }
        if let Some(rx) = self.handed.as_mut() {
            rx.close();
        }
        while let Some(h) = self.handed.as_mut().and_then(|rx| rx.try_recv().ok()) {
            self.take_handed(h).await;
        }
        while let Some((_, _, _, r)) = self.outstanding.next().await {
            if let Ok(batch) = r {
                self.buffer.extend(batch.items);
            }
        }
        for cx in std::mem::take(&mut self.buffer) {
            self.release_unstarted(cx, "released unstarted: worker shutting down");
        }
    }
}

/// The next handed-over batch, or never without a handover.
async fn recv_handed(
    rx: &mut Option<tokio::sync::mpsc::UnboundedReceiver<Handed>>,
) -> Option<Handed> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The next poll instant: the poll interval, jittered by ±10%.
fn jittered_poll(every: Duration) -> tokio::time::Instant {
    let jitter = 1.0 + 0.1 * (2.0 * rand::random::<f64>() - 1.0);
    tokio::time::Instant::now() + every.mul_f64(jitter)
}

/// Applies one wake-up to the claim loop's lanes: on this worker's turn
/// (`spread`), or with no fallback configured, the lane claims now;
/// otherwise it claims once `fallback` has passed, the earliest such
/// instant kept. A lane this worker does not drain is ignored; a wake-up of
/// every lane (another process committed to a SQLite file) applies to each.
fn take_turn(
    w: &crate::store::Wake,
    lanes: &[String],
    peers: &spread::Peers,
    fallback: Duration,
    idle: &mut [bool],
    deferred: &mut [Option<tokio::time::Instant>],
) {
    for i in (0..lanes.len()).filter(|&i| w.is_any() || lanes[i] == w.lane) {
        if fallback.is_zero() || peers.turn(i, w.nonce) == spread::Turn::Now {
            idle[i] = false;
            deferred[i] = None;
        } else if deferred[i].is_none() {
            deferred[i] = Some(tokio::time::Instant::now() + fallback);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Wake;
    use crate::store::wake::ANY_LANE;

    fn wake(lane: &str) -> Wake {
        Wake {
            lane: lane.into(),
            nonce: Some(1),
        }
    }

    #[test]
    fn a_wake_up_of_every_lane_marks_each_lane_worth_a_claim() {
        let lanes = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let (mut idle, mut deferred) = (vec![true; 3], vec![None; 3]);
        let alone = spread::Peers::default();
        take_turn(
            &wake("b"),
            &lanes,
            &alone,
            Duration::ZERO,
            &mut idle,
            &mut deferred,
        );
        assert_eq!(idle, [true, false, true], "a lane's wake-up: that lane");
        take_turn(
            &wake("x"),
            &lanes,
            &alone,
            Duration::ZERO,
            &mut idle,
            &mut deferred,
        );
        assert_eq!(idle, [true, false, true], "a lane not drained here: none");
        take_turn(
            &wake(ANY_LANE),
            &lanes,
            &alone,
            Duration::ZERO,
            &mut idle,
            &mut deferred,
        );
        assert_eq!(idle, [false, false, false], "every lane");
    }
}
