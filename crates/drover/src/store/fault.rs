//! A store wrapper that injects faults into chosen calls, for tests of the
//! runtime's behaviour when the database misbehaves. Every call not
//! faulted is passed through unchanged. Costs nothing in production: it
//! exists only with the `test-util` feature.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::{Error, Opaque, Result};
use crate::item::{InsertResult, Inserted, Item, NewItem};
use crate::rules::RetryPolicy;
use crate::store::{
    AuditEntry, Backend, ClaimParams, ClaimRef, CountRow, FailOutcome, FailParams, Gauges,
    ListFilter, StaleReport, Store, WorkerRow,
};

/// The faults to inject; change them at any time.
#[derive(Debug, Default)]
pub struct Faults {
    /// `worker_beat` fails.
    pub beat_fails: AtomicBool,
    /// `item_extend_lease` fails with `Unavailable`.
    pub extend_fails: AtomicBool,
    /// The next N `item_extend_lease` calls hang this many milliseconds
    /// first (see `extend_hang_ms`).
    pub extend_hangs: AtomicU32,
    /// How long a hanging renewal hangs, in milliseconds.
    pub extend_hang_ms: AtomicU64,
    /// `item_claim` fails with `Unavailable`.
    pub claim_fails: AtomicBool,
    /// Calls of `item_extend_lease` seen.
    pub extend_calls: AtomicU64,
    /// Calls of `worker_beat` seen.
    pub beat_calls: AtomicU64,
}

/// A [`Store`] that forwards to `inner` except where [`Faults`] say.
pub struct FaultStore {
    inner: Arc<dyn Store>,
    /// The faults in force.
    pub faults: Arc<Faults>,
}

impl FaultStore {
    /// Wraps `inner` with no faults in force.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        FaultStore {
            inner,
            faults: Arc::new(Faults::default()),
        }
    }
}

fn injected(what: &str) -> Error {
    Error::Unavailable(Opaque::msg(format!("injected fault: {what}")))
}

#[async_trait]
impl Store for FaultStore {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }
    fn pool_size(&self) -> Option<u32> {
        self.inner.pool_size()
    }
    async fn migrate(&self) -> Result<()> {
        self.inner.migrate().await
    }
    async fn migration_status(&self) -> Result<super::MigrationStatus> {
        self.inner.migration_status().await
    }
    async fn db_oldest_xact_age(&self) -> Result<Option<std::time::Duration>> {
        self.inner.db_oldest_xact_age().await
    }
    async fn item_insert(&self, item: &NewItem) -> Result<Inserted> {
        self.inner.item_insert(item).await
    }
    async fn item_insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        self.inner.item_insert_many(items).await
    }
    async fn item_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<Item>> {
        self.inner.item_get(tenant, id).await
    }
    async fn item_get_by_key(&self, tenant: Uuid, key: &str) -> Result<Option<Item>> {
        self.inner.item_get_by_key(tenant, key).await
    }
    async fn item_claim(&self, params: &ClaimParams) -> Result<Vec<Item>> {
        if self.faults.claim_fails.load(Ordering::SeqCst) {
            return Err(injected("claim"));
        }
        self.inner.item_claim(params).await
    }
    async fn item_complete(&self, claim: &ClaimRef) -> Result<()> {
        self.inner.item_complete(claim).await
    }
    async fn item_complete_many(&self, claims: &[ClaimRef]) -> Result<Vec<Uuid>> {
        self.inner.item_complete_many(claims).await
    }
    async fn item_fail(&self, claim: &ClaimRef, params: &FailParams) -> Result<FailOutcome> {
        self.inner.item_fail(claim, params).await
    }
    async fn item_defer(&self, claim: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>> {
        self.inner.item_defer(claim, delay).await
    }
    async fn item_release(&self, claim: &ClaimRef, note: Option<&str>) -> Result<()> {
        self.inner.item_release(claim, note).await
    }
    async fn item_extend_lease(&self, claim: &ClaimRef, lease: Duration) -> Result<DateTime<Utc>> {
        self.faults.extend_calls.fetch_add(1, Ordering::SeqCst);
        let hang = self
            .faults
            .extend_hangs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if hang {
            let ms = self.faults.extend_hang_ms.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if self.faults.extend_fails.load(Ordering::SeqCst) {
            return Err(injected("extend_lease"));
        }
        self.inner.item_extend_lease(claim, lease).await
    }
    async fn item_cancel_claimed(&self, claim: &ClaimRef, note: &str) -> Result<()> {
        self.inner.item_cancel_claimed(claim, note).await
    }
    async fn item_fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()> {
        self.inner.item_fail_orphaned(id, token).await
    }
    async fn item_stale_tenants(&self, limit: u32) -> Result<Vec<Uuid>> {
        self.inner.item_stale_tenants(limit).await
    }
    async fn item_requeue_stale(
        &self,
        tenant: Uuid,
        limit: u32,
        policy: &RetryPolicy,
    ) -> Result<StaleReport> {
        self.inner.item_requeue_stale(tenant, limit, policy).await
    }
    async fn item_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.inner.item_purge(before, batch).await
    }
    async fn item_cancel(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        self.inner.item_cancel(tenant, id, actor).await
    }
    async fn item_retry(&self, tenant: Uuid, id: Uuid, actor: Uuid) -> Result<Item> {
        self.inner.item_retry(tenant, id, actor).await
    }
    async fn item_list(&self, filter: &ListFilter) -> Result<Vec<Item>> {
        self.inner.item_list(filter).await
    }
    async fn counts(&self) -> Result<Vec<CountRow>> {
        self.inner.counts().await
    }
    async fn gauges(&self) -> Result<Gauges> {
        self.inner.gauges().await
    }
    async fn audit_list(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>> {
        self.inner.audit_list(tenant, item_id).await
    }
    async fn worker_beat(&self, row: &WorkerRow) -> Result<()> {
        self.faults.beat_calls.fetch_add(1, Ordering::SeqCst);
        if self.faults.beat_fails.load(Ordering::SeqCst) {
            return Err(injected("worker_beat"));
        }
        self.inner.worker_beat(row).await
    }
    async fn worker_list(&self) -> Result<Vec<WorkerRow>> {
        self.inner.worker_list().await
    }
    async fn wakeups(&self) -> Result<tokio::sync::broadcast::Receiver<String>> {
        self.inner.wakeups().await
    }
    async fn sweep_try_lock(&self) -> Result<bool> {
        self.inner.sweep_try_lock().await
    }
    async fn sweep_unlock(&self) -> Result<()> {
        self.inner.sweep_unlock().await
    }
}
