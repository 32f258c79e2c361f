//! The item entity's seam: [`ItemStore`], the queue's hot path (insert,
//! claim, the fenced writes after a claim) and its operator and maintenance
//! calls, with the types they take and return.
//!
//! The invariants each implementation keeps are the store module's (an
//! insert never overwrites; one rule for a cross-tenant id collision; one
//! claimer per item; every write after a claim fenced in one statement on
//! token, status and lease); the contract cases in `contract::claims`,
//! `contract::writes` and `contract::operations` hold every backend to them.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::Result;
use drover_core::item::{InsertResult, Inserted, Item, NewItem, Progress, Status};
use drover_core::rules::RetryPolicy;

/// What a claim asks for.
#[derive(Debug, Clone)]
pub struct ClaimParams {
    /// The lane to take from.
    pub lane: String,
    /// Only items of these kinds; empty means every kind.
    pub kinds: Vec<String>,
    /// The claiming worker, stamped as `claimed_by`.
    pub worker_id: String,
    /// How long the claim holds before it may be swept.
    pub lease: Duration,
    /// At most this many items.
    pub limit: u32,
}

/// A handle on a claim: everything a fenced write needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClaimRef {
    /// The item's tenant: the write runs under it.
    pub tenant_id: Uuid,
    /// The item.
    pub id: Uuid,
    /// The token of the claim this write belongs to.
    pub token: Uuid,
}

impl ClaimRef {
    /// The handle on the current claim of a claimed item, if it has one.
    pub fn of(item: &Item) -> Option<ClaimRef> {
        item.claim_token.map(|token| ClaimRef {
            tenant_id: item.tenant_id,
            id: item.id,
            token,
        })
    }
}

/// One completion of a batch: the claim it ends and the handler's result,
/// written by the same fenced statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The claim the completion belongs to.
    pub claim: ClaimRef,
    /// What the handler returned, if anything (validated by the caller:
    /// at most `MAX_RESULT_BYTES`).
    pub result: Option<serde_json::Value>,
}

/// What [`ItemStore::item_complete_then_claim`] did: which completions
/// landed, and what the claim after them took.
#[derive(Debug)]
pub struct Handover {
    /// The completions that landed, in the order given; the others were
    /// stale (another token, or the lease had passed).
    pub landed: Vec<Uuid>,
    /// The claim that followed the completions. An error here leaves the
    /// completions landed.
    pub claimed: Result<Vec<Item>>,
}

/// How a failure is recorded.
#[derive(Debug, Clone)]
pub struct FailParams {
    /// The message kept as `last_error` (bounded by the store).
    pub error: String,
    /// The delay before the retry, if the budget allows one.
    pub retry_delay: Duration,
    /// Skip the budget: dead-letter now.
    pub fatal: bool,
}

/// What a failure did to the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum FailOutcome {
    /// Pending again, not before `available_at`; one attempt spent.
    Requeued {
        /// When it may run again.
        available_at: DateTime<Utc>,
    },
    /// The budget is spent (or the failure was fatal): final, audited.
    DeadLettered,
}

/// What a sweep of stale claims did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleReport {
    /// Lease-expired items made pending again (one attempt spent each).
    pub requeued: u64,
    /// Lease-expired items whose budget was spent: dead-lettered and audited.
    pub dead_lettered: u64,
}

/// A filter for [`ItemStore::item_list`].
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this tenant's items; `None` lists across tenants (a system operation).
    pub tenant_id: Option<Uuid>,
    /// Only items in this status.
    pub status: Option<Status>,
    /// Only items in this lane.
    pub lane: Option<String>,
    /// Only items of this kind.
    pub kind: Option<String>,
    /// Only items of this flow-control group.
    pub group: Option<String>,
    /// Only the item with this idempotency key.
    pub key: Option<String>,
    /// Only items created at or after this.
    pub created_after: Option<DateTime<Utc>>,
    /// Only items created before this.
    pub created_before: Option<DateTime<Utc>>,
    /// Only items whose last error contains this text (case-insensitive).
    pub error_contains: Option<String>,
    /// A cursor: only items after this one in the listing's order (newest
    /// first), given as the last item of the previous page.
    pub after: Option<ListCursor>,
    /// At most this many (newest first).
    pub limit: u32,
}

/// Where a page of [`ItemStore::item_list`] ended: the last item's creation
/// time and id. PostgreSQL and memory order by id (time-ordered v7);
/// SQLite by creation time then id; each backend continues after the
/// cursor in its own order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListCursor {
    /// The last item's `created_at`.
    pub created_at: DateTime<Utc>,
    /// The last item's id.
    pub id: Uuid,
}

