//! The queue: the API producers and workers call, over one [`Store`].
//!
//! It owns what the store does not: validation before any write (bad input
//! changes nothing), the stamping of DESIGN §2 (the principal's actor,
//! tenant, request and trace), the permission check per kind, the retry
//! policy per kind (jitter drawn here, arithmetic in [`crate::rules`]), the
//! tenant directory check that decides who a claimed item runs for (its
//! creator, the tenant's service context, or nobody: an orphan), and the
//! retried outcome writes the worker settles items with (`fenced`).
//!
//! Every `impl Queue` lives in this module: items (here, `enqueue`, `each`,
//! `fenced`, `tx`), lanes (`lanes`), orchestrations (`orchestration`, with
//! [`Start`](crate::orchestration::Start)), the producer side of the outbox
//! (`outbox`), a projector's standing (`projector`) and the operator's reads
//! and admin calls (`ops`). Callers above the queue (the HTTP API, the CLI)
//! use these, never [`Queue::store`]; a caller's own transaction reaches the
//! store only through its seam ([`Store::item_insert_in`] and siblings).
//!
//! The queue stands on the store and the core alone: the records it passes
//! come from `crate::store::<entity>`, never from a role module (the roles,
//! the worker and the maintenance sit above it and re-export what they
//! share with it), so no module it imports imports it back.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{DEFAULT_MAX_PAYLOAD_BYTES, InsertResult, Inserted, Item, NewItem};
use crate::rules::{self, RetryPolicy};
use crate::store::{
    AuditEntry, ClaimParams, ConnectOptions, CountRow, FailOutcome, FailParams, Gauges, ListFilter,
    StaleReport, Store, WorkerRow,
};

mod claimed;
mod console;
mod context;
pub(crate) mod counters;
mod each;
mod enqueue;
mod fairness;
mod fenced;
mod held;
mod kind;
mod lanes;
mod limits;
mod links;
mod ops;
pub(crate) mod orchestration;
mod outbox;
mod progress;
pub(crate) mod projector;
mod results;
mod runs;
mod tenant;
mod tx;
mod waiting;

pub use context::JobContext;
pub use each::GatheredWrite;
pub use enqueue::{Enqueue, EnqueueBatch, OnConnection, ToStore};
pub use kind::{DEFAULT_PERMISSION, Kind, OPERATE_PERMISSION, Principal, permission_covers};
pub use links::BatchSpec;
pub use outbox::OutboxConnection;
pub use progress::PROGRESS_INTERVAL;
pub use results::{MAX_WAIT, Returns};
pub use tenant::{AllLive, TenantDirectory};
pub use tx::Transactional;
pub use waiting::{Holder, WaitReason};

/// How many stale items one sweep hands back per tenant by default.
pub const STALE_BATCH_DEFAULT: u32 = 1000;
/// How many tenants one sweep visits by default.
pub const STALE_TENANTS_DEFAULT: u32 = 1000;
/// How many rows one purge statement deletes by default.
pub const PURGE_BATCH_DEFAULT: u32 = 5000;

