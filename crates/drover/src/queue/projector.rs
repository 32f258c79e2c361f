//! A projector's standing as an operator reads it: where its checkpoint
//! is against the head of every tenant's log (`drover projector status`,
//! [`Queue::projector_status`]). The runner and its lag gauges are
//! [`crate::projector`]'s; this read lives with the queue's API, which
//! answers it, and the projector module keeps its public paths.
//!
//! Invariant: every tenant with events or a checkpoint is listed (the
//! tenants are paged through, no cap); a tenant the projector has not run
//! for yet shows position 0.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::error::Result;
use crate::queue::Queue;
use crate::store::Store;

/// Tenants read per page by [`status`].
const STATUS_PAGE: u32 = 1_000;

/// One tenant's checkpoint against its log's head.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantStatus {
    /// The tenant.
    pub tenant: Uuid,
    /// The last position applied.
    pub position: i64,
    /// The log's newest position.
    pub head: i64,
    /// `head - position`.
    pub behind_events: i64,
    /// Age of the oldest event not applied yet (0 when caught up).
    pub behind_seconds: f64,
    /// The runner holding the lease, while one does.
    pub holder: Option<String>,
    /// When its lease passes.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// A rebuild is asked for and has not run yet.
    pub rebuild_requested: bool,
    /// Rebuilds run so far.
    pub rebuilds: i32,
}

/// The checkpoint of `projector` against the head of every tenant's log
/// (tenants it has not run for yet show position 0), for `drover projector
/// status`. Pages through every tenant with events (no cap); reads each
/// tenant's head and oldest unapplied event, so it is an operator's read:
/// the runner's lag gauges come from one aggregate statement instead
/// ([`ProjectorStore::projector_lag`](crate::store::projector::ProjectorStore::projector_lag)).
///
/// # Errors
/// Storage errors.
pub async fn status(store: &dyn Store, projector: &str) -> Result<Vec<TenantStatus>> {
    let rows = store.projector_checkpoints(Some(projector)).await?;
    let mut tenants: BTreeSet<Uuid> = rows.iter().map(|r| r.tenant).collect();
    let mut after = None;
    loop {
        let page = store.event_tenants(after, STATUS_PAGE).await?;
        let full = page.len() >= STATUS_PAGE as usize;
        after = page.last().copied();
        tenants.extend(page);
        if !full {
            break;
        }
    }
    let now = store.db_now().await?;
    let mut out = Vec::with_capacity(tenants.len());
    for tenant in tenants {
        let row = rows.iter().find(|r| r.tenant == tenant);
        let position = row.map_or(0, |r| r.position);
        let head = store.event_head(tenant).await?.position;
        let behind_seconds = if head > position {
            store
                .event_read(tenant, position, &[], 1)
                .await?
                .first()
                .map_or(0.0, |e| {
                    (now - e.created_at).num_milliseconds().max(0) as f64 / 1000.0
                })
        } else {
            0.0
        };
        out.push(TenantStatus {
            tenant,
            position,
            head,
            behind_events: (head - position).max(0),
            behind_seconds,
            holder: row.and_then(|r| r.holder.clone()),
            lease_expires_at: row.and_then(|r| r.lease_expires_at),
            rebuild_requested: row.is_some_and(|r| r.rebuild_requested),
            rebuilds: row.map_or(0, |r| r.rebuilds),
        });
    }
    Ok(out)
}

impl Queue {
    /// Where `projector` stands in each tenant's log ([`status`]): an
    /// operator's read.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn projector_status(&self, projector: &str) -> Result<Vec<TenantStatus>> {
        status(self.store.as_ref(), projector).await
    }
}
