//! Completion gathering: concurrent `POST /v1/work/items/{id}/complete`
//! requests written together, as concurrent native completions are (the
//! worker's completer): one fenced statement for many claims.
//!
//! A completion's own work is one fenced row update; what it costs is the
//! round trip and the commit. So the route queues its claim for this
//! process's completer task, which takes the first one waiting and then
//! whatever else is already queued (up to [`COMPLETE_GATHER_MAX`]; no added
//! delay when idle, so a lone completion is written at once), and sends
//! them as one `Queue::complete_claims`, each row fenced on its own token.
//! Up to [`COMPLETE_GATHER_BATCHES`] batches are written at once.
//!
//! Invariants:
//! - Each request's answer is its own row's: 200 when its claim landed,
//!   409 when it was stale, the storage error's problem when the statement
//!   failed (nothing landed then).
//! - An item named twice in one batch (a completion sent again while the
//!   first is queued) is written once: the later copy goes to the next
//!   batch, where its claim is spent, so exactly one of them answers 200.
//! - Each batch is written in item-id order, so two batches written at
//!   once lock shared rows in one order and never deadlock.

use std::sync::Arc;

use drover::store::Completion;
use drover::{ClaimRef, Queue};
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::problem::Problem;

/// The most completions one statement carries.
pub const COMPLETE_GATHER_MAX: usize = 256;
/// How many completion statements are written at once.
pub const COMPLETE_GATHER_BATCHES: usize = 2;
/// How many completions may wait before a handler waits to queue.
pub const COMPLETE_GATHER_QUEUE: usize = 8192;

/// One queued completion.
pub(super) struct Job {
    pub(super) claim: ClaimRef,
    /// The handler's result, written by the same statement.
    pub(super) result: Option<serde_json::Value>,
    pub(super) reply: oneshot::Sender<Result<bool, Problem>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("item", &self.claim.id)
            .finish_non_exhaustive()
    }
}

/// Starts the completer task over `queue`; its sender.
pub(super) fn start(queue: Queue) -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel(COMPLETE_GATHER_QUEUE);
    tokio::spawn(run(queue, rx));
    tx
}

async fn run(queue: Queue, mut rx: mpsc::Receiver<Job>) {
    let slots = Arc::new(Semaphore::new(COMPLETE_GATHER_BATCHES));
    let mut carried: Vec<Job> = Vec::new();
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let mut batch: Vec<Job> = Vec::new();
        let mut later: Vec<Job> = Vec::new();
        let mut take = |job: Job, batch: &mut Vec<Job>| {
            if batch.iter().any(|j| j.claim.id == job.claim.id) {
                later.push(job);
            } else {
                batch.push(job);
            }
        };
        for job in carried.drain(..) {
            take(job, &mut batch);
        }
        if batch.is_empty() {
            match rx.recv().await {
                Some(job) => take(job, &mut batch),
                // Every sender is gone: the router was dropped.
                None => return,
            }
        }
        while batch.len() < COMPLETE_GATHER_MAX {
            match rx.try_recv() {
                Ok(job) => take(job, &mut batch),
                Err(_) => break,
            }
        }
        carried = later;
        // Two batches are written at once, and a completion sent again while
        // its first copy is being written lands in the second: sorted by id,
        // both statements lock their rows in one order (complete_items walks
        // its arrays in order: nested loops only), so the second waits for
        // the first instead of deadlocking with it. A deadlock made
        // PostgreSQL abort one statement, and every completion of that batch
        // answered 503.
        batch.sort_by_key(|j| j.claim.id);
        let queue = queue.clone();
        tokio::spawn(async move {
            let claims: Vec<Completion> = batch
                .iter_mut()
                .map(|j| Completion {
                    claim: j.claim,
                    result: j.result.take(),
                })
                .collect();
            let done = queue.complete_claims_with(&claims).await;
            for job in batch {
                let answer = match &done {
                    Ok(ids) => Ok(ids.contains(&job.claim.id)),
                    Err(e) => Err(Problem::from(e)),
                };
                // A client that went away does not undo its completion.
                let _ = job.reply.send(answer);
            }
            drop(permit);
        });
    }
}
