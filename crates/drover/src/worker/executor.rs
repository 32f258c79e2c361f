//! The executor: runs one claimed item as its own task, keeps its lease
//! alive while the handler runs, and writes the outcome under the claim's
//! token.
//!
//! Invariants:
//! - The renewal is polled by the same task as the handler, so a handler
//!   that blocks its thread starves its own renewal and loses its lease (it
//!   is never kept alive falsely), while other items' tasks renew on other
//!   threads.
//! - A renewal refused with `Conflict` cancels the run at once; other
//!   renewal failures are retried, and the run cancels itself once renewal
//!   has been failing for half the lease (wall time since the last success).
//! - After a lease is lost nothing more is written for the item. A run
//!   dropped because its renewals kept failing (the store slow or out of
//!   reach, not a rival claim) writes one fenced release, which lands only
//!   if its claim still holds: the item is pending again at once with no
//!   attempt spent, rather than left to lapse and be charged one.
//! - A run whose lease has passed by the local clock (no renewal landed for
//!   a whole lease, measured from when the last successful renewal was
//!   sent) is dropped before its handler is polled again: a process that
//!   was stopped or stalled past its lease starts no new side effect on
//!   resuming, even when the handler's own timers fired meanwhile.
//! - Cancellation is cooperative: on a shutdown past the grace period and
//!   on a timeout the run's token fires first, and the handler gets
//!   `cancel_grace` to return (and write its own cleanup) before its future
//!   is dropped. A lost lease fires the token and drops the run at once.
//! - A panic or a timeout is a retryable failure; a shutdown past the grace
//!   period releases the item without spending an attempt (unless the
//!   handler, told, still returned done, a defer or a cancel).
//! - Every outcome write is retried on a transient error, a lost reply
//!   resolved by reading the row back (`queue/fenced.rs`), so the item ends
//!   as the handler said instead of being swept and charged an attempt.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::queue::{JobContext, Queue, counters};
use crate::worker::completer::{Completer, Fate, Landed, Ticket};
use crate::worker::handler::{Done, JobError, Outcome, Registry};
use crate::worker::settings::WorkerSettings;

/// The earliest a run's first renewal may come, as a fraction of the
/// renewal interval (earlier, never later: the spread costs no safety).
const FIRST_RENEWAL_SPREAD: f64 = 0.75;

/// How a run ended.
#[derive(Debug)]
pub(crate) enum RunEnd {
    Finished(Outcome),
    Panicked(String),
    TimedOut(Duration),
    LeaseLost(&'static str),
    /// Dropped because renewals kept failing (the store slow or out of
    /// reach, not a rival claim): the claim may still stand.
    RenewalFailing,
    Shutdown,
}

impl RunEnd {
    /// The `outcome` label of `drover_handler_duration_seconds`: how the
    /// run ended, from a small fixed set.
    fn outcome(&self) -> &'static str {
        match self {
            RunEnd::Finished(Ok(_)) => "completed",
            RunEnd::Finished(Err(JobError::Retry(_))) => "retry",
            RunEnd::Finished(Err(JobError::Fatal(_))) => "fatal",
            RunEnd::Finished(Err(JobError::Snooze(_))) => "snoozed",
            RunEnd::Finished(Err(JobError::Cancel(_))) => "cancelled",
            RunEnd::Panicked(_) => "panicked",
            RunEnd::TimedOut(_) => "timed_out",
            RunEnd::LeaseLost(_) | RunEnd::RenewalFailing => "lease_lost",
            RunEnd::Shutdown => "shutdown",
        }
    }
}

/// Why a run's token fired while its handler still runs.
#[derive(Debug, Clone, Copy)]
enum Stop {
    /// Shutdown past the grace period.
    Shutdown,
    /// The handler's time limit passed.
    Timeout,
}

impl Stop {
    /// How a run ends whose handler returned within the cancel grace
    /// (`None`: it panicked). Work the handler reports done is completed
    /// (it happened); on shutdown a defer or a cancel is the handler's own
    /// decision and spends no attempt either; any other end of a shutdown
    /// is a release (the error is most likely the cancellation itself), and
    /// any other end of a timeout is the timeout's failure.
    fn returned(self, outcome: Option<Outcome>, limit: Duration) -> RunEnd {
        match (self, outcome) {
            (_, Some(Ok(done @ (Done::Completed | Done::Output(_))))) => RunEnd::Finished(Ok(done)),
            (Stop::Shutdown, Some(Err(e @ (JobError::Snooze(_) | JobError::Cancel(_))))) => {
                RunEnd::Finished(Err(e))
            }
            (Stop::Shutdown, _) => RunEnd::Shutdown,
            (Stop::Timeout, _) => RunEnd::TimedOut(limit),
        }
    }
}

