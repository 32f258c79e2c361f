//! The scheduler as a worker role: its [`Service`], the schedules as the
//! builder keeps them ([`ScheduleKnobs`]), the builder call that adds a
//! schedule, and the built worker's handle on its scheduler.
//!
//! Invariant: a schedule of the worker's own is work of its own (a worker
//! with schedules and no handler is worth building); the heartbeat's,
//! added from the settings at build, is not.

use std::sync::Arc;

use super::{Schedule, Scheduler};
use crate::error::Result;
use crate::worker::{RoleKnobs, Service, ServiceContext, ServiceFuture, Worker, WorkerBuilder};

/// The scheduler a worker runs beside its claim loop.
struct SchedulerService(Arc<Scheduler>);

impl Service for SchedulerService {
    fn run(self: Box<Self>, cx: ServiceContext) -> Result<ServiceFuture> {
        let scheduler = self.0;
        Ok(Box::pin(async move {
            Scheduler::run(&scheduler, cx.stop).await
        }))
    }
}

/// The service that runs `scheduler` in a worker.
pub(crate) fn scheduler_service(scheduler: Arc<Scheduler>) -> Box<dyn Service> {
    Box::new(SchedulerService(scheduler))
}

/// The schedules of this worker's scheduler, as the builder's calls left
/// them (the heartbeat's is added from the settings).
#[derive(Default)]
pub(crate) struct ScheduleKnobs {
    /// In call order.
    pub(crate) schedules: Vec<Schedule>,
}

impl RoleKnobs for ScheduleKnobs {
    fn is_work(&self) -> bool {
        !self.schedules.is_empty()
    }
}

impl WorkerBuilder {
    /// Adds a periodic schedule; this worker's scheduler enqueues its ticks
    /// (one item per tick across every worker declaring it). Checked by
    /// [`WorkerBuilder::build`].
    pub fn schedule(self, schedule: Schedule) -> Self {
        self.knobs(|k: &mut ScheduleKnobs| k.schedules.push(schedule))
    }
}

impl Worker {
    /// The scheduler this worker runs beside its claim loop, if it has
    /// schedules.
    pub fn scheduler(&self) -> Option<&Arc<Scheduler>> {
        self.services().iter().find_map(|s| {
            let any: &dyn std::any::Any = &**s;
            any.downcast_ref::<SchedulerService>().map(|s| &s.0)
        })
    }
}
