//! Enqueues of independent items, each as its own principal, in one
//! transaction, each keeping its own outcome and its idempotency marker's
//! answer: what the HTTP API's request gathering writes with.

use crate::error::Result;
use crate::item::{InsertResult, NewItem};
use crate::queue::{Principal, Queue, counters};

impl Queue {
    /// A gathered batch of requests written whole
    /// ([`Store::item_insert_each_claimed`](crate::store::Store::item_insert_each_claimed)):
    /// each input's `Idempotency-Key` marker claimed (`claims[i]`, `None`
    /// without a key), then the inputs whose claim started (or that hold
    /// none) validated and inserted with their answers, one transaction for
    /// the lot on PostgreSQL. Returns per input what became of it; an input
    /// refused here (invalid, or a permission its principal lacks) is
    /// [`Claimed::Written`](crate::store::access::Claimed::Written) with its error,
    /// and its marker stores the answer made from it.
    ///
    /// # Errors
    /// The store's error when the batch could not be written: nothing of it
    /// was, and no marker is left held.
    pub async fn enqueue_each_claimed(
        &self,
        items: Vec<(Principal, NewItem)>,
        claims: &[Option<crate::store::access::MarkerClaim>],
        answer: &crate::store::AnswerFn<'_>,
        retention: std::time::Duration,
        stale_after: std::time::Duration,
    ) -> Result<Vec<crate::store::access::Claimed>> {
        let prepared = items
            .into_iter()
            .map(|(principal, item)| self.prepare(&principal, item))
            .collect();
        let out = self
            .store
            .item_insert_each_claimed(claims, prepared, answer, retention, stale_after)
            .await?;
        for c in &out {
            if let crate::store::access::Claimed::Written(Ok(ins)) = c
                && ins.result == InsertResult::Inserted
            {
                counters::count("drover_enqueued_total", &ins.item.lane, &ins.item.kind, 1);
            }
        }
        Ok(out)
    }
}
