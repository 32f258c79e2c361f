//! Request gathering: concurrent single-item enqueue requests written
//! together: one short transaction claims their markers, one more writes
//! their items (one statement per tenant) and their answers, one commit.
//!
//! A request's own work is one row; what it costs is the round trips and
//! the commit. So `POST /v1/items` does not write on its own: it queues a
//! [`Job`] for this process's gatherer task, which takes the first job
//! waiting and then whatever else is already queued (up to
//! [`GatherConfig::max_batch`]; no added delay when idle, so a lone request
//! is written at once), and writes the batch:
//!
//! 1. the batch's `Idempotency-Key` markers claimed in one short
//!    transaction, committed before any item is written: another request
//!    with one of the keys sees it in flight (409) at once. A key met in
//!    flight, finished (replay) or with another body (422) answers that
//!    request alone; the rest go on;
//! 2. the remaining items and their answers in one transaction
//!    ([`drover::Queue::enqueue_each_answered`]): each request keeps its
//!    own result (inserted, or the row its id or key met) or its own error
//!    (a 400 from validation, a 409 for another tenant's id), so one bad
//!    request does not fail the others; each answer is stored in its
//!    marker in the same transaction as the item it names (one commit for
//!    the batch). When that transaction fails, nothing was written and the
//!    markers are released, so a retry runs again;
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
use drover::access::{MARKER_RETENTION_DEFAULT, MARKER_STALE_DEFAULT, MarkerBegin, MarkerClaim};
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

/// A job that got past its marker, with the marker it holds.
struct Running {
    marker: Option<MarkerClaim>,
    known_kind: bool,
    reply: oneshot::Sender<Response>,
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
                    result: super::items::result_name(ins.result).to_owned(),
                    known_kind,
                    item: ins.item.clone().into(),
                },
            )
        }
        Err(e) => Answer::from(Problem::from(e)),
    }
}

/// Writes one batch and answers each of its requests.
async fn write(queue: &Queue, batch: Vec<Job>) {
    let store = queue.store();
    let claims: Vec<MarkerClaim> = batch.iter().filter_map(|j| j.marker.clone()).collect();
    let begun = if claims.is_empty() {
        Vec::new()
    } else {
        match store
            .marker_begin_many(&claims, MARKER_RETENTION_DEFAULT, MARKER_STALE_DEFAULT)
            .await
        {
            Ok(b) => b,
            Err(e) => {
                // Nothing was claimed (the transaction did not commit):
                // every request of the batch is told, none runs.
                let answer = Answer::from(Problem::from(e));
                for job in batch {
                    let _ = job.reply.send(answer.clone().into_response());
                }
                return;
            }
        }
    };
    let mut begun = begun.into_iter();
    let mut running = Vec::with_capacity(batch.len());
    let mut items = Vec::with_capacity(batch.len());
    for job in batch {
        if job.marker.is_some() {
            match begun.next() {
                Some(MarkerBegin::Started) => {}
                Some(other) => {
                    let _ = job.reply.send(idempotency::settled(other));
                    continue;
                }
                None => {
                    let _ = job.reply.send(Problem::internal().into_response());
                    continue;
                }
            }
        }
        items.push((job.principal, job.item));
        running.push(Running {
            marker: job.marker,
            known_kind: job.known_kind,
            reply: job.reply,
        });
    }
    if running.is_empty() {
        return;
    }
    // Each answer is made once, inside the write, and stored in its
    // marker in the same transaction as the items; the very same answer is
    // sent, so a replay is byte for byte what the first request got.
    let markers: Vec<_> = running
        .iter()
        .map(|r| r.marker.as_ref().map(|m| m.key.clone()))
        .collect();
    let made: Vec<std::sync::Mutex<Option<Answer>>> = running
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    let known: Vec<bool> = running.iter().map(|r| r.known_kind).collect();
    let answer = |i: usize, r: &drover::Result<drover::Inserted>| {
        let a = enqueue_answer(known[i], r);
        let stored = (a.status.as_u16(), a.body.clone());
        *made[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(a);
        stored
    };
    let answers: Vec<Answer> = match queue.enqueue_each_answered(items, &markers, &answer).await {
        Ok(results) => results
            .iter()
            .zip(&made)
            .zip(&known)
            .map(|((res, m), k)| {
                m.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                    .unwrap_or_else(|| enqueue_answer(*k, res))
            })
            .collect(),
        Err(e) => {
            // Nothing was written: the markers are given up so a retry
            // runs again.
            let answer = Answer::from(Problem::from(e));
            for m in running.iter().filter_map(|r| r.marker.as_ref()) {
                if let Err(e) = store.marker_release(&m.key).await {
                    tracing::warn!(error = %e, "idempotency marker not released");
                }
            }
            running.iter().map(|_| answer.clone()).collect()
        }
    };
    for (r, a) in running.into_iter().zip(answers) {
        let _ = r.reply.send(a.into_response());
    }
}
