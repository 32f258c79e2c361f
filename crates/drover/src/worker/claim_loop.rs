//! The claim loop: claims ahead of the free slots into a small ready
//! buffer, with up to `claimers` claims in flight, and hands buffered items
//! to free slots.
//!
//! Invariants: a permit is taken before an item starts (never more than
//! `capacity` run); claiming stops at once when `fetch` fires, and what was
//! claimed but never started is handed back spending no attempt; an item
//! never waits in the buffer past half its lease; no claim goes to a lane
//! seen paused; a burst of wake-ups costs one claim round.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, broadcast};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::executor::Executor;
use super::{Health, pause, spread};
use crate::error::Result;

/// How much work the adaptive prefetch holds ready: the items this worker
/// starts in this long.
const PREFETCH_HORIZON: Duration = Duration::from_millis(20);
/// How often the adaptive prefetch re-measures the start rate.
const PREFETCH_WINDOW: Duration = Duration::from_millis(50);
/// The adaptive prefetch never holds more than this many times the capacity.
const PREFETCH_MAX_FACTOR: usize = 10;

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
