//! Worker settings: one type, from flags and `DROVER_*` environment
//! variables, every field with a documented default, validated together at
//! start so a bad combination is refused with the relation it breaks.
//!
//! One table, [`SETTINGS`], lists every setting (field, variable, flag,
//! default, parser, meaning); `from_env`, `drover worker`'s flags,
//! `.env.example` and `drover env-example` are generated from it. The
//! lease rule is [`renewal_for`]; `DROVER_POOL_SIZE` is read by the store
//! alone ([`ConnectOptions::from_env`](crate::store::ConnectOptions::from_env)).

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::{Error, Result};

mod row;
use row::setting;
pub use row::{FlagCheck, SettingDef, SettingFlag, SettingKind, SettingValue, parse_lanes};
use row::{flag, nonzero, range};

/// `DROVER_LANES`: lanes drained (comma-separated).
pub const LANES_DEFAULT: &str = "default";
/// `DROVER_CAPACITY`: handlers running at once.
pub const CAPACITY_DEFAULT: usize = 20;
/// `DROVER_LEASE`: how long a claim holds without renewal.
pub const LEASE_DEFAULT: Duration = Duration::from_secs(30);
/// `DROVER_RENEW_TIMEOUT`: the longest one renewal may take (a fifteenth
/// of the lease unless set, so several retries fit in half a lease): the
/// [`renewal_for`] the default lease, held equal by a unit test.
pub const RENEW_TIMEOUT_DEFAULT: Duration = Duration::from_secs(2);

/// The lease rule: the renewal interval (a third of the lease) and the
/// renewal timeout (a fifteenth) a lease brings along unless they are set.
/// A failed renewal is retried after half the timeout, so with these the
/// interval plus two timeouts stay under half the lease
/// ([`WorkerSettings::validate`]). Every place that sets a lease uses it,
/// through [`WorkerSettings::set_lease`].
pub fn renewal_for(lease: Duration) -> (Duration, Duration) {
    (lease / 3, lease / 15)
}
/// `DROVER_HEARTBEAT_INTERVAL`: how often liveness is beaten and published.
pub const HEARTBEAT_INTERVAL_DEFAULT: Duration = Duration::from_secs(5);
/// `DROVER_POLL_INTERVAL`: the claim poll when no wake-up arrives.
pub const POLL_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);
// The defaults of the settings that steer a role (the sweep, the paced
// vacuum, the scheduler and its heartbeat) are defined here, with the table
// that names them, and the roles' modules re-export them
// (`maintenance::ITEM_RETENTION_DEFAULT`,
// `vacuum::VACUUM_DEAD_THRESHOLD_DEFAULT`, ...): the roles stand on the
// worker, so the arrow runs from them to here, never back.
/// `DROVER_SWEEP_INTERVAL`: how often the sweep runs (jittered ±20 %).
pub const SWEEP_INTERVAL_DEFAULT: Duration = Duration::from_secs(15);
/// `DROVER_ITEM_RETENTION`: how long final items are kept before purge.
pub const ITEM_RETENTION_DEFAULT: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long the row of a worker that stopped beating (offline or lost) is
/// kept by default before the sweep deletes it.
pub const WORKER_RETENTION_DEFAULT: Duration = Duration::from_secs(24 * 3600);
/// `DROVER_VACUUM`: whether the worker runs the paced vacuum (PostgreSQL).
pub const VACUUM_DEFAULT: bool = true;
/// `DROVER_VACUUM_THRESHOLD`: the dead tuples at which the paced vacuum
/// vacuums a table.
pub const VACUUM_THRESHOLD_DEFAULT: u64 = 5_000;
/// `DROVER_SHUTDOWN_GRACE`: how long in-flight items may finish on shutdown.
pub const SHUTDOWN_GRACE_DEFAULT: Duration = Duration::from_secs(30);
/// `DROVER_HANDLER_TIMEOUT`: a run's time limit when its handler names none.
pub const HANDLER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// `DROVER_POOL_SIZE`: database connections the process opens (the
/// store's default: `Queue::connect` opens the same pool).
pub const POOL_SIZE_DEFAULT: u32 = crate::store::POOL_SIZE_DEFAULT;
/// The largest `--capacity` `drover worker` accepts.
pub const CAPACITY_MAX: usize = 100_000;
/// Where `drover worker` serves `/healthz`, `/readyz` and `/metrics`
/// unless `--metrics-addr` / `DROVER_METRICS_ADDR` says otherwise. A
/// library worker serves none by default ([`WorkerSettings::default`]'s
/// `metrics_addr` is `None`): two workers in one process (tests, a service
/// that serves its own metrics) must not race for one port, so the
/// listener is opted into with
/// [`WorkerBuilder::metrics_addr`](super::WorkerBuilder::metrics_addr) or
/// the variable.
pub const METRICS_ADDR_DEFAULT: &str = "127.0.0.1:9464";
/// `DROVER_COMPLETE_BATCH`: the most completions written in one statement.
pub const COMPLETE_BATCH_DEFAULT: usize = 500;
/// `DROVER_COMPLETE_WINDOW`: how long finished items wait to share a write.
pub const COMPLETE_WINDOW_DEFAULT: Duration = Duration::from_millis(2);

