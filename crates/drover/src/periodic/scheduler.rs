//! The scheduler service every worker runs beside its claim loop: on each
//! run it reads the database clock and the state rows, plans each
//! schedule's due ticks, and advances each row and enqueues its ticks'
//! items in one transaction.
//!
//! Invariants: ticks come from the database clock, never the worker's; a
//! tick's item is keyed `periodic:<name>:<tick>` and inserted in the same
//! transaction that moves the row past it, so N schedulers racing produce
//! one item per tick (the compare-and-set lets one of them move the row,
//! the key refuses a second item even if two did); a failed or lost run
//! changes nothing and the next run plans the same ticks again.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::plan::plan;
use super::schedule::{Compiled, Schedule};
use crate::error::{Error, Result};
use crate::item::InsertResult;
use crate::queue::{Principal, Queue};
use crate::rules::to_chrono;
use crate::store::schedule::{AdvanceOutcome, AdvanceParams, ScheduleRow};
use crate::worker::Strategy;

// The longest wait between two runs is a worker setting
// (`DROVER_SCHEDULER_INTERVAL`): its default lives with the settings table.
pub use crate::worker::SCHEDULER_INTERVAL_DEFAULT;
/// Each wait is lengthened by a random delay up to this, so workers that
/// wake for the same tick do not all ask at once.
pub const SCHEDULER_JITTER_DEFAULT: Duration = Duration::from_millis(250);
/// A tick at most this late runs as it is; an older one was missed and
/// goes by the schedule's misfire policy.
pub const MISFIRE_GRACE_DEFAULT: Duration = Duration::from_secs(60);
/// How often a scheduler re-declares its schedules (refreshing `seen_at`)
/// and purges old rows.
pub const TOUCH_INTERVAL_DEFAULT: Duration = Duration::from_secs(60);
/// A row no scheduler has seen for this long is listed as inactive (its
/// schedule was removed from code).
pub const INACTIVE_AFTER_DEFAULT: Duration = Duration::from_secs(10 * 60);
/// An inactive row is purged once unseen for this long.
pub const STATE_RETENTION_DEFAULT: Duration = Duration::from_secs(30 * 24 * 3600);

/// What the scheduler declares, as `drover handlers` prints it.
pub const SCHEDULER_STRATEGY: Strategy = Strategy {
    idempotency: "each tick is enqueued under periodic:<name>:<tick> in the transaction that \
                  advances the schedule's row (compare-and-set): one item per tick across workers",
    retry: "a failed run changes nothing; the next run (at the next tick or interval) plans \
            the same ticks again",
    checkpoint: "the schedule row's last_tick, moved in the same transaction as the tick's \
                 items: the next run resumes from it",
    recovery: "the last tick lives in the database: a restart of every worker neither loses \
               nor repeats a tick; ticks missed while none ran follow the misfire policy",
};

/// The scheduler's role row for `drover handlers`: the four strategies,
/// each schedule's misfire policy, and the schedules it runs.
pub fn scheduler_role(schedules: &[Compiled]) -> crate::worker::RoleInfo {
    let listed: Vec<String> = schedules
        .iter()
        .map(|s| {
            format!(
                "{} ({}, {}, lane {}, misfire {})",
                s.name(),
                s.cron(),
                s.zone_name(),
                s.lane(),
                s.misfire()
            )
        })
        .collect();
    crate::worker::RoleInfo::new("scheduler", "drover.scheduler", SCHEDULER_STRATEGY)
        .with(
            "misfire",
            "ticks later than the misfire grace follow the schedule's policy: skip drops them, \
             once enqueues one catch-up keyed by the latest, all enqueues each (at most \
             max_backfill of the latest, itself at most MAX_BACKFILL_LIMIT)",
        )
        .with("schedules", listed.join("; "))
}

/// The scheduler's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    /// Longest wait between runs. Default [`SCHEDULER_INTERVAL_DEFAULT`].
    pub interval: Duration,
    /// Random extra wait. Default [`SCHEDULER_JITTER_DEFAULT`].
    pub jitter: Duration,
    /// Lateness up to which a tick is on time. Default [`MISFIRE_GRACE_DEFAULT`].
    pub misfire_grace: Duration,
    /// Re-declaration and purge period. Default [`TOUCH_INTERVAL_DEFAULT`].
    pub touch_interval: Duration,
    /// Unseen this long: inactive. Default [`INACTIVE_AFTER_DEFAULT`].
    pub inactive_after: Duration,
    /// Unseen this long: purged. Default [`STATE_RETENTION_DEFAULT`].
    pub retention: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            interval: SCHEDULER_INTERVAL_DEFAULT,
            jitter: SCHEDULER_JITTER_DEFAULT,
            misfire_grace: MISFIRE_GRACE_DEFAULT,
            touch_interval: TOUCH_INTERVAL_DEFAULT,
            inactive_after: INACTIVE_AFTER_DEFAULT,
            retention: STATE_RETENTION_DEFAULT,
        }
    }
}

