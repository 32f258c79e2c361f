//! The paced vacuum as a worker role: its [`Service`], and the builder
//! calls that set it or turn it off.

use super::{VacuumConfig, Vacuumer};
use crate::error::Result;
use crate::worker::{Service, ServiceContext, ServiceFuture, WorkerBuilder};

impl Service for Vacuumer {
    fn run(self: Box<Self>, cx: ServiceContext) -> Result<ServiceFuture> {
        Ok(Box::pin(async move { Vacuumer::run(&self, cx.stop).await }))
    }
}

impl WorkerBuilder {
    /// Sets the paced vacuum this worker runs beside its claim loop on
    /// PostgreSQL (on by default with [`VacuumConfig::default`] and the
    /// settings' `vacuum_threshold`); overrides the settings' `vacuum` and
    /// `vacuum_threshold` (`DROVER_VACUUM`, `DROVER_VACUUM_THRESHOLD`).
    /// [`without_vacuum`](WorkerBuilder::without_vacuum), before or after,
    /// still turns it off.
    pub fn vacuum(mut self, config: VacuumConfig) -> Self {
        self.defaults_mut().vacuum = Some(config);
        self
    }

    /// Turns this worker's paced vacuum off (autovacuum alone, or another
    /// process, keeps the tables), whatever the settings say.
    pub fn without_vacuum(mut self) -> Self {
        self.defaults_mut().vacuum_on = false;
        self
    }
}
