//! Enqueues of independent items, each as its own principal, in one
//! transaction, each keeping its own outcome: what the HTTP API's request
//! gathering writes with.

use crate::error::{Error, Result};
use crate::item::{InsertResult, Inserted, NewItem};
use crate::queue::{Principal, Queue, counters};

/// The caller's outcomes: `out` holds each refusal already; `stored[j]` is
/// the store's answer for input `at[j]`. Counts the items that landed.
fn settle(
    mut out: Vec<Option<Result<Inserted>>>,
    at: &[usize],
    stored: Vec<Result<Inserted>>,
) -> Vec<Result<Inserted>> {
    for (&i, r) in at.iter().zip(stored) {
        if let Ok(ins) = &r
            && ins.result == InsertResult::Inserted
        {
            counters::count("drover_enqueued_total", &ins.item.lane, &ins.item.kind, 1);
        }
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|o| {
            o.unwrap_or_else(|| {
                Err(Error::Storage(crate::error::Opaque::msg(
                    "an item was not answered",
                )))
            })
        })
        .collect()
}

impl Queue {
    /// Enqueues independent items, each as its own principal, in one
    /// transaction: each keeps its own outcome (the stored row, or its own
    /// error: refused by [`Queue::prepare`], or `Conflict` for another
    /// tenant's id), so one bad item does not fail the others. What the
    /// HTTP API's request gathering writes with.
    ///
    /// # Errors
    /// The outer error is the transaction's (storage): nothing was written.
    pub async fn enqueue_each(
        &self,
        items: Vec<(Principal, NewItem)>,
    ) -> Result<Vec<Result<Inserted>>> {
        let mut out: Vec<Option<Result<Inserted>>> = Vec::with_capacity(items.len());
        let mut prepared = Vec::with_capacity(items.len());
        let mut at = Vec::with_capacity(items.len());
        for (i, (principal, item)) in items.into_iter().enumerate() {
            match self.prepare(&principal, item) {
                Ok(p) => {
                    prepared.push(p);
                    at.push(i);
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        let stored = self.store.item_insert_each(&prepared).await?;
        Ok(settle(out, &at, stored))
    }

    /// [`Queue::enqueue_each`] with each request's answer stored in its
    /// idempotency marker in the same transaction as the items
    /// ([`Store::item_insert_each_answered`]): `markers[i]` is item i's
    /// marker, if its request holds one; `answer(i, outcome)` is the status
    /// and body to store for it, refusals by [`Queue::prepare`] included.
    ///
    /// # Errors
    /// The outer error is the transaction's (storage): nothing was written,
    /// no answer stored.
    pub async fn enqueue_each_answered(
        &self,
        items: Vec<(Principal, NewItem)>,
        markers: &[Option<crate::access::MarkerKey>],
        answer: &crate::store::AnswerFn<'_>,
    ) -> Result<Vec<Result<Inserted>>> {
        let mut out: Vec<Option<Result<Inserted>>> = Vec::with_capacity(items.len());
        let mut prepared = Vec::with_capacity(items.len());
        let mut prepared_markers = Vec::with_capacity(items.len());
        let mut at = Vec::with_capacity(items.len());
        let mut known = Vec::new();
        for (i, (principal, item)) in items.into_iter().enumerate() {
            let marker = markers.get(i).cloned().flatten();
            match self.prepare(&principal, item) {
                Ok(p) => {
                    prepared.push(p);
                    prepared_markers.push(marker);
                    at.push(i);
                    out.push(None);
                }
                Err(e) => {
                    let refused = Err(e);
                    if let Some(key) = marker {
                        let (status, body) = answer(i, &refused);
                        known.push(crate::access::MarkerAnswer { key, status, body });
                    }
                    out.push(Some(refused));
                }
            }
        }
        // The store numbers its inputs from 0: map back to the caller's.
        let remap = |j: usize, r: &Result<Inserted>| answer(at[j], r);
        let stored = self
            .store
            .item_insert_each_answered(&prepared, &prepared_markers, &remap, &known)
            .await?;
        Ok(settle(out, &at, stored))
    }

    /// A gathered batch of requests written whole
    /// ([`Store::item_insert_each_claimed`](crate::store::Store::item_insert_each_claimed)):
    /// each input's `Idempotency-Key` marker claimed (`claims[i]`, `None`
    /// without a key), then the inputs whose claim started (or that hold
    /// none) validated and inserted with their answers, one transaction for
    /// the lot on PostgreSQL. Returns per input what became of it; an input
    /// refused here (invalid, or a permission its principal lacks) is
    /// [`Claimed::Written`](crate::access::Claimed::Written) with its error,
    /// and its marker stores the answer made from it.
    ///
    /// # Errors
    /// The store's error when the batch could not be written: nothing of it
    /// was, and no marker is left held.
    pub async fn enqueue_each_claimed(
        &self,
        items: Vec<(Principal, NewItem)>,
        claims: &[Option<crate::access::MarkerClaim>],
        answer: &crate::store::AnswerFn<'_>,
        retention: std::time::Duration,
        stale_after: std::time::Duration,
    ) -> Result<Vec<crate::access::Claimed>> {
        let prepared = items
            .into_iter()
            .map(|(principal, item)| self.prepare(&principal, item))
            .collect();
        let out = self
            .store
            .item_insert_each_claimed(claims, prepared, answer, retention, stale_after)
            .await?;
        for c in &out {
            if let crate::access::Claimed::Written(Ok(ins)) = c
                && ins.result == InsertResult::Inserted
            {
                counters::count("drover_enqueued_total", &ins.item.lane, &ins.item.kind, 1);
            }
        }
        Ok(out)
    }
}