impl SchedulerConfig {
    /// Checks the settings together.
    ///
    /// # Errors
    /// [`Error::Config`] naming the relation broken.
    pub fn validate(&self) -> Result<()> {
        if self.interval.is_zero() {
            return Err(Error::Config(
                "the scheduler interval must be longer than zero".into(),
            ));
        }
        if self.touch_interval.is_zero() {
            return Err(Error::Config(
                "the schedule touch interval must be longer than zero".into(),
            ));
        }
        if self.inactive_after <= self.touch_interval * 2 {
            return Err(Error::Config(format!(
                "inactive_after ({:?}) must exceed twice the touch interval ({:?}), or live \
                 schedules would be listed as inactive",
                self.inactive_after, self.touch_interval
            )));
        }
        if self.retention < self.inactive_after {
            return Err(Error::Config(format!(
                "the schedule retention ({:?}) must be at least inactive_after ({:?})",
                self.retention, self.inactive_after
            )));
        }
        Ok(())
    }
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulerReport {
    /// The database clock the run planned against.
    pub now: Option<DateTime<Utc>>,
    /// Items inserted.
    pub enqueued: u64,
    /// Items whose key was already there (a manual retry of a run, a race).
    pub existing: u64,
    /// Due ticks later than the grace (capped count).
    pub missed: u64,
    /// Missed ticks not enqueued (skipped, merged into one, or past the cap).
    pub dropped: u64,
    /// Advances lost to another scheduler (nothing changed).
    pub raced: u64,
    /// Rows declared or refreshed.
    pub declared: u64,
    /// Inactive rows purged.
    pub purged: u64,
    /// The earliest next tick of any schedule after this run.
    pub next_tick: Option<DateTime<Utc>>,
    /// Each schedule (or step) that failed, with its error.
    pub errors: Vec<(String, String)>,
}

/// The scheduler service.
pub struct Scheduler {
    queue: Queue,
    schedules: Vec<Compiled>,
    config: SchedulerConfig,
    last_purge: Mutex<Option<DateTime<Utc>>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("schedules", &self.schedules)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler over `queue` for `schedules`.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the schedule and field for a schedule
    /// that does not compile or a name used twice; [`Error::Config`] for
    /// settings that contradict each other.
    pub fn new(queue: Queue, schedules: Vec<Schedule>, config: SchedulerConfig) -> Result<Self> {
        let compiled = schedules
            .iter()
            .map(Schedule::compile)
            .collect::<Result<Vec<_>>>()?;
        Self::from_compiled(queue, compiled, config)
    }

    pub(crate) fn from_compiled(
        queue: Queue,
        schedules: Vec<Compiled>,
        config: SchedulerConfig,
    ) -> Result<Self> {
        config.validate()?;
        let mut names = HashSet::new();
        for s in &schedules {
            if !names.insert(s.name().to_owned()) {
                return Err(Error::InvalidInput {
                    field: "name",
                    reason: format!("schedule {:?}: declared twice", s.name()),
                });
            }
            s.register(&queue);
        }
        Ok(Scheduler {
            queue,
            schedules,
            config,
            last_purge: Mutex::new(None),
        })
    }

    /// The schedules this scheduler runs.
    pub fn schedules(&self) -> &[Compiled] {
        &self.schedules
    }

