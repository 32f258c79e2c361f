//! A test hook between a batch's plan and its write (feature `test-util`
//! only; without it the call compiles to nothing): a test pauses one batch
//! of one (tenant, reconciler) there, writes beside it, and lets it go, so
//! the race of a batch with a local put is run deterministically, with no
//! sleep. A pause is taken by the first batch that reaches it, once.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tokio::sync::oneshot;
use uuid::Uuid;

/// The two ends of a pause a test holds.
#[derive(Debug)]
pub struct PlanPause {
    /// Fires when the batch has planned and waits before its write.
    pub reached: oneshot::Receiver<()>,
    /// Send (or drop) to let the batch write.
    pub release: oneshot::Sender<()>,
}

type Ends = (oneshot::Sender<()>, oneshot::Receiver<()>);

fn pauses() -> &'static Mutex<HashMap<(Uuid, String), Ends>> {
    static PAUSES: OnceLock<Mutex<HashMap<(Uuid, String), Ends>>> = OnceLock::new();
    PAUSES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Pauses the next batch of `reconciler` for `tenant` after its plan.
/// Use a tenant of the test's own: the registry is per process.
pub fn pause_after_plan(tenant: Uuid, reconciler: &str) -> PlanPause {
    let (reached_tx, reached) = oneshot::channel();
    let (release, release_rx) = oneshot::channel();
    pauses()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert((tenant, reconciler.to_owned()), (reached_tx, release_rx));
    PlanPause { reached, release }
}

/// Called by a backend between a batch's plan and its write: waits while a
/// test holds a pause for this batch.
pub(crate) async fn after_plan(tenant: Uuid, reconciler: &str) {
    let ends = pauses()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&(tenant, reconciler.to_owned()));
    if let Some((reached, release)) = ends {
        let _ = reached.send(());
        let _ = release.await;
    }
}