/// `DROVER_PREFETCH`: claimed items a worker may hold ready beyond its free
/// slots, so claims come in larger batches (0 = claim only for free slots).
/// Default: adaptive (`None`): about 20 ms of work at the rate items are
/// being started, at most fifty times the capacity — large claims for quick
/// handlers, none held ahead for slow ones.
pub const PREFETCH_DEFAULT: Option<usize> = None;
/// `DROVER_CLAIMERS`: claim statements a worker keeps in flight at once, so
/// their commits share the database's WAL flushes (one for a lane a
/// concurrency limit applies to: such claims take the limit's scope lock;
/// while claims are large, a second goes out only when it asks for at
/// least half the prefetch, since two claims race for the lane's head).
pub const CLAIMERS_DEFAULT: usize = 2;
/// `DROVER_CANCEL_GRACE`: how long a handler whose cancellation token fired
/// (shutdown past its grace, or a timeout) may take to return before its
/// future is dropped.
pub const CANCEL_GRACE_DEFAULT: Duration = Duration::from_secs(1);

/// `DROVER_SPREAD_FALLBACK`: after a wake-up designating another worker of
/// the lane (see `worker::spread`), how long this one waits before it
/// claims anyway, so the work starts when the designated worker is full,
/// slow or gone. The designated worker, and a worker alone on its lane,
/// claim at once. Zero: every worker claims at every wake-up.
pub const SPREAD_FALLBACK_DEFAULT: Duration = Duration::from_millis(3);

/// `DROVER_HEARTBEAT_CRON`: when the built-in `drover.heartbeat` job fires
/// (a cron expression, seconds optional); `off` disables it. Every minute,
/// on the minute.
pub const HEARTBEAT_CRON_DEFAULT: &str = "* * * * *";
/// `DROVER_HEARTBEAT_LANE`: the lane the built-in `drover.heartbeat` job's
/// items go to. The same on every worker by default, whatever lanes each
/// drains, so workers with different first lanes do not rewrite its
/// schedule row in turn.
pub const HEARTBEAT_LANE_DEFAULT: &str = crate::item::DEFAULT_LANE;
/// `DROVER_SCHEDULER_INTERVAL`: the longest the scheduler waits between
/// runs (it also wakes for each schedule's next tick).
pub const SCHEDULER_INTERVAL_DEFAULT: Duration = Duration::from_secs(15);

/// Connections the runtime itself keeps busy at worst besides its claims:
/// one completing, one for liveness and the sweep (each claim in flight
/// takes one more).
pub const RUNTIME_CONNECTIONS: u32 = 2;
/// Connections the wake-up listener holds for the worker's life (on
/// PostgreSQL its `LISTEN` session is taken from the pool and kept).
pub const LISTENER_CONNECTIONS: u32 = 1;
/// Running items that share one connection for their renewals and
/// failure writes (each is a short statement every few seconds).
pub const ITEMS_PER_CONNECTION: u32 = 4;

