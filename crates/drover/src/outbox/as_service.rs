//! The outbox relay as a worker role: its [`Service`], its knobs as the
//! builder keeps them ([`RelayKnobs`]), and the builder calls that turn it
//! on or off.
//!
//! Invariants: the relay a worker runs and the relay its sweep's step drives
//! are one [`Relay`] (one config, one set of counters); the relay is on by
//! default with [`RelayConfig::default`], and is work of its own only when
//! asked for by a call.

use std::sync::Arc;

use super::{Relay, RelayConfig, RelaySweep};
use crate::error::Result;
use crate::maintenance::SweepStep;
use crate::queue::Queue;
use crate::worker::{RoleKnobs, Service, ServiceContext, ServiceFuture, WorkerBuilder};

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

/// The relay's knobs, as the builder's calls left them.
pub(crate) struct RelayKnobs {
    /// The relay's settings; `None` after `without_relay`.
    pub(crate) config: Option<RelayConfig>,
    /// True once `relay` was called: the relay is then work of its own (a
    /// relay-only worker needs no handler), not only the default every
    /// worker runs.
    pub(crate) asked: bool,
}

impl Default for RelayKnobs {
    fn default() -> Self {
        RelayKnobs {
            config: Some(RelayConfig::default()),
            asked: false,
        }
    }
}

impl RoleKnobs for RelayKnobs {
    fn is_work(&self) -> bool {
        self.asked && self.config.is_some()
    }
}

impl WorkerBuilder {
    /// Sets the outbox relay this worker runs beside its claim loop (on by
    /// default with [`RelayConfig::default`]).
    /// Called explicitly, the relay counts as this worker's work: a worker
    /// that only relays needs no handler.
    pub fn relay(self, config: RelayConfig) -> Self {
        self.knobs(|k: &mut RelayKnobs| {
            k.config = Some(config);
            k.asked = true;
        })
    }

    /// Turns this worker's outbox relay off (another process relays); the
    /// sweep then relays no outbox rows either.
    pub fn without_relay(self) -> Self {
        self.knobs(|k: &mut RelayKnobs| {
            k.config = None;
            k.asked = false;
        })
    }
}
