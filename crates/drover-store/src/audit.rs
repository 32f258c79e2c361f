//! The audit entity's seam: [`AuditStore`] reads the trail a dead letter,
//! an operator's cancel and an operator's retry leave. Entries are written
//! by the item transitions themselves, in their own transaction (so no
//! transition lands without its entry); only reading is a call of its own.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use drover_core::error::Result;

/// An audit entry: a dead letter, an operator's cancel or retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// The tenant.
    pub tenant_id: Uuid,
    /// The item.
    pub item_id: Uuid,
    /// `dead_letter`, `cancel` or `retry`.
    pub action: String,
    /// Who did it (nil for the system).
    pub actor: Uuid,
    /// Free text (the last error for a dead letter).
    pub detail: Option<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// The audit trail. A supertrait of [`Store`](super::Store).
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// The audit entries of one item, oldest first.
    async fn audit_list(&self, tenant: Uuid, item_id: Uuid) -> Result<Vec<AuditEntry>>;
}