/// Everything a worker process is told.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSettings {
    /// Lanes drained, in claim order. Default [`LANES_DEFAULT`].
    pub lanes: Vec<String>,
    /// Lanes this worker does not drain but writes work of its own to (the
    /// heartbeat's, a schedule's or a workflow's lane), declared drained by
    /// another worker. [`WorkerBuilder::build`](super::WorkerBuilder::build)
    /// refuses a worker whose own work goes to a lane in neither list.
    /// Default none.
    pub drained_elsewhere: Vec<String>,
    /// Handlers running at once. Default [`CAPACITY_DEFAULT`].
    pub capacity: usize,
    /// Claim lease. Default [`LEASE_DEFAULT`].
    pub lease: Duration,
    /// Renewal interval. Default a third of the lease.
    pub renew_interval: Duration,
    /// One renewal's time limit. Default [`RENEW_TIMEOUT_DEFAULT`] (a
    /// fifteenth of the lease). A failed renewal is retried after half of it.
    pub renew_timeout: Duration,
    /// Liveness beat. Default [`HEARTBEAT_INTERVAL_DEFAULT`].
    pub heartbeat_interval: Duration,
    /// Poll fallback. Default [`POLL_INTERVAL_DEFAULT`].
    pub poll_interval: Duration,
    /// Sweep interval. Default [`SWEEP_INTERVAL_DEFAULT`].
    pub sweep_interval: Duration,
    /// Final items kept this long. Default [`ITEM_RETENTION_DEFAULT`].
    pub item_retention: Duration,
    /// Whether the paced vacuum runs (PostgreSQL only; see
    /// [`crate::vacuum`]). Default [`VACUUM_DEFAULT`] (on).
    pub vacuum: bool,
    /// Dead tuples at which the paced vacuum vacuums a table. Default
    /// [`VACUUM_THRESHOLD_DEFAULT`].
    pub vacuum_threshold: u64,
    /// Drain time on shutdown. Default [`SHUTDOWN_GRACE_DEFAULT`].
    pub shutdown_grace: Duration,
    /// Default run time limit. Default [`HANDLER_TIMEOUT_DEFAULT`].
    pub handler_timeout: Duration,
    /// Database pool size. Default [`POOL_SIZE_DEFAULT`].
    pub pool_size: u32,
    /// Metrics and health listener; `None` serves none. Default `None` for
    /// a library worker (port 0 binds a free port, logged at start and
    /// read back with `RunningWorker::metrics_addr`); `drover worker`'s
    /// default is [`METRICS_ADDR_DEFAULT`]. Needs the `metrics-listener`
    /// feature (on by default).
    pub metrics_addr: Option<SocketAddr>,
    /// Completions per statement. Default [`COMPLETE_BATCH_DEFAULT`].
    pub complete_batch: usize,
    /// Completion gathering window. Default [`COMPLETE_WINDOW_DEFAULT`].
    pub complete_window: Duration,
    /// Items held claimed and ready beyond the free slots. Default:
    /// adaptive ([`PREFETCH_DEFAULT`]). A prefetched item's lease runs from
    /// its claim; one that waited half its lease is released unrun.
    pub prefetch: Option<usize>,
    /// Claims in flight at once. Default [`CLAIMERS_DEFAULT`].
    pub claimers: usize,
    /// After a run's cancellation token fires on shutdown past the grace
    /// period or on a timeout, how long the handler may take to return
    /// (and write its own cleanup) before its future is dropped. A lost
    /// lease gets none: the token fires and the run is dropped at once.
    /// Default [`CANCEL_GRACE_DEFAULT`].
    pub cancel_grace: Duration,
    /// The longest a database call waits for a connection before it fails
    /// fast (`DROVER_DB_TIMEOUT`). Default
    /// [`DB_TIMEOUT_DEFAULT`](crate::store::DB_TIMEOUT_DEFAULT).
    pub db_timeout: Duration,
    /// How long a worker not designated by a wake-up waits before it claims
    /// (zero: at once, like the designated one). Default
    /// [`SPREAD_FALLBACK_DEFAULT`].
    pub spread_fallback: Duration,

    // Periodic work.
    /// The heartbeat job's cron expression; `None` turns it off. Default
    /// [`HEARTBEAT_CRON_DEFAULT`] (every minute).
    pub heartbeat_cron: Option<String>,
    /// The lane the heartbeat's items go to (some worker must drain it).
    /// Default [`HEARTBEAT_LANE_DEFAULT`].
    pub heartbeat_lane: String,
    /// The scheduler's longest wait. Default [`SCHEDULER_INTERVAL_DEFAULT`].
    pub scheduler_interval: Duration,
}

