//! The sweep lease as a pass holds it: released at the pass's end, or
//! from a task of its own when the pass is dropped, so the next sweeper
//! never waits for a lease nobody uses.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::store::Store;

/// The lease a pass holds: its token, and the instant before which it
/// certainly still holds (measured from before the take or the last
/// renewal was sent, so never later than the store's expiry).
pub(super) struct Held {
    pub(super) token: Uuid,
    pub(super) until: tokio::time::Instant,
}

/// The sweep lease while held; released on drop from a task of its own.
pub(super) struct LeaseGuard {
    pub(super) store: Arc<dyn Store>,
    pub(super) token: Option<Uuid>,
    pub(super) timeout: Duration,
}

impl LeaseGuard {
    /// Gives the lease up; `completed` records the pass as completed.
    /// Returns false when the lease had passed to another before the end.
    pub(super) async fn release(mut self, completed: bool) -> bool {
        let Some(token) = self.token else {
            return true;
        };
        let r = tokio::time::timeout(
            self.timeout,
            self.store.sweep_lease_release(token, completed),
        )
        .await;
        // Only now: a release dropped at its await is retried by Drop.
        self.token = None;
        match r {
            Ok(Ok(held)) => held,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "sweep lease release failed; it passes on its own");
                true
            }
            Err(_) => {
                tracing::warn!("sweep lease release timed out; it passes on its own");
                true
            }
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let Some(token) = self.token.take() else {
            return;
        };
        // A pass dropped mid-way (shutdown, an aborted task): hand the lease
        // back now rather than make the next sweeper wait for it to pass.
        // Outside a runtime it simply passes.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let store = self.store.clone();
            let timeout = self.timeout;
            rt.spawn(async move {
                match tokio::time::timeout(timeout, store.sweep_lease_release(token, false)).await
                {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "sweep lease release failed; it passes on its own"),
                    Err(_) => tracing::warn!("sweep lease release timed out; it passes on its own"),
                }
            });
        }
    }
}