/// A lease renewal in flight, bounded by the renewal timeout.
type Renewal = std::pin::Pin<
    Box<
        tokio::time::Timeout<tokio::task::JoinHandle<crate::Result<chrono::DateTime<chrono::Utc>>>>,
    >,
>;

/// What the executor needs, shared by every item task.
#[derive(Clone)]
pub(crate) struct Executor {
    pub(crate) queue: Queue,
    pub(crate) registry: Arc<Registry>,
    pub(crate) settings: Arc<WorkerSettings>,
    pub(crate) completer: Completer,
    /// Cancelled when in-flight runs must stop (shutdown past the grace).
    pub(crate) work: CancellationToken,
    /// Told when a run's final write has landed: its claim no longer holds
    /// a limit's slot, so a lane whose last claim came back short (perhaps
    /// only because a limit was full) is worth claiming from again now,
    /// not at the next poll.
    pub(crate) freed: Arc<tokio::sync::Notify>,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

impl Executor {
    /// Runs `cx` to its end and writes the outcome; returns how the run
    /// ended (the `outcome` label of `drover_handler_duration_seconds`).
    /// `permit` is the slot the run occupies; it is freed as soon as the
    /// handler stops, before the outcome is written, so writes never hold
    /// capacity.
    pub(crate) async fn run(&self, cx: JobContext, permit: OwnedSemaphorePermit) -> &'static str {
        // A root span linked to the item's trace, never its child: see
        // `worker::span`.
        let span = crate::worker::span::run_span(&cx);
        async {
            let end = self.execute(&cx).await;
            let outcome = end.outcome();
            // A completion first takes its place in the completer's queue,
            // still holding the slot: backpressure reaches the claim loop.
            let ticket = match end {
                RunEnd::Finished(Ok(Done::Completed | Done::Output(_))) => {
                    self.completer.reserve().await
                }
                _ => None,
            };
            drop(permit);
            // A slot handed over in the completion's call was claimed
            // there: the claim loop need not claim again for it.
            if !self.settle(&cx, end, ticket).await {
                self.freed.notify_one();
            }
            outcome
        }
        .instrument(span)
        .await
    }