/// One environment variable a worker reads: the source `.env.example` is
/// generated from ([`WorkerSettings::variables`]), so the file lists what
/// the code reads, with the defaults the code uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// The variable's name (`DROVER_CAPACITY`).
    pub name: &'static str,
    /// The default, in the form the variable takes (`20`, `30s`).
    pub default: String,
    /// One line of meaning.
    pub meaning: &'static str,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            lanes: vec![LANES_DEFAULT.to_owned()],
            drained_elsewhere: Vec::new(),
            capacity: CAPACITY_DEFAULT,
            lease: LEASE_DEFAULT,
            renew_interval: renewal_for(LEASE_DEFAULT).0,
            renew_timeout: renewal_for(LEASE_DEFAULT).1,
            heartbeat_interval: HEARTBEAT_INTERVAL_DEFAULT,
            poll_interval: POLL_INTERVAL_DEFAULT,
            sweep_interval: SWEEP_INTERVAL_DEFAULT,
            item_retention: ITEM_RETENTION_DEFAULT,
            vacuum: VACUUM_DEFAULT,
            vacuum_threshold: VACUUM_THRESHOLD_DEFAULT,
            shutdown_grace: SHUTDOWN_GRACE_DEFAULT,
            handler_timeout: HANDLER_TIMEOUT_DEFAULT,
            pool_size: POOL_SIZE_DEFAULT,
            metrics_addr: None,
            complete_batch: COMPLETE_BATCH_DEFAULT,
            complete_window: COMPLETE_WINDOW_DEFAULT,
            prefetch: PREFETCH_DEFAULT,
            claimers: CLAIMERS_DEFAULT,
            cancel_grace: CANCEL_GRACE_DEFAULT,
            db_timeout: crate::store::DB_TIMEOUT_DEFAULT,
            spread_fallback: SPREAD_FALLBACK_DEFAULT,
            heartbeat_cron: Some(HEARTBEAT_CRON_DEFAULT.to_owned()),
            heartbeat_lane: HEARTBEAT_LANE_DEFAULT.to_owned(),
            scheduler_interval: SCHEDULER_INTERVAL_DEFAULT,
        }
    }
}

impl WorkerSettings {
    /// Every variable [`WorkerSettings::from_env`] reads, in the order it
    /// reads them, with the default rendered from [`WorkerSettings::default`]:
    /// the rows of [`SETTINGS`].
    pub fn variables() -> Vec<Variable> {
        SETTINGS
            .iter()
            .map(|r| Variable {
                name: r.env,
                default: r.default_text(),
                meaning: r.doc,
            })
            .collect()
    }

