//! A handler's result: declared per kind ([`Returns`]), written by the
//! fenced statement that completes the item, read back typed
//! ([`Queue::result`]) or awaited ([`Queue::wait_final`]).
//!
//! Exactly once: a result is stored by the one completion that lands under
//! the claim (a stale holder's completion is refused and stores nothing);
//! an item is done with its result or not done at all. The result goes
//! with its row when the purge by retention takes the item.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{Item, Progress, validate_result};
use crate::queue::{JobContext, Kind, Queue};
use crate::store::{ClaimRef, Completion};

/// The longest [`Queue::wait_final`] waits.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// The first pause between two reads of a waited item; doubles up to
/// [`WAIT_STEP_MAX`].
const WAIT_STEP: Duration = Duration::from_millis(25);
/// The longest pause between two reads of a waited item.
const WAIT_STEP_MAX: Duration = Duration::from_millis(500);

/// A kind whose handler returns a result, and its type.
///
/// ```
/// use drover::queue::{Kind, Returns};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize)]
/// struct Resize { image: String }
/// impl Kind for Resize { const NAME: &'static str = "resize"; }
///
/// #[derive(Serialize, Deserialize)]
/// struct Resized { url: String, bytes: u64 }
/// impl Returns for Resize { type Output = Resized; }
/// ```
pub trait Returns: Kind {
    /// What its handler returns (at most 256 KiB of JSON).
    type Output: Serialize + DeserializeOwned + Send + Sync + 'static;
}

impl Queue {
    /// The result of item `id` of `tenant`, typed as its kind declares:
    /// `None` while it is not done, or when its handler returned none.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the tenant has no such item;
    /// [`Error::InvalidInput`] when the item is of another kind or its
    /// result does not decode as `K::Output`; storage errors.
    pub async fn result<K: Returns>(&self, tenant: Uuid, id: Uuid) -> Result<Option<K::Output>> {
        let item = self.get(tenant, id).await?;
        if item.kind != K::NAME {
            return Err(Error::invalid(
                "kind",
                format!("item {id} is of kind {}, not {}", item.kind, K::NAME),
            ));
        }
        item.result
            .map(|v| {
                serde_json::from_value(v).map_err(|e| {
                    Error::invalid(
                        "result",
                        format!("does not decode as {}'s output: {e}", K::NAME),
                    )
                })
            })
            .transpose()
    }

    /// Marks the item done and stores `result` in the same fenced write.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a result over 256 KiB (nothing is
    /// written); [`Error::Conflict`] when the claim is stale or the lease
    /// passed (nothing is stored).
    pub async fn complete_with(
        &self,
        cx: &JobContext,
        result: Option<&serde_json::Value>,
    ) -> Result<()> {
        if let Some(r) = result {
            validate_result(r)?;
        }
        self.store.item_complete_with(cx.claim(), result).await
    }

    /// Marks the items of many presented claims done, each fenced on its
    /// own token and storing its own result, in one statement (a batch
    /// without any result runs the statement [`Queue::complete_claims`]
    /// runs). Returns the ids that landed; the others were stale.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a result is over 256 KiB (nothing is
    /// written); storage errors. Stale claims are reported by absence.
    pub async fn complete_claims_with(&self, done: &[Completion]) -> Result<Vec<Uuid>> {
        for c in done {
            if let Some(r) = &c.result {
                validate_result(r)?;
            }
        }
        self.store.item_complete_many_with(done).await
    }

    /// Records progress for the item `claim` holds, fenced on the claim,
    /// written at once (the caller rate-limits: the runtime does per run,
    /// see [`JobContext::report_progress`]; the HTTP API per item).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad report; [`Error::Conflict`] when
    /// the claim is stale; [`Error::NotFound`] when the tenant has no such
    /// item.
    pub async fn progress_claim(&self, claim: &ClaimRef, progress: &Progress) -> Result<()> {
        progress.validate()?;
        self.store.item_progress(claim, progress).await
    }

    /// Reads item `id` of `tenant` until it is final (done, failed or
    /// cancelled) or `bound` (at most [`MAX_WAIT`]) has passed, and returns
    /// it as it then stands: a caller checks `status` for which.
    ///
    /// A completion publishes no wake-up (the wake-up says "work to claim",
    /// and adding one to every completion would cost the hot path), so
    /// this reads the row with a short backoff: from 25 ms, doubling to
    /// 500 ms, one primary-key read each.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the tenant has no such item; storage errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn wait_final(&self, tenant: Uuid, id: Uuid, bound: Duration) -> Result<Item> {
        let deadline = tokio::time::Instant::now() + bound.min(MAX_WAIT);
        let mut step = WAIT_STEP;
        loop {
            let item = self.get(tenant, id).await?;
            let now = tokio::time::Instant::now();
            if item.status.is_final() || now >= deadline {
                return Ok(item);
            }
            tokio::time::sleep_until((now + step).min(deadline)).await;
            step = (step * 2).min(WAIT_STEP_MAX);
        }
    }
}
