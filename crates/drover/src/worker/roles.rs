//! The roles a worker runs beside its claim loop, as `drover handlers`
//! lists them: the sweep's declared strategies (published here as
//! [`SWEEP_STRATEGY`]; the sweep's role row is built in
//! [`crate::maintenance`]), and the idle claim loop of a worker that runs
//! roles only.
//!
//! Invariant: every role the [`Registry`](super::Registry) holds declares
//! idempotency, retry, checkpoint and recovery (the registry refuses one
//! that does not). A projector, a workflow runner and a sync reconciler
//! declare all four, and their role-specific strategies, in their own
//! modules.

use super::Strategy;

/// The claim loop of a worker with no handler (roles only): it claims
/// nothing — a claim with no kinds would take items of every kind — and
/// only shows it is alive to `/healthz`, until claiming stops.
pub(super) async fn claim_nothing(
    health: std::sync::Arc<super::Health>,
    fetch: tokio_util::sync::CancellationToken,
    every: std::time::Duration,
) {
    loop {
        health.loop_tick();
        tokio::select! {
            () = fetch.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// What the sweep declares, as `drover handlers` prints it.
pub const SWEEP_STRATEGY: Strategy = Strategy {
    idempotency: "every step is idempotent and every item write is fenced on the item's own \
                  state in its statement: a second sweeper (a holder that lost the lease \
                  mid-step) only repeats work, never makes a wrong write",
    retry: "a step that fails, hangs past its step timeout or panics is reported and the next \
            step and the next pass (every sweep interval, jittered) run; nothing is retried in \
            a loop",
    checkpoint: "none: each pass reads the items, outbox rows and markers afresh; one sweeper \
                 at a time by the sweep lease on the database clock",
    recovery: "a sweeper that dies, hangs or is paused loses the sweep lease when it passes, and \
               any worker takes it on its next tick",
};