    /// The defaults overridden by any `DROVER_*` variable set, each row of
    /// [`SETTINGS`] in turn. The renewal interval and timeout follow the
    /// lease unless `DROVER_RENEW_INTERVAL` / `DROVER_RENEW_TIMEOUT` are
    /// set (their rows come after the lease's). `DROVER_POOL_SIZE` is read
    /// by [`ConnectOptions::from_env`](crate::store::ConnectOptions::from_env),
    /// the one place it is read, so the worker and `Queue::connect` agree.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the variable that does not parse.
    pub fn from_env() -> Result<Self> {
        let mut s = WorkerSettings::default();
        for row in SETTINGS {
            if row.store_reads {
                s.pool_size = crate::store::ConnectOptions::from_env()?.pool_size;
            } else if let Some(v) = row.env_text() {
                (row.set)(&mut s, row.parse_env(&v)?);
            }
        }
        Ok(s)
    }
}

/// The one source of worker settings: per setting its field, variable,
/// `drover worker` flag (with what the flag refuses beyond the variable),
/// default (the field's in [`WorkerSettings::default`]), parser (its
/// [`SettingKind`]) and meaning. [`WorkerSettings::from_env`], the CLI's flags,
/// `.env.example` and `drover env-example` are generated from it. Order
/// matters: a row may bring later ones along (the lease), and is the order
/// of `.env.example` and `--help`.
pub const SETTINGS: &[SettingDef] = &[
    setting!(lanes: Lanes, "DROVER_LANES", flag("lanes", "A,B"),
        "lanes drained, comma-separated, in claim order"),
    setting!(drained_elsewhere: Lanes, "DROVER_DRAINED_ELSEWHERE", flag("drained-elsewhere", "A,B"),
        "lanes another worker drains that this one's own work goes to (the heartbeat's, a schedule's, a workflow's), comma-separated"),
    setting!(capacity: Usize, "DROVER_CAPACITY", range("capacity", "N", 1, CAPACITY_MAX as u64),
        "handlers running at once"),
    setting!(lease: Duration, "DROVER_LEASE", nonzero("lease", "DURATION"),
        "how long a claim holds without renewal", set = WorkerSettings::set_lease),
    setting!(renew_interval: Duration, "DROVER_RENEW_INTERVAL", nonzero("renew-interval", "DURATION"),
        "how often a running item renews its lease (default: a third of the lease)"),
    setting!(renew_timeout: Duration, "DROVER_RENEW_TIMEOUT", None,
        "the longest one renewal may take (default: a fifteenth of the lease)"),
    setting!(heartbeat_interval: Duration, "DROVER_HEARTBEAT_INTERVAL", nonzero("heartbeat-interval", "DURATION"),
        "how often liveness is beaten in memory and published to the workers table"),
    setting!(poll_interval: Duration, "DROVER_POLL_INTERVAL", nonzero("poll-interval", "DURATION"),
        "the claim poll when no wake-up arrives"),
    setting!(sweep_interval: Duration, "DROVER_SWEEP_INTERVAL", nonzero("sweep-interval", "DURATION"),
        "how often the sweep runs (stale requeue, purge, gauges), jittered +-20 %"),
    setting!(item_retention: Duration, "DROVER_ITEM_RETENTION", nonzero("item-retention", "DURATION"),
        "done, failed and cancelled items are purged after this"),
    setting!(vacuum: Switch, "DROVER_VACUUM", flag("vacuum", "on|off"),
        "PostgreSQL: vacuum drover's tables once their dead tuples pass the threshold (on|off)"),
    setting!(vacuum_threshold: U64, "DROVER_VACUUM_THRESHOLD", range("vacuum-threshold", "N", 1, u64::MAX),
        "PostgreSQL: the dead tuples at which the paced vacuum vacuums a table"),
    setting!(shutdown_grace: Duration, "DROVER_SHUTDOWN_GRACE", flag("shutdown-grace", "DURATION"),
        "how long in-flight items may finish on shutdown before they are released"),
    setting!(handler_timeout: Duration, "DROVER_HANDLER_TIMEOUT", None,
        "a run's time limit when its handler names none"),
    SettingDef {
        store_reads: true,
        ..setting!(pool_size: U32, "DROVER_POOL_SIZE", range("pool-size", "N", 1, u32::MAX as u64),
            "database connections the process opens (2 + claimers + capacity / 4 at least)")
    },
    setting!(prefetch: Prefetch, "DROVER_PREFETCH", None,
        "claimed items held ready beyond the free slots (unset: adaptive, about 20 ms of work)"),
    setting!(claimers: Usize, "DROVER_CLAIMERS", None,
        "claim statements in flight at once"),
    setting!(db_timeout: Duration, "DROVER_DB_TIMEOUT", nonzero("db-timeout", "DURATION"),
        "the longest a database call waits for a connection before it fails fast"),
    setting!(complete_batch: Usize, "DROVER_COMPLETE_BATCH", None,
        "the most completions written in one statement"),
    setting!(complete_window: Duration, "DROVER_COMPLETE_WINDOW", None,
        "how long finished items wait to share a completion write"),
    setting!(cancel_grace: Duration, "DROVER_CANCEL_GRACE", None,
        "how long a handler whose token fired may take to return before it is dropped"),
    setting!(spread_fallback: Duration, "DROVER_SPREAD_FALLBACK", None,
        "after a wake-up designating another worker of the lane, the wait before claiming anyway (0: at once)"),
    setting!(heartbeat_cron: Cron, "DROVER_HEARTBEAT_CRON", flag("heartbeat-cron", "CRON|off"),
        "when the built-in drover.heartbeat job fires (cron, seconds optional), or off"),
    setting!(heartbeat_lane: Lane, "DROVER_HEARTBEAT_LANE", flag("heartbeat-lane", "LANE"),
        "the lane the drover.heartbeat job's items go to, the same on every worker (some worker must drain it)"),
    setting!(scheduler_interval: Duration, "DROVER_SCHEDULER_INTERVAL", None,
        "the longest the scheduler waits between two looks at its schedules"),
    setting!(metrics_addr: Addr, "DROVER_METRICS_ADDR", flag("metrics-addr", "HOST:PORT|off"),
        "where /healthz, /readyz and /metrics listen: host:port, or off (default: off for a library worker, 127.0.0.1:9464 for drover worker)"),
];

