//! The bench kind, its handler, and the recorder that counts every
//! execution: which item ran, when, and (for items that carry their enqueue
//! time) how long after its enqueue the handler was entered; and the line
//! format a child process reports its executions in (`x <id> <at_ns>
//! <lat_ns|->`), written by [`crate::child`] and read by the fleet.
//!
//! Invariants: the handler does nothing but this bookkeeping (and, when
//! told, a sleep after it); one recorder
//! sees every execution of a run, in-process or reported by a child, so
//! `executed - distinct` is exactly the number of duplicate runs.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drover::queue::{JobContext, Kind};
use drover::worker::{Done, Handler, Outcome, Strategy};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use uuid::Uuid;

/// The payload of a bench item: `{"n": i}` in the drain phase, `{"t_ns":
/// unix_nanos}` for items whose latency is measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BenchJob {
    /// The item's number (drain phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// The enqueue time in unix nanoseconds (latency and sustained phases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ns: Option<i64>,
}

impl Kind for BenchJob {
    const NAME: &'static str = crate::KIND;
}

/// One execution as the handler saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exec {
    /// The item.
    pub id: Uuid,
    /// When the handler was entered (unix nanoseconds).
    pub at_ns: i64,
    /// Entry time minus the enqueue time the payload carried.
    pub lat_ns: Option<i64>,
}

/// Formats one execution as a child process reports it on its stdout:
/// `x <id> <at_ns> <lat_ns|->` and a newline.
pub(crate) fn format_line(e: &Exec) -> String {
    match e.lat_ns {
        Some(l) => format!("x {} {} {l}\n", e.id, e.at_ns),
        None => format!("x {} {} -\n", e.id, e.at_ns),
    }
}

/// Parses one line a child wrote; `None` for anything else.
pub fn parse_line(line: &str) -> Option<Exec> {
    let mut parts = line.split_whitespace();
    if parts.next()? != "x" {
        return None;
    }
    let id = parts.next()?.parse().ok()?;
    let at_ns = parts.next()?.parse().ok()?;
    let lat_ns = match parts.next()? {
        "-" => None,
        v => Some(v.parse().ok()?),
    };
    Some(Exec { id, at_ns, lat_ns })
}

#[derive(Debug, Default)]
struct State {
    execs: Vec<Exec>,
    distinct: HashSet<Uuid>,
    /// A forwarding recorder (a child's) keeps no distinct set: its
    /// executions are taken out as they are reported.
    forwarding: bool,
}

/// Every execution of a run.
#[derive(Debug)]
pub struct Recorder {
    state: Mutex<State>,
    distinct_tx: watch::Sender<usize>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            state: Mutex::new(State::default()),
            distinct_tx: watch::channel(0).0,
        }
    }
}

/// Executions and distinct items over a span of a recorder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Handler runs.
    pub executed: u64,
    /// Distinct items among them.
    pub distinct: u64,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Arc<Self> {
        Arc::new(Recorder::default())
    }

    /// A recorder whose executions are taken out by [`Recorder::take`] as
    /// they are forwarded (a child process's), so its memory stays flat.
    pub fn forwarding() -> Arc<Self> {
        let r = Recorder::default();
        r.lock().forwarding = true;
        Arc::new(r)
    }

    /// Takes the executions recorded since the last call out of the recorder.
    pub fn take(&self) -> Vec<Exec> {
        std::mem::take(&mut self.lock().execs)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records one execution.
    pub fn record(&self, exec: Exec) {
        let distinct = {
            let mut s = self.lock();
            s.execs.push(exec);
            if !s.forwarding {
                s.distinct.insert(exec.id);
            }
            s.distinct.len()
        };
        self.distinct_tx.send_replace(distinct);
    }

    /// Executions recorded so far (a mark for [`Recorder::tally`]).
    pub fn len(&self) -> usize {
        self.lock().execs.len()
    }

    /// True before the first execution.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Distinct items run so far.
    pub fn distinct(&self) -> usize {
        *self.distinct_tx.borrow()
    }

    /// Waits until `n` distinct items have run (in the whole run).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_distinct(&self, n: usize) {
        let mut rx = self.distinct_tx.subscribe();
        let _ = rx.wait_for(|d| *d >= n).await;
    }

    /// A copy of the executions from index `from` on.
    pub fn since(&self, from: usize) -> Vec<Exec> {
        let s = self.lock();
        s.execs
            .get(from..)
            .map(<[Exec]>::to_vec)
            .unwrap_or_default()
    }

    /// Runs and distinct items among executions `from..to`.
    pub fn tally(&self, from: usize, to: usize) -> Tally {
        let s = self.lock();
        let span = s.execs.get(from..to.min(s.execs.len())).unwrap_or(&[]);
        let ids: HashSet<Uuid> = span.iter().map(|e| e.id).collect();
        Tally {
            executed: span.len() as u64,
            distinct: ids.len() as u64,
        }
    }

    /// Runs and distinct items over the whole run.
    pub fn total(&self) -> Tally {
        let s = self.lock();
        Tally {
            executed: s.execs.len() as u64,
            distinct: s.distinct.len() as u64,
        }
    }
}

/// The bench handler: records the execution, then sleeps
/// [`BenchHandler::with_sleep`]'s time (none by default), nothing else.
#[derive(Debug, Clone)]
pub struct BenchHandler {
    recorder: Arc<Recorder>,
    sleep: Duration,
}

impl BenchHandler {
    /// A handler recording into `recorder`.
    pub fn new(recorder: Arc<Recorder>) -> Self {
        BenchHandler {
            recorder,
            sleep: Duration::ZERO,
        }
    }

    /// The handler sleeping `sleep` (a tokio sleep) after recording its
    /// entry, before it returns (`--handler-ms`).
    #[must_use]
    pub fn with_sleep(mut self, sleep: Duration) -> Self {
        self.sleep = sleep;
        self
    }
}

impl Handler for BenchHandler {
    type Job = BenchJob;
    const STRATEGY: Strategy = Strategy {
        idempotency: "bookkeeping only: a second run is counted as a duplicate, never hidden",
        retry: "default backoff, 5 attempts (it never fails)",
        checkpoint: "none: one step, a rerun starts over (and is counted)",
        recovery: "a crashed run is swept after its lease and run again (and counted)",
    };

    async fn handle(&self, cx: &JobContext, job: BenchJob) -> Outcome {
        let at_ns = crate::unix_nanos();
        self.recorder.record(Exec {
            id: cx.id(),
            at_ns,
            lat_ns: job.t_ns.map(|t| at_ns - t),
        });
        if !self.sleep.is_zero() {
            tokio::time::sleep(self.sleep).await;
        }
        Ok(Done::Completed)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_line_round_trips() {
        let e = Exec {
            id: uuid::Uuid::new_v4(),
            at_ns: 12,
            lat_ns: Some(-3),
        };
        assert_eq!(parse_line(&format_line(&e)), Some(e));
        let e = Exec { lat_ns: None, ..e };
        assert_eq!(parse_line(&format_line(&e)), Some(e));
        assert_eq!(parse_line("ready"), None);
    }
}
