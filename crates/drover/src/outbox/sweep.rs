//! The relay's sweep step ([`RelaySweep`]): publishes
//! `drover_outbox_lag_seconds`, purges done rows past the retention, and
//! relays what a crash left, in that order, every pass.
//!
//! Invariants:
//!
//! - **The gauge and the purge never wait for the relaying.** They run
//!   first, each whatever the other did (an error of one is reported after
//!   the others ran), so the lag is published exactly when the relay falls
//!   behind and the purge keeps pace under any load.
//! - **The relaying is bounded** by [`RelayConfig::sweep_batches`] batches
//!   and [`RelayConfig::sweep_budget`] of wall time (checked between
//!   batches), below the sweep's step timeout: a saturated outbox is the
//!   fast path's to drain, the step only makes progress and returns.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::{Relay, RelayConfig};
use crate::error::{Error, Result};
use crate::maintenance::SweepStep;
use crate::queue::Queue;

/// How many ring children the PostgreSQL outbox has; a child is current
/// for `retention / (N - 1)`.
const RING_CHILDREN: u32 = 4;

/// What one pass of the relay's sweep step did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RelaySweepReport {
    /// The lag published as `drover_outbox_lag_seconds` (the last value,
    /// after the relaying when that ran clean); `None` when the store could
    /// not say.
    pub lag_seconds: Option<f64>,
    /// Done rows the purge removed; `None` when the purge failed.
    pub purged: Option<u64>,
    /// Relay batches run.
    pub batches: u32,
    /// Rows marked done by those batches.
    pub relayed: u64,
    /// Rows parked as failed by those batches.
    pub parked: u64,
    /// True when the budget (batches or time) ended the relaying while
    /// batches were still full: the fast path drains the rest.
    pub budget_spent: bool,
}

/// The relay's sweep step: publishes the lag, purges done rows past the
/// retention, and relays what a crash left (rows whose claim's lease
/// passed), within a budget.
#[derive(Debug, Clone)]
pub struct RelaySweep {
    relay: Arc<Relay>,
}

impl RelaySweep {
    /// The step for `relay`.
    pub fn new(relay: Arc<Relay>) -> Self {
        RelaySweep { relay }
    }

    /// One pass: lag gauge, purge, then relay batches until a batch is not
    /// full or the budget is spent.
    ///
    /// # Errors
    /// The first storage error of the pass, after every part of it ran (the
    /// gauge is published and the purge runs whatever the relaying did).
    ///
    /// # Cancel safety
    /// Dropped, a relay batch in flight is left to its lease (see
    /// [`Relay::run_once`]); the gauge and the purge are single calls.
    pub async fn run_once(&self) -> Result<RelaySweepReport> {
        let queue = &self.relay.queue;
        let store = queue.store();
        let config: &RelayConfig = &self.relay.config;
        let mut report = RelaySweepReport::default();
        let mut first: Option<Error> = None;
        match store.outbox_lag().await {
            Ok(lag) => {
                metrics::gauge!("drover_outbox_lag_seconds").set(lag);
                report.lag_seconds = Some(lag);
            }
            Err(e) => {
                tracing::warn!(error = %e, "outbox lag unavailable");
                first.get_or_insert(e);
            }
        }
        match self.purge(queue).await {
            Ok(n) => report.purged = Some(n),
            Err(e) => {
                tracing::warn!(error = %e, "outbox purge failed");
                first.get_or_insert(e);
            }
        }
        let started = tokio::time::Instant::now();
        let mut relay_failed = false;
        loop {
            if report.batches >= config.sweep_batches || started.elapsed() >= config.sweep_budget {
                report.budget_spent = true;
                break;
            }
            match self.relay.run_once().await {
                Ok(r) => {
                    report.batches += 1;
                    report.relayed += r.relayed;
                    report.parked += r.parked;
                    if r.claimed < u64::from(config.batch) {
                        break;
                    }
                }
                Err(e) => {
                    relay_failed = true;
                    first.get_or_insert(e);
                    break;
                }
            }
        }
        if report.relayed + report.parked > 0 && !relay_failed {
            // The lag after this pass's relaying, so a drained outbox does
            // not show the lag it had before until the next pass.
            if let Ok(lag) = store.outbox_lag().await {
                metrics::gauge!("drover_outbox_lag_seconds").set(lag);
                report.lag_seconds = Some(lag);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    async fn purge(&self, queue: &Queue) -> Result<u64> {
        let store = queue.store();
        let retention = self.relay.config.retention;
        let before = store.db_now().await? - crate::rules::to_chrono(retention);
        store
            .outbox_purge(before, retention / (RING_CHILDREN - 1))
            .await
    }
}

impl SweepStep for RelaySweep {
    fn name(&self) -> &str {
        "outbox"
    }

    fn run<'a>(
        &'a self,
        _queue: &'a Queue,
    ) -> Pin<Box<dyn Future<Output = Result<u64>> + Send + 'a>> {
        Box::pin(async move {
            let r = self.run_once().await?;
            Ok(r.relayed + r.parked + r.purged.unwrap_or(0))
        })
    }
}
