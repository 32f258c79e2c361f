//! The queue: the API producers and workers call, over one [`Store`].
//!
//! It owns what the store does not: validation before any write (bad input
//! changes nothing), the stamping of DESIGN §2 (the principal's actor,
//! tenant, request and trace), the permission check per kind, the retry
//! policy per kind (jitter drawn here, arithmetic in [`crate::rules`]), and
//! the tenant directory check that turns work for a gone tenant into an
//! orphan instead of a run.

use std::collections::HashMap;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::item::{DEFAULT_MAX_PAYLOAD_BYTES, InsertResult, Inserted, Item, NewItem};
use crate::rules::{self, RetryPolicy};
use crate::store::{
    AuditEntry, ClaimParams, CountRow, FailOutcome, FailParams, Gauges, ListFilter, StaleReport,
    Store, WorkerRow,
};

mod context;
mod kind;
mod tenant;
mod tx;

pub use context::JobContext;
pub use kind::{DEFAULT_PERMISSION, Kind, Principal};
pub use tenant::{AllLive, TenantDirectory};
pub use tx::Transactional;

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

#[derive(Debug, Clone)]
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
    /// Items whose actor left the tenant: dead-lettered, never run.
    pub forbidden: u64,
}

impl Queue {
    /// A queue over `store` with default settings and every tenant live.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Queue {
            store,
            config: Arc::new(QueueConfig::default()),
            tenants: Arc::new(AllLive),
            kinds: Arc::new(RwLock::new(HashMap::new())),
        }
    }

    /// Connects to the store a URL names and returns a queue over it:
    /// `postgres://…` / `postgresql://…` (schema `drover`), `sqlite://path`
    /// / `sqlite:path` / `sqlite::memory:`, or `memory:` (a fresh in-process
    /// store). Does not migrate: call [`Queue::migrate`].
    ///
    /// # Errors
    /// [`Error::InvalidInput`] on `database_url` for an unknown scheme;
    /// [`Error::Unavailable`] when the database cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        let store = crate::store::connect(url).await?;
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
    pub fn register_kind<K: Kind>(&self) {
        let mut kinds = self.kinds.write().unwrap_or_else(|p| p.into_inner());
        kinds.insert(
            K::NAME.to_owned(),
            KindRules {
                permission: K::PERMISSION.to_owned(),
                retry: K::retry_policy().unwrap_or(self.config.retry),
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

    /// Starts a typed enqueue of `job` as the system principal; await it, or
    /// set options first (`.key(..)`, `.delay(..)`, `.principal(..)`).
    ///
    /// ```
    /// # use drover::queue::{Kind, Queue};
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Ping { n: u32 }
    /// # impl Kind for Ping { const NAME: &'static str = "ping"; }
    /// # async fn f() -> drover::Result<()> {
    /// let queue = Queue::memory();
    /// let out = queue.enqueue(Ping { n: 1 }).key("ping:1").await?;
    /// # Ok(()) }
    /// ```
    pub fn enqueue<K: Kind>(&self, job: K) -> Enqueue<'_> {
        self.register_kind::<K>();
        let payload = serde_json::to_value(&job)
            .map_err(|e| Error::invalid("payload", format!("does not serialize: {e}")));
        let item = payload.map(|p| {
            NewItem::new(K::NAME, p)
                .with_lane(K::LANE)
                .with_max_attempts(K::MAX_ATTEMPTS)
        });
        Enqueue {
            queue: self,
            item,
            principal: Principal::system(),
            tenant_override: None,
        }
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
            metrics::counter!("drover_enqueued_total").increment(1);
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
        let n = out.iter().filter(|r| **r == InsertResult::Inserted).count();
        metrics::counter!("drover_enqueued_total").increment(n as u64);
        Ok(out)
    }

    /// Claims up to `n` items of `kinds` (all kinds when empty) from `lane`
    /// for `worker_id` under a `lease`, and builds each one's context.
    /// Items whose tenant is gone are failed as orphaned; items whose actor
    /// left the tenant are dead-lettered; neither is returned.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a bad lane or kind name; storage errors.
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
        let mut batch = ClaimBatch::default();
        let mut live: HashMap<Uuid, bool> = HashMap::new();
        for item in items {
            let Some(cx) = JobContext::from_claimed(item, sent) else {
                continue;
            };
            let tenant = cx.tenant();
            let is_live = match live.get(&tenant) {
                Some(v) => *v,
                None => {
                    let v = self.tenants.is_live(tenant).await?;
                    live.insert(tenant, v);
                    v
                }
            };
            if !is_live {
                match self
                    .store
                    .item_fail_orphaned(cx.id(), cx.claim().token)
                    .await
                {
                    Ok(()) => {
                        batch.orphaned += 1;
                        metrics::counter!("drover_orphaned_total").increment(1);
                        tracing::warn!(item = %cx.id(), %tenant, "tenant gone: item failed as orphaned");
                    }
                    Err(e) => tracing::warn!(item = %cx.id(), error = %e, "orphan failure refused"),
                }
                continue;
            }
            if !cx.actor().is_nil() && !self.tenants.is_member(tenant, cx.actor()).await? {
                let params = FailParams {
                    error: "actor is no longer a member of the tenant".into(),
                    retry_delay: Duration::ZERO,
                    fatal: true,
                };
                match self.store.item_fail(cx.claim(), &params).await {
                    Ok(_) => {
                        batch.forbidden += 1;
                        metrics::counter!("drover_dead_lettered_total").increment(1);
                    }
                    Err(e) => {
                        tracing::warn!(item = %cx.id(), error = %e, "forbidden failure refused")
                    }
                }
                continue;
            }
            batch.items.push(cx);
        }
        metrics::counter!("drover_claimed_total").increment(batch.items.len() as u64);
        Ok(batch)
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
                metrics::counter!("drover_dead_lettered_total").increment(1);
                tracing::warn!(item = %cx.id(), kind = cx.kind(), error, "item dead-lettered");
            }
            FailOutcome::Requeued { .. } => {
                metrics::counter!("drover_retried_total").increment(1);
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
        self.store.item_purge(before, PURGE_BATCH_DEFAULT).await
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

    /// Cancels a pending or claimed item (operator).
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Conflict`] when already final.
    pub async fn cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        self.store.item_cancel(tenant, id, actor).await
    }

    /// Retries a final item now with a fresh budget (operator).
    ///
    /// # Errors
    /// [`Error::NotFound`]; [`Error::Conflict`] when pending or claimed.
    pub async fn retry(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        self.store.item_retry(tenant, id, actor).await
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

/// A typed enqueue being built; await it to write.
#[must_use = "an enqueue does nothing until awaited"]
pub struct Enqueue<'q> {
    queue: &'q Queue,
    item: Result<NewItem>,
    principal: Principal,
    tenant_override: Option<Uuid>,
}

impl Enqueue<'_> {
    fn map(mut self, f: impl FnOnce(NewItem) -> NewItem) -> Self {
        self.item = self.item.map(f);
        self
    }

    /// Sets the idempotency key.
    pub fn key(self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.map(|i| i.with_key(key))
    }

    /// Runs no earlier than `delay` from now.
    pub fn delay(self, delay: Duration) -> Self {
        let at = Utc::now() + rules::to_chrono(delay);
        self.map(|i| i.with_available_at(at))
    }

    /// Runs no earlier than `at`.
    pub fn run_at(self, at: DateTime<Utc>) -> Self {
        self.map(|i| i.with_available_at(at))
    }

    /// Sets the priority (lower runs first).
    pub fn priority(self, p: i16) -> Self {
        self.map(|i| i.with_priority(p))
    }

    /// Overrides the kind's lane.
    pub fn lane(self, lane: impl Into<String>) -> Self {
        let lane = lane.into();
        self.map(|i| i.with_lane(lane))
    }

    /// Overrides the kind's attempt budget.
    pub fn max_attempts(self, n: i32) -> Self {
        self.map(|i| i.with_max_attempts(n))
    }

    /// Sets the id (for producers that mint their own).
    pub fn id(self, id: Uuid) -> Self {
        self.map(|i| i.with_id(id))
    }

    /// Enqueues as `principal` (its actor, tenant and permissions).
    pub fn principal(mut self, principal: Principal) -> Self {
        self.principal = principal;
        self
    }

    /// Enqueues into `tenant` (a system principal only).
    pub fn tenant(mut self, tenant: Uuid) -> Self {
        self.tenant_override = Some(tenant);
        self
    }

    /// The item as it would be written, after stamping and checks.
    ///
    /// # Errors
    /// As [`Queue::prepare`].
    pub fn build(self) -> Result<NewItem> {
        let mut item = self.item?;
        if let Some(t) = self.tenant_override {
            item.tenant_id = t;
        }
        self.queue.prepare(&self.principal, item)
    }
}

impl<'q> IntoFuture for Enqueue<'q> {
    type Output = Result<Inserted>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Inserted>> + Send + 'q>>;

    fn into_future(self) -> Self::IntoFuture {
        let queue = self.queue;
        Box::pin(async move {
            let item = self.build()?;
            let out = queue.store.item_insert(&item).await?;
            if out.result == InsertResult::Inserted {
                metrics::counter!("drover_enqueued_total").increment(1);
            }
            Ok(out)
        })
    }
}
