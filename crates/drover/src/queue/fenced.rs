//! Outcome writes that survive a transient database error: fail, defer,
//! release, the handler's cancel and the orphan failure, each retried with
//! backoff for a bounded time and resolved by a read-back when a reply may
//! have been lost. The worker uses these, so an item ends as its handler
//! said instead of waiting out its lease and being charged an attempt by
//! the sweep for our database's trouble. Completions have their own batched
//! path with the same rule (`worker/completer.rs`).
//!
//! Invariants:
//! - Every write is the store's own fenced statement (claim token, status
//!   claimed, lease not passed); a retry is the same statement again, so it
//!   can never land where the first could not.
//! - After a transient error the write may have committed with its reply
//!   lost. The row is read back before the next try: if it shows our write
//!   (same `claim_seq`, so no later claim, and the fields our write sets),
//!   it landed; if our token still holds the row, the write did not land
//!   and is sent again; anything else is [`Error::Conflict`]. A `Conflict`
//!   on a retry is resolved the same way, since the refused retry may be
//!   the echo of an earlier try that landed.
//! - Bounded: [`RETRIES`] tries after the first, backoff doubling from
//!   [`BACKOFF`] (about 5 s in all, well inside a default lease). Past that
//!   the last error is returned and the item, still claimed, is swept.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::{Error, Result};
use crate::item::{Item, Status, bound_error};
use crate::queue::{JobContext, Queue};
use crate::rules;
use crate::store::{FailOutcome, FailParams};

/// How many times an outcome write is retried on a transient error.
pub(crate) const RETRIES: u32 = 8;
/// The first retry backoff; doubles each time.
pub(crate) const BACKOFF: Duration = Duration::from_millis(20);

/// What a read-back says about a write whose reply may have been lost.
enum Seen<T> {
    /// The row shows our write: it landed.
    Landed(T),
    /// Our claim still holds the row: the write did not land.
    Ours,
    /// Someone else's write (a sweep, an operator, a later claim).
    Gone,
}

impl Queue {
    /// Sends `write` until it lands, is refused, or the retries run out;
    /// `landed` recognises our write in a read-back of the row.
    async fn fenced_retry<T, F, Fut>(
        &self,
        cx: &JobContext,
        what: &'static str,
        mut write: F,
        landed: impl Fn(&Item) -> Option<T>,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let mut backoff = BACKOFF;
        let mut ambiguous = false;
        let mut attempt = 0u32;
        loop {
            let err = match write().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if err.is_conflict() {
                if !ambiguous {
                    return Err(err);
                }
                // Refused now; an earlier try may be what refused it.
                return match self.read_back(cx, &landed).await {
                    Ok(Seen::Landed(v)) => {
                        tracing::warn!(write = what, item = %cx.id(), "reply was lost; the write had landed");
                        Ok(v)
                    }
                    Ok(_) => Err(err),
                    Err(e) => Err(e),
                };
            }
            if !err.is_transient() || attempt >= RETRIES {
                return Err(err);
            }
            ambiguous = true;
            attempt += 1;
            tracing::warn!(write = what, item = %cx.id(), error = %err, attempt, "outcome write failed; retrying");
            tokio::time::sleep(backoff).await;
            backoff *= 2;
            match self.read_back(cx, &landed).await {
                Ok(Seen::Landed(v)) => {
                    tracing::warn!(write = what, item = %cx.id(), "reply was lost; the write had landed");
                    return Ok(v);
                }
                Ok(Seen::Ours) => {}
                Ok(Seen::Gone) => {
                    return Err(Error::Conflict(format!(
                        "item {} is no longer held by this claim",
                        cx.id()
                    )));
                }
                // The read failed too: try the write again; if it had
                // landed, its refusal is resolved above.
                Err(e) => {
                    tracing::debug!(write = what, error = %e, "read-back failed; retrying the write")
                }
            }
        }
    }

