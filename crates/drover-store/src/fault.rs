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

use crate::{
    AuditEntry, Backend, ClaimParams, ClaimRef, CountRow, FailOutcome, FailParams, Gauges,
    ListFilter, StaleReport, Store, WorkerRow,
};
use drover_core::error::{Error, Opaque, Result};
use drover_core::item::{InsertResult, Inserted, Item, NewItem};
use drover_core::rules::RetryPolicy;

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
    /// The next N outcome writes (fail, defer, release, the handler's
    /// cancel, the orphan failure) fail with `Unavailable` before reaching
    /// the store: nothing lands.
    pub write_fails: AtomicU32,
    /// The next N outcome writes reach the store, land, and then fail with
    /// `Unavailable`: a reply lost after the commit.
    pub write_replies_lost: AtomicU32,
    /// Calls of the outcome writes seen.
    pub write_calls: AtomicU64,
    /// Every `worker_beat` hangs this many milliseconds first (0: none).
    pub beat_hang_ms: AtomicU64,
    /// `worker_beat` calls running now.
    pub beats_in_flight: AtomicU64,
    /// The most `worker_beat` calls ever running at once.
    pub beats_in_flight_max: AtomicU64,
    /// Calls of `sweep_lease_renew` seen.
    pub sweep_renew_calls: AtomicU64,
    /// While set, every `item_insert` and `item_insert_each` waits at
    /// [`Faults::insert_gate`] until the test lets it through: a request
    /// held open mid-flight, deterministically.
    pub insert_hold: AtomicBool,
    /// Where held inserts wait.
    pub insert_gate: Gate,
}

/// A gate held calls wait at: each announces its arrival, then waits for
/// a pass the test hands out.
#[derive(Debug)]
pub struct Gate {
    arrived: tokio::sync::Semaphore,
    passes: tokio::sync::Semaphore,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            arrived: tokio::sync::Semaphore::new(0),
            passes: tokio::sync::Semaphore::new(0),
        }
    }
}

impl Gate {
    /// Waits until a call has arrived at the gate (one arrival per call).
    pub async fn arrived(&self) {
        if let Ok(p) = self.arrived.acquire().await {
            p.forget();
        }
    }

    /// Lets `n` held calls (present or future) through.
    pub fn release(&self, n: usize) {
        self.passes.add_permits(n);
    }

    async fn pass(&self) {
        self.arrived.add_permits(1);
        if let Ok(p) = self.passes.acquire().await {
            p.forget();
        }
    }
}

fn take(n: &AtomicU32) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

impl FaultStore {
    /// Runs one outcome write under the write faults in force.
    async fn outcome<T>(
        &self,
        what: &str,
        write: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        self.faults.write_calls.fetch_add(1, Ordering::SeqCst);
        if take(&self.faults.write_fails) {
            return Err(injected(what));
        }
        let out = write.await;
        if out.is_ok() && take(&self.faults.write_replies_lost) {
            return Err(injected(&format!("{what} (reply lost after commit)")));
        }
        out
    }
}

/// A [`Store`] that forwards to `inner` except where [`Faults`] say.
pub struct FaultStore {
    pub(crate) inner: Arc<dyn Store>,
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

mod passthrough;

fn injected(what: &str) -> Error {
    Error::Unavailable(Opaque::msg(format!("injected fault: {what}")))
}

#[async_trait]
impl Store for FaultStore {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }
    // `item_insert_each_claimed` is not forwarded: the default claims the
    // markers, then inserts through the held `item_insert_each` below, so
    // a test sees a request whose marker is in flight and whose insert
    // waits.
    fn pool_size(&self) -> Option<u32> {
        self.inner.pool_size()
    }
    async fn migrate(&self) -> Result<()> {
        self.inner.migrate().await
    }
    async fn db_now(&self) -> Result<DateTime<Utc>> {
        self.inner.db_now().await
    }
    async fn migration_status(&self) -> Result<super::MigrationStatus> {
        self.inner.migration_status().await
    }
    async fn db_oldest_xact_age(&self) -> Result<Option<std::time::Duration>> {
        self.inner.db_oldest_xact_age().await
    }
    async fn wakeups(&self) -> Result<tokio::sync::broadcast::Receiver<crate::Wake>> {
        self.inner.wakeups().await
    }
}

/// Orchestration calls pass through unfaulted.
#[async_trait]
impl super::ItemStore for FaultStore {
    async fn item_insert(&self, item: &NewItem) -> Result<Inserted> {
        if self.faults.insert_hold.load(Ordering::SeqCst) {
            self.faults.insert_gate.pass().await;
        }
        self.inner.item_insert(item).await
    }

