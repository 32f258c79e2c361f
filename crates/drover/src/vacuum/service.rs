//! [`Vacuumer`]: the paced vacuum service, its settings and its report.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::TableGarbage;
use crate::error::{Error, ErrorKind, Result};
use crate::queue::Queue;
use crate::worker::{RoleInfo, Strategy};

/// How often the dead-tuple counts are read by default
/// (jittered ±[`VACUUM_JITTER`]).
pub const VACUUM_CHECK_EVERY_DEFAULT: Duration = Duration::from_secs(1);
/// A table is vacuumed once it has at least this many dead tuples by
/// default (`DROVER_VACUUM_THRESHOLD`), and at least
/// [`VACUUM_DEAD_RATIO_DEFAULT`] of its live rows. The worker setting's
/// default ([`VACUUM_THRESHOLD_DEFAULT`](crate::worker::VACUUM_THRESHOLD_DEFAULT)),
/// defined with the settings table below this role.
pub const VACUUM_DEAD_THRESHOLD_DEFAULT: u64 = crate::worker::VACUUM_THRESHOLD_DEFAULT;
/// A table is vacuumed only once its dead tuples are also at least this
/// fraction of its live rows by default. At drover's steady state (a short
/// retention: tables of at most a few tens of thousands of rows) the
/// threshold decides; the ratio keeps a large table (a long retention) from
/// being vacuumed every second for a sliver of its size, since each vacuum
/// that removes rows scans every index of the table in full.
pub const VACUUM_DEAD_RATIO_DEFAULT: f64 = 0.05;
/// The longest a table that vacuum could not reclaim waits before it is
/// vacuumed again by default.
pub const VACUUM_BACKOFF_MAX_DEFAULT: Duration = Duration::from_secs(30);
/// The check interval varies by this fraction either way, so workers
/// started together do not read the statistics in lockstep.
pub const VACUUM_JITTER: f64 = 0.2;

/// What the paced vacuum declares, as `drover handlers` prints it.
pub const VACUUM_STRATEGY: Strategy = Strategy {
    idempotency: "VACUUM changes no row: a second vacuum of a table finds less to do, and a \
                  second worker's concurrent one is skipped (VACUUM (SKIP_LOCKED)), never \
                  waited for",
    retry: "a vacuum that fails is tried again at the next check (about a second later); one \
            that leaves a table's dead tuples not halved (an old snapshot held open) doubles \
            that table's wait, up to 30 s, until one reclaims",
    checkpoint: "none: each check reads the dead-tuple counts afresh from pg_stat_user_tables",
    recovery: "nothing to recover: a vacuum cut off by a crash is ended by PostgreSQL, and the \
               next check of any worker vacuums what is still over the threshold",
};

/// The paced vacuum's role row for `drover handlers`: the four strategies
/// and how it paces itself.
pub fn vacuum_role() -> RoleInfo {
    RoleInfo::new("paced vacuum", "vacuum", VACUUM_STRATEGY).with(
        "pacing",
        "a table is vacuumed once its dead tuples reach the threshold (DROVER_VACUUM_THRESHOLD) \
         and the dead ratio of its live rows; PostgreSQL only, off with DROVER_VACUUM=off",
    )
}

/// The paced vacuum's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct VacuumConfig {
    /// The mean interval between two reads of the dead-tuple counts.
    /// Default [`VACUUM_CHECK_EVERY_DEFAULT`].
    pub check_every: Duration,
    /// A table is vacuumed when its dead tuples reach this many **and**
    /// [`dead_ratio`](VacuumConfig::dead_ratio) of its live rows. Default
    /// [`VACUUM_DEAD_THRESHOLD_DEFAULT`].
    pub dead_threshold: u64,
    /// The fraction of a table's live rows its dead tuples must also reach
    /// (0: the threshold alone decides). Default
    /// [`VACUUM_DEAD_RATIO_DEFAULT`].
    pub dead_ratio: f64,
    /// The longest wait of a table whose vacuums reclaim nothing; the wait
    /// starts at twice [`check_every`](VacuumConfig::check_every) and
    /// doubles per such vacuum. Default [`VACUUM_BACKOFF_MAX_DEFAULT`].
    pub backoff_max: Duration,
}

