//! [`Service`]: what a worker runs beside its claim loop, from start to
//! shutdown.
//!
//! The worker knows no role by name: every role (the relay, the scheduler,
//! the sweep, the paced vacuum, a projector, a reconciler, a user's own
//! background task) is a `Service` the builder collected, and the worker
//! starts each one, hands it a [`ServiceContext`], and waits for it at
//! shutdown once in-flight work has drained.
//!
//! Invariants: a service runs until its context's `stop` fires and then
//! returns (the worker awaits it before marking itself offline); a service
//! declares its role through [`Service::role`], which the builder adds to
//! the registry when the service is added, so `drover handlers` lists it.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Health, RoleInfo};
use crate::error::Result;

/// What a background service is handed when the worker starts.
#[derive(Debug, Clone)]
pub struct ServiceContext {
    /// Fires at shutdown; the service runs until then.
    pub stop: CancellationToken,
    /// The worker's health, where the service reports itself failing
    /// ([`Health::set_failing`](super::Health::set_failing)) so `/healthz`
    /// names it.
    pub health: Arc<Health>,
    /// This run's worker id (a projector's lease holder).
    pub worker_id: String,
}

/// The future a started service runs until its `stop` fires.
pub type ServiceFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A background service as a boxed closure (the shape
/// [`WorkerBuilder::service`](super::WorkerBuilder::service) took before
/// services were a trait): given its context, it runs until `stop`. Every
/// such closure is a [`Service`] with no role of its own.
pub type ServiceFn = Box<dyn FnOnce(ServiceContext) -> ServiceFuture + Send>;

/// A role a worker runs beside its claim loop, from start to shutdown.
///
/// `Any` lets the role's own module find its service again in a built
/// worker (the scheduler behind [`Worker::scheduler`](super::Worker::scheduler)).
pub trait Service: Any + Send {
    /// The role and the strategies it declares, as `drover handlers` prints
    /// them; `None` for a service that declares its role itself (through
    /// [`WorkerBuilder::role`](super::WorkerBuilder::role)) or has none.
    fn role(&self) -> Option<RoleInfo> {
        None
    }

    /// Starts the service: the future it returns runs until `cx.stop`
    /// fires.
    ///
    /// # Errors
    /// What the service can check only once the worker is known (its id);
    /// [`Worker::start`](super::Worker::start) then fails and stops what it
    /// had started.
    fn run(self: Box<Self>, cx: ServiceContext) -> Result<ServiceFuture>;
}

impl<F, Fut> Service for F
where
    F: FnOnce(ServiceContext) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn run(self: Box<Self>, cx: ServiceContext) -> Result<ServiceFuture> {
        Ok(Box::pin((*self)(cx)))
    }
}
