//! Enqueues of independent items, each as its own principal, in one
//! transaction, each keeping its own outcome and its idempotency marker's
//! answer: what the HTTP API's request gathering writes with.

use crate::error::Result;
use crate::item::InsertResult;
use crate::item::NewItem;
use crate::queue::{Principal, Queue, counters};
use crate::store::access::{Claimed, MarkerClaim};
use crate::store::gathered::{Answer, Gathered};

impl Queue {
    /// A gathered batch of requests written whole
    /// ([`Store::item_insert_each_claimed`](crate::store::Store::item_insert_each_claimed)):
    /// each input's `Idempotency-Key` marker claimed (`claims[i]`, `None`
    /// without a key), then the inputs whose claim started (or that hold
    /// none) validated and inserted, one transaction for the lot on
    /// PostgreSQL. Returns the batch waiting for its answers: read what
    /// became of each input ([`GatheredWrite::outcomes`]; an input refused
    /// here, invalid or beyond its principal's permissions, is
    /// [`Claimed::Written`] with its error), make each answer, and
    /// [`GatheredWrite::commit`] them: each is stored in its request's
    /// marker with the items.
    ///
    /// # Errors
    /// The store's error when the batch could not be written: nothing of it
    /// was, and no marker is left held.
    pub async fn enqueue_each_claimed(
        &self,
        items: Vec<(Principal, NewItem)>,
        claims: &[Option<MarkerClaim>],
        retention: std::time::Duration,
        stale_after: std::time::Duration,
    ) -> Result<GatheredWrite<'_>> {
        let prepared = items
            .into_iter()
            .map(|(principal, item)| self.prepare(&principal, item))
            .collect();
        let inner = self
            .store
            .item_insert_each_claimed(claims, prepared, retention, stale_after)
            .await?;
        Ok(GatheredWrite { inner })
    }
}

/// A gathered batch between its insert and its commit
/// ([`Queue::enqueue_each_claimed`]). Dropped without a commit, the batch
/// is rolled back on PostgreSQL.
pub struct GatheredWrite<'a> {
    inner: Box<dyn Gathered + 'a>,
}

impl GatheredWrite<'_> {
    /// What became of each input, one per input in order.
    pub fn outcomes(&self) -> &[Claimed] {
        self.inner.outcomes()
    }

    /// Stores `answers[i]` (HTTP status and body) in input i's marker
    /// where the batch started one, commits, and returns the outcomes. A
    /// started marker given `None` is released (a retry runs again).
    ///
    /// # Errors
    /// The store's error: on PostgreSQL nothing of the batch was written.
    pub async fn commit(self, answers: &[Option<Answer>]) -> Result<Vec<Claimed>> {
        let out = self.inner.commit(answers).await?;
        for c in &out {
            if let Claimed::Written(Ok(ins)) = c
                && ins.result == InsertResult::Inserted
            {
                counters::count("drover_enqueued_total", &ins.item.lane, &ins.item.kind, 1);
            }
        }
        Ok(out)
    }
}