    /// Runs the handler with renewal, timeout and panic capture.
    pub(crate) async fn execute(&self, cx: &JobContext) -> RunEnd {
        let Some(handler) = self.registry.get(cx.kind()).cloned() else {
            return RunEnd::Finished(Err(JobError::Snooze(Duration::ZERO)));
        };
        let limit = handler.timeout().unwrap_or(self.settings.handler_timeout);
        let started = Instant::now();
        let lease = self.settings.lease;
        let end = {
            let run = AssertUnwindSafe(handler.run(cx)).catch_unwind();
            tokio::pin!(run);
            let deadline = tokio::time::sleep(limit);
            tokio::pin!(deadline);
            // The lease began when the claim was sent, which may be a while
            // ago for an item that waited in the prefetch buffer.
            let claimed_at = tokio::time::Instant::from_std(cx.claimed_at());
            // The first renewal comes up to a quarter interval early, at
            // random: a claim returns its whole batch at one instant, and
            // without the spread the batch's renewals would all land at
            // once (on SQLite, one write queue) on every interval after.
            let first = self
                .settings
                .renew_interval
                .mul_f64(rand::random_range(FIRST_RENEWAL_SPREAD..=1.0));
            let mut next_renew = claimed_at + first;
            let mut last_ok = cx.claimed_at();
            // When the lease passes by our clock unless a renewal lands:
            // checked before the handler is polled, so a run resumed after
            // a stall past its lease is dropped, not continued.
            let mut lease_deadline = claimed_at + lease;
            // The renewal in flight, and when it was sent. It runs as its
            // own task: a timeout, or the handler finishing first, stops
            // waiting for it but never cancels it mid-transaction (a SQLite
            // write cancelled inside BEGIN can leave its connection in the
            // transaction, holding the file's write lock).
            let mut renewal: Option<Renewal> = None;
            let mut sent = tokio::time::Instant::now();
            // Set once the token has fired for a shutdown or a timeout: the
            // handler has until then to return before it is dropped.
            let mut stopping: Option<(Stop, tokio::time::Instant)> = None;
            let cancel = cx.cancellation();
            loop {
                let stop_at = stopping.map_or(lease_deadline, |(_, at)| at);
                tokio::select! {
                    biased;
                    () = tokio::time::sleep_until(lease_deadline) => {
                        cancel.cancel();
                        break RunEnd::LeaseLost("lease passed without a renewal (stalled past the lease)");
                    }
                    r = &mut run => break match (stopping, r) {
                        (None, Ok(outcome)) => RunEnd::Finished(outcome),
                        (None, Err(p)) => RunEnd::Panicked(panic_message(&*p)),
                        (Some((stop, _)), r) => stop.returned(r.ok(), limit),
                    },
                    () = tokio::time::sleep_until(stop_at), if stopping.is_some() => {
                        break match stopping {
                            Some((Stop::Timeout, _)) => {
                                tracing::warn!(grace = ?self.settings.cancel_grace, "handler did not return after its token fired; dropped");
                                RunEnd::TimedOut(limit)
                            }
                            _ => {
                                tracing::warn!(grace = ?self.settings.cancel_grace, "handler did not return after its token fired; dropped");
                                RunEnd::Shutdown
                            }
                        };
                    }
                    () = self.work.cancelled(), if stopping.is_none() => {
                        cancel.cancel();
                        stopping = Some((Stop::Shutdown, tokio::time::Instant::now() + self.settings.cancel_grace));
                    }
                    () = &mut deadline, if stopping.is_none() => {
                        cancel.cancel();
                        stopping = Some((Stop::Timeout, tokio::time::Instant::now() + self.settings.cancel_grace));
                    }
                    () = tokio::time::sleep_until(next_renew), if renewal.is_none() => {
                        sent = tokio::time::Instant::now();
                        renewal = Some(Box::pin(tokio::time::timeout(self.settings.renew_timeout, {
                            let (queue, cx) = (self.queue.clone(), cx.clone());
                            tokio::spawn(async move { queue.extend_lease(&cx, lease).await })
                        })));
                    }
                    Some(outcome) = async { match renewal.as_mut() { Some(r) => Some(r.await), None => None } }, if renewal.is_some() => {
                        renewal = None;
                        match outcome {
                            Ok(Ok(Ok(_))) => {
                                last_ok = Instant::now();
                                lease_deadline = sent + lease;
                                next_renew = tokio::time::Instant::now() + self.settings.renew_interval;
                            }
                            Ok(Ok(Err(e))) if e.is_conflict() => {
                                cancel.cancel();
                                break RunEnd::LeaseLost("renewal refused: another claim holds the item");
                            }
                            Ok(Ok(Err(e))) => {
                                tracing::warn!(error = %e, "lease renewal failed; retrying");
                                next_renew = tokio::time::Instant::now() + self.settings.renew_timeout / 2;
                            }
                            Ok(Err(e)) => {
                                tracing::warn!(error = %e, "lease renewal task failed; retrying");
                                next_renew = tokio::time::Instant::now() + self.settings.renew_timeout / 2;
                            }
                            Err(_) => {
                                tracing::warn!(timeout = ?self.settings.renew_timeout, "lease renewal timed out; retrying");
                                next_renew = tokio::time::Instant::now() + self.settings.renew_timeout / 2;
                            }
                        }
                        if last_ok.elapsed() >= lease / 2 {
                            cancel.cancel();
                            break RunEnd::RenewalFailing;
                        }
                    }
                }
            }
        };
        Self::close_run(cx, &end, started);
        end
    }

    /// Ends a run: tells anything the handler spawned that the run is over
    /// (the handler itself was told before it was dropped), and records
    /// its duration by outcome.
    fn close_run(cx: &JobContext, end: &RunEnd, started: Instant) {
        if !matches!(end, RunEnd::Finished(_)) {
            cx.cancellation().cancel();
        }
        metrics::histogram!(
            "drover_handler_duration_seconds",
            "lane" => cx.lane().to_owned(),
            "kind" => cx.kind().to_owned(),
            "outcome" => end.outcome(),
        )
        .record(started.elapsed().as_secs_f64());
    }