/// Queue-wide settings.
#[derive(Debug, Clone)]
pub struct QueueConfig {
    /// The largest payload accepted, in bytes of JSON (default 256 KiB).
    pub max_payload_bytes: usize,
    /// The retry policy for kinds that register none.
    pub retry: RetryPolicy,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            retry: RetryPolicy::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct KindRules {
    permission: String,
    retry: RetryPolicy,
}

/// The queue handle: cheap to clone, shared by producers and workers.
#[derive(Clone)]
pub struct Queue {
    store: Arc<dyn Store>,
    config: Arc<QueueConfig>,
    tenants: Arc<dyn TenantDirectory>,
    kinds: Arc<RwLock<HashMap<String, KindRules>>>,
    /// The workflows declared on this queue, by name (`Start::new`).
    workflows: orchestration::DeclaredWorkflows,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("backend", &self.store.backend())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What a claim hands to the runtime: the items to run, each with its
/// context, and how many were turned away.
#[derive(Debug, Default)]
pub struct ClaimBatch {
    /// Items to run.
    pub items: Vec<JobContext>,
    /// Items whose tenant is gone: failed as orphaned, never run.
    pub orphaned: u64,
    /// Items among `items` whose creator has left the tenant: they run
    /// under the tenant's service context ([`JobContext::is_service`]).
    pub creator_departed: u64,
    /// The claim came back short while a concurrency limit applies to its
    /// lane or kinds: the lane may hold claimable work that a full limit
    /// kept back, worth another claim once a slot frees. False for a full
    /// batch and for a short claim no limit touches (the lane is empty).
    pub limited: bool,
    /// A concurrency limit applies to the claim's lane or kinds, full or
    /// short: the store takes such a claim under the limit's scope lock
    /// (PostgreSQL), so a second claim of the lane in flight only waits on
    /// the first; the worker keeps one in flight for such a lane.
    pub serial: bool,
    /// The claim came back short while a rate applies to its lane or
    /// kinds and holds a start back: how long until that rate next allows
    /// one (the database's clock), so the claimer claims the lane again
    /// then rather than at its next poll. `None` otherwise.
    pub rate_wait: Option<Duration>,
}

/// Who a claimed item runs for, as the tenant directory says.
enum Decided {
    /// The tenant is gone: failed as orphaned, never run.
    Orphan,
    /// The creator is a member of the live tenant: run for them.
    Creator,
    /// The creator is the nil UUID or holds no live membership: run under
    /// the tenant's service context.
    Service,
}

/// The directory's answers within one claim: a batch asks once per tenant
/// and once per (tenant, creator).
#[derive(Default)]
struct DirectoryCache {
    live: HashMap<Uuid, bool>,
    member: HashMap<(Uuid, Uuid), bool>,
}

impl Queue {
    /// A queue over `store` with default settings and every tenant live.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Queue {
            store,
            config: Arc::new(QueueConfig::default()),
            tenants: Arc::new(AllLive),
            kinds: Arc::new(RwLock::new(HashMap::new())),
            workflows: orchestration::DeclaredWorkflows::default(),
        }
    }

