//! The context a claim makes for the handler that runs the item.
//!
//! Only the queue builds a [`JobContext`] (from a claimed row), so a handler
//! can never forge its claim token or fencing number, nor the actor it runs
//! for: the claim path decides that from the tenant directory (DESIGN §5).

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::item::Item;
use crate::store::ClaimRef;

/// Everything a handler may know about the item it runs.
#[derive(Debug, Clone)]
pub struct JobContext {
    item: Item,
    claim: ClaimRef,
    cancel: CancellationToken,
    claimed_at: Instant,
    /// Runs under the tenant's service context (nil actor, service role):
    /// the creator is the nil UUID or no longer a member of the tenant.
    service: bool,
    /// The run's progress: the latest report and where it is written
    /// (shared by the context's clones, rate-limited; see `progress.rs`).
    pub(super) progress: Arc<super::progress::ProgressCell>,
    /// The store a close of the item's group is written to (none in the
    /// test kit's contexts).
    store: Option<StoreRef>,
}

/// The context's store, shown by name only.
#[derive(Clone)]
struct StoreRef(Arc<dyn crate::store::Store>);

impl std::fmt::Debug for StoreRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Store")
    }
}

impl JobContext {
    /// Builds the context of a freshly claimed item, run for its creator
    /// (or under the service context when the creator is the nil UUID).
    /// `None` when the row carries no claim (it was not claimed).
    pub(crate) fn from_claimed(item: Item, claimed_at: Instant) -> Option<Self> {
        let claim = ClaimRef::of(&item)?;
        Some(JobContext {
            service: item.created_by.is_nil(),
            progress: Arc::new(super::progress::ProgressCell::new(None)),
            store: None,
            item,
            claim,
            cancel: CancellationToken::new(),
            claimed_at,
        })
    }

    /// Writes the run's progress reports to `store` (fenced on the claim).
    /// A context without a store (the test kit's) keeps them in memory.
    pub(crate) fn with_store(mut self, store: Arc<dyn crate::store::Store>) -> Self {
        self.progress = Arc::new(super::progress::ProgressCell::new(Some(store.clone())));
        self.store = Some(StoreRef(store));
        self
    }

    /// Moves the run to the tenant's service context: its creator holds no
    /// live membership any more, and the work still runs (DESIGN §5).
    pub(crate) fn into_service(mut self) -> Self {
        self.service = true;
        self
    }

    /// When the claim was sent, by this process's monotonic clock: the lease
    /// began no earlier, so the runtime measures the lease from here.
    pub fn claimed_at(&self) -> Instant {
        self.claimed_at
    }

    /// The item's id.
    pub fn id(&self) -> Uuid {
        self.item.id
    }

    /// The item's kind.
    pub fn kind(&self) -> &str {
        &self.item.kind
    }

    /// The lane it was claimed from.
    pub fn lane(&self) -> &str {
        &self.item.lane
    }

    /// The owning tenant: every read and write the handler makes should be
    /// under it.
    pub fn tenant(&self) -> Uuid {
        self.item.tenant_id
    }

    /// The actor the run acts for: the item's creator while the creator is
    /// still a member of the live tenant, else the nil UUID (the tenant's
    /// service context, see [`JobContext::is_service`]).
    pub fn actor(&self) -> Uuid {
        if self.service {
            Uuid::nil()
        } else {
            self.item.created_by
        }
    }

    /// True when the run acts under the tenant's service context (the nil
    /// actor, the service role) rather than for a member: the item was
    /// enqueued by the system, or by a member who has since left the
    /// tenant. A handler that authorizes its own calls should use the
    /// tenant's service credentials then, never the departed member's.
    pub fn is_service(&self) -> bool {
        self.service
    }

    /// Who enqueued the item, whatever context the run acts under (for
    /// audit trails: "refund queued by X, run by the service").
    pub fn created_by(&self) -> Uuid {
        self.item.created_by
    }

    /// The request that caused the item.
    pub fn request_id(&self) -> Option<&str> {
        self.item.request_id.as_deref()
    }

    /// The W3C trace context to link the run's span to.
    pub fn traceparent(&self) -> Option<&str> {
        self.item.traceparent.as_deref()
    }

    /// Which attempt this is, from 1.
    pub fn attempt(&self) -> i32 {
        self.item.attempts + 1
    }

    /// The attempt budget.
    pub fn max_attempts(&self) -> i32 {
        self.item.max_attempts
    }

    /// The second fence: grows with every claim of this item. Make the
    /// records the handler writes refuse a smaller number than they have
    /// seen, and a stale holder cannot overwrite a newer one's work.
    pub fn fencing_token(&self) -> i64 {
        self.item.claim_seq
    }

    /// When the claim lapses unless renewed (at claim time).
    pub fn lease_expires_at(&self) -> Option<DateTime<Utc>> {
        self.item.lease_expires_at
    }

    /// Fires while the handler still runs when its run must stop: on a
    /// shutdown past the grace period and on a timeout the handler then
    /// has the worker's `cancel_grace` to return (and write its own
    /// cleanup) before it is dropped; when the lease is lost (the item is
    /// no longer ours) it fires and the run is dropped at once. Long
    /// handlers should select on it.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// True once the run has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The claim handle the queue's fenced writes use.
    pub fn claim(&self) -> &ClaimRef {
        &self.claim
    }

    /// The claimed row as it stood at claim time.
    pub fn item(&self) -> &Item {
        &self.item
    }

    /// Closes the item's group until `until` (the far side is saturated: a
    /// 429 with `Retry-After`): from the close on, no worker claims an item
    /// of this kind, this tenant and this group before `until`, judged on
    /// the database's clock (docs/flow-control.md, "Closing a group"). A
    /// closure in force only moves later. Return the item with
    /// `JobError::until_reopened()` (the runtime's) to hand it back without spending an attempt.
    ///
    /// # Errors
    /// [`Error::InvalidInput`](crate::error::Error::InvalidInput) when the
    /// item has no group or the context has no store (a test kit's);
    /// storage errors.
    pub async fn close_group_until(
        &self,
        until: DateTime<Utc>,
    ) -> crate::error::Result<crate::store::closures::Closure> {
        let group = self.item.group.as_deref().ok_or_else(|| {
            crate::error::Error::invalid("group", "the item has no group to close")
        })?;
        self.close(Some(group), until).await
    }

    /// Closes the item's whole kind (every group, every tenant) until
    /// `until`, as [`JobContext::close_group_until`] closes one group.
    ///
    /// # Errors
    /// As [`JobContext::close_group_until`], save the group.
    pub async fn close_kind_until(
        &self,
        until: DateTime<Utc>,
    ) -> crate::error::Result<crate::store::closures::Closure> {
        self.close(None, until).await
    }

    async fn close(
        &self,
        group: Option<&str>,
        until: DateTime<Utc>,
    ) -> crate::error::Result<crate::store::closures::Closure> {
        let store = self.store.as_ref().ok_or_else(|| {
            crate::error::Error::invalid("store", "this context writes to no store")
        })?;
        let tenant = if group.is_some() {
            self.item.tenant_id
        } else {
            Uuid::nil()
        };
        store
            .0
            .close_until(
                &self.item.kind,
                tenant,
                group,
                until,
                Some(self.item.id),
                self.actor(),
            )
            .await
    }
}