    async fn read_back<T>(
        &self,
        cx: &JobContext,
        landed: &impl Fn(&Item) -> Option<T>,
    ) -> Result<Seen<T>> {
        let Some(row) = self.store.item_get(cx.tenant(), cx.id()).await? else {
            return Ok(Seen::Gone);
        };
        // A later claim raises claim_seq: nothing it shows is ours.
        if row.claim_seq != cx.fencing_token() {
            return Ok(Seen::Gone);
        }
        if let Some(v) = landed(&row) {
            return Ok(Seen::Landed(v));
        }
        if row.status == Status::Claimed && row.claim_token == Some(cx.claim().token) {
            return Ok(Seen::Ours);
        }
        Ok(Seen::Gone)
    }

    /// [`Queue::fail`], retried (see the module docs). The retry delay is
    /// drawn once, so every try asks for the same requeue.
    pub(crate) async fn fail_retried(
        &self,
        cx: &JobContext,
        error: &str,
        fatal: bool,
    ) -> Result<FailOutcome> {
        let policy = self.rules_for(cx.kind()).retry;
        let params = FailParams {
            error: error.to_owned(),
            retry_delay: rules::retry_delay(&policy, cx.attempt(), rand::random::<f64>()),
            fatal,
        };
        let spent = cx.item().attempts + 1;
        let note = bound_error(error);
        let out = self
            .fenced_retry(
                cx,
                "fail",
                || self.store.item_fail(cx.claim(), &params),
                |row| {
                    if row.attempts != spent || row.last_error.as_deref() != Some(note.as_str()) {
                        return None;
                    }
                    match row.status {
                        Status::Failed => Some(FailOutcome::DeadLettered),
                        Status::Pending => Some(FailOutcome::Requeued {
                            available_at: row.available_at,
                        }),
                        _ => None,
                    }
                },
            )
            .await?;
        match out {
            FailOutcome::DeadLettered => {
                super::counters::count("drover_dead_lettered_total", cx.lane(), cx.kind(), 1);
                tracing::warn!(item = %cx.id(), kind = cx.kind(), error, "item dead-lettered");
            }
            FailOutcome::Requeued { .. } => {
                super::counters::count("drover_retried_total", cx.lane(), cx.kind(), 1);
            }
        }
        Ok(out)
    }

    /// [`Queue::defer`], retried (see the module docs).
    pub(crate) async fn defer_retried(
        &self,
        cx: &JobContext,
        delay: Duration,
    ) -> Result<DateTime<Utc>> {
        let spent = cx.item().attempts;
        self.fenced_retry(
            cx,
            "defer",
            || self.store.item_defer(cx.claim(), delay),
            |row| {
                (row.status == Status::Pending && row.attempts == spent).then_some(row.available_at)
            },
        )
        .await
    }

    /// [`Queue::release`], retried (see the module docs).
    pub(crate) async fn release_retried(&self, cx: &JobContext, note: Option<&str>) -> Result<()> {
        let spent = cx.item().attempts;
        let note_kept = note.map(bound_error);
        self.fenced_retry(
            cx,
            "release",
            || self.store.item_release(cx.claim(), note),
            |row| {
                let noted = note_kept
                    .as_deref()
                    .is_none_or(|n| row.last_error.as_deref() == Some(n));
                (row.status == Status::Pending && row.attempts == spent && noted).then_some(())
            },
        )
        .await
    }

    /// [`Queue::cancel_claimed`], retried (see the module docs).
    pub(crate) async fn cancel_claimed_retried(&self, cx: &JobContext, note: &str) -> Result<()> {
        let note_kept = bound_error(note);
        self.fenced_retry(
            cx,
            "cancel",
            || self.store.item_cancel_claimed(cx.claim(), note),
            |row| {
                (row.status == Status::Cancelled
                    && row.last_error.as_deref() == Some(note_kept.as_str()))
                .then_some(())
            },
        )
        .await
    }

