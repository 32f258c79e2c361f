//! An item's runs as the queue reads them (the attempt history; the
//! records and their rules are [`crate::store::runs`]'s).

use uuid::Uuid;

use crate::error::Result;
use crate::queue::Queue;
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
}
