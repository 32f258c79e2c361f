//! The worker's view of paused lanes: one read of the lane states per poll
//! interval, shared with the claim loop through a watch channel.
//!
//! Why not in the claim statement: a subquery per claim would cost every
//! claim, and a pause need only be honoured within one poll interval (see
//! `lane`). A failed read keeps the last known set and is logged once per
//! outage: a store that cannot answer cannot hand out items either.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// For each of the worker's lanes (in its order), whether it is paused.
pub(super) type PausedLanes = Arc<Vec<bool>>;

/// Reads which of `lanes` are paused; `None` when the store did not answer.
async fn read(store: &dyn Store, lanes: &[String]) -> Option<PausedLanes> {
    match store.lane_list().await {
        Ok(rows) => Some(Arc::new(
            lanes
                .iter()
                .map(|l| rows.iter().any(|r| r.paused && r.lane == *l))
                .collect(),
        )),
        Err(e) => {
            tracing::debug!(error = %e, "reading the paused lanes failed");
            None
        }
    }
}

/// Reads the paused set once (so a worker starting on a paused lane never
/// claims from it), then starts the refresher: every `interval` until
/// `stop`, publishing only when the set changed.
pub(super) async fn start(
    store: Arc<dyn Store>,
    lanes: Vec<String>,
    interval: Duration,
    stop: CancellationToken,
) -> (watch::Receiver<PausedLanes>, tokio::task::JoinHandle<()>) {
    let first = match read(store.as_ref(), &lanes).await {
        Some(p) => p,
        None => {
            tracing::warn!(
                "the paused lanes could not be read at start; treating every lane as running until the next poll"
            );
            Arc::new(vec![false; lanes.len()])
        }
    };
    let (tx, rx) = watch::channel(first);
    let task = tokio::spawn(async move {
        let mut failing = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(interval) => {}
            }
            match read(store.as_ref(), &lanes).await {
                Some(p) => {
                    if failing {
                        tracing::info!("the paused lanes can be read again");
                        failing = false;
                    }
                    tx.send_if_modified(|cur| {
                        if *cur == p {
                            return false;
                        }
                        for (lane, (was, is)) in lanes.iter().zip(cur.iter().zip(p.iter())) {
                            if was != is {
                                tracing::info!(lane = %lane, paused = is, "lane state seen");
                            }
                        }
                        *cur = p;
                        true
                    });
                }
                None if !failing => {
                    tracing::warn!(
                        "reading the paused lanes failed; keeping the last known set, logged once until a read succeeds"
                    );
                    failing = true;
                }
                None => {}
            }
        }
    });
    (rx, task)
}

/// The paused set the claim loop has put into effect, and what it shows.
///
/// Why a second channel: the refresher's value changes before the claim
/// loop acts on it, and a claim issued under the old set may still be in
/// flight. What this publishes (`RunningWorker::paused_lanes`) changes only
/// once every claim issued under an older set has come back, so from the
/// moment a lane shows paused no claim of this worker can take from it.
pub(super) struct Applied {
    now: PausedLanes,
    generation: u64,
    older_in_flight: usize,
    unpublished: bool,
    seen: watch::Sender<PausedLanes>,
}

impl Applied {
    /// Starts from `first`, already shown through `seen`.
    pub(super) fn new(first: PausedLanes, seen: watch::Sender<PausedLanes>) -> Self {
        Self {
            now: first,
            generation: 0,
            older_in_flight: 0,
            unpublished: false,
            seen,
        }
    }

    /// The generation a claim issued now carries (see [`Applied::settled`]).
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether lane `i` is paused for claims issued now.
    pub(super) fn is_paused(&self, i: usize) -> bool {
        self.now.get(i).copied().unwrap_or(false)
    }

    /// Puts `next` into effect for claims issued from now on, with
    /// `in_flight` claims still out under the old set; marks each lane that
    /// was resumed as worth a claim at once (`idle[i] = false`).
    pub(super) fn apply(&mut self, next: PausedLanes, in_flight: usize, idle: &mut [bool]) {
        for (i, was) in self.now.iter().enumerate() {
            if *was
                && !next.get(i).copied().unwrap_or(false)
                && let Some(slot) = idle.get_mut(i)
            {
                *slot = false;
            }
        }
        self.now = next;
        self.generation += 1;
        self.older_in_flight = in_flight;
        self.unpublished = true;
        self.publish_if_settled();
    }

    /// A claim issued under `generation` came back.
    pub(super) fn settled(&mut self, generation: u64) {
        if generation < self.generation {
            self.older_in_flight = self.older_in_flight.saturating_sub(1);
        }
        self.publish_if_settled();
    }

    fn publish_if_settled(&mut self) {
        if self.unpublished && self.older_in_flight == 0 {
            self.unpublished = false;
            self.seen.send_replace(self.now.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_shows_only_once_older_claims_are_back() {
        let (tx, rx) = watch::channel(Arc::new(vec![false, false]));
        let mut a = Applied::new(Arc::new(vec![false, false]), tx);
        let g0 = a.generation();
        let mut idle = vec![true, true];
        // Two claims out under the old set when the pause arrives.
        a.apply(Arc::new(vec![true, false]), 2, &mut idle);
        assert!(a.is_paused(0), "claims issued now skip the lane");
        assert_eq!(*rx.borrow().as_slice(), [false, false], "not shown yet");
        a.settled(a.generation()); // a claim issued under the new set
        assert_eq!(*rx.borrow().as_slice(), [false, false]);
        a.settled(g0);
        assert_eq!(*rx.borrow().as_slice(), [false, false]);
        a.settled(g0);
        assert_eq!(
            *rx.borrow().as_slice(),
            [true, false],
            "shown once both are back"
        );
        assert_eq!(idle, [true, true], "a pause wakes nothing");
    }

    #[test]
    fn a_resume_with_nothing_in_flight_shows_at_once_and_wakes_the_lane() {
        let (tx, rx) = watch::channel(Arc::new(vec![true]));
        let mut a = Applied::new(Arc::new(vec![true]), tx);
        let mut idle = vec![true];
        a.apply(Arc::new(vec![false]), 0, &mut idle);
        assert_eq!(*rx.borrow().as_slice(), [false]);
        assert_eq!(idle, [false], "a resumed lane may hold work");
    }
}
