//! The second half of a claim: the items a store claim took (by
//! [`Queue::claim`](super::Queue::claim) or handed over with a completion,
//! see the worker's completer) made into the contexts a worker runs, each
//! checked against the tenant directory.

use super::counters;
use super::{ClaimBatch, Decided, DirectoryCache, JobContext, Queue};
use crate::error::Result;
use crate::item::Item;

impl Queue {
    /// The batch of `items` a claim of `n` on `lane` took (sent at
    /// `sent`): whether a limit held it short, and each item's context.
    pub(crate) async fn claimed(
        &self,
        items: Vec<Item>,
        sent: std::time::Instant,
        lane: &str,
        kinds: &[String],
        n: u32,
    ) -> Result<ClaimBatch> {
        let mut batch = ClaimBatch::default();
        // One atomic load unless a rate held a claim back since.
        if let Some(totals) = crate::store::rates::rate_limited_totals() {
            for (scope, n) in totals {
                metrics::counter!("drover_rate_limited_total", "scope" => scope).absolute(n);
            }
        }
        // Answered from the claimers' cache of the limits in force (the
        // claim itself just read it).
        let applies = self.store.limits_apply(lane, kinds).await;
        // Unknown: claims as before, two in flight.
        batch.serial = applies.as_ref().is_ok_and(|a| *a);
        if items.len() < usize::try_from(n).unwrap_or(usize::MAX) {
            // Unknown counts as limited (one spare claim, never a stall).
            batch.limited = applies.unwrap_or(true);
            // A hint only: on an error the lane waits for its poll.
            batch.rate_wait = self.store.rate_wait(lane, kinds).await.unwrap_or(None);
        }
        let mut contexts = items
            .into_iter()
            .filter_map(|item| JobContext::from_claimed(item, sent))
            .map(|cx| cx.with_store(self.store.clone()));
        let mut directory = DirectoryCache::default();
        while let Some(cx) = contexts.next() {
            let decided = match self.decide(&mut directory, &cx).await {
                Ok(d) => d,
                Err(e) => {
                    // Nothing is handed out from this claim: hand every item
                    // not yet settled back at once, spending no attempt
                    // (left claimed, each would wait out its lease and be
                    // charged one by the sweep), and report the error so
                    // the claim loop backs off.
                    tracing::warn!(error = %e, "tenant directory failed; releasing the claimed batch");
                    let rest: Vec<JobContext> = batch
                        .items
                        .drain(..)
                        .chain(std::iter::once(cx))
                        .chain(contexts)
                        .collect();
                    self.release_all(&rest, "released unstarted: tenant directory failed")
                        .await;
                    return Err(e);
                }
            };
            match decided {
                Decided::Orphan => match self.fail_orphaned_retried(&cx).await {
                    Ok(()) => {
                        batch.orphaned += 1;
                        counters::count("drover_orphaned_total", cx.lane(), cx.kind(), 1);
                        tracing::warn!(item = %cx.id(), tenant = %cx.tenant(), "tenant gone: item failed as orphaned");
                    }
                    Err(e) => {
                        tracing::warn!(item = %cx.id(), error = %e, "orphan failure refused")
                    }
                },
                Decided::Creator => batch.items.push(cx),
                Decided::Service => {
                    if !cx.created_by().is_nil() {
                        batch.creator_departed += 1;
                        tracing::info!(item = %cx.id(), creator = %cx.created_by(), "creator left the tenant: running under the service context");
                    }
                    batch.items.push(cx.into_service());
                }
            }
        }
        counters::count_each(
            "drover_claimed_total",
            batch.items.iter().map(|cx| (cx.lane(), cx.kind())),
        );
        Ok(batch)
    }
}
