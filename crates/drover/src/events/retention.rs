//! The event log's retention as a sweep step: register
//! [`EventRetention`] on a worker (`WorkerBuilder::sweep_step`) and every
//! sweep pass purges events older than the retention that every projector
//! checkpoint has passed (on PostgreSQL by truncating the ring's oldest
//! child; see [`EventStore::event_purge`](super::EventStore::event_purge)).
//!
//! The same step forgets removed projectors: the checkpoint rows of a
//! projector no runner has recorded alive for the retention, and at least
//! [`CHECKPOINT_FORGET_MIN`], are deleted
//! ([`ProjectorStore::projector_forget`](crate::projector::ProjectorStore::projector_forget)),
//! so a projector taken out of the code stops pinning the log. A runner
//! records itself alive every few seconds, so a live projector's
//! checkpoints are never forgotten; the floor keeps a projector whose
//! workers are down for a while (a long deploy, an outage) from coming back
//! to a checkpoint of 0.
//!
//! Off unless registered: the log is what rebuilds replay, so how long to
//! keep it is the application's decision.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::maintenance::SweepStep;
use crate::queue::Queue;

/// The shortest retention accepted: a child of the PostgreSQL ring is
/// closed after a third of it, and a rebuild must have something to replay.
pub const EVENT_RETENTION_MIN: Duration = Duration::from_secs(60);

/// The shortest time a projector goes unseen before its checkpoints are
/// forgotten, whatever the retention.
pub const CHECKPOINT_FORGET_MIN: Duration = Duration::from_secs(24 * 3600);

/// A sweep step purging events past a retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventRetention {
    retention: Duration,
}

impl EventRetention {
    /// Purge events older than `retention`.
    ///
    /// # Errors
    /// [`Error::Config`] for a retention under [`EVENT_RETENTION_MIN`].
    pub fn new(retention: Duration) -> Result<Self> {
        if retention < EVENT_RETENTION_MIN {
            return Err(Error::Config(format!(
                "event retention must be at least {}s",
                EVENT_RETENTION_MIN.as_secs()
            )));
        }
        Ok(EventRetention { retention })
    }
}

impl SweepStep for EventRetention {
    fn name(&self) -> &str {
        "event retention"
    }

    fn run<'a>(
        &'a self,
        queue: &'a Queue,
    ) -> Pin<Box<dyn Future<Output = Result<u64>> + Send + 'a>> {
        Box::pin(async move {
            let store = queue.store();
            let now = store.db_now().await?;
            let unseen = self.retention.max(CHECKPOINT_FORGET_MIN);
            let forgotten = store
                .projector_forget(now - crate::rules::to_chrono(unseen))
                .await?;
            if forgotten > 0 {
                tracing::info!(
                    checkpoints = forgotten,
                    "checkpoints of projectors no runner has run for the retention were deleted"
                );
            }
            let purged = store
                .event_purge(now - crate::rules::to_chrono(self.retention))
                .await?;
            if purged.pinned {
                tracing::info!(
                    "events past the retention are kept: a projector has not applied them yet"
                );
            }
            if purged.busy {
                tracing::info!(
                    "event purge skipped this pass: a long transaction holds the log's oldest child"
                );
            }
            metrics::counter!("drover_events_purged_total").increment(purged.removed);
            Ok(purged.removed + forgotten)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;
    use crate::events::{EventStore, NewEvent};
    use crate::store::ManualClock;
    use crate::store::memory::MemoryStore;

    #[tokio::test]
    async fn the_step_purges_only_past_the_retention() {
        let clock = Arc::new(ManualClock::new());
        let store = Arc::new(MemoryStore::with_clock(clock.clone()));
        let queue = Queue::new(store.clone());
        store
            .event_append(&NewEvent::new("old", serde_json::json!({})))
            .await
            .unwrap();
        clock.advance(Duration::from_secs(120));
        store
            .event_append(&NewEvent::new("new", serde_json::json!({})))
            .await
            .unwrap();
        let step = EventRetention::new(Duration::from_secs(60)).unwrap();
        assert_eq!(step.run(&queue).await.unwrap(), 1);
        let left = store
            .event_read(uuid::Uuid::nil(), 0, &[], 10)
            .await
            .unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].topic, "new");
        assert!(EventRetention::new(Duration::from_secs(1)).is_err());
    }
}
