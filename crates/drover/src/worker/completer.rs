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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use uuid::Uuid;

use crate::store::{ClaimRef, Completion, Store};

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

struct Request {
    claim: ClaimRef,
    seq: i64,
    /// The handler's result, written by the same statement.
    result: Option<serde_json::Value>,
    ack: oneshot::Sender<Landed>,
    _ticket: OwnedSemaphorePermit,
}

/// A handle to submit completions.
#[derive(Clone)]
pub(crate) struct Completer {
    tx: mpsc::Sender<Request>,
    tickets: Arc<Semaphore>,
    /// Write without waiting out the window (see the module docs).
    eager: Arc<AtomicBool>,
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
        let task = tokio::spawn(run(store, rx, batch.max(1), window, eager.clone()));
        (Completer { tx, tickets, eager }, task)
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

    /// Submits a completion (`seq` is the claim's `claim_seq`) with its
    /// result and waits for its fate.
    pub(crate) async fn complete(
        &self,
        ticket: Ticket,
        claim: ClaimRef,
        seq: i64,
        result: Option<serde_json::Value>,
    ) -> Landed {
        let (ack, rx) = oneshot::channel();
        let req = Request {
            claim,
            seq,
            result,
            ack,
            _ticket: ticket.0,
        };
        if self.tx.send(req).await.is_err() {
            return Landed::Unknown;
        }
        rx.await.unwrap_or(Landed::Unknown)
    }
}

async fn run(
    store: Arc<dyn Store>,
    mut rx: mpsc::Receiver<Request>,
    batch: usize,
    window: Duration,
    eager: Arc<AtomicBool>,
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
        flush(&*store, &mut pending).await;
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

async fn flush(store: &dyn Store, pending: &mut Vec<Request>) {
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
    for attempt in 0..=RETRIES {
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
    for req in pending.drain(..) {
        let fate = match &landed {
            Some(ids) if ids.contains(&req.claim.id) => Landed::Yes,
            Some(_) if ambiguous => resolve(store, &req).await,
            Some(_) => Landed::Stale,
            None => Landed::Unknown,
        };
        let _ = req.ack.send(fate);
    }
}
