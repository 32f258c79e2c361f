//! Request gathering: concurrent single-item enqueue requests written
//! together: their markers, their items (one statement per tenant) and
//! their answers in one transaction on PostgreSQL, one commit.
//!
//! A request's own work is one row; what it costs is the round trips and
//! the commit. So `POST /v1/items` does not write on its own: it queues a
//! [`Job`] for this process's gatherer task, which takes the first job
//! waiting and then whatever else is already queued (up to
//! [`GatherConfig::max_batch`]; no added delay when idle, so a lone request
//! is written at once), and writes the batch
//! ([`drover::Queue::enqueue_each_claimed`]):
//!
//! 1. the batch's `Idempotency-Key` markers claimed. A key met in flight,
//!    finished (replay) or with another body (422) answers that request
//!    alone; the rest go on. On PostgreSQL the claims are in the batch's
//!    one transaction, and a key another batch is writing is told by that
//!    batch's transaction-scoped advisory lock on it (409 at once, never a
//!    wait); the other backends claim in a short transaction of their own
//!    first, committed before any item is written;
//! 2. the remaining items and their answers: each request keeps its own
//!    result (inserted, or the row its id or key met) or its own error (a
//!    400 from validation, a 409 for another tenant's id), so one bad
//!    request does not fail the others; each answer is stored in its
//!    marker in the same transaction as the item it names. When the write
//!    fails, nothing was written and no marker is held, so a retry runs
//!    again;
//! 3. only then each request answered, so a retry after the answer meets
//!    the replay.
//!
//! Up to [`GatherConfig::batches`] batches are written at once; while they
//! are, new requests wait in the queue and make the next batch bigger. A
//! client that goes away does not cancel its job: the batch finishes and
//! its marker holds the answer for the retry.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use drover::access::{Claimed, MARKER_RETENTION_DEFAULT, MARKER_STALE_DEFAULT, MarkerClaim};
use drover::queue::Principal;
use drover::{NewItem, Queue};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use super::idempotency::{self, Answer};
use crate::problem::Problem;

/// The most requests one batch takes: 256.
pub const GATHER_MAX_BATCH_DEFAULT: usize = 256;
/// How many requests may wait for the gatherer before a handler waits to
/// queue (back-pressure): 8,192.
pub const GATHER_QUEUE_DEFAULT: usize = 8192;
/// How many batches are written at once: 2 (one filling while one commits).
pub const GATHER_BATCHES_DEFAULT: usize = 2;

/// Settings of request gathering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatherConfig {
    /// Gather single-item enqueues (default true); false writes each
    /// request on its own.
    pub enabled: bool,
    /// Default [`GATHER_MAX_BATCH_DEFAULT`].
    pub max_batch: usize,
    /// Default [`GATHER_QUEUE_DEFAULT`].
    pub queue: usize,
    /// Default [`GATHER_BATCHES_DEFAULT`].
    pub batches: usize,
}

impl Default for GatherConfig {
    fn default() -> Self {
        GatherConfig {
            enabled: true,
            max_batch: GATHER_MAX_BATCH_DEFAULT,
            queue: GATHER_QUEUE_DEFAULT,
            batches: GATHER_BATCHES_DEFAULT,
        }
    }
}

/// What the gatherer has done, for tests and the benchmark's report.
#[derive(Debug)]
pub struct GatherStats {
    batches: AtomicU64,
    requests: AtomicU64,
    queued: watch::Sender<u64>,
}

impl Default for GatherStats {
    fn default() -> Self {
        GatherStats {
            batches: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            queued: watch::Sender::new(0),
        }
    }
}

impl GatherStats {
    /// Batches written (each its own item transaction).
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::SeqCst)
    }

    /// Requests written through batches.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` requests have been queued in all.
    pub async fn queued_at_least(&self, n: u64) {
        let mut rx = self.queued.subscribe();
        // The sender lives in `self`, so the wait ends only by reaching `n`.
        let _ = rx.wait_for(|q| *q >= n).await;
    }
}

/// One request's work, queued for the gatherer.
struct Job {
    /// Its marker claim, when it sent an `Idempotency-Key`.
    marker: Option<MarkerClaim>,
    /// The queue principal to enqueue as.
    principal: Principal,
    /// The item.
    item: NewItem,
    /// Whether the kind is registered on this queue (the answer says).
    known_kind: bool,
    /// Where its answer goes.
    reply: oneshot::Sender<Response>,
}

/// The process's gatherer: the queue into its task, started on first use
/// (so a router can be built outside a runtime), ended when the router's
/// last clone is dropped.
pub struct Gatherer {
    queue: Queue,
    config: GatherConfig,
    stats: Arc<GatherStats>,
    tx: OnceLock<mpsc::Sender<Job>>,
}

