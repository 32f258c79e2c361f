//! The scheduler as a worker role: its [`Service`], the builder call that
//! adds a schedule, and the built worker's handle on its scheduler.

use std::sync::Arc;

use super::{Schedule, Scheduler};
use crate::error::Result;
use crate::worker::{Service, ServiceContext, ServiceFuture, Worker, WorkerBuilder};

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

impl WorkerBuilder {
    /// Adds a periodic schedule; this worker's scheduler enqueues its ticks
    /// (one item per tick across every worker declaring it). Checked by
    /// [`WorkerBuilder::build`].
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.defaults_mut().schedules.push(schedule);
        self
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