impl WorkerSettings {
    /// Sets the lease and what follows it ([`renewal_for`]): the renewal
    /// interval and timeout. The one place the lease rule is applied.
    pub fn set_lease(&mut self, lease: Duration) {
        self.lease = lease;
        (self.renew_interval, self.renew_timeout) = renewal_for(lease);
    }

    /// The pool size that serves `capacity` running items: the runtime's
    /// own connections, the wake-up listener's, one per claimer, and one
    /// per [`ITEMS_PER_CONNECTION`] running items.
    pub fn pool_needed(capacity: usize, claimers: usize) -> u32 {
        let cap = u32::try_from(capacity).unwrap_or(u32::MAX);
        let claimers = u32::try_from(claimers).unwrap_or(u32::MAX);
        RUNTIME_CONNECTIONS
            .saturating_add(LISTENER_CONNECTIONS)
            .saturating_add(claimers)
            .saturating_add(cap.div_ceil(ITEMS_PER_CONNECTION))
    }

    /// Checks the settings together. `pool` is the pool the store actually
    /// opened (`None` for a store without one).
    ///
    /// # Errors
    /// [`Error::Config`] naming the relation broken.
    pub fn validate(&self, pool: Option<u32>) -> Result<()> {
        if self.lanes.is_empty() {
            return Err(Error::Config("at least one lane must be drained".into()));
        }
        for l in self.lanes.iter().chain(&self.drained_elsewhere) {
            crate::item::validate_lane(l)?;
        }
        crate::item::validate_lane(&self.heartbeat_lane)?;
        if self.capacity == 0 {
            return Err(Error::Config("capacity must be at least 1".into()));
        }
        if self.renew_interval.is_zero() {
            return Err(Error::Config(
                "the renewal interval must be longer than zero".into(),
            ));
        }
        if self.lease <= self.renew_interval * 2 {
            return Err(Error::Config(format!(
                "lease ({:?}) must exceed twice the renewal interval ({:?})",
                self.lease, self.renew_interval
            )));
        }
        if self.renew_timeout.is_zero() {
            return Err(Error::Config(
                "the renewal timeout must be longer than zero".into(),
            ));
        }
        if self.db_timeout.is_zero() {
            return Err(Error::Config(
                "the database timeout must be longer than zero".into(),
            ));
        }
        if self.renew_interval + self.renew_timeout * 2 >= self.lease / 2 {
            return Err(Error::Config(format!(
                "the renewal interval ({:?}) plus two renewal timeouts ({:?} each) must be \
                 shorter than half the lease ({:?}), so a failed renewal is retried before \
                 the worker gives the item up",
                self.renew_interval,
                self.renew_timeout,
                self.lease / 2
            )));
        }
        if self.heartbeat_interval.is_zero() || self.poll_interval.is_zero() {
            return Err(Error::Config(
                "heartbeat and poll intervals must be longer than zero".into(),
            ));
        }
        if self.sweep_interval.is_zero() {
            return Err(Error::Config(
                "the sweep interval must be longer than zero".into(),
            ));
        }
        if self.vacuum_threshold == 0 {
            return Err(Error::Config(
                "the vacuum threshold must be at least 1 (DROVER_VACUUM=off turns the vacuum off)"
                    .into(),
            ));
        }
        if self.claimers == 0 {
            return Err(Error::Config("claimers must be at least 1".into()));
        }
        if self.scheduler_interval.is_zero() {
            return Err(Error::Config(
                "the scheduler interval must be longer than zero".into(),
            ));
        }
        if self.complete_batch == 0 {
            return Err(Error::Config(
                "the completion batch must be at least 1".into(),
            ));
        }
        if let Some(pool) = pool {
            let need = Self::pool_needed(self.capacity, self.claimers);
            if pool < need {
                return Err(Error::Config(format!(
                    "capacity {} needs a pool of at least {need} connections \
                     ({RUNTIME_CONNECTIONS} for the runtime, {LISTENER_CONNECTIONS} for the wake-up listener, \
                     1 per claimer, 1 per {ITEMS_PER_CONNECTION} items); the pool has {pool}: raise \
                     the pool size to {need} (--pool-size or DROVER_POOL_SIZE, which Queue::connect \
                     reads; ConnectOptions::pool_size in Queue::connect_with) or lower --capacity",
                    self.capacity
                )));
            }
        }
        Ok(())
    }
}