impl Default for VacuumConfig {
    fn default() -> Self {
        VacuumConfig {
            check_every: VACUUM_CHECK_EVERY_DEFAULT,
            dead_threshold: VACUUM_DEAD_THRESHOLD_DEFAULT,
            dead_ratio: VACUUM_DEAD_RATIO_DEFAULT,
            backoff_max: VACUUM_BACKOFF_MAX_DEFAULT,
        }
    }
}

impl VacuumConfig {
    /// Whether a table with this garbage is due for a vacuum.
    pub fn is_due(&self, g: &TableGarbage) -> bool {
        g.dead >= self.dead_threshold && g.dead as f64 >= self.dead_ratio * g.live as f64
    }

    fn validate(&self) -> Result<()> {
        if self.check_every.is_zero() {
            return Err(Error::Config(
                "the vacuum check interval must be longer than zero".into(),
            ));
        }
        if self.dead_threshold == 0 {
            return Err(Error::Config(
                "the vacuum dead-tuple threshold must be at least 1".into(),
            ));
        }
        if !self.dead_ratio.is_finite() || self.dead_ratio < 0.0 {
            return Err(Error::Config(format!(
                "the vacuum dead ratio ({}) must be a fraction of zero or more",
                self.dead_ratio
            )));
        }
        if self.backoff_max < self.check_every {
            return Err(Error::Config(format!(
                "the vacuum's longest backoff ({:?}) must be at least its check interval ({:?})",
                self.backoff_max, self.check_every
            )));
        }
        Ok(())
    }
}

/// One table a run vacuumed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VacuumOutcome {
    /// The table.
    pub table: String,
    /// Its dead tuples as read before the vacuum.
    pub dead_before: u64,
    /// Its dead tuples as read right after.
    pub dead_after: u64,
    /// How long the vacuum took (the statement and the read after).
    #[serde(serialize_with = "secs")]
    pub took: Duration,
    /// True when the vacuum at least halved the dead tuples; false puts
    /// the table in backoff (its wait doubles).
    pub reclaimed: bool,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VacuumReport {
    /// Every table's garbage as read at the start of the run.
    pub garbage: Vec<TableGarbage>,
    /// The tables vacuumed, in table order.
    pub vacuumed: Vec<VacuumOutcome>,
    /// Tables due but skipped by `SKIP_LOCKED` (their lock was held, by
    /// another worker's vacuum or a DDL), for the next check.
    pub skipped: Vec<String>,
    /// Tables due but waiting out their backoff.
    pub backed_off: Vec<String>,
    /// Tables due that the connecting login may not vacuum (no longer
    /// tried).
    pub forbidden: Vec<String>,
    /// Each table whose vacuum failed, with the error.
    pub errors: Vec<(String, String)>,
}

impl VacuumReport {
    /// The outcome for `table`, if this run vacuumed it.
    pub fn outcome(&self, table: &str) -> Option<&VacuumOutcome> {
        self.vacuumed.iter().find(|o| o.table == table)
    }
}

/// Where one table stands with this vacuumer.
#[derive(Debug, Default)]
struct TableState {
    /// The current backoff; zero when not backed off.
    wait: Duration,
    /// Not vacuumed before this instant (backoff).
    not_before: Option<Instant>,
    /// The login may not vacuum it: never tried again.
    forbidden: bool,
}

/// The paced vacuum service. See the [module docs](crate::vacuum).
pub struct Vacuumer {
    queue: Queue,
    config: VacuumConfig,
    tables: Mutex<HashMap<String, TableState>>,
}

impl std::fmt::Debug for Vacuumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vacuumer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What to do with a due table.
enum Plan {
    Vacuum,
    BackedOff,
    Forbidden,
}

impl Vacuumer {
    /// A vacuumer over `queue`'s store.
    ///
    /// # Errors
    /// [`Error::Config`] for a zero check interval or threshold, a negative
    /// or non-finite ratio, or a longest backoff shorter than the check
    /// interval.
    pub fn new(queue: Queue, config: VacuumConfig) -> Result<Self> {
        config.validate()?;
        Ok(Vacuumer {
            queue,
            config,
            tables: Mutex::new(HashMap::new()),
        })
    }