/// One row of [`ItemStore::counts`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountRow {
    /// The lane.
    pub lane: String,
    /// The kind.
    pub kind: String,
    /// The status.
    pub status: Status,
    /// How many items.
    pub count: i64,
}

/// The health gauges the sweep publishes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Gauges {
    /// Per lane, the age in seconds of the oldest item that is available and
    /// still pending (0 when none waits).
    pub oldest_age_seconds: Vec<(String, f64)>,
    /// Items in the dead letter.
    pub failed: i64,
}

/// The items table: enqueue, claim, the fenced writes after a claim, the
/// sweep's and the operator's calls, counts and gauges. A supertrait of
/// [`Store`](super::Store); see the store module docs for the invariants.
#[async_trait]
pub trait ItemStore: Send + Sync {
    /// Inserts one item, never overwriting; an id held by another tenant is
    /// `Conflict` (see the module docs for the collision rule).
    ///
    /// `item` must already be validated; the store stamps `status = pending`,
    /// `attempts = 0`, no claim, `updated_by = created_by`.
    async fn item_insert(&self, item: &NewItem) -> Result<Inserted>;

    /// Inserts many items in one statement; one result per input, in order
    /// (`IdTaken` for an id held by another tenant).
    async fn item_insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>>;

    /// Inserts many independent items in one transaction, each keeping its
    /// own outcome: the stored row (inserted, or the tenant's own row that
    /// blocked it) or its own error (`Conflict` for an id held by another
    /// tenant), as [`ItemStore::item_insert`] would answer it alone. The
    /// outer error is the transaction's: then nothing was written.
    ///
    /// This is what the HTTP API's request gathering writes with: many
    /// single-item requests, one commit. The default runs
    /// [`ItemStore::item_insert`] per item (a commit each); the SQL
    /// backends override it with one transaction.
    async fn item_insert_each(&self, items: &[NewItem]) -> Result<Vec<Result<Inserted>>> {
        insert_each_one_by_one(self, items).await
    }

    /// Reads an item of `tenant` by id.
    async fn item_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Item>>;

    /// Reads an item of `tenant` by idempotency key.
    async fn item_get_by_key(&self, tenant: Uuid, key: &str) -> Result<Option<Item>>;

    /// Claims up to `limit` available items (system operation, across tenants),
    /// in priority then `available_at` order.
    async fn item_claim(&self, params: &ClaimParams) -> Result<Vec<Item>>;

    /// Marks a claimed item done. Fenced.
    async fn item_complete(&self, claim: &ClaimRef) -> Result<()> {
        self.item_complete_with(claim, None).await
    }

    /// Marks a claimed item done and stores the handler's `result` in the
    /// same fenced statement (a stale holder's completion stores nothing).
    async fn item_complete_with(
        &self,
        claim: &ClaimRef,
        result: Option<&serde_json::Value>,
    ) -> Result<()>;

    /// Marks many claimed items done in one statement, each row fenced on its
    /// own token. Returns the ids that landed; the others were stale.
    async fn item_complete_many(&self, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
        let done: Vec<Completion> = claims
            .iter()
            .map(|c| Completion {
                claim: *c,
                result: None,
            })
            .collect();
        self.item_complete_many_with(&done).await
    }

    /// [`ItemStore::item_complete_many`] with a result per item, each stored
    /// by the statement that completes its row.
    async fn item_complete_many_with(&self, done: &[Completion]) -> Result<Vec<Uuid>>;

    /// Completes `done` (as [`ItemStore::item_complete_many_with`]) and then
    /// claims by `claim`: the slots the completions freed are handed over
    /// to the claim. PostgreSQL does both in one call and one transaction
    /// when the claim is its one-call limited claim (migration 0045); the
    /// other stores, and PostgreSQL otherwise, write the completions and
    /// then claim, exactly as the two calls would. Either way the claim
    /// counts held slots after the completions, under its own locks, so it
    /// admits nothing a claim after the completions' commit would not.
    ///
    /// An error means the completions' fate is unknown (the caller retries
    /// them alone: the fence refuses a second write).
    async fn item_complete_then_claim(
        &self,
        done: &[Completion],
        claim: &ClaimParams,
    ) -> Result<Handover> {
        let landed = self.item_complete_many_with(done).await?;
        let claimed = self.item_claim(claim).await;
        Ok(Handover { landed, claimed })
    }

    /// Records a running handler's progress (latest wins), fenced on the
    /// claim like every write after it; the item keeps it across retries.
    async fn item_progress(&self, claim: &ClaimRef, progress: &Progress) -> Result<()>;

