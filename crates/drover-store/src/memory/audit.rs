//! [`AuditStore`] in memory: the entries the item transitions appended
//! under the store's lock, read for one tenant's item.

use async_trait::async_trait;
use uuid::Uuid;

use super::MemoryStore;
use crate::{AuditEntry, AuditStore};
use drover_core::error::Result;

#[async_trait]
impl AuditStore for MemoryStore {
    async fn audit_list(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>> {
        Ok(self
            .lock()
            .audit
            .iter()
            .filter(|a| a.tenant_id == tenant && a.item_id == item_id)
            .cloned()
            .collect())
    }
}