    async fn item_insert_many(&self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        self.inner.item_insert_many(items).await
    }

    async fn item_insert_each(&self, items: &[NewItem]) -> Result<Vec<Result<Inserted>>> {
        if self.faults.insert_hold.load(Ordering::SeqCst) {
            self.faults.insert_gate.pass().await;
        }
        self.inner.item_insert_each(items).await
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

    async fn item_complete_with(
        &self,
        claim: &ClaimRef,
        result: Option<&serde_json::Value>,
    ) -> Result<()> {
        self.inner.item_complete_with(claim, result).await
    }

    async fn item_complete_many_with(&self, done: &[crate::Completion]) -> Result<Vec<Uuid>> {
        self.inner.item_complete_many_with(done).await
    }

    async fn item_progress(
        &self,
        claim: &ClaimRef,
        progress: &drover_core::item::Progress,
    ) -> Result<()> {
        self.inner.item_progress(claim, progress).await
    }

    async fn item_fail(&self, claim: &ClaimRef, params: &FailParams) -> Result<FailOutcome> {
        self.outcome("fail", self.inner.item_fail(claim, params))
            .await
    }

    async fn item_defer(&self, claim: &ClaimRef, delay: Duration) -> Result<DateTime<Utc>> {
        self.outcome("defer", self.inner.item_defer(claim, delay))
            .await
    }

    async fn item_release(&self, claim: &ClaimRef, note: Option<&str>) -> Result<()> {
        self.outcome("release", self.inner.item_release(claim, note))
            .await
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
        self.outcome("cancel", self.inner.item_cancel_claimed(claim, note))
            .await
    }

    async fn item_fail_orphaned(&self, id: Uuid, token: Uuid) -> Result<()> {
        self.outcome("orphan", self.inner.item_fail_orphaned(id, token))
            .await
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

    async fn counts_tenant(&self, tenant: Uuid) -> Result<Vec<CountRow>> {
        self.inner.counts_tenant(tenant).await
    }

    async fn counts_lane(&self, lane: &str) -> Result<Vec<CountRow>> {
        self.inner.counts_lane(lane).await
    }

    async fn counts_settle(&self) -> Result<u64> {
        self.inner.counts_settle().await
    }

    async fn gauges(&self) -> Result<Gauges> {
        self.inner.gauges().await
    }
}

#[async_trait]
impl super::AuditStore for FaultStore {
    async fn audit_list(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>> {
        self.inner.audit_list(tenant, item_id).await
    }
}

#[async_trait]
impl super::WorkerStore for FaultStore {
    async fn worker_beat(&self, row: &WorkerRow) -> Result<()> {
        self.faults.beat_calls.fetch_add(1, Ordering::SeqCst);
        let now = self.faults.beats_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.faults
            .beats_in_flight_max
            .fetch_max(now, Ordering::SeqCst);
        let hang = self.faults.beat_hang_ms.load(Ordering::SeqCst);
        if hang > 0 {
            tokio::time::sleep(Duration::from_millis(hang)).await;
        }
        let r = if self.faults.beat_fails.load(Ordering::SeqCst) {
            Err(injected("worker_beat"))
        } else {
            self.inner.worker_beat(row).await
        };
        self.faults.beats_in_flight.fetch_sub(1, Ordering::SeqCst);
        r
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRow>> {
        self.inner.worker_list().await
    }

    async fn worker_purge(&self, older_than: Duration) -> Result<u64> {
        self.inner.worker_purge(older_than).await
    }
}

#[async_trait]
impl super::SweepStore for FaultStore {
    async fn sweep_lease_take(&self, holder: &str, lease: Duration) -> Result<Option<Uuid>> {
        self.inner.sweep_lease_take(holder, lease).await
    }

    async fn sweep_lease_renew(&self, token: Uuid, lease: Duration) -> Result<()> {
        self.faults.sweep_renew_calls.fetch_add(1, Ordering::SeqCst);
        self.inner.sweep_lease_renew(token, lease).await
    }

    async fn sweep_lease_release(&self, token: Uuid, completed: bool) -> Result<bool> {
        self.inner.sweep_lease_release(token, completed).await
    }

    async fn sweep_last_pass(&self) -> Result<Option<DateTime<Utc>>> {
        self.inner.sweep_last_pass().await
    }
}

#[async_trait]
impl crate::orchestration::OrchestrationStore for FaultStore {
    async fn orchestration_insert(
        &self,
        new: &crate::orchestration::NewOrchestration,
        first: &NewItem,
    ) -> Result<crate::orchestration::OrchestrationInserted> {
        self.inner.orchestration_insert(new, first).await
    }
    async fn orchestration_get(
        &self,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Option<crate::orchestration::Orchestration>> {
        self.inner.orchestration_get(tenant, id).await
    }
    async fn orchestration_list(
        &self,
        filter: &crate::orchestration::OrchestrationFilter,
    ) -> Result<Vec<crate::orchestration::Orchestration>> {
        self.inner.orchestration_list(filter).await
    }
    async fn orchestration_advance(
        &self,
        claim: &ClaimRef,
        t: &crate::orchestration::Transition,
    ) -> Result<crate::orchestration::Orchestration> {
        self.inner.orchestration_advance(claim, t).await
    }
    async fn orchestration_update(
        &self,
        t: &crate::orchestration::Transition,
    ) -> Result<crate::orchestration::Orchestration> {
        self.inner.orchestration_update(t).await
    }
    async fn orchestration_due(
        &self,
        limit: u32,
    ) -> Result<Vec<crate::orchestration::Orchestration>> {
        self.inner.orchestration_due(limit).await
    }
    async fn orchestration_dead_steps(
        &self,
        limit: u32,
    ) -> Result<Vec<crate::orchestration::DeadStep>> {
        self.inner.orchestration_dead_steps(limit).await
    }
    async fn orchestration_parked_count(&self) -> Result<i64> {
        self.inner.orchestration_parked_count().await
    }
    async fn orchestration_request_cancel(
        &self,
        tenant: Uuid,
        id: Uuid,
        expected_version: i64,
    ) -> Result<crate::orchestration::Orchestration> {
        self.inner
            .orchestration_request_cancel(tenant, id, expected_version)
            .await
    }
    async fn orchestration_purge(&self, before: DateTime<Utc>, limit: u32) -> Result<u64> {
        self.inner.orchestration_purge(before, limit).await
    }
    async fn orchestration_signal(
        &self,
        signal: &crate::orchestration::Signal,
    ) -> Result<crate::orchestration::SignalOutcome> {
        self.inner.orchestration_signal(signal).await
    }
    async fn orchestration_signal_list(
        &self,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Vec<crate::orchestration::Signal>> {
        self.inner.orchestration_signal_list(tenant, id).await
    }
}

/// Reconciler calls pass through unfaulted.
#[async_trait]
impl crate::reconcile::ReconcileStore for FaultStore {
    async fn reconcile_checkpoint_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
    ) -> Result<Option<crate::reconcile::Checkpoint>> {
        self.inner
            .reconcile_checkpoint_get(tenant, reconciler)
            .await
    }
    async fn reconcile_checkpoint_list(&self) -> Result<Vec<crate::reconcile::Checkpoint>> {
        self.inner.reconcile_checkpoint_list().await
    }
    async fn reconcile_apply(
        &self,
        batch: &crate::reconcile::ApplyBatch,
    ) -> Result<crate::reconcile::ApplyReport> {
        self.inner.reconcile_apply(batch).await
    }
    async fn reconcile_local_put_valid(
        &self,
        put: &crate::reconcile::LocalPut,
    ) -> Result<crate::reconcile::SyncRecord> {
        self.inner.reconcile_local_put_valid(put).await
    }
    async fn reconcile_purge_deleted(
        &self,
        reconciler: &str,
        before: chrono::DateTime<chrono::Utc>,
        limit: u32,
    ) -> Result<u64> {
        self.inner
            .reconcile_purge_deleted(reconciler, before, limit)
            .await
    }
    async fn reconcile_record_get(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
    ) -> Result<Option<crate::reconcile::SyncRecord>> {
        self.inner
            .reconcile_record_get(tenant, reconciler, key)
            .await
    }
    async fn reconcile_record_list(
        &self,
        filter: &crate::reconcile::RecordFilter,
    ) -> Result<Vec<crate::reconcile::SyncRecord>> {
        self.inner.reconcile_record_list(filter).await
    }
    async fn reconcile_review_resolve(
        &self,
        tenant: Uuid,
        reconciler: &str,
        key: &str,
        resolution: crate::reconcile::Resolution,
    ) -> Result<crate::reconcile::SyncRecord> {
        self.inner
            .reconcile_review_resolve(tenant, reconciler, key, resolution)
            .await
    }
}

/// Schedules pass straight through: no faults are injected there yet.
#[async_trait]
impl crate::schedule::ScheduleStore for FaultStore {
    async fn schedule_upsert(
        &self,
        decl: &crate::schedule::ScheduleDecl,
    ) -> Result<crate::schedule::ScheduleRow> {
        self.inner.schedule_upsert(decl).await
    }
    async fn schedule_list(&self) -> Result<Vec<crate::schedule::ScheduleRow>> {
        self.inner.schedule_list().await
    }
    async fn schedule_advance(
        &self,
        params: &crate::schedule::AdvanceParams,
    ) -> Result<crate::schedule::AdvanceOutcome> {
        self.inner.schedule_advance(params).await
    }
    async fn schedule_purge(&self, before: DateTime<Utc>) -> Result<u64> {
        self.inner.schedule_purge(before).await
    }
}

#[async_trait]
impl crate::events::EventStore for FaultStore {
    async fn event_append_valid(
        &self,
        events: &[crate::events::NewEvent],
    ) -> Result<Vec<crate::events::EventAppended>> {
        self.inner.event_append_valid(events).await
    }
    async fn event_read(
        &self,
        tenant: Uuid,
        after: i64,
        topics: &[String],
        limit: u32,
    ) -> Result<Vec<crate::events::Event>> {
        self.inner.event_read(tenant, after, topics, limit).await
    }
    async fn event_head(&self, tenant: Uuid) -> Result<crate::events::EventHead> {
        self.inner.event_head(tenant).await
    }
    async fn event_tenants(&self, after: Option<Uuid>, limit: u32) -> Result<Vec<Uuid>> {
        self.inner.event_tenants(after, limit).await
    }
    async fn event_purge(&self, before: DateTime<Utc>) -> Result<crate::events::EventPurge> {
        self.inner.event_purge(before).await
    }
}

#[async_trait]
impl crate::outbox::OutboxStore for FaultStore {
    async fn outbox_insert(&self, row: &crate::outbox::NewOutboxRow) -> Result<()> {
        self.inner.outbox_insert(row).await
    }
    async fn outbox_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<crate::outbox::OutboxRow>> {
        self.inner.outbox_get(tenant, id).await
    }
    async fn outbox_claim(
        &self,
        params: &crate::outbox::OutboxClaimParams,
    ) -> Result<Vec<crate::outbox::OutboxRow>> {
        self.inner.outbox_claim(params).await
    }
    async fn outbox_complete(&self, claims: &[crate::outbox::OutboxClaim]) -> Result<Vec<Uuid>> {
        self.inner.outbox_complete(claims).await
    }
    async fn outbox_fail(
        &self,
        claim: &crate::outbox::OutboxClaim,
        params: &crate::outbox::OutboxFailParams,
    ) -> Result<crate::outbox::OutboxFailOutcome> {
        self.inner.outbox_fail(claim, params).await
    }
    async fn outbox_list(
        &self,
        filter: &crate::outbox::OutboxFilter,
    ) -> Result<Vec<crate::outbox::OutboxRow>> {
        self.inner.outbox_list(filter).await
    }
    async fn outbox_stats(&self) -> Result<crate::outbox::OutboxStats> {
        self.inner.outbox_stats().await
    }
    async fn outbox_lag(&self) -> Result<f64> {
        self.inner.outbox_lag().await
    }
    async fn outbox_purge(&self, before: DateTime<Utc>, rotate_after: Duration) -> Result<u64> {
        self.inner.outbox_purge(before, rotate_after).await
    }
}

/// Lane states pass straight through: no faults are injected there yet.
#[async_trait]
impl crate::lane::LaneStore for FaultStore {
    async fn lane_set(
        &self,
        params: &crate::lane::LaneSetParams,
    ) -> Result<crate::lane::LaneState> {
        self.inner.lane_set(params).await
    }
    async fn lane_list(&self) -> Result<Vec<crate::lane::LaneState>> {
        self.inner.lane_list().await
    }
}

/// Limit settings pass straight through (the claim that enforces them is
/// the inner store's, faulted as every claim is).
#[async_trait]
impl crate::limits::LimitStore for FaultStore {
    async fn limit_set(
        &self,
        scope: &crate::limits::LimitScope,
        source: crate::limits::LimitSource,
        spec: crate::limits::LimitSpec,
        actor: Uuid,
    ) -> Result<crate::limits::LimitSetting> {
        self.inner.limit_set(scope, source, spec, actor).await
    }
    async fn limit_clear(
        &self,
        scope: &crate::limits::LimitScope,
        source: crate::limits::LimitSource,
    ) -> Result<bool> {
        self.inner.limit_clear(scope, source).await
    }
    async fn limit_settings(&self) -> Result<Vec<crate::limits::LimitSetting>> {
        self.inner.limit_settings().await
    }
    async fn limit_usage(&self) -> Result<Vec<crate::limits::LimitUsage>> {
        self.inner.limit_usage().await
    }
    async fn limits_apply(&self, lane: &str, kinds: &[String]) -> Result<bool> {
        self.inner.limits_apply(lane, kinds).await
    }
    async fn order_blocker(
        &self,
        item: &drover_core::item::Item,
        on_dead_letter: crate::limits::OnDeadLetter,
    ) -> Result<Option<crate::limits::OrderBlocker>> {
        self.inner.order_blocker(item, on_dead_letter).await
    }
}

/// Tokens and markers pass straight through: no faults are injected there.
#[async_trait]
impl crate::access::AccessStore for FaultStore {
    async fn token_insert(&self, t: &crate::access::NewToken) -> Result<crate::access::TokenRow> {
        self.inner.token_insert(t).await
    }
    async fn token_by_hash(&self, hash: &str) -> Result<Option<crate::access::TokenRow>> {
        self.inner.token_by_hash(hash).await
    }
    async fn token_list(&self) -> Result<Vec<crate::access::TokenRow>> {
        self.inner.token_list().await
    }
    async fn token_revoke(&self, id: Uuid) -> Result<bool> {
        self.inner.token_revoke(id).await
    }
    async fn marker_begin(
        &self,
        k: &crate::access::MarkerKey,
        fingerprint: &str,
        retention: std::time::Duration,
        stale_after: std::time::Duration,
    ) -> Result<crate::access::MarkerBegin> {
        self.inner
            .marker_begin(k, fingerprint, retention, stale_after)
            .await
    }
    async fn marker_finish(
        &self,
        k: &crate::access::MarkerKey,
        status: u16,
        body: &str,
    ) -> Result<()> {
        self.inner.marker_finish(k, status, body).await
    }
    async fn marker_release(&self, k: &crate::access::MarkerKey) -> Result<()> {
        self.inner.marker_release(k).await
    }
    async fn marker_begin_many(
        &self,
        claims: &[crate::access::MarkerClaim],
        retention: std::time::Duration,
        stale_after: std::time::Duration,
    ) -> Result<Vec<crate::access::MarkerBegin>> {
        self.inner
            .marker_begin_many(claims, retention, stale_after)
            .await
    }
    async fn marker_finish_many(&self, answers: &[crate::access::MarkerAnswer]) -> Result<()> {
        self.inner.marker_finish_many(answers).await
    }
    async fn marker_purge(&self, batch: u32) -> Result<u64> {
        self.inner.marker_purge(batch).await
    }
}

#[async_trait]
impl crate::projector::ProjectorStore for FaultStore {
    async fn projector_lease_take(
        &self,
        params: &crate::projector::LeaseParams,
    ) -> Result<Option<crate::projector::ProjectorLease>> {
        self.inner.projector_lease_take(params).await
    }
    async fn projector_lease_release(
        &self,
        lease: &crate::projector::ProjectorLease,
    ) -> Result<()> {
        self.inner.projector_lease_release(lease).await
    }
    async fn projector_apply_valid(
        &self,
        lease: &crate::projector::ProjectorLease,
        renew: Duration,
        events: &[crate::events::Event],
        projector: &dyn crate::projector::Projector,
    ) -> Result<crate::projector::ProjectorLease> {
        self.inner
            .projector_apply_valid(lease, renew, events, projector)
            .await
    }
    async fn projector_rebuild(
        &self,
        lease: &crate::projector::ProjectorLease,
        renew: Duration,
        projector: &dyn crate::projector::Projector,
    ) -> Result<crate::projector::ProjectorLease> {
        self.inner.projector_rebuild(lease, renew, projector).await
    }
    async fn projector_request_rebuild(
        &self,
        projector: &str,
        tenant: Option<Uuid>,
    ) -> Result<u64> {
        self.inner
            .projector_request_rebuild(projector, tenant)
            .await
    }
    async fn projector_checkpoints(
        &self,
        projector: Option<&str>,
    ) -> Result<Vec<crate::projector::CheckpointRow>> {
        self.inner.projector_checkpoints(projector).await
    }
    async fn projector_pending(
        &self,
        projector: &str,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Uuid>> {
        self.inner.projector_pending(projector, after, limit).await
    }
    async fn projector_lag(&self, projector: &str) -> Result<crate::projector::ProjectorLag> {
        self.inner.projector_lag(projector).await
    }
    async fn projector_seen(&self, projector: &str) -> Result<()> {
        self.inner.projector_seen(projector).await
    }
    async fn projector_forget(&self, before: DateTime<Utc>) -> Result<u64> {
        self.inner.projector_forget(before).await
    }
}
