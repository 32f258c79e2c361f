//! The sweep's parking step: one pass of the store's parking of deep
//! backlogs ([`crate::store::parking`]) in every sweep pass, counted as the
//! items it moved either way. The step is idempotent (a pass parks beyond
//! a window it reads again, and gives back up to it), so a holder that
//! lost the lease mid-step and the next holder may overlap harmlessly.

use std::future::Future;
use std::pin::Pin;

use super::SweepStep;
use crate::Queue;
use crate::error::Result;

/// The step's name in logs and in [`super::SweepReport::steps`].
pub const PARK_STEP: &str = "park_deep_groups";

/// Parks full groups' deep backlogs and gives parked items back.
pub(crate) struct ParkStep;

impl SweepStep for ParkStep {
    fn name(&self) -> &str {
        PARK_STEP
    }

    fn run<'a>(
        &'a self,
        queue: &'a Queue,
    ) -> Pin<Box<dyn Future<Output = Result<u64>> + Send + 'a>> {
        Box::pin(async move {
            let pass = queue.store().park_pass().await?;
            if pass.moved() > 0 {
                tracing::info!(
                    parked = pass.parked,
                    unparked = pass.unparked,
                    groups = pass.groups,
                    "sweep: parking"
                );
            }
            Ok(pass.moved())
        })
    }
}