    /// Connects to the store a URL names and returns a queue over it:
    /// `postgres://…` / `postgresql://…` (schema `drover`), `sqlite://path`
    /// / `sqlite:path` / `sqlite::memory:`, or `memory:` (a fresh in-process
    /// store). Does not migrate: call [`Queue::migrate`].
    ///
    /// The pool is opened at `DROVER_POOL_SIZE` when it is set (the
    /// variable the worker's pool-vs-capacity error names), else at
    /// [`POOL_SIZE_DEFAULT`](crate::worker::POOL_SIZE_DEFAULT); use
    /// [`Queue::connect_with`] to set it in code.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `database_url` for an unknown scheme, or
    /// on `DROVER_POOL_SIZE` when it is not a number of at least 1;
    /// [`Error::Unavailable`] when the database cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, &ConnectOptions::from_env()?).await
    }

    /// Connects as [`Queue::connect`] does, with explicit options (the pool
    /// size, the PostgreSQL schema and system login, the pooler mode);
    /// `DROVER_POOL_SIZE` is not read.
    ///
    /// ```no_run
    /// # async fn f() -> drover::Result<()> {
    /// use drover::queue::Queue;
    /// use drover::store::ConnectOptions;
    ///
    /// let options = ConnectOptions { pool_size: 30, ..ConnectOptions::default() };
    /// let queue = Queue::connect_with("postgres://localhost/app", &options).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Queue::connect`]; [`Error::InvalidInput`] on `system_url` for a
    /// URL that is not PostgreSQL's.
    pub async fn connect_with(url: &str, options: &ConnectOptions) -> Result<Self> {
        let store = crate::store::connect_with(url, options).await?;
        Ok(Self::new(store))
    }

    /// A queue over a fresh in-memory store, for tests.
    pub fn memory() -> Self {
        Self::new(Arc::new(crate::store::memory::MemoryStore::new()))
    }

    /// Replaces the settings.
    pub fn with_config(mut self, config: QueueConfig) -> Self {
        self.config = Arc::new(config);
        self
    }

    /// Replaces the tenant directory.
    pub fn with_tenants(mut self, tenants: Arc<dyn TenantDirectory>) -> Self {
        self.tenants = tenants;
        self
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The settings.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Applies the store's migrations; idempotent.
    ///
    /// # Errors
    /// [`Error::Unavailable`] / [`Error::Storage`] from the database.
    pub async fn migrate(&self) -> Result<()> {
        self.store.migrate().await
    }

    /// Records a kind's permission and retry policy so untyped enqueues
    /// (CLI, HTTP) and failures of it follow the same rules as typed ones.
    ///
    /// A kind already registered with the same rules (every typed enqueue
    /// after the first) costs a read lock only: producers on many threads
    /// never queue behind each other on the registry.
    pub fn register_kind<K: Kind>(&self) {
        let retry = K::retry_policy().unwrap_or(self.config.retry);
        {
            let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
            if kinds
                .get(K::NAME)
                .is_some_and(|r| r.permission == K::PERMISSION && r.retry == retry)
            {
                return;
            }
        }
        let mut kinds = self.kinds.write().unwrap_or_else(|p| p.into_inner());
        kinds.insert(
            K::NAME.to_owned(),
            KindRules {
                permission: K::PERMISSION.to_owned(),
                retry,
            },
        );
    }

    fn rules_for(&self, kind: &str) -> KindRules {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds.get(kind).cloned().unwrap_or_else(|| KindRules {
            permission: kind::DEFAULT_PERMISSION.to_owned(),
            retry: self.config.retry,
        })
    }

    /// The permission a producer needs to enqueue `kind`: the registered
    /// kind's, else [`DEFAULT_PERMISSION`] (an untyped kind).
    pub fn kind_permission(&self, kind: &str) -> String {
        self.rules_for(kind).permission
    }

    /// True when `kind` was registered on this queue (a typed kind, or a
    /// handler's). The HTTP API flags pending kinds no registration knows.
    pub fn kind_registered(&self, kind: &str) -> bool {
        let kinds = self.kinds.read().unwrap_or_else(|p| p.into_inner());
        kinds.contains_key(kind)
    }

    /// Builds the stored copy of `item` for `principal`: stamps the actor,
    /// tenant, request and trace, validates, and checks the permission.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the field; [`Error::Forbidden`] when
    /// the principal lacks the kind's permission.
    pub fn prepare(&self, principal: &Principal, mut item: NewItem) -> Result<NewItem> {
        item.validate(self.config.max_payload_bytes)?;
        let rules = self.rules_for(&item.kind);
        if !principal.holds(&rules.permission) {
            return Err(Error::Forbidden(format!(
                "enqueueing {} requires the permission {:?}",
                item.kind, rules.permission
            )));
        }
        item.created_by = principal.actor;
        if item.tenant_id.is_nil() {
            item.tenant_id = principal.tenant;
        } else if item.tenant_id != principal.tenant && !principal.holds("*") {
            return Err(Error::Forbidden(format!(
                "the principal may not enqueue into tenant {}",
                item.tenant_id
            )));
        }
        if item.request_id.is_none() {
            item.request_id = principal.request_id.clone();
        }
        if item.traceparent.is_none() {
            // The principal's trace context is checked as the item's own is.
            if let Some(t) = &principal.traceparent {
                crate::trace::validate_traceparent(t)?;
            }
            item.traceparent = principal.traceparent.clone();
        }
        Ok(item)
    }

    /// Enqueues an untyped item (the kind is a name) as `principal`.
    ///
    /// # Errors
    /// As [`Queue::prepare`], plus storage errors. A collision is not an
    /// error: see [`InsertResult`].
    ///
    /// # Cancel safety
    /// The insert is one statement: dropped, it either committed or not.
    pub async fn enqueue_item(&self, principal: &Principal, item: NewItem) -> Result<Inserted> {
        let item = self.prepare(principal, item)?;
        let out = self.store.item_insert(&item).await?;
        if out.result == InsertResult::Inserted {
            counters::count("drover_enqueued_total", &item.lane, &item.kind, 1);
        }
        Ok(out)
    }

    /// Enqueues many items in one statement. Every item is validated first:
    /// one bad item refuses the whole batch and nothing is written.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] whose reason names the item's index.
    pub async fn enqueue_many(
        &self,
        principal: &Principal,
        items: Vec<NewItem>,
    ) -> Result<Vec<InsertResult>> {
        let mut prepared = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            match self.prepare(principal, item) {
                Ok(p) => prepared.push(p),
                Err(Error::InvalidInput { field, reason }) => {
                    return Err(Error::InvalidInput {
                        field,
                        reason: format!("item {i}: {reason}"),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        let out = self.store.item_insert_many(&prepared).await?;
        counters::count_each(
            "drover_enqueued_total",
            prepared
                .iter()
                .zip(&out)
                .filter(|(_, r)| **r == InsertResult::Inserted)
                .map(|(i, _)| (i.lane.as_str(), i.kind.as_str())),
        );
        Ok(out)
    }

    /// Claims up to `n` items of `kinds` (all kinds when empty) from `lane`
    /// for `worker_id` under a `lease`, and builds each one's context
    /// (DESIGN §5): an item runs for its creator while the creator is a
    /// member of the live tenant, and under the tenant's service context
    /// when the creator is the nil UUID or holds no live membership. Items
    /// whose tenant is gone are failed as orphaned and not returned.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad lane or kind name; storage errors;
    /// the tenant directory's error, after every item of the batch was
    /// released (fenced, no attempt spent).
    ///
    /// # Cancel safety
    /// Not cancel safe: a claim dropped after its statement committed leaves
    /// its items claimed until the lease passes and the sweep hands them
    /// back (a delay, never a loss).
    pub async fn claim(
        &self,
        lane: &str,
        kinds: &[String],
        worker_id: &str,
        lease: Duration,
        n: u32,
    ) -> Result<ClaimBatch> {
        crate::item::validate_lane(lane)?;
        for k in kinds {
            crate::item::validate_kind(k)?;
        }
        if lease.is_zero() {
            return Err(Error::invalid("lease", "must be longer than zero"));
        }
        let sent = std::time::Instant::now();
        let items = self
            .store
            .item_claim(&ClaimParams {
                lane: lane.to_owned(),
                kinds: kinds.to_vec(),
                worker_id: worker_id.to_owned(),
                lease,
                limit: n,
            })
            .await?;
        self.claimed(items, sent, lane, kinds, n).await
    }

    /// Who `cx` runs for, asking the directory once per tenant and creator.
    async fn decide(&self, cache: &mut DirectoryCache, cx: &JobContext) -> Result<Decided> {
        let tenant = cx.tenant();
        let live = match cache.live.get(&tenant) {
            Some(v) => *v,
            None => {
                let v = self.tenants.is_live(tenant).await?;
                cache.live.insert(tenant, v);
                v
            }
        };
        if !live {
            return Ok(Decided::Orphan);
        }
        let creator = cx.created_by();
        if creator.is_nil() {
            return Ok(Decided::Service);
        }
        let member = match cache.member.get(&(tenant, creator)) {
            Some(v) => *v,
            None => {
                let v = self.tenants.is_member(tenant, creator).await?;
                cache.member.insert((tenant, creator), v);
                v
            }
        };
        Ok(if member {
            Decided::Creator
        } else {
            Decided::Service
        })
    }

    /// Hands claimed items back unstarted (fenced, retried, no attempt
    /// spent), concurrently, so one slow write does not hold the others.
    async fn release_all(&self, cxs: &[JobContext], note: &'static str) {
        let writes = cxs.iter().map(|cx| async move {
            if let Err(e) = self.release_retried(cx, Some(note)).await {
                tracing::warn!(item = %cx.id(), error = %e, "release of an unstarted item failed; the sweep will hand it back");
            }
        });
        futures::future::join_all(writes).await;
    }

    /// Marks the item done.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the claim is stale or the lease passed.
    pub async fn complete(&self, cx: &JobContext) -> Result<()> {
        self.store.item_complete(cx.claim()).await
    }

    /// Marks many items done in one statement; returns the ids that landed
    /// (the rest were stale).
    ///
    /// # Errors
    /// Storage errors only; stale claims are reported by absence.
    pub async fn complete_many(&self, cxs: &[&JobContext]) -> Result<Vec<Uuid>> {
        let refs: Vec<_> = cxs.iter().map(|c| *c.claim()).collect();
        self.store.item_complete_many(&refs).await
    }

    /// Records a failure: requeue after the kind's backoff (one attempt
    /// spent), or dead-letter at the budget or when `fatal`.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the claim is stale or the lease passed.
    pub async fn fail(&self, cx: &JobContext, error: &str, fatal: bool) -> Result<FailOutcome> {
        let policy = self.rules_for(cx.kind()).retry;
        let delay = rules::retry_delay(&policy, cx.attempt(), rand::random::<f64>());
        let out = self
            .store
            .item_fail(
                cx.claim(),
                &FailParams {
                    error: error.to_owned(),
                    retry_delay: delay,
                    fatal,
                },
            )
            .await?;
        match out {
            FailOutcome::DeadLettered => {
                counters::count("drover_dead_lettered_total", cx.lane(), cx.kind(), 1);
                tracing::warn!(item = %cx.id(), kind = cx.kind(), error, "item dead-lettered");
            }
            FailOutcome::Requeued { .. } => {
                counters::count("drover_retried_total", cx.lane(), cx.kind(), 1);
            }
        }
        Ok(out)
    }

    /// Puts the item back to run after `delay`, spending no attempt.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the claim is stale or the lease passed.
    pub async fn defer(&self, cx: &JobContext, delay: Duration) -> Result<DateTime<Utc>> {
        self.store.item_defer(cx.claim(), delay).await
    }

    /// Puts the item back to run now, spending no attempt.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the claim is stale or the lease passed.
    pub async fn release(&self, cx: &JobContext, note: Option<&str>) -> Result<()> {
        self.store.item_release(cx.claim(), note).await
    }

    /// Cancels the item at its handler's request: final, no attempt spent.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the claim is stale or the lease passed.
    pub async fn cancel_claimed(&self, cx: &JobContext, note: &str) -> Result<()> {
        self.store.item_cancel_claimed(cx.claim(), note).await
    }

    /// Renews the lease to `lease` from now (database clock).
    ///
    /// # Errors
    /// [`Error::Conflict`] when the claim is stale or the lease passed: the
    /// item is no longer ours and its run must stop.
    pub async fn extend_lease(&self, cx: &JobContext, lease: Duration) -> Result<DateTime<Utc>> {
        self.store.item_extend_lease(cx.claim(), lease).await
    }

    /// Hands back every tenant's lease-expired items as failed attempts,
    /// tenant by tenant, each bounded by `per_tenant`.
    ///
    /// # Errors
    /// Storage errors; tenants handled before the error keep their changes.
    pub async fn requeue_stale(&self, per_tenant: u32) -> Result<StaleReport> {
        let mut total = StaleReport::default();
        for tenant in self.store.item_stale_tenants(STALE_TENANTS_DEFAULT).await? {
            let r = self
                .store
                .item_requeue_stale(tenant, per_tenant, &self.config.retry)
                .await?;
            total.requeued += r.requeued;
            total.dead_lettered += r.dead_lettered;
        }
        if total.dead_lettered > 0 {
            metrics::counter!("drover_dead_lettered_total").increment(total.dead_lettered);
        }
        metrics::counter!("drover_lease_expired_total")
            .increment(total.requeued + total.dead_lettered);
        Ok(total)
    }

    /// Deletes final items last changed more than `retention` ago.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn purge(&self, retention: Duration) -> Result<u64> {
        let before = Utc::now() - rules::to_chrono(retention);
        let purged = self.store.item_purge(before, PURGE_BATCH_DEFAULT).await?;
        // The runs go by the same cutoff: every run of a purged item
        // finished before its last change, so none outlives it.
        loop {
            let gone = self
                .store
                .item_runs_purge(before, PURGE_BATCH_DEFAULT)
                .await?;
            if gone < u64::from(PURGE_BATCH_DEFAULT) {
                break;
            }
        }
        Ok(purged)
    }

    /// The health gauges.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn gauges(&self) -> Result<Gauges> {
        self.store.gauges().await
    }

    /// Counts per lane, kind and status.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn counts(&self) -> Result<Vec<CountRow>> {
        self.store.counts().await
    }

    /// Counts per kind and status of one lane, read through the lane's
    /// index entries (never the whole table) on PostgreSQL and SQLite.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a malformed lane; storage errors.
    pub async fn counts_lane(&self, lane: &str) -> Result<Vec<CountRow>> {
        crate::item::validate_lane(lane)?;
        self.store.counts_lane(lane).await
    }

    /// Reads an item of `tenant`.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the tenant has no such item.
    pub async fn get(&self, tenant: Uuid, id: Uuid) -> Result<Item> {
        self.store
            .item_get(tenant, id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("item {id}")))
    }

    /// Reads an item of `tenant` by idempotency key.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the tenant has no such key.
    pub async fn get_by_key(&self, tenant: Uuid, key: &str) -> Result<Item> {
        self.store
            .item_get_by_key(tenant, key)
            .await?
            .ok_or_else(|| Error::NotFound(format!("item with key {key:?}")))
    }

    /// Lists items.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on a malformed lane or kind filter.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<Item>> {
        if let Some(l) = &filter.lane {
            crate::item::validate_lane(l)?;
        }
        if let Some(k) = &filter.kind {
            crate::item::validate_kind(k)?;
        }
        self.store.item_list(filter).await
    }

    /// Checks that `principal` may operate on `tenant`'s items: it holds
    /// [`OPERATE_PERMISSION`] and is of that tenant (or holds `"*"`, as the
    /// system principal does).
    pub(crate) fn check_operator(
        &self,
        principal: &Principal,
        tenant: Uuid,
        what: &str,
    ) -> Result<()> {
        if !principal.holds(OPERATE_PERMISSION) {
            return Err(Error::Forbidden(format!(
                "{what} requires the permission {OPERATE_PERMISSION:?}"
            )));
        }
        if tenant != principal.tenant && !principal.holds("*") {
            return Err(Error::Forbidden(format!(
                "the principal may not {what} items of tenant {tenant}"
            )));
        }
        Ok(())
    }

    /// Cancels a pending or claimed item of `tenant`, or discards a dead
    /// letter (the way on for an ordered group that holds on one), as
    /// `principal` (an operator: it needs [`OPERATE_PERMISSION`]; its actor
    /// signs the audit entry).
    ///
    /// # Errors
    /// [`Error::Forbidden`] when the principal may not operate on the
    /// tenant's items; [`Error::NotFound`]; [`Error::Conflict`] when done
    /// or cancelled already.
    pub async fn cancel(&self, principal: &Principal, tenant: Uuid, id: Uuid) -> Result<Item> {
        self.check_operator(principal, tenant, "cancel")?;
        self.store.item_cancel(tenant, id, principal.actor).await
    }

    /// Retries a final item of `tenant` now with a fresh budget, as
    /// `principal` (an operator, as for [`Queue::cancel`]).
    ///
    /// # Errors
    /// [`Error::Forbidden`] as for [`Queue::cancel`]; [`Error::NotFound`];
    /// [`Error::Conflict`] when pending or claimed.
    pub async fn retry(&self, principal: &Principal, tenant: Uuid, id: Uuid) -> Result<Item> {
        self.check_operator(principal, tenant, "retry")?;
        self.store.item_retry(tenant, id, principal.actor).await
    }

    /// The audit entries of an item.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn audit(&self, tenant: Uuid, id: Uuid) -> Result<Vec<AuditEntry>> {
        self.store.audit_list(tenant, id).await
    }

    /// The workers' liveness rows, most recent beat first. A worker that
    /// died without shutting down is listed with state `lost` once two of
    /// its heartbeat intervals passed without a beat (by the store's clock;
    /// see [`crate::store::LOST_AFTER_BEATS`]).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn workers(&self) -> Result<Vec<WorkerRow>> {
        self.store.worker_list().await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Ping {
        n: u32,
    }

    impl Kind for Ping {
        const NAME: &'static str = "ping";
    }

    #[test]
    fn typed_enqueue_of_a_registered_kind_takes_no_write_lock() {
        let q = Queue::memory();
        q.register_kind::<Ping>();
        // A reader holds the registry: a write lock per enqueue would wait
        // for it; a read lock goes through.
        let held = q.kinds.read().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let q2 = q.clone();
        std::thread::spawn(move || {
            let _ = tx.send(q2.enqueue(Ping { n: 1 }).build().is_ok());
        });
        let built = rx.recv_timeout(Duration::from_secs(10));
        drop(held);
        assert_eq!(built, Ok(true), "the enqueue waited on the registry lock");
    }
}
