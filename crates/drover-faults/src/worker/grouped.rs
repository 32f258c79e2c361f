//! `effects.grouped`: the kind the limits scenario runs under a kind limit
//! and a per-group limit. Its handler is `effects.write`'s (log the start,
//! work `ms`, the fenced effects write) plus a record of the run in `runs`
//! (item, group, fencing token, start, end and how it ended), so the limits
//! checker can rebuild which runs of a group overlapped and when.

use std::time::Duration;

use drover::queue::{JobContext, Kind};
use drover::rules::RetryPolicy;
use drover::worker::{Handler, JobError, Outcome, Strategy};
use serde::{Deserialize, Serialize};

use super::{FAULT_POLICY, OpArgs, STRATEGY, Written, log_start, op, write_fenced};
use crate::effects::EffectsDb;
use crate::effects::runs::{RunGuard, RunOutcome};

/// `effects.grouped` (its group is the item's, set at enqueue).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EffectsGrouped(pub OpArgs);

impl Kind for EffectsGrouped {
    const NAME: &'static str = "effects.grouped";
    fn retry_policy() -> Option<RetryPolicy> {
        Some(FAULT_POLICY)
    }
}

/// The handler of [`EffectsGrouped`].
pub struct Grouped {
    db: EffectsDb,
}

impl Grouped {
    /// Writes its runs and effects to `db`.
    pub fn new(db: EffectsDb) -> Grouped {
        Grouped { db }
    }
}

impl Handler for Grouped {
    type Job = EffectsGrouped;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, job: EffectsGrouped) -> Outcome {
        let op = op(cx, &job.0);
        log_start(&self.db, op).await?;
        let run = self
            .db
            .run_start(op, cx.item().group.as_deref())
            .await
            .map_err(JobError::retry)?;
        // From here every way out writes the run's end, a drop included.
        let guard = RunGuard::new(self.db.clone(), run);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(job.0.ms)) => {}
            () = cx.cancellation().cancelled() => {
                guard.end(RunOutcome::Cancelled).await;
                return Err(JobError::Retry("cancelled".into()));
            }
        }
        let written = write_fenced(&self.db, cx, op).await;
        guard
            .end(match written {
                Written::Accepted => RunOutcome::Done,
                Written::Refused => RunOutcome::Refused,
                Written::Cancelled => RunOutcome::Cancelled,
            })
            .await;
        written.outcome()
    }
}
