//! A running handler's progress: reported from its [`JobContext`], written
//! fenced on its claim, rate-limited so a tight loop cannot flood the
//! database.
//!
//! The rule: at most one write per [`PROGRESS_INTERVAL`] per run. A report
//! inside the interval is kept in memory (latest wins) and written by the
//! next report after the interval, or by the runtime when the run ends
//! (before its outcome is written), so the last value always lands while
//! the claim holds. Progress is at least once and latest wins: a crash loses
//! at most the reports of the last interval, never a completed write. The
//! item keeps its progress across retries, so the next run reads it back
//! ([`JobContext::progress`]) as a checkpoint to resume from.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::item::Progress;
use crate::queue::JobContext;
use crate::store::Store;

/// The least time between two progress writes of one run.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// One run's progress: where it is written and what is not written yet.
pub(crate) struct ProgressCell {
    store: Option<Arc<dyn Store>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The latest report of this run.
    latest: Option<Progress>,
    /// The latest report is not written yet.
    unwritten: bool,
    /// When the last write was sent.
    last_write: Option<Instant>,
}

impl std::fmt::Debug for ProgressCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressCell")
            .field("writes", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

impl ProgressCell {
    pub(crate) fn new(store: Option<Arc<dyn Store>>) -> Self {
        ProgressCell {
            store,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A few field writes under the lock: a panic cannot leave it torn.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl JobContext {
    /// The progress of this item: the latest this run reported, else what
    /// the item carried when it was claimed (a previous run's checkpoint),
    /// else `None`.
    pub fn progress(&self) -> Option<Progress> {
        self.progress
            .state()
            .latest
            .clone()
            .or_else(|| self.item().progress.clone())
    }

    /// Reports progress (latest wins). Written at once when the last write
    /// of this run is at least [`PROGRESS_INTERVAL`] old; otherwise kept
    /// and written by a later report or when the run ends.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a note over 8 KiB, a non-finite value or
    /// an empty report; [`Error::Conflict`] when a write found the claim
    /// stale (the item is no longer this run's); storage errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped write leaves the report unwritten, and the
    /// next report or the end of the run writes it.
    pub async fn report_progress(&self, progress: Progress) -> Result<()> {
        progress.validate()?;
        let due = {
            let mut st = self.progress.state();
            st.latest = Some(progress);
            st.unwritten = true;
            st.last_write
                .is_none_or(|at| at.elapsed() >= PROGRESS_INTERVAL)
        };
        if due {
            self.flush_progress().await
        } else {
            Ok(())
        }
    }

    /// Reports a number (a percentage by convention), keeping the last note.
    ///
    /// # Errors
    /// As [`JobContext::report_progress`].
    pub async fn set_progress(&self, value: f64) -> Result<()> {
        let data = self.progress().and_then(|p| p.data);
        self.report_progress(Progress {
            value: Some(value),
            data,
        })
        .await
    }

    /// Records a checkpoint (a small JSON note the next run can resume
    /// from), keeping the last number.
    ///
    /// # Errors
    /// As [`JobContext::report_progress`]; [`Error::InvalidInput`] when
    /// `note` does not serialize.
    pub async fn checkpoint(&self, note: &impl Serialize) -> Result<()> {
        let data = serde_json::to_value(note)
            .map_err(|e| Error::invalid("progress", format!("does not serialize: {e}")))?;
        let value = self.progress().and_then(|p| p.value);
        self.report_progress(Progress {
            value,
            data: Some(data),
        })
        .await
    }

    /// Writes the latest report if it is not written yet (the runtime calls
    /// this when a run ends, before the outcome).
    ///
    /// # Errors
    /// [`Error::Conflict`] when the claim is stale; storage errors (the
    /// report stays unwritten for the next try).
    pub async fn flush_progress(&self) -> Result<()> {
        let Some(store) = &self.progress.store else {
            // The test kit's context: the report lives in memory only.
            self.progress.state().unwritten = false;
            return Ok(());
        };
        let pending = {
            let mut st = self.progress.state();
            if !st.unwritten {
                return Ok(());
            }
            st.unwritten = false;
            st.last_write = Some(Instant::now());
            st.latest.clone()
        };
        let Some(p) = pending else { return Ok(()) };
        let written = store.item_progress(self.claim(), &p).await;
        if written.as_ref().is_err_and(|e| !e.is_conflict()) {
            // Not written: the next report or the end of the run tries again
            // (unless a newer report already replaced it).
            let mut st = self.progress.state();
            if st.latest.as_ref() == Some(&p) {
                st.unwritten = true;
            }
        }
        written
    }
}
