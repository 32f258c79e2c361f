//! The completer: gathers finished items for a few milliseconds and writes
//! them done in one statement per batch.
//!
//! It waits out its window only while the worker's claims come back full
//! (a drain: batching saves statements and nobody waits on one item).
//! Once a claim came back short, the worker waits on work rather than on
//! writes, and a completion may free the very slot of a concurrency limit
//! the next claim waits for: then a batch is written as soon as it is
//! taken (whatever queued during the previous write still joins it).
//!
//! Every row in a batch is still fenced on its own claim token in the store,
//! so a stale item in a batch is refused while the others land. Each
//! submitter learns whether its own completion landed. Transient database
//! errors are retried with backoff for a bounded time; after that the
//! completion is reported as not landed and the item, still claimed, is
//! handed back by the sweep when its lease passes (run again, never lost).
//!
//! An ambiguous batch (a transient error after the statement was sent: the
//! commit may have landed with its reply lost) is retried, and the retry
//! refuses the rows that did land (their token is cleared). Those are
//! resolved by one read each: an item that is `done` with our claim's
//! `claim_seq` was completed under our claim, since any later claim would
//! have raised `claim_seq`, and only a holder of our token could complete
//! it under ours. So a lost reply is reported as landed, not as a lost lease.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use uuid::Uuid;

use crate::item::Item;
use crate::store::{ClaimParams, ClaimRef, Completion, Store};

/// How many times a batch is retried on a transient error before its
/// submitters are told it did not land.
const RETRIES: u32 = 8;
/// The first retry backoff; doubles each time (so about 5 s in all).
const BACKOFF: Duration = Duration::from_millis(20);

/// Whether one completion landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Landed {
    /// Written done under our token.
    Yes,
    /// Refused: the claim was stale or the lease had passed.
    Stale,
    /// The database kept failing; the item stays claimed until swept.
    Unknown,
}

/// What became of one completion: whether it landed, and whether the slot
/// it freed was handed to a claim in the same call (then the worker need
/// not claim again for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fate {
    pub(crate) landed: Landed,
    pub(crate) handed: bool,
}

struct Request {
    claim: ClaimRef,
    seq: i64,
    /// The lane the item was claimed from.
    lane: String,
    /// The handler's result, written by the same statement.
    result: Option<serde_json::Value>,
    ack: oneshot::Sender<Fate>,
    _ticket: OwnedSemaphorePermit,
}

/// The handover: a completion whose lane's last claim a limit held short
/// claims that lane again in the completion's own call, for as many items
/// as it completes there (the slots it frees), and the claim loop takes
/// the items.
pub(crate) struct Handover {
    lanes: Vec<String>,
    kinds: Vec<String>,
    worker_id: String,
    lease: Duration,
    /// Per lane: its last claim came back short with a limit applying
    /// (set by the claim loop).
    held: Vec<AtomicBool>,
    /// Items asked for by handovers whose answer the claim loop has not
    /// taken yet: the claim loop counts them as requested.
    in_flight: AtomicUsize,
    tx: mpsc::UnboundedSender<Handed>,
}

/// Items a handover claimed, for the claim loop.
pub(crate) struct Handed {
    /// The lane's index among the worker's lanes.
    pub(crate) lane: usize,
    /// How many the handover asked for.
    pub(crate) asked: usize,
    /// When the call was sent (the lease runs from there).
    pub(crate) sent: Instant,
    pub(crate) items: Vec<Item>,
}

impl Handover {
    /// Marks lane `li`'s last claim as held short by a limit (or not).
    pub(crate) fn set_held(&self, li: usize, held: bool) {
        if let Some(h) = self.held.get(li) {
            h.store(held, Ordering::Relaxed);
        }
    }

    /// Items asked for by handovers not yet taken by the claim loop.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The claim loop took `asked` items' worth of a handover's answer.
    pub(crate) fn taken(&self, asked: usize) {
        self.in_flight.fetch_sub(asked, Ordering::Relaxed);
    }
}

/// A handle to submit completions.
#[derive(Clone)]
pub(crate) struct Completer {
    tx: mpsc::Sender<Request>,
    tickets: Arc<Semaphore>,
    /// Write without waiting out the window (see the module docs).
    eager: Arc<AtomicBool>,
    /// Set once by the claim loop that takes handed items.
    handover: Arc<OnceLock<Arc<Handover>>>,
}

/// A place in the completer's queue, taken before a run gives up its slot:
/// when completions fall behind, runs keep their slots and the worker stops
/// claiming, instead of piling up claimed items whose leases run out.
pub(crate) struct Ticket(OwnedSemaphorePermit);

