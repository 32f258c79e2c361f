//! The paced vacuum as a worker role: its [`Service`], its knobs as the
//! builder keeps them ([`VacuumKnobs`]), and the builder calls that set it
//! or turn it off.
//!
//! Invariant: a `without_vacuum` call, before or after a `vacuum` call,
//! keeps it off whatever the settings say.

use super::{VacuumConfig, Vacuumer};
use crate::error::Result;
use crate::worker::{RoleKnobs, Service, ServiceContext, ServiceFuture, WorkerBuilder};

impl Service for Vacuumer {
    fn run(self: Box<Self>, cx: ServiceContext) -> Result<ServiceFuture> {
        Ok(Box::pin(async move { Vacuumer::run(&self, cx.stop).await }))
    }
}

/// The paced vacuum's knobs, as the builder's calls left them.
pub(crate) struct VacuumKnobs {
    /// The settings when set explicitly (else the defaults with the
    /// settings' threshold, when the settings turn it on).
    pub(crate) config: Option<VacuumConfig>,
    /// False after `without_vacuum`.
    pub(crate) on: bool,
}

impl Default for VacuumKnobs {
    fn default() -> Self {
        VacuumKnobs {
            config: None,
            on: true,
        }
    }
}

impl RoleKnobs for VacuumKnobs {}

impl WorkerBuilder {
    /// Sets the paced vacuum this worker runs beside its claim loop on
    /// PostgreSQL (on by default with [`VacuumConfig::default`] and the
    /// settings' `vacuum_threshold`); overrides the settings' `vacuum` and
    /// `vacuum_threshold` (`DROVER_VACUUM`, `DROVER_VACUUM_THRESHOLD`).
    /// [`without_vacuum`](WorkerBuilder::without_vacuum), before or after,
    /// still turns it off.
    pub fn vacuum(self, config: VacuumConfig) -> Self {
        self.knobs(|k: &mut VacuumKnobs| k.config = Some(config))
    }

    /// Turns this worker's paced vacuum off (autovacuum alone, or another
    /// process, keeps the tables), whatever the settings say.
    pub fn without_vacuum(self) -> Self {
        self.knobs(|k: &mut VacuumKnobs| k.on = false)
    }
}
