//! The stores that pass through the fault store unfaulted: the run history,
//! the throughput history and the vacuum calls.

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
}