impl Completer {
    /// Starts the completer task; it ends when every handle is dropped and
    /// the queue is empty.
    pub(crate) fn start(
        store: Arc<dyn Store>,
        batch: usize,
        window: Duration,
    ) -> (Completer, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(batch.max(1) * 2);
        let tickets = Arc::new(Semaphore::new(batch.max(1) * 2));
        let eager = Arc::new(AtomicBool::new(false));
        let handover = Arc::new(OnceLock::new());
        let task = tokio::spawn(run(
            store,
            rx,
            batch.max(1),
            window,
            eager.clone(),
            handover.clone(),
        ));
        (
            Completer {
                tx,
                tickets,
                eager,
                handover,
            },
            task,
        )
    }

    /// Turns the handover on for a claim loop of `lanes` (claiming `kinds`
    /// as `worker_id` with `lease`): returns its shared state and where
    /// handed items arrive. `None` if a claim loop already took it.
    pub(crate) fn handover(
        &self,
        lanes: Vec<String>,
        kinds: Vec<String>,
        worker_id: String,
        lease: Duration,
    ) -> Option<(Arc<Handover>, mpsc::UnboundedReceiver<Handed>)> {
        let (tx, rx) = mpsc::unbounded_channel();
        let h = Arc::new(Handover {
            held: lanes.iter().map(|_| AtomicBool::new(false)).collect(),
            lanes,
            kinds,
            worker_id,
            lease,
            in_flight: AtomicUsize::new(0),
            tx,
        });
        self.handover.set(h.clone()).ok()?;
        Some((h, rx))
    }

    /// Whether the worker's last claim came back short of what it asked
    /// (it waits on work, not on writes): batches are then written without
    /// waiting out the window.
    pub(crate) fn set_eager(&self, short: bool) {
        self.eager.store(short, Ordering::Relaxed);
    }

    /// Waits for a place in the queue.
    pub(crate) async fn reserve(&self) -> Option<Ticket> {
        self.tickets.clone().acquire_owned().await.ok().map(Ticket)
    }

    /// Submits a completion (`seq` is the claim's `claim_seq`) of an item
    /// of `lane` with its result and waits for its fate.
    pub(crate) async fn complete(
        &self,
        ticket: Ticket,
        claim: ClaimRef,
        seq: i64,
        lane: &str,
        result: Option<serde_json::Value>,
    ) -> Fate {
        let unknown = Fate {
            landed: Landed::Unknown,
            handed: false,
        };
        let (ack, rx) = oneshot::channel();
        let req = Request {
            claim,
            seq,
            lane: lane.to_owned(),
            result,
            ack,
            _ticket: ticket.0,
        };
        if self.tx.send(req).await.is_err() {
            return unknown;
        }
        rx.await.unwrap_or(unknown)
    }
}

async fn run(
    store: Arc<dyn Store>,
    mut rx: mpsc::Receiver<Request>,
    batch: usize,
    window: Duration,
    eager: Arc<AtomicBool>,
    handover: Arc<OnceLock<Arc<Handover>>>,
) {
    let mut pending: Vec<Request> = Vec::with_capacity(batch);
    loop {
        let Some(first) = rx.recv().await else {
            return;
        };
        pending.push(first);
        // Whatever is already queued joins at once; then wait at most the
        // window for more, so a lone completion is delayed by the window
        // only and a busy worker fills whole batches.
        while pending.len() < batch {
            match rx.try_recv() {
                Ok(r) => pending.push(r),
                Err(_) => break,
            }
        }
        if pending.len() < batch && !window.is_zero() && !eager.load(Ordering::Relaxed) {
            let deadline = tokio::time::Instant::now() + window;
            while pending.len() < batch {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(r)) => pending.push(r),
                    Ok(None) | Err(_) => break,
                }
            }
        }
        flush(&*store, &mut pending, handover.get().map(|h| &**h)).await;
    }
}

/// After an ambiguous attempt: did an earlier try land this completion?
async fn resolve(store: &dyn Store, req: &Request) -> Landed {
    match store.item_get(req.claim.tenant_id, req.claim.id).await {
        Ok(Some(item)) if item.status == crate::item::Status::Done && item.claim_seq == req.seq => {
            tracing::warn!(item = %req.claim.id, "completion reply was lost; the completion had landed");
            Landed::Yes
        }
        Ok(_) => Landed::Stale,
        // Unknown, not stale: nothing more is written either way.
        Err(_) => Landed::Unknown,
    }
}

