//! [`LinkStore`](crate::links::LinkStore) for the fault-injecting store:
//! every call goes straight to the wrapped store.

use async_trait::async_trait;
use uuid::Uuid;

use super::fault::FaultStore;
use drover_core::error::Result;
use drover_core::item::{Inserted, NewItem};

#[async_trait]
impl crate::links::LinkStore for FaultStore {
    async fn links_insert(&self, items: &[NewItem]) -> Result<Vec<Inserted>> {
        self.inner.links_insert(items).await
    }
    async fn links_of(&self, tenant: Uuid, id: Uuid) -> Result<crate::links::ItemLinks> {
        self.inner.links_of(tenant, id).await
    }
    async fn links_dependencies(
        &self,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Vec<drover_core::item::Item>> {
        self.inner.links_dependencies(tenant, id).await
    }
    async fn batch_create(&self, b: &crate::links::NewBatch) -> Result<crate::links::BatchRow> {
        self.inner.batch_create(b).await
    }
    async fn batch_seal(&self, tenant: Uuid, id: Uuid) -> Result<crate::links::BatchRow> {
        self.inner.batch_seal(tenant, id).await
    }
    async fn batch_get(&self, tenant: Uuid, id: Uuid) -> Result<Option<crate::links::BatchRow>> {
        self.inner.batch_get(tenant, id).await
    }
    async fn batch_list(&self, tenant: Uuid, limit: u32) -> Result<Vec<crate::links::BatchRow>> {
        self.inner.batch_list(tenant, limit).await
    }
    async fn batch_members(
        &self,
        tenant: Uuid,
        id: Uuid,
    ) -> Result<Vec<(drover_core::item::Status, i64)>> {
        self.inner.batch_members(tenant, id).await
    }
    async fn links_census(&self) -> Result<crate::links::LinkCensus> {
        self.inner.links_census().await
    }
}