    /// The orphan failure (DESIGN §3: one conditional statement on the
    /// token), retried (see the module docs).
    pub(crate) async fn fail_orphaned_retried(&self, cx: &JobContext) -> Result<()> {
        self.fenced_retry(
            cx,
            "orphan",
            || self.store.item_fail_orphaned(cx.id(), cx.claim().token),
            |row| {
                (row.status == Status::Failed && row.last_error.as_deref() == Some(ORPHANED_NOTE))
                    .then_some(())
            },
        )
        .await
    }
}

/// What every backend writes into `last_error` when it fails an orphan.
const ORPHANED_NOTE: &str = "orphaned: tenant gone";

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::item::NewItem;
    use crate::queue::Principal;
    use crate::store::fault::FaultStore;
    use crate::store::memory::MemoryStore;

    async fn claimed() -> (Queue, Arc<FaultStore>, JobContext) {
        let store = Arc::new(FaultStore::new(Arc::new(MemoryStore::new())));
        let q = Queue::new(store.clone());
        q.enqueue_item(
            &Principal::system(),
            NewItem::new("k", serde_json::json!({})),
        )
        .await
        .unwrap();
        let mut batch = q
            .claim("default", &[], "w", Duration::from_secs(30), 1)
            .await
            .unwrap();
        (q, store, batch.items.remove(0))
    }

    #[tokio::test]
    async fn a_lost_reply_on_a_failure_reads_as_landed_and_spends_one_attempt() {
        let (q, store, cx) = claimed().await;
        store.faults.write_replies_lost.store(1, Ordering::SeqCst);
        let out = q.fail_retried(&cx, "boom", false).await.unwrap();
        assert!(matches!(out, FailOutcome::Requeued { .. }));
        let row = q.get(cx.tenant(), cx.id()).await.unwrap();
        assert_eq!((row.status, row.attempts), (Status::Pending, 1));
        assert_eq!(
            store.faults.write_calls.load(Ordering::SeqCst),
            1,
            "resolved by reading back, not by writing again"
        );
    }

    #[tokio::test]
    async fn a_release_that_failed_before_landing_is_sent_again() {
        let (q, store, cx) = claimed().await;
        store.faults.write_fails.store(2, Ordering::SeqCst);
        q.release_retried(&cx, Some("bye")).await.unwrap();
        let row = q.get(cx.tenant(), cx.id()).await.unwrap();
        assert_eq!((row.status, row.attempts), (Status::Pending, 0));
        assert_eq!(store.faults.write_calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_lost_reply_after_another_claim_took_the_item_is_a_conflict() {
        let (q, store, cx) = claimed().await;
        // Our write fails before landing; meanwhile the operator cancels and
        // retries, and another worker claims the item (a new claim_seq).
        store.faults.write_fails.store(1, Ordering::SeqCst);
        let (tenant, id) = (cx.tenant(), cx.id());
        q.cancel(&Principal::system(), tenant, id).await.unwrap();
        q.retry(&Principal::system(), tenant, id).await.unwrap();
        let again = q
            .claim("default", &[], "other", Duration::from_secs(30), 1)
            .await
            .unwrap();
        assert_eq!(again.items.len(), 1);
        let e = q.defer_retried(&cx, Duration::ZERO).await.unwrap_err();
        assert!(e.is_conflict(), "{e}");
        let row = q.get(tenant, id).await.unwrap();
        assert_eq!(row.status, Status::Claimed, "the other claim is untouched");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_are_bounded() {
        let (q, store, cx) = claimed().await;
        store.faults.write_fails.store(u32::MAX, Ordering::SeqCst);
        let e = q.cancel_claimed_retried(&cx, "moot").await.unwrap_err();
        assert!(e.is_transient(), "{e}");
        assert_eq!(
            store.faults.write_calls.load(Ordering::SeqCst),
            u64::from(RETRIES) + 1
        );
    }
}
