//! A projector as a worker role: its [`Service`] (one runner per
//! projector and worker, holding the tenants' leases as the worker), and
//! the builder call that adds one.

use std::sync::Arc;

use super::{Projector, ProjectorConfig, ProjectorRunner};
use crate::error::{Error, Result};
use crate::queue::Queue;
use crate::worker::{RoleInfo, Service, ServiceContext, ServiceFuture, WorkerBuilder};

/// A projector a worker runs beside its claim loop; it names its failing
/// tenants in the worker's health.
struct ProjectorService {
    queue: Queue,
    projector: Arc<dyn Projector>,
}

impl Service for ProjectorService {
    fn role(&self) -> Option<RoleInfo> {
        Some(super::strategy_role(
            &self.projector.strategy(),
            self.projector.name(),
        ))
    }

    fn run(self: Box<Self>, cx: ServiceContext) -> Result<ServiceFuture> {
        let store = self.queue.store().clone();
        let config = ProjectorConfig {
            holder: cx.worker_id,
            ..ProjectorConfig::for_backend(store.backend())
        };
        let sink_health = cx.health;
        let runner = ProjectorRunner::new(store, self.projector, config)?.with_failing_sink(
            Arc::new(move |name, n| {
                let detail = (n > 0).then(|| format!("{n} tenants failing"));
                sink_health.set_failing(&format!("projector {name}"), detail);
            }),
        );
        let stop = cx.stop;
        Ok(Box::pin(async move { runner.run(stop).await }))
    }
}

impl WorkerBuilder {
    /// Adds a projector: the worker runs it beside its claim loop (one runner
    /// per projector and tenant across the fleet, by lease), and `drover
    /// handlers` prints its declared strategies. Checked by
    /// [`WorkerBuilder::build`] (a bad name or a blank strategy fails it).
    pub fn projector(self, projector: impl Projector) -> Self {
        let p: Arc<dyn Projector> = Arc::new(projector);
        if let Err(e) = super::validate(p.as_ref()) {
            return self.error(e);
        }
        let twice = self
            .services()
            .iter()
            .filter_map(|s| s.role())
            .any(|r| r.role == "projector" && r.name == p.name());
        let queue = self.queue().clone();
        let this = self.with_service(ProjectorService {
            queue,
            projector: p.clone(),
        });
        if twice {
            return this.error(Error::Config(format!(
                "two projectors are named {}",
                p.name()
            )));
        }
        this
    }
}
