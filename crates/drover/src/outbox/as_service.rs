//! The outbox relay as a worker role: its [`Service`], and the builder calls
//! that turn it on or off.
//!
//! Invariant: the relay a worker runs and the relay its sweep's step drives
//! are one [`Relay`] (one config, one set of counters).

use std::sync::Arc;

use super::{Relay, RelayConfig, RelaySweep};
use crate::error::Result;
use crate::maintenance::SweepStep;
use crate::queue::Queue;
use crate::worker::{Service, ServiceContext, ServiceFuture, WorkerBuilder};

/// The relay a worker runs beside its claim loop.
struct RelayService(Arc<Relay>);

impl Service for RelayService {
    fn run(self: Box<Self>, cx: ServiceContext) -> Result<ServiceFuture> {
        let relay = self.0;
        Ok(Box::pin(async move { Relay::run(&relay, cx.stop).await }))
    }
}

/// The relay's service and the sweep step that relays what it missed, over
/// one [`Relay`].
///
/// # Errors
/// As [`Relay::new`].
pub(crate) fn relay_service(
    queue: &Queue,
    config: RelayConfig,
) -> Result<(Box<dyn Service>, Box<dyn SweepStep>)> {
    let relay = Arc::new(Relay::new(queue.clone(), config)?);
    Ok((
        Box::new(RelayService(relay.clone())),
        Box::new(RelaySweep::new(relay)),
    ))
}

impl WorkerBuilder {
    /// Sets the outbox relay this worker runs beside its claim loop (on by
    /// default with [`RelayConfig::default`]).
    /// Called explicitly, the relay counts as this worker's work: a worker
    /// that only relays needs no handler.
    pub fn relay(mut self, config: RelayConfig) -> Self {
        let d = self.defaults_mut();
        d.relay = Some(config);
        d.relay_asked = true;
        self
    }

    /// Turns this worker's outbox relay off (another process relays); the
    /// sweep then relays no outbox rows either.
    pub fn without_relay(mut self) -> Self {
        let d = self.defaults_mut();
        d.relay = None;
        d.relay_asked = false;
        self
    }
}