    /// Writes the outcome of a run under its claim.
    /// Writes how the run ended; true when its completion handed the
    /// freed slot to a claim in the same call.
    pub(crate) async fn settle(
        &self,
        cx: &JobContext,
        end: RunEnd,
        ticket: Option<Ticket>,
    ) -> bool {
        if self.registry.get(cx.kind()).is_none() {
            // Not ours to fail: another worker may handle this kind.
            self.write(
                cx,
                "release",
                self.queue
                    .release_retried(
                        cx,
                        Some("no handler for this kind on the worker that claimed it"),
                    )
                    .await,
            );
            return false;
        }
        if !matches!(end, RunEnd::LeaseLost(_))
            && let Err(e) = cx.flush_progress().await
        {
            tracing::warn!(error = %e, "last progress report not written");
        }
        match end {
            RunEnd::Finished(Ok(Done::Completed)) => return self.complete(cx, ticket, None).await,
            RunEnd::Finished(Ok(Done::Output(result))) => {
                match crate::item::validate_result(&result) {
                    Ok(()) => return self.complete(cx, ticket, Some(result)).await,
                    Err(e) => {
                        // Refused at the handler's end, never dropped silently:
                        // the item fails saying why (a rerun would return the
                        // same oversized result).
                        tracing::warn!(error = %e, "handler result refused");
                        self.write(
                            cx,
                            "fail",
                            self.queue
                                .fail_retried(cx, &format!("handler result refused: {e}"), true)
                                .await
                                .map(|_| ()),
                        );
                    }
                }
            }
            // The handler's own transaction completed the item, fenced.
            RunEnd::Finished(Ok(Done::Settled)) => {
                counters::count("drover_completed_total", cx.lane(), cx.kind(), 1);
            }
            RunEnd::Finished(Err(JobError::Retry(m))) => {
                self.write(
                    cx,
                    "fail",
                    self.queue.fail_retried(cx, &m, false).await.map(|_| ()),
                );
            }
            RunEnd::Finished(Err(JobError::Fatal(m))) => {
                self.write(
                    cx,
                    "fail",
                    self.queue.fail_retried(cx, &m, true).await.map(|_| ()),
                );
            }
            RunEnd::Finished(Err(JobError::Snooze(d))) => {
                self.write(
                    cx,
                    "defer",
                    self.queue.defer_retried(cx, d).await.map(|_| ()),
                );
            }
            RunEnd::Finished(Err(JobError::Cancel(m))) => {
                self.write(
                    cx,
                    "cancel",
                    self.queue.cancel_claimed_retried(cx, &m).await,
                );
            }
            RunEnd::Panicked(m) => {
                tracing::error!(panic = %m, "handler panicked");
                self.write(
                    cx,
                    "fail",
                    self.queue
                        .fail_retried(cx, &format!("handler panicked: {m}"), false)
                        .await
                        .map(|_| ()),
                );
            }
            RunEnd::TimedOut(limit) => {
                tracing::warn!(?limit, "handler timed out");
                self.write(
                    cx,
                    "fail",
                    self.queue
                        .fail_retried(cx, &format!("handler timed out after {limit:?}"), false)
                        .await
                        .map(|_| ()),
                );
            }
            RunEnd::LeaseLost(why) => self.lease_lost(cx, why),
            RunEnd::RenewalFailing => self.release_after_failing_renewals(cx).await,
            RunEnd::Shutdown => {
                self.write(
                    cx,
                    "release",
                    self.queue
                        .release_retried(cx, Some("released: worker shutting down"))
                        .await,
                );
            }
        }
        false
    }

    /// Writes a completion through the completer (batched), and says
    /// what became of it; true when the slot it freed was handed over.
    async fn complete(
        &self,
        cx: &JobContext,
        ticket: Option<Ticket>,
        result: Option<serde_json::Value>,
    ) -> bool {
        let fate = match ticket {
            Some(t) => {
                self.completer
                    .complete(t, *cx.claim(), cx.fencing_token(), cx.lane(), result)
                    .await
            }
            None => Fate {
                landed: Landed::Unknown,
                handed: false,
            },
        };
        match fate.landed {
            Landed::Yes => counters::count("drover_completed_total", cx.lane(), cx.kind(), 1),
            Landed::Stale => self.lease_lost(cx, "completion refused"),
            Landed::Unknown => {
                tracing::error!("completion not written; the item will be swept and run again");
            }
        }
        fate.handed
    }

    /// The handler is dropped already. Hands the item back now if the
    /// claim still holds (the fence refuses it otherwise): left to lapse,
    /// it would wait out the lease and the sweep would charge it an attempt
    /// for our store's trouble.
    async fn release_after_failing_renewals(&self, cx: &JobContext) {
        counters::count("drover_lease_lost_total", cx.lane(), cx.kind(), 1);
        tracing::warn!(
            reason = "renewal failing for half the lease",
            "lease lost: run dropped; releasing the item if the claim still holds"
        );
        let note = "released: lease renewals failing, run dropped";
        match self.queue.release_retried(cx, Some(note)).await {
            Ok(()) => tracing::info!("released after failing renewals; no attempt spent"),
            // Already counted and logged as lost above.
            Err(e) if e.is_conflict() => {
                tracing::debug!("release refused: the claim had lapsed")
            }
            Err(e) => tracing::error!(
                error = %e,
                "release not written; the item will be swept"
            ),
        }
    }

    fn lease_lost(&self, cx: &JobContext, why: &str) {
        counters::count("drover_lease_lost_total", cx.lane(), cx.kind(), 1);
        tracing::warn!(
            reason = why,
            "lease lost: the item is no longer ours; nothing more is written"
        );
    }

    fn write(&self, cx: &JobContext, what: &'static str, r: crate::Result<()>) {
        match r {
            Ok(()) => {}
            Err(e) if e.is_conflict() => self.lease_lost(cx, what),
            Err(e) => {
                tracing::error!(error = %e, write = what, "outcome not written; the item will be swept")
            }
        }
    }
}
