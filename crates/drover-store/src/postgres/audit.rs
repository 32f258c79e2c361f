//! [`AuditStore`] on PostgreSQL: the trail is read under the runtime role
//! scoped to the item's tenant, so row-level security keeps one tenant's
//! entries from another.

use async_trait::async_trait;
use uuid::Uuid;

use super::{PgStore, ops};
use crate::{AuditEntry, AuditStore};
use drover_core::error::Result;

#[async_trait]
impl AuditStore for PgStore {
    async fn audit_list(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>> {
        ops::audit_list(self, tenant, item_id).await
    }
}
