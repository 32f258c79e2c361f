//! A sync reconciler as a worker role: its [`Service`], and the builder
//! call that adds one.

use std::sync::Arc;

use super::Reconciler;
use crate::error::Result;
use crate::worker::{RoleInfo, Service, ServiceContext, ServiceFuture, WorkerBuilder};

/// A reconciler a worker runs beside its claim loop; it names its failing
/// tenants in the worker's health.
struct ReconcilerService(Arc<Reconciler>);

impl Service for ReconcilerService {
    fn role(&self) -> Option<RoleInfo> {
        Some(self.0.role())
    }

    fn run(self: Box<Self>, cx: ServiceContext) -> Result<ServiceFuture> {
        let r = self.0;
        Ok(Box::pin(async move {
            let _ = r.health.set(cx.health);
            r.run(cx.stop).await;
        }))
    }
}

impl WorkerBuilder {
    /// Adds a sync reconciler: it runs beside the claim loop until the
    /// worker shuts down, and its declared strategies are printed by
    /// `drover handlers`.
    pub fn reconciler(self, r: Reconciler) -> Self {
        self.with_service(ReconcilerService(Arc::new(r)))
    }
}