    /// The settings.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// Plans and enqueues every due tick once.
    ///
    /// # Errors
    /// Only when the database clock or the state rows cannot be read; a
    /// schedule's failure is in the report and the others still run.
    ///
    /// # Cancel safety
    /// Cancel safe: each advance is one transaction; a dropped run leaves
    /// each row either moved with its items or untouched.
    pub async fn run_once(&self) -> Result<SchedulerReport> {
        let store = self.queue.store();
        let mut report = SchedulerReport::default();
        let now = store.db_now().await?;
        report.now = Some(now);
        let rows: HashMap<String, ScheduleRow> = store
            .schedule_list()
            .await?
            .into_iter()
            .map(|r| (r.decl.name.clone(), r))
            .collect();
        let touch = to_chrono(self.config.touch_interval);
        let grace = to_chrono(self.config.misfire_grace);
        for s in &self.schedules {
            let decl = s.decl();
            let row = match rows.get(s.name()) {
                Some(r) if r.decl == decl && now - r.seen_at < touch => r.clone(),
                _ => match store.schedule_upsert(&decl).await {
                    Ok(r) => {
                        report.declared += 1;
                        r
                    }
                    Err(e) => {
                        report.errors.push((s.name().to_owned(), e.to_string()));
                        continue;
                    }
                },
            };
            let start = row.last_tick.unwrap_or(row.created_at);
            let p = plan(s, start, now, grace);
            if let Some(to) = p.advance_to {
                match self.advance(s, &row, to, &p.fire).await {
                    Ok(AdvanceOutcome::Advanced(results)) => {
                        let inserted = results
                            .iter()
                            .filter(|r| **r == InsertResult::Inserted)
                            .count() as u64;
                        report.enqueued += inserted;
                        report.existing += results.len() as u64 - inserted;
                        report.missed += p.missed;
                        report.dropped += p.dropped;
                        crate::queue::counters::count(
                            "drover_enqueued_total",
                            &decl.lane,
                            &decl.kind,
                            inserted,
                        );
                        metrics::counter!("drover_periodic_enqueued_total", "schedule" => s.name().to_owned())
                            .increment(inserted);
                        if p.missed > 0 {
                            tracing::warn!(
                                schedule = s.name(),
                                missed = p.missed,
                                dropped = p.dropped,
                                policy = %s.misfire(),
                                "ticks were missed while no scheduler ran"
                            );
                        }
                        tracing::debug!(schedule = s.name(), %to, inserted, "advanced");
                    }
                    Ok(AdvanceOutcome::Stale) => report.raced += 1,
                    Err(e) => {
                        report.errors.push((s.name().to_owned(), e.to_string()));
                        // Due and not enqueued: how long since the first
                        // tick that should have been (DroverScheduleLate).
                        let late = s.next_ticks(start, 1).first().map_or(0.0, |due| {
                            (now - *due).num_milliseconds().max(0) as f64 / 1e3
                        });
                        set_late(s.name(), late);
                        continue;
                    }
                }
            }
            set_late(s.name(), 0.0);
            let after = p.advance_to.unwrap_or(start).max(now);
            if let Some(next) = s.next_ticks(after, 1).first() {
                report.next_tick = Some(report.next_tick.map_or(*next, |t| t.min(*next)));
            }
        }
        self.purge(now, &mut report).await;
        for (schedule, error) in &report.errors {
            tracing::warn!(schedule, error, "scheduler step failed");
        }
        Ok(report)
    }

    async fn advance(
        &self,
        s: &Compiled,
        row: &ScheduleRow,
        to: DateTime<Utc>,
        fire: &[DateTime<Utc>],
    ) -> Result<AdvanceOutcome> {
        let system = Principal::system();
        let items = fire
            .iter()
            .map(|t| self.queue.prepare(&system, s.item_for(*t)))
            .collect::<Result<Vec<_>>>()?;
        self.queue
            .store()
            .schedule_advance(&AdvanceParams {
                name: s.name().to_owned(),
                from: row.last_tick,
                to,
                items,
            })
            .await
    }

    async fn purge(&self, now: DateTime<Utc>, report: &mut SchedulerReport) {
        let due = {
            let mut last = self.last_purge.lock().unwrap_or_else(|p| p.into_inner());
            let due = last.is_none_or(|t| now - t >= to_chrono(self.config.touch_interval));
            if due {
                *last = Some(now);
            }
            due
        };
        if !due {
            return;
        }
        match self
            .queue
            .store()
            .schedule_purge(now - to_chrono(self.config.retention))
            .await
        {
            Ok(n) => report.purged = n,
            Err(e) => report.errors.push(("purge".into(), e.to_string())),
        }
    }

    /// Enqueues one item of `name` now, outside its ticks, under the key
    /// `periodic:<name>:manual:<id>`; the state row is not touched.
    ///
    /// # Errors
    /// [`Error::NotFound`] when no schedule has that name; storage errors.
    pub async fn trigger(&self, name: &str) -> Result<crate::Inserted> {
        let s = self
            .schedules
            .iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| Error::NotFound(format!("schedule {name:?}")))?;
        self.queue
            .enqueue_item(&Principal::system(), s.manual_item())
            .await
    }

    /// Runs until `stop`: a run, then a wait until the next tick (at most
    /// the interval) plus a random jitter.
    pub async fn run(&self, stop: CancellationToken) {
        loop {
            let wait = match self.run_once().await {
                Ok(r) => {
                    let until = match (r.next_tick, r.now) {
                        (Some(next), Some(now)) => (next - now).to_std().unwrap_or_default(),
                        _ => self.config.interval,
                    };
                    until.min(self.config.interval)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "scheduler run skipped");
                    self.config.interval
                }
            };
            let jitter = self.config.jitter.mul_f64(rand::random::<f64>());
            let wait = (wait + jitter).max(Duration::from_millis(10));
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// `drover_schedule_late_seconds{schedule}`: 0 once a schedule's due ticks
/// are enqueued (or nothing is due), else the age of its first due tick
/// this scheduler could not enqueue.
fn set_late(schedule: &str, seconds: f64) {
    metrics::gauge!("drover_schedule_late_seconds", "schedule" => schedule.to_owned()).set(seconds);
}