/// An on/off setting: `on`, `true`, `1` or `off`, `false`, `0` (any case).
///
/// # Errors
/// [`Error::InvalidInput`] naming `field` for anything else.
pub fn parse_on_off(field: &'static str, v: &str) -> Result<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(Error::invalid(field, format!("{v:?} is not on or off"))),
    }
}

/// A heartbeat cron setting: `off` (or empty) turns the job off.
pub fn parse_heartbeat_cron(v: &str) -> Option<String> {
    let v = v.trim();
    (!v.is_empty() && !v.eq_ignore_ascii_case("off")).then(|| v.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `DROVER_*` name this file's `from_env` reads is listed by
    /// `variables()`, and nothing else is: `.env.example` cannot miss one.
    #[test]
    fn variables_list_exactly_what_from_env_reads() {
        let src = include_str!("settings.rs");
        let body = src
            .split("pub fn from_env()")
            .nth(1)
            .and_then(|b| b.split("pub fn pool_needed").next())
            .unwrap_or_default();
        let mut read: Vec<&str> = body
            .split('"')
            .filter(|s| {
                s.starts_with("DROVER_") && s.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            })
            .collect();
        read.sort_unstable();
        read.dedup();
        let mut listed: Vec<&str> = WorkerSettings::variables().iter().map(|v| v.name).collect();
        listed.sort_unstable();
        assert!(read.len() >= 17, "{read:?}");
        assert_eq!(read, listed);
    }

    #[test]
    fn defaults_validate() {
        WorkerSettings::default()
            .validate(Some(POOL_SIZE_DEFAULT))
            .expect("defaults are consistent");
    }

    #[test]
    fn lease_must_exceed_twice_renewal() {
        let s = WorkerSettings {
            lease: Duration::from_secs(10),
            renew_interval: Duration::from_secs(5),
            ..Default::default()
        };
        let e = s.validate(None).expect_err("refused");
        assert!(e.to_string().contains("twice the renewal interval"), "{e}");
    }

    #[test]
    fn capacity_must_fit_the_pool_and_names_the_size() {
        let s = WorkerSettings {
            capacity: 100,
            ..Default::default()
        };
        let e = s.validate(Some(10)).expect_err("refused");
        assert!(e.to_string().contains("at least 30"), "{e}");
        assert!(e.to_string().contains("DROVER_POOL_SIZE"), "{e}");
        s.validate(Some(30)).expect("fits");
    }

    #[test]
    fn pool_rule_counts_the_listen_connection() {
        // 2 runtime + 1 listener + 2 claimers + 20 / 4 items: the default
        // capacity still fits the default pool, with the listener counted.
        assert_eq!(WorkerSettings::pool_needed(20, 2), 10);
        assert_eq!(WorkerSettings::pool_needed(1, 1), 5);
        let s = WorkerSettings {
            capacity: 24,
            ..Default::default()
        };
        // 2 + 1 + 2 + 6 = 11: a pool of 10 would leave the last running
        // item's writes waiting on the connection LISTEN holds.
        s.validate(Some(10))
            .expect_err("the listener's connection counted");
    }

    /// Each row's default, rendered as its variable takes it, parses back
    /// to the default, and `set` takes what `get` gives: the table's
    /// parsers, renderers and fields agree.
    #[test]
    fn every_row_round_trips_its_default() {
        let d = WorkerSettings::default();
        for row in SETTINGS {
            let v = (row.get)(&d);
            let mut s = WorkerSettings::default();
            (row.set)(&mut s, v.clone());
            assert_eq!(s, d, "{}", row.field);
            if row.kind == SettingKind::Prefetch || row.store_reads {
                continue; // unset means adaptive; the store parses the pool
            }
            let parsed = row.parse_env(&row.default_text());
            assert_eq!(parsed.ok(), Some(v), "{}", row.field);
        }
    }

    #[test]
    fn rows_are_unique_and_only_the_pool_is_the_stores() {
        let mut fields: Vec<_> = SETTINGS.iter().map(|r| r.field).collect();
        let mut envs: Vec<_> = SETTINGS.iter().map(|r| r.env).collect();
        let n = SETTINGS.len();
        fields.sort_unstable();
        fields.dedup();
        envs.sort_unstable();
        envs.dedup();
        assert_eq!((fields.len(), envs.len()), (n, n));
        let store: Vec<_> = SETTINGS.iter().filter(|r| r.store_reads).collect();
        assert_eq!(store.len(), 1);
        assert_eq!(store[0].env, "DROVER_POOL_SIZE");
        for r in SETTINGS {
            let long = r.field.replace('_', "-");
            assert_eq!(r.long(), r.flag.map(|_| long.as_str()), "{}", r.field);
        }
    }

    #[test]
    fn the_lease_brings_the_renewal_along() {
        assert_eq!(renewal_for(LEASE_DEFAULT).1, RENEW_TIMEOUT_DEFAULT);
        let mut s = WorkerSettings::default();
        let lease = SETTINGS.iter().find(|r| r.field == "lease");
        let lease = lease.map(|r| r.parse_env("3s").map(|v| (r.set)(&mut s, v)));
        assert!(matches!(lease, Some(Ok(()))));
        assert_eq!(s.renew_interval, Duration::from_secs(1));
        assert_eq!(s.renew_timeout, Duration::from_millis(200));
    }
}
