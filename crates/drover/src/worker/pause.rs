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
