//! What the console reads around one item and one tenant: an item's runs
//! (the attempt history; the records and their rules are
//! [`crate::store::runs`]'s) and one tenant's counts (a tenant-scoped
//! overview).

use uuid::Uuid;

use crate::error::Result;
use crate::queue::Queue;
use crate::store::CountRow;
use crate::store::runs::ItemRun;

impl Queue {
    /// `tenant`'s item `id`'s last runs, newest first (at most
    /// [`RUNS_KEPT`](crate::store::runs::RUNS_KEPT)): worker, start, end,
    /// outcome and error of each claim that ended.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn runs(&self, tenant: Uuid, id: Uuid) -> Result<Vec<ItemRun>> {
        self.store.item_runs(tenant, id).await
    }

    /// Counts per lane, kind and status of `tenant`'s items: exact, from
    /// the store's count rollup and indexes narrowed to the tenant.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn counts_tenant(&self, tenant: Uuid) -> Result<Vec<CountRow>> {
        self.store.counts_tenant(tenant).await
    }
}
