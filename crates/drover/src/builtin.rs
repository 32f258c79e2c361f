//! The built-in diagnostic kinds, so anyone can exercise a deployment
//! without writing Rust: `drover.noop`, `drover.sleep` (`{"ms": N}`),
//! `drover.echo` (returns its payload as its result), `drover.fail`
//! (`{"times": N}`: fails its first N attempts, then succeeds) and
//! `drover.panic`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::queue::{JobContext, Kind, Returns};
use crate::worker::{Done, Handler, JobError, Outcome, Strategy, WorkerBuilder};

/// `drover.noop`: does nothing; any payload.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Noop(pub serde_json::Value);

impl Kind for Noop {
    const NAME: &'static str = "drover.noop";
}

/// `drover.sleep`: sleeps `ms` milliseconds (cancellable).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sleep {
    /// How long to sleep.
    pub ms: u64,
}

impl Kind for Sleep {
    const NAME: &'static str = "drover.sleep";
}

/// `drover.echo`: returns its payload as its result; any payload.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Echo(pub serde_json::Value);

impl Kind for Echo {
    const NAME: &'static str = "drover.echo";
}

impl Returns for Echo {
    type Output = serde_json::Value;
}

/// `drover.fail`: fails its first `times` attempts, then succeeds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fail {
    /// Attempts that fail before one succeeds.
    pub times: i32,
}

impl Kind for Fail {
    const NAME: &'static str = "drover.fail";
}

/// `drover.panic`: panics every time (until its budget is spent).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Panic(pub serde_json::Value);

impl Kind for Panic {
    const NAME: &'static str = "drover.panic";
}

const STRATEGY: Strategy = Strategy {
    idempotency: "no side effects: running twice is harmless",
    retry: "default backoff (1 s doubling, capped at 1 h, ±10 %), 5 attempts",
    checkpoint: "none: one step, a rerun starts over",
    recovery: "a crashed run is swept after its lease and run again",
};

/// Runs `drover.noop`.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopHandler;

impl Handler for NoopHandler {
    type Job = Noop;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, _job: Noop) -> Outcome {
        Ok(Done::Completed)
    }
}

/// Runs `drover.sleep`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SleepHandler;

impl Handler for SleepHandler {
    type Job = Sleep;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, job: Sleep) -> Outcome {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(job.ms)) => Ok(Done::Completed),
            () = cx.cancellation().cancelled() => Err(JobError::Retry("sleep cancelled".into())),
        }
    }
}

/// Runs `drover.echo`.
#[derive(Debug, Default, Clone, Copy)]
pub struct EchoHandler;

impl Handler for EchoHandler {
    type Job = Echo;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, _cx: &JobContext, job: Echo) -> Outcome {
        Ok(Done::Output(job.0))
    }
}

/// Runs `drover.fail`.
#[derive(Debug, Default, Clone, Copy)]
pub struct FailHandler;

impl Handler for FailHandler {
    type Job = Fail;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, job: Fail) -> Outcome {
        if cx.attempt() <= job.times {
            Err(JobError::Retry(format!(
                "drover.fail: planned failure {} of {}",
                cx.attempt(),
                job.times
            )))
        } else {
            Ok(Done::Completed)
        }
    }
}

/// Runs `drover.panic`.
#[derive(Debug, Default, Clone, Copy)]
pub struct PanicHandler;

impl Handler for PanicHandler {
    type Job = Panic;
    const STRATEGY: Strategy = STRATEGY;
    #[allow(clippy::panic)]
    async fn handle(&self, _cx: &JobContext, _job: Panic) -> Outcome {
        panic!("drover.panic: panicking as asked")
    }
}

// Defined here rather than in `worker`, so the built-in kinds depend on the
// worker (through its public `handler` call only) and the worker knows
// nothing of them: the arrow runs one way.
impl WorkerBuilder {
    /// Adds the built-in diagnostic kinds (`drover.noop`, `drover.sleep`,
    /// `drover.echo`, `drover.fail`, `drover.panic`).
    pub fn builtins(self) -> Self {
        self.handler(NoopHandler)
            .handler(SleepHandler)
            .handler(EchoHandler)
            .handler(FailHandler)
            .handler(PanicHandler)
    }
}