impl std::fmt::Debug for Gatherer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gatherer")
            .field("config", &self.config)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Gatherer {
    /// A gatherer over `queue`.
    pub fn new(queue: Queue, config: GatherConfig) -> Self {
        Gatherer {
            queue,
            config,
            stats: Arc::new(GatherStats::default()),
            tx: OnceLock::new(),
        }
    }

    /// Whether requests are gathered.
    pub fn enabled(&self) -> bool {
        self.config.enabled
    }

    /// Its counters.
    pub fn stats(&self) -> Arc<GatherStats> {
        self.stats.clone()
    }

    /// Queues one request (its marker claim when it sent an
    /// `Idempotency-Key`, the principal to enqueue as, the item) and waits
    /// for its answer.
    pub async fn submit(
        &self,
        marker: Option<MarkerClaim>,
        principal: Principal,
        item: NewItem,
        known_kind: bool,
    ) -> Response {
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::channel(self.config.queue.max(1));
            tokio::spawn(run(
                self.queue.clone(),
                rx,
                self.config.clone(),
                self.stats.clone(),
            ));
            tx
        });
        let (reply, answer) = oneshot::channel();
        let job = Job {
            marker,
            principal,
            item,
            known_kind,
            reply,
        };
        if tx.send(job).await.is_err() {
            tracing::warn!("the request gatherer has stopped");
            return Problem::internal().into_response();
        }
        self.stats.queued.send_modify(|q| *q += 1);
        match answer.await {
            Ok(res) => res,
            Err(_) => {
                tracing::warn!("a gathered request was not answered");
                Problem::internal().into_response()
            }
        }
    }
}

/// The gatherer task: take the first job, then what else is waiting, and
/// write the batch while the next one fills.
async fn run(
    queue: Queue,
    mut rx: mpsc::Receiver<Job>,
    config: GatherConfig,
    stats: Arc<GatherStats>,
) {
    let writers = Arc::new(Semaphore::new(config.batches.max(1)));
    let max = config.max_batch.max(1);
    loop {
        let Ok(permit) = writers.clone().acquire_owned().await else {
            return;
        };
        let Some(first) = rx.recv().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < max {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        stats.batches.fetch_add(1, Ordering::SeqCst);
        stats
            .requests
            .fetch_add(batch.len() as u64, Ordering::SeqCst);
        let queue = queue.clone();
        tokio::spawn(async move {
            write(&queue, batch).await;
            drop(permit);
        });
    }
}

/// The problem for an item the queue refused, naming the request's own
/// member under `prefix` (`items[3].`): the store's `idempotency_key` is
/// the request's `key`.
pub(crate) fn item_problem(e: &drover::Error, prefix: &str) -> Problem {
    match e {
        drover::Error::InvalidInput { field, reason } => {
            let member = if *field == "idempotency_key" {
                "key"
            } else {
                field
            };
            Problem::invalid(format!("{prefix}{member}"), reason.clone())
        }
        other => Problem::from(other),
    }
}

/// The answer of one enqueue, as `POST /v1/items` gives it.
pub(crate) fn enqueue_answer(known_kind: bool, r: &drover::Result<drover::Inserted>) -> Answer {
    match r {
        Ok(ins) => {
            let status = if ins.result == drover::InsertResult::Inserted {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Answer::json(
                status,
                &super::views::EnqueueResponse {
                    id: ins.item.id,
                    result: super::views::result_name(ins.result).to_owned(),
                    known_kind,
                    item: ins.item.clone().into(),
                },
            )
        }
        Err(e) => Answer::from(item_problem(e, "")),
    }
}

/// Writes one batch and answers each of its requests.
async fn write(queue: &Queue, batch: Vec<Job>) {
    let claims: Vec<Option<MarkerClaim>> = batch.iter().map(|j| j.marker.clone()).collect();
    let known: Vec<bool> = batch.iter().map(|j| j.known_kind).collect();
    let mut replies = Vec::with_capacity(batch.len());
    let mut items = Vec::with_capacity(batch.len());
    for job in batch {
        items.push((job.principal, job.item));
        replies.push(job.reply);
    }
    let written = queue
        .enqueue_each_claimed(
            items,
            &claims,
            MARKER_RETENTION_DEFAULT,
            MARKER_STALE_DEFAULT,
        )
        .await;
    let committed = match written {
        Ok(written) => {
            // Each answer is made once, from its input's outcome, and
            // stored in its marker in the same transaction as the item it
            // names; the very same answer is sent, so a replay is byte
            // for byte what the first request got.
            let made: Vec<Option<Answer>> = written
                .outcomes()
                .iter()
                .enumerate()
                .map(|(i, outcome)| match outcome {
                    Claimed::Written(r) => Some(enqueue_answer(known[i], r)),
                    Claimed::Settled(_) => None,
                })
                .collect();
            let stored: Vec<Option<(u16, String)>> = made
                .iter()
                .map(|a| a.as_ref().map(|a| (a.status.as_u16(), a.body.clone())))
                .collect();
            written.commit(&stored).await.map(|out| (out, made))
        }
        Err(e) => Err(e),
    };
    match committed {
        Ok((outcomes, made)) => {
            let each = outcomes.into_iter().zip(made).zip(replies).enumerate();
            for (i, ((outcome, answer), reply)) in each {
                let response = match (outcome, answer) {
                    // In flight, another payload, or answered before.
                    (Claimed::Settled(begun), _) => idempotency::settled(begun),
                    (Claimed::Written(_), Some(answer)) => answer.into_response(),
                    (Claimed::Written(r), None) => enqueue_answer(known[i], &r).into_response(),
                };
                let _ = reply.send(response);
            }
        }
        Err(e) => {
            // Nothing was written and no marker is held: every request of
            // the batch is told, and a retry runs again.
            let answer = Answer::from(Problem::from(e));
            for reply in replies {
                let _ = reply.send(answer.clone().into_response());
            }
        }
    }
}
