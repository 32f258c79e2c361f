//! The tenant directory the host implements: is a tenant still live, is an
//! actor still a member. The queue asks before handing an item out, so work
//! for a deleted tenant is failed as orphaned instead of run, and work
//! enqueued by an actor who has since left still runs, under the tenant's
//! service context (nil actor) rather than on their behalf. A directory
//! call that errors hands the claimed batch back unstarted (no attempt
//! spent) and fails the claim.

use async_trait::async_trait;
use uuid::Uuid;

use crate::error::Result;

/// The host's view of its tenants.
#[async_trait]
pub trait TenantDirectory: Send + Sync + 'static {
    /// True while `tenant` exists.
    async fn is_live(&self, tenant: Uuid) -> Result<bool>;

    /// True while `actor` may act in `tenant` (the nil actor, the system,
    /// always may).
    async fn is_member(&self, tenant: Uuid, actor: Uuid) -> Result<bool>;
}

/// The default directory: every tenant is live and every actor a member.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllLive;

#[async_trait]
impl TenantDirectory for AllLive {
    async fn is_live(&self, _tenant: Uuid) -> Result<bool> {
        Ok(true)
    }

    async fn is_member(&self, _tenant: Uuid, _actor: Uuid) -> Result<bool> {
        Ok(true)
    }
}
