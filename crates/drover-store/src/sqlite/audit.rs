//! [`AuditStore`] on SQLite: the trail is read on a reader connection,
//! filtered by the item's tenant in the statement.

use async_trait::async_trait;
use uuid::Uuid;

use super::SqliteStore;
use crate::{AuditEntry, AuditStore};
use drover_core::error::Result;

#[async_trait]
impl AuditStore for SqliteStore {
    async fn audit_list(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>> {
        self.read_audit(tenant, item_id).await
    }
}
