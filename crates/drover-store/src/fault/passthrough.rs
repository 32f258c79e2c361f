//! The stores that pass through the fault store unfaulted: the run history,
//! the throughput history, the vacuum calls and the rate settings.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::FaultStore;
use crate::runs::{ItemRun, RunStore};
use crate::vacuum::{TableGarbage, TableVacuum, VacuumStore};
use drover_core::error::Result;

#[async_trait]
impl RunStore for FaultStore {
    async fn item_runs(&self, tenant: Uuid, id: Uuid) -> Result<Vec<ItemRun>> {
        self.inner.item_runs(tenant, id).await
    }
    async fn item_runs_purge(&self, before: DateTime<Utc>, batch: u32) -> Result<u64> {
        self.inner.item_runs_purge(before, batch).await
    }
}

#[async_trait]
impl VacuumStore for FaultStore {
    async fn table_garbage(&self) -> Result<Vec<TableGarbage>> {
        self.inner.table_garbage().await
    }

    async fn table_vacuum(&self, table: &str) -> Result<TableVacuum> {
        self.inner.table_vacuum(table).await
    }
}

#[async_trait]
impl crate::throughput::ThroughputStore for FaultStore {
    async fn throughput(
        &self,
        q: &crate::throughput::ThroughputQuery,
    ) -> Result<Vec<crate::throughput::ThroughputRow>> {
        self.inner.throughput(q).await
    }

    async fn items_running(&self) -> Result<Vec<crate::throughput::RunningRow>> {
        self.inner.items_running().await
    }

    async fn wait_record(
        &self,
        at: chrono::DateTime<chrono::Utc>,
        ages: &[(String, f64)],
    ) -> Result<u64> {
        self.inner.wait_record(at, ages).await
    }

    async fn wait_history(
        &self,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<crate::throughput::WaitRow>> {
        self.inner.wait_history(since).await
    }
}

/// Rate settings pass straight through (the claim that enforces them is
/// the inner store's, faulted as every claim is).
#[async_trait]
impl crate::rates::RateStore for FaultStore {
    async fn rate_set(
        &self,
        scope: &crate::limits::LimitScope,
        source: crate::limits::LimitSource,
        rate: crate::rates::Rate,
        actor: Uuid,
    ) -> Result<crate::rates::RateSetting> {
        self.inner.rate_set(scope, source, rate, actor).await
    }
    async fn rate_clear(
        &self,
        scope: &crate::limits::LimitScope,
        source: crate::limits::LimitSource,
    ) -> Result<bool> {
        self.inner.rate_clear(scope, source).await
    }
    async fn rate_settings(&self) -> Result<Vec<crate::rates::RateSetting>> {
        self.inner.rate_settings().await
    }
    async fn rate_usage(&self) -> Result<Vec<crate::rates::RateUsage>> {
        self.inner.rate_usage().await
    }
    async fn rate_cells_purge(&self, batch: u32) -> Result<u64> {
        self.inner.rate_cells_purge(batch).await
    }
    async fn rate_wait(&self, lane: &str, kinds: &[String]) -> Result<Option<std::time::Duration>> {
        self.inner.rate_wait(lane, kinds).await
    }
    async fn rate_cells(
        &self,
        keys: &[String],
    ) -> Result<(
        chrono::DateTime<chrono::Utc>,
        Vec<(String, chrono::DateTime<chrono::Utc>)>,
    )> {
        self.inner.rate_cells(keys).await
    }
}

/// Closures pass straight through (the claim that enforces them is the
/// inner store's, faulted as every claim is).
#[async_trait]
impl crate::closures::ClosureStore for FaultStore {
    async fn close_until(
        &self,
        kind: &str,
        tenant: Uuid,
        group: Option<&str>,
        until: chrono::DateTime<chrono::Utc>,
        by_item: Option<Uuid>,
        actor: Uuid,
    ) -> Result<crate::closures::Closure> {
        self.inner
            .close_until(kind, tenant, group, until, by_item, actor)
            .await
    }
    async fn reopen(&self, kind: &str, tenant: Uuid, group: Option<&str>) -> Result<bool> {
        self.inner.reopen(kind, tenant, group).await
    }
    async fn closures(&self) -> Result<Vec<crate::closures::Closure>> {
        self.inner.closures().await
    }
}

/// Fair-share settings pass straight through (the claim that shares is the
/// inner store's, faulted as every claim is).
#[async_trait]
impl crate::fairness::FairnessStore for FaultStore {
    async fn fair_weight_set(
        &self,
        tenant: Uuid,
        weight: u32,
        actor: Uuid,
    ) -> Result<crate::fairness::FairWeight> {
        self.inner.fair_weight_set(tenant, weight, actor).await
    }
    async fn fair_weight_clear(&self, tenant: Uuid) -> Result<bool> {
        self.inner.fair_weight_clear(tenant).await
    }
    async fn fair_lane_set(
        &self,
        lane: &str,
        on: bool,
        by_group: bool,
        actor: Uuid,
    ) -> Result<crate::fairness::FairLane> {
        self.inner.fair_lane_set(lane, on, by_group, actor).await
    }
    async fn fair_group_passes(&self, lane: &str, tenant: Uuid) -> Result<Vec<(String, i64, u64)>> {
        self.inner.fair_group_passes(lane, tenant).await
    }
    async fn fair_settings(&self) -> Result<crate::fairness::FairSettings> {
        self.inner.fair_settings().await
    }
    async fn fair_shares(&self) -> Result<Vec<crate::fairness::FairShare>> {
        self.inner.fair_shares().await
    }
    async fn fair_passes_purge(&self, batch: u32) -> Result<u64> {
        self.inner.fair_passes_purge(batch).await
    }
}

#[async_trait]
impl crate::parking::ParkStore for FaultStore {
    async fn park_pass(&self) -> Result<crate::parking::ParkPass> {
        self.inner.park_pass().await
    }
    async fn parked_count(&self) -> Result<u64> {
        self.inner.parked_count().await
    }
}