    /// Records a failure: requeue after `retry_delay` with one attempt spent,
    /// or dead-letter (with an audit entry) at the budget or when fatal. Fenced.
    async fn item_fail(&self, claim: &ClaimRef, params: &FailParams) -> Result<FailOutcome>;

    /// Makes a claimed item pending again after `delay`, spending no attempt.
    /// Fenced. Returns the new `available_at`.
    async fn item_defer(&self, claim: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>>;

    /// Makes a claimed item pending again now, spending no attempt, keeping
    /// `note` as `last_error` when given. Fenced.
    async fn item_release(&self, claim: &ClaimRef, note: Option<&str>) -> Result<()>;

    /// Extends the lease to `lease` from now. Fenced. Returns the new expiry.
    async fn item_extend_lease(&self, claim: &ClaimRef, lease: Duration) -> Result<DateTime<Utc>>;

    /// Cancels a claimed item at its handler's request (final, no attempt
    /// spent), keeping `note` as `last_error`. Fenced.
    async fn item_cancel_claimed(&self, claim: &ClaimRef, note: &str) -> Result<()>;

    /// Fails an item whose tenant is gone, conditioned on its token; no audit
    /// entry (system operation).
    async fn item_fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()>;

    /// Tenants that have claimed items whose lease has passed (system
    /// operation), at most `limit`.
    async fn item_stale_tenants(&self, limit: u32) -> Result<Vec<Uuid>>;

    /// Hands back up to `limit` of `tenant`'s lease-expired items as failed
    /// attempts (`last_error = "lease expired"`): requeued with the policy's
    /// nominal delay, or dead-lettered at the budget.
    async fn item_requeue_stale(
        &self,
        tenant: Uuid,
        limit: u32,
        policy: &RetryPolicy,
    ) -> Result<StaleReport>;

    /// Deletes final items (`done`, `failed`, `cancelled`) last updated before
    /// `before`, in batches of `batch` (system operation). Returns how many.
    async fn item_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64>;

    /// Cancels a pending, claimed or dead-lettered item (operator; a dead
    /// letter is discarded). `Conflict` if done or cancelled.
    async fn item_cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item>;

    /// Makes a failed, cancelled or done item pending now with a fresh
    /// budget (operator). `Conflict` if pending or claimed.
    async fn item_retry(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item>;

    /// Lists items, newest first.
    async fn item_list(&self, filter: &ListFilter) -> Result<Vec<Item>>;

    /// Counts per lane, kind and status (system operation). Exact on every
    /// backend; PostgreSQL and SQLite answer from a rollup of the settled final rows
    /// plus index scans (see [`ItemStore::counts_settle`]).
    async fn counts(&self) -> Result<Vec<CountRow>>;

    /// Folds final rows into the store's count rollup, if it keeps one (the
    /// sweep's step; system operation). Returns how many rows were folded
    /// in. Counts are right whether or not it runs: it only keeps them
    /// cheap, since rows not folded in yet are counted one by one. The
    /// default keeps no rollup (memory counts directly).
    async fn counts_settle(&self) -> Result<u64> {
        Ok(0)
    }

    /// Counts per kind and status of one lane (system operation), from the
    /// lane's index entries rather than the whole table on PostgreSQL and
    /// SQLite. The default filters [`ItemStore::counts`], for custom stores.
    async fn counts_lane(&self, lane: &str) -> Result<Vec<CountRow>> {
        let mut rows = self.counts().await?;
        rows.retain(|r| r.lane == lane);
        Ok(rows)
    }

    /// Counts per lane, kind and status of one tenant's items (system
    /// operation; what a tenant-scoped overview shows). Exact, from the
    /// same rollup and indexes as [`ItemStore::counts`], narrowed to the
    /// tenant.
    async fn counts_tenant(&self, tenant: Uuid) -> Result<Vec<CountRow>>;

    /// The health gauges (system operation).
    async fn gauges(&self) -> Result<Gauges>;
}

/// [`ItemStore::item_insert_each`]'s default: [`ItemStore::item_insert`]
/// per item, each its own answer (a linked item is its own all-or-nothing
/// enqueue). The SQL backends use it for a gathered batch holding a linked
/// item.
///
/// # Errors
/// What is not one item's own refusal (the database down, a broken schema).
pub async fn insert_each_one_by_one<S: ItemStore + ?Sized>(
    store: &S,
    items: &[NewItem],
) -> Result<Vec<Result<Inserted>>> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match store.item_insert(item).await {
            // The item's own refusal stays its own; anything else (the
            // database down, a broken schema) is the batch's.
            Err(e)
                if !(e.is_conflict() || matches!(e, drover_core::Error::InvalidInput { .. })) =>
            {
                return Err(e);
            }
            other => out.push(other),
        }
    }
    Ok(out)
}