    /// The settings it runs with.
    pub fn config(&self) -> &VacuumConfig {
        &self.config
    }

    fn plan(&self, table: &str, now: Instant) -> Plan {
        let tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        match tables.get(table) {
            Some(s) if s.forbidden => Plan::Forbidden,
            Some(s) if s.not_before.is_some_and(|t| now < t) => Plan::BackedOff,
            _ => Plan::Vacuum,
        }
    }

    /// Records a vacuum that ran: resets the table's backoff when it
    /// reclaimed, doubles it when it did not (logging the entry once).
    fn settle(&self, o: &VacuumOutcome, at: Instant) {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        let s = tables.entry(o.table.clone()).or_default();
        if o.reclaimed {
            if !s.wait.is_zero() {
                tracing::info!(
                    table = %o.table,
                    dead_before = o.dead_before,
                    dead_after = o.dead_after,
                    "vacuum reclaims again: backoff over"
                );
            }
            s.wait = Duration::ZERO;
            s.not_before = None;
            return;
        }
        let entering = s.wait.is_zero();
        s.wait = if entering {
            self.config.check_every * 2
        } else {
            s.wait * 2
        }
        .min(self.config.backoff_max);
        s.not_before = Some(at + s.wait);
        if entering {
            tracing::info!(
                table = %o.table,
                dead_before = o.dead_before,
                dead_after = o.dead_after,
                wait = ?s.wait,
                "vacuum reclaimed less than half of the dead tuples (an old snapshot held open?): \
                 backing off, doubling up to {:?}",
                self.config.backoff_max
            );
        }
    }

    fn forbid(&self, table: &str, e: &Error) {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        let s = tables.entry(table.to_owned()).or_default();
        if !s.forbidden {
            s.forbidden = true;
            tracing::warn!(
                table,
                error = %e,
                "this login may not vacuum the table: no longer trying it (connect as the \
                 owner that migrated, or set DROVER_VACUUM=off)"
            );
        }
    }

