//! Claims held outside this process: a worker over HTTP presents the item,
//! its tenant and the claim token it was handed, and its writes go through
//! the very `Queue` methods a native worker settles items with.
//!
//! Invariants:
//! - A presented claim is never trusted beyond the store's fence: every
//!   write is the store's own fenced statement (claim token, status
//!   claimed, lease not passed), so a forged or stale token changes
//!   nothing and reads as [`Error::Conflict`].
//! - [`Queue::held`] rebuilds a [`JobContext`] only from the row as it
//!   stands, and only while the presented token holds it; the context
//!   carries the row's attempt and kind, so a failure's retry delay is the
//!   kind's policy, as for a native worker.

use std::time::Instant;

use tokio::sync::broadcast;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::Status;
use crate::queue::{JobContext, Queue};
use crate::store::{ClaimRef, Wake, WorkerRow};

impl Queue {
    /// The context of an item `claim` still holds: the row is read under
    /// the claim's tenant and must be claimed with that token.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the item is missing, not claimed, or held
    /// by another claim (the caller's claim is stale); storage errors.
    pub async fn held(&self, claim: ClaimRef) -> Result<JobContext> {
        let stale =
            || Error::Conflict(format!("item {} is no longer held by this claim", claim.id));
        let Some(row) = self.store.item_get(claim.tenant_id, claim.id).await? else {
            return Err(stale());
        };
        if row.status != Status::Claimed || row.claim_token != Some(claim.token) {
            return Err(stale());
        }
        JobContext::from_claimed(row, Instant::now())
            .map(|cx| cx.with_store(self.store.clone()))
            .ok_or_else(stale)
    }

    /// Marks the items of many presented claims done, each fenced on its
    /// own token, in one statement (what [`Queue::complete_many`] sends).
    /// Returns the ids that landed; the others were stale.
    ///
    /// # Errors
    /// Storage errors only; stale claims are reported by absence.
    pub async fn complete_claims(&self, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
        self.store.item_complete_many(claims).await
    }

    /// Subscribes to the store's wake-ups, the ones native workers listen
    /// to: each names a lane that got work (see [`Wake`]).
    ///
    /// # Errors
    /// Storage errors (PostgreSQL's listener could not start).
    pub async fn wakeups(&self) -> Result<broadcast::Receiver<Wake>> {
        self.store.wakeups().await
    }

    /// Publishes a worker's liveness row, as a native worker's heartbeat
    /// does (the store stamps the beat with its own clock).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn worker_beat(&self, row: &WorkerRow) -> Result<()> {
        self.store.worker_beat(row).await
    }
}