/// The lane of `pending` to hand over in the completion's call (the first
/// whose last claim a limit held short) and how many slots its items free.
fn handover_lane(h: &Handover, pending: &[Request]) -> Option<(usize, usize)> {
    let li = pending.iter().find_map(|r| {
        let li = h.lanes.iter().position(|l| *l == r.lane)?;
        h.held[li].load(Ordering::Relaxed).then_some(li)
    })?;
    let n = pending.iter().filter(|r| r.lane == h.lanes[li]).count();
    Some((li, n))
}

/// The completions and the handover's claim in one store call; the items
/// go to the claim loop. The ids that landed, and whether the claim
/// refilled every slot it asked for (if not, the worker claims again as
/// after any run's end); `None` if the call failed (nothing is known: the
/// completions are retried alone).
async fn complete_handing_over(
    store: &dyn Store,
    h: &Handover,
    claims: &[Completion],
    (li, n): (usize, usize),
) -> Option<(Vec<Uuid>, bool)> {
    let params = ClaimParams {
        lane: h.lanes[li].clone(),
        kinds: h.kinds.clone(),
        worker_id: h.worker_id.clone(),
        lease: h.lease,
        limit: u32::try_from(n).unwrap_or(u32::MAX),
    };
    h.in_flight.fetch_add(n, Ordering::Relaxed);
    let sent = Instant::now();
    let r = store.item_complete_then_claim(claims, &params).await;
    let items = match &r {
        Ok(handover) => match &handover.claimed {
            Ok(items) => Some(items.clone()),
            Err(e) => {
                tracing::debug!(error = %e, "handover claim failed; the claim loop claims instead");
                None
            }
        },
        Err(e) => {
            tracing::warn!(error = %e, "completion with handover failed; retrying the completion alone");
            None
        }
    };
    let delivered = match items.map(|items| {
        h.tx.send(Handed {
            lane: li,
            asked: n,
            sent,
            items,
        })
    }) {
        Some(Ok(())) => true,
        // The claim loop is gone (shutdown): hand the items back at once,
        // spending no attempt, rather than leave them to the sweep.
        Some(Err(mpsc::error::SendError(handed))) => {
            for c in handed.items.iter().filter_map(ClaimRef::of) {
                let note = Some("released unstarted: worker shutting down");
                if let Err(e) = store.item_release(&c, note).await {
                    tracing::warn!(item = %c.id, error = %e, "release of a handed-over item failed; the sweep will hand it back");
                }
            }
            false
        }
        None => false,
    };
    if !delivered {
        h.taken(n);
    }
    let full = delivered
        && r.as_ref()
            .is_ok_and(|h| h.claimed.as_ref().is_ok_and(|i| i.len() >= n));
    r.ok().map(|handover| (handover.landed, full))
}

async fn flush(store: &dyn Store, pending: &mut Vec<Request>, handover: Option<&Handover>) {
    let claims: Vec<Completion> = pending
        .iter_mut()
        .map(|r| Completion {
            claim: r.claim,
            result: r.result.take(),
        })
        .collect();
    let mut backoff = BACKOFF;
    let mut landed: Option<HashSet<Uuid>> = None;
    let mut ambiguous = false;
    let mut handed = false;
    let lane = handover.and_then(|h| Some((h, handover_lane(h, pending)?)));
    if let Some((h, lane)) = lane {
        match complete_handing_over(store, h, &claims, lane).await {
            Some((ids, full)) => {
                landed = Some(ids.into_iter().collect());
                handed = full;
            }
            // The call may have landed with its reply lost.
            None => ambiguous = true,
        }
    }
    for attempt in 0..=RETRIES {
        if landed.is_some() {
            break;
        }
        match store.item_complete_many_with(&claims).await {
            Ok(ids) => {
                landed = Some(ids.into_iter().collect());
                break;
            }
            Err(e) if e.is_transient() && attempt < RETRIES => {
                ambiguous = true;
                tracing::warn!(error = %e, attempt, "batched completion failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            Err(e) => {
                tracing::error!(error = %e, items = claims.len(), "batched completion failed; items stay claimed until swept");
                break;
            }
        }
    }
    metrics::histogram!("drover_complete_batch_size").record(claims.len() as f64);
    let handed_lane = lane.map(|(h, (li, _))| h.lanes[li].clone());
    for req in pending.drain(..) {
        let fate = match &landed {
            Some(ids) if ids.contains(&req.claim.id) => Landed::Yes,
            Some(_) if ambiguous => resolve(store, &req).await,
            Some(_) => Landed::Stale,
            None => Landed::Unknown,
        };
        let handed = handed && handed_lane.as_deref() == Some(req.lane.as_str());
        let _ = req.ack.send(Fate {
            landed: fate,
            handed,
        });
    }
}