    /// Reads every table's garbage, publishes it, and vacuums each table
    /// that is due ([`VacuumConfig::is_due`]) and not backed off, one at a
    /// time.
    ///
    /// # Errors
    /// Only when the garbage cannot be read; a table's failed vacuum is in
    /// the report.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the vacuum in flight to PostgreSQL,
    /// which finishes or ends it; no backoff is recorded for it.
    pub async fn run_once(&self) -> Result<VacuumReport> {
        let store = self.queue.store();
        let garbage = store.table_garbage().await?;
        let mut report = VacuumReport::default();
        for g in &garbage {
            metrics::gauge!("drover_table_dead_tuples", "table" => g.table.clone())
                .set(g.dead as f64);
            if !self.config.is_due(g) {
                continue;
            }
            match self.plan(&g.table, Instant::now()) {
                Plan::Forbidden => {
                    report.forbidden.push(g.table.clone());
                    continue;
                }
                Plan::BackedOff => {
                    report.backed_off.push(g.table.clone());
                    continue;
                }
                Plan::Vacuum => {}
            }
            let started = Instant::now();
            match store.table_vacuum(&g.table).await {
                Ok(v) if !v.vacuumed => {
                    tracing::debug!(table = %g.table, "vacuum skipped: the table's lock is held");
                    report.skipped.push(g.table.clone());
                }
                Ok(v) => {
                    let took = started.elapsed();
                    let o = VacuumOutcome {
                        table: g.table.clone(),
                        dead_before: g.dead,
                        dead_after: v.after.dead,
                        took,
                        reclaimed: v.after.dead.saturating_mul(2) <= g.dead,
                    };
                    metrics::counter!("drover_vacuum_runs_total", "table" => g.table.clone())
                        .increment(1);
                    metrics::histogram!("drover_vacuum_seconds", "table" => g.table.clone())
                        .record(took.as_secs_f64());
                    metrics::gauge!("drover_table_dead_tuples", "table" => g.table.clone())
                        .set(v.after.dead as f64);
                    tracing::debug!(
                        table = %o.table,
                        dead_before = o.dead_before,
                        dead_after = o.dead_after,
                        took = ?o.took,
                        "vacuumed"
                    );
                    self.settle(&o, Instant::now());
                    report.vacuumed.push(o);
                }
                Err(e) if e.kind() == ErrorKind::Forbidden => {
                    self.forbid(&g.table, &e);
                    report.forbidden.push(g.table.clone());
                }
                // Dropped since the read: nothing to do.
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(table = %g.table, error = %e, "vacuum failed");
                    report.errors.push((g.table.clone(), e.to_string()));
                }
            }
        }
        report.garbage = garbage;
        Ok(report)
    }

    /// Runs a check every jittered interval (from one check's start to the
    /// next) until `stop`.
    ///
    /// # Cancel safety
    /// `stop` ends a run in flight as dropping [`Vacuumer::run_once`] does.
    pub async fn run(&self, stop: CancellationToken) {
        let jittered = |d: Duration| {
            let jitter = 1.0 + VACUUM_JITTER * (2.0 * rand::random::<f64>() - 1.0);
            d.mul_f64(jitter)
        };
        let mut next = Instant::now() + jittered(self.config.check_every);
        let mut failing = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until(next) => {}
            }
            next = Instant::now() + jittered(self.config.check_every);
            tokio::select! {
                () = stop.cancelled() => return,
                r = self.run_once() => match r {
                    Ok(_) => failing = false,
                    // Once per outage, not once a second.
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "vacuum check failed: reading the dead-tuple counts");
                    }
                    Err(_) => {}
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn g(live: u64, dead: u64) -> TableGarbage {
        TableGarbage {
            table: "items".into(),
            live,
            dead,
            last_vacuum: None,
        }
    }

    #[test]
    fn due_needs_the_threshold_and_the_ratio() {
        let c = VacuumConfig::default();
        assert!(!c.is_due(&g(0, 4_999)));
        assert!(c.is_due(&g(0, 5_000)));
        assert!(c.is_due(&g(100_000, 5_000)));
        // A large table: 5 % of its live rows first.
        assert!(!c.is_due(&g(1_000_000, 49_999)));
        assert!(c.is_due(&g(1_000_000, 50_000)));
    }

    #[test]
    fn config_is_validated() {
        assert!(VacuumConfig::default().validate().is_ok());
        for bad in [
            VacuumConfig {
                check_every: Duration::ZERO,
                ..VacuumConfig::default()
            },
            VacuumConfig {
                dead_threshold: 0,
                ..VacuumConfig::default()
            },
            VacuumConfig {
                dead_ratio: f64::NAN,
                ..VacuumConfig::default()
            },
            VacuumConfig {
                backoff_max: Duration::from_millis(10),
                ..VacuumConfig::default()
            },
        ] {
            assert_eq!(bad.validate().unwrap_err().kind(), ErrorKind::Config);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_to_the_max_and_resets_on_a_reclaim() {
        let v = Vacuumer::new(Queue::memory(), VacuumConfig::default()).unwrap();
        let stuck = VacuumOutcome {
            table: "items".into(),
            dead_before: 10_000,
            dead_after: 9_000,
            took: Duration::ZERO,
            reclaimed: false,
        };
        let now = Instant::now();
        let mut waits = Vec::new();
        for _ in 0..6 {
            v.settle(&stuck, now);
            waits.push(v.tables.lock().unwrap()["items"].wait.as_secs());
        }
        assert_eq!(waits, [2, 4, 8, 16, 30, 30]);
        assert!(matches!(v.plan("items", now), Plan::BackedOff));
        assert!(matches!(
            v.plan("items", now + Duration::from_secs(30)),
            Plan::Vacuum
        ));
        v.settle(
            &VacuumOutcome {
                dead_after: 100,
                reclaimed: true,
                ..stuck
            },
            now,
        );
        assert_eq!(v.tables.lock().unwrap()["items"].wait, Duration::ZERO);
        assert!(matches!(v.plan("items", now), Plan::Vacuum));
    }
}
