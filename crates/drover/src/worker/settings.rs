//! Worker settings: one type, from flags and `DROVER_*` environment
//! variables, every field with a documented default, validated together at
//! start so a bad combination is refused with the relation it breaks.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::{Error, Result};

/// `DROVER_LANES`: lanes drained (comma-separated).
pub const LANES_DEFAULT: &str = "default";
/// `DROVER_CAPACITY`: handlers running at once.
pub const CAPACITY_DEFAULT: usize = 20;
/// `DROVER_LEASE`: how long a claim holds without renewal.
pub const LEASE_DEFAULT: Duration = Duration::from_secs(30);
/// `DROVER_RENEW_TIMEOUT`: the longest one renewal may take (a fifteenth
/// of the lease unless set, so several retries fit in half a lease).
pub const RENEW_TIMEOUT_DEFAULT: Duration = Duration::from_secs(2);
/// `DROVER_HEARTBEAT_INTERVAL`: how often liveness is beaten and published.
pub const HEARTBEAT_INTERVAL_DEFAULT: Duration = Duration::from_secs(5);
/// `DROVER_POLL_INTERVAL`: the claim poll when no wake-up arrives.
pub const POLL_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);
// `DROVER_SWEEP_INTERVAL` and `DROVER_ITEM_RETENTION` default to the
// sweep's own constants: the worker runs the sweep, so the arrow runs from
// here to `maintenance`, never back.
pub use crate::maintenance::{
    ITEM_RETENTION_DEFAULT, SWEEP_INTERVAL_DEFAULT, WORKER_RETENTION_DEFAULT,
};
/// `DROVER_VACUUM`: whether the worker runs the paced vacuum (PostgreSQL).
pub const VACUUM_DEFAULT: bool = true;
/// `DROVER_VACUUM_THRESHOLD`: the dead tuples at which the paced vacuum
/// vacuums a table.
pub const VACUUM_THRESHOLD_DEFAULT: u64 = crate::vacuum::VACUUM_DEAD_THRESHOLD_DEFAULT;
/// `DROVER_SHUTDOWN_GRACE`: how long in-flight items may finish on shutdown.
pub const SHUTDOWN_GRACE_DEFAULT: Duration = Duration::from_secs(30);
/// `DROVER_HANDLER_TIMEOUT`: a run's time limit when its handler names none.
pub const HANDLER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(300);
/// `DROVER_POOL_SIZE`: database connections the process opens.
pub const POOL_SIZE_DEFAULT: u32 = 10;
/// `DROVER_METRICS_ADDR`: where `/healthz` and `/metrics` listen.
pub const METRICS_ADDR_DEFAULT: &str = "127.0.0.1:9464";
/// `DROVER_COMPLETE_BATCH`: the most completions written in one statement.
pub const COMPLETE_BATCH_DEFAULT: usize = 500;
/// `DROVER_COMPLETE_WINDOW`: how long finished items wait to share a write.
pub const COMPLETE_WINDOW_DEFAULT: Duration = Duration::from_millis(2);

/// `DROVER_PREFETCH`: claimed items a worker may hold ready beyond its free
/// slots, so claims come in larger batches (0 = claim only for free slots).
/// Default: adaptive (`None`): about 20 ms of work at the rate items are
/// being started, at most ten times the capacity — large claims for quick
/// handlers, none held ahead for slow ones.
pub const PREFETCH_DEFAULT: Option<usize> = None;
/// `DROVER_CLAIMERS`: claim statements a worker keeps in flight at once, so
/// their commits share the database's WAL flushes.
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
/// (a cron expression, seconds optional); `off` disables it.
pub const HEARTBEAT_CRON_DEFAULT: &str = crate::periodic::HEARTBEAT_CRON_DEFAULT;
/// `DROVER_HEARTBEAT_LANE`: the lane the built-in `drover.heartbeat` job's
/// items go to. The same on every worker by default, whatever lanes each
/// drains, so workers with different first lanes do not rewrite its
/// schedule row in turn.
pub const HEARTBEAT_LANE_DEFAULT: &str = crate::item::DEFAULT_LANE;
/// `DROVER_SCHEDULER_INTERVAL`: the longest the scheduler waits between
/// runs (it also wakes for each schedule's next tick).
pub const SCHEDULER_INTERVAL_DEFAULT: Duration = crate::periodic::SCHEDULER_INTERVAL_DEFAULT;

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
    /// Metrics and health listener; `None` serves none. Default
    /// [`METRICS_ADDR_DEFAULT`].
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

fn text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            lanes: vec![LANES_DEFAULT.to_owned()],
            capacity: CAPACITY_DEFAULT,
            lease: LEASE_DEFAULT,
            renew_interval: LEASE_DEFAULT / 3,
            renew_timeout: RENEW_TIMEOUT_DEFAULT,
            heartbeat_interval: HEARTBEAT_INTERVAL_DEFAULT,
            poll_interval: POLL_INTERVAL_DEFAULT,
            sweep_interval: SWEEP_INTERVAL_DEFAULT,
            item_retention: ITEM_RETENTION_DEFAULT,
            vacuum: VACUUM_DEFAULT,
            vacuum_threshold: VACUUM_THRESHOLD_DEFAULT,
            shutdown_grace: SHUTDOWN_GRACE_DEFAULT,
            handler_timeout: HANDLER_TIMEOUT_DEFAULT,
            pool_size: POOL_SIZE_DEFAULT,
            metrics_addr: METRICS_ADDR_DEFAULT.parse().ok(),
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

fn env_duration(name: &'static str, into: &mut Duration) -> Result<()> {
    if let Ok(v) = std::env::var(name) {
        *into = humantime::parse_duration(v.trim())
            .map_err(|e| Error::invalid(name, format!("{v:?} is not a duration: {e}")))?;
    }
    Ok(())
}

fn env_num<T: std::str::FromStr>(name: &'static str, into: &mut T) -> Result<()> {
    if let Ok(v) = std::env::var(name) {
        *into = v
            .trim()
            .parse()
            .map_err(|_| Error::invalid(name, format!("{v:?} is not a number")))?;
    }
    Ok(())
}

impl WorkerSettings {
    /// Every variable [`WorkerSettings::from_env`] reads, in the order it
    /// reads them, with the default rendered from [`WorkerSettings::default`].
    /// A test holds this list and `from_env` together.
    pub fn variables() -> Vec<Variable> {
        let d = WorkerSettings::default();
        let v = |name, default: String, meaning| Variable {
            name,
            default,
            meaning,
        };
        vec![
            v(
                "DROVER_LANES",
                d.lanes.join(","),
                "lanes drained, comma-separated, in claim order",
            ),
            v(
                "DROVER_CAPACITY",
                d.capacity.to_string(),
                "handlers running at once",
            ),
            v(
                "DROVER_LEASE",
                text(d.lease),
                "how long a claim holds without renewal",
            ),
            v(
                "DROVER_RENEW_INTERVAL",
                text(d.renew_interval),
                "how often a running item renews its lease (default: a third of the lease)",
            ),
            v(
                "DROVER_RENEW_TIMEOUT",
                text(d.lease / 15),
                "the longest one renewal may take (default: a fifteenth of the lease)",
            ),
            v(
                "DROVER_HEARTBEAT_INTERVAL",
                text(d.heartbeat_interval),
                "how often liveness is beaten in memory and published to the workers table",
            ),
            v(
                "DROVER_POLL_INTERVAL",
                text(d.poll_interval),
                "the claim poll when no wake-up arrives",
            ),
            v(
                "DROVER_SWEEP_INTERVAL",
                text(d.sweep_interval),
                "how often the sweep runs (stale requeue, purge, gauges), jittered +-20 %",
            ),
            v(
                "DROVER_ITEM_RETENTION",
                text(d.item_retention),
                "done, failed and cancelled items are purged after this",
            ),
            v(
                "DROVER_VACUUM",
                on_off(d.vacuum),
                "PostgreSQL: vacuum drover's tables once their dead tuples pass the threshold (on|off)",
            ),
            v(
                "DROVER_VACUUM_THRESHOLD",
                d.vacuum_threshold.to_string(),
                "PostgreSQL: the dead tuples at which the paced vacuum vacuums a table",
            ),
            v(
                "DROVER_SHUTDOWN_GRACE",
                text(d.shutdown_grace),
                "how long in-flight items may finish on shutdown before they are released",
            ),
            v(
                "DROVER_HANDLER_TIMEOUT",
                text(d.handler_timeout),
                "a run's time limit when its handler names none",
            ),
            v(
                "DROVER_POOL_SIZE",
                d.pool_size.to_string(),
                "database connections the process opens (2 + claimers + capacity / 4 at least)",
            ),
            v(
                "DROVER_PREFETCH",
                String::new(),
                "claimed items held ready beyond the free slots (unset: adaptive, about 20 ms of work)",
            ),
            v(
                "DROVER_CLAIMERS",
                d.claimers.to_string(),
                "claim statements in flight at once",
            ),
            v(
                "DROVER_DB_TIMEOUT",
                text(d.db_timeout),
                "the longest a database call waits for a connection before it fails fast",
            ),
            v(
                "DROVER_COMPLETE_BATCH",
                d.complete_batch.to_string(),
                "the most completions written in one statement",
            ),
            v(
                "DROVER_COMPLETE_WINDOW",
                text(d.complete_window),
                "how long finished items wait to share a completion write",
            ),
            v(
                "DROVER_CANCEL_GRACE",
                text(d.cancel_grace),
                "how long a handler whose token fired may take to return before it is dropped",
            ),
            v(
                "DROVER_SPREAD_FALLBACK",
                text(d.spread_fallback),
                "after a wake-up designating another worker of the lane, the wait before claiming anyway (0: at once)",
            ),
            v(
                "DROVER_HEARTBEAT_CRON",
                d.heartbeat_cron.clone().unwrap_or_else(|| "off".to_owned()),
                "when the built-in drover.heartbeat job fires (cron, seconds optional), or off",
            ),
            v(
                "DROVER_HEARTBEAT_LANE",
                d.heartbeat_lane.clone(),
                "the lane the drover.heartbeat job's items go to, the same on every worker (some worker must drain it)",
            ),
            v(
                "DROVER_SCHEDULER_INTERVAL",
                text(d.scheduler_interval),
                "the longest the scheduler waits between two looks at its schedules",
            ),
            v(
                "DROVER_METRICS_ADDR",
                METRICS_ADDR_DEFAULT.to_owned(),
                "where /healthz, /readyz and /metrics listen (host:port, or off)",
            ),
        ]
    }

    /// The defaults overridden by any `DROVER_*` variable set. The renewal
    /// interval follows the lease unless `DROVER_RENEW_INTERVAL` is set.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the variable that does not parse.
    pub fn from_env() -> Result<Self> {
        let mut s = WorkerSettings::default();
        if let Ok(v) = std::env::var("DROVER_LANES") {
            s.lanes = v.split(',').map(|l| l.trim().to_owned()).collect();
        }
        env_num("DROVER_CAPACITY", &mut s.capacity)?;
        env_duration("DROVER_LEASE", &mut s.lease)?;
        s.renew_interval = s.lease / 3;
        s.renew_timeout = s.lease / 15;
        env_duration("DROVER_RENEW_INTERVAL", &mut s.renew_interval)?;
        env_duration("DROVER_RENEW_TIMEOUT", &mut s.renew_timeout)?;
        env_duration("DROVER_HEARTBEAT_INTERVAL", &mut s.heartbeat_interval)?;
        env_duration("DROVER_POLL_INTERVAL", &mut s.poll_interval)?;
        env_duration("DROVER_SWEEP_INTERVAL", &mut s.sweep_interval)?;
        env_duration("DROVER_ITEM_RETENTION", &mut s.item_retention)?;
        if let Ok(v) = std::env::var("DROVER_VACUUM") {
            s.vacuum = parse_on_off("DROVER_VACUUM", &v)?;
        }
        env_num("DROVER_VACUUM_THRESHOLD", &mut s.vacuum_threshold)?;
        env_duration("DROVER_SHUTDOWN_GRACE", &mut s.shutdown_grace)?;
        env_duration("DROVER_HANDLER_TIMEOUT", &mut s.handler_timeout)?;
        env_num("DROVER_POOL_SIZE", &mut s.pool_size)?;
        if let Ok(v) = std::env::var("DROVER_PREFETCH") {
            s.prefetch = Some(v.trim().parse().map_err(|_| {
                Error::invalid("DROVER_PREFETCH", format!("{v:?} is not a number"))
            })?);
        }
        env_num("DROVER_CLAIMERS", &mut s.claimers)?;
        env_duration("DROVER_DB_TIMEOUT", &mut s.db_timeout)?;
        env_num("DROVER_COMPLETE_BATCH", &mut s.complete_batch)?;
        env_duration("DROVER_COMPLETE_WINDOW", &mut s.complete_window)?;
        env_duration("DROVER_CANCEL_GRACE", &mut s.cancel_grace)?;
        env_duration("DROVER_SPREAD_FALLBACK", &mut s.spread_fallback)?;
        if let Ok(v) = std::env::var("DROVER_METRICS_ADDR") {
            s.metrics_addr = if v.trim().is_empty() || v.trim() == "off" {
                None
            } else {
                Some(v.trim().parse().map_err(|_| {
                    Error::invalid("DROVER_METRICS_ADDR", format!("{v:?} is not host:port"))
                })?)
            };
        }
        if let Ok(v) = std::env::var("DROVER_HEARTBEAT_CRON") {
            s.heartbeat_cron = parse_heartbeat_cron(&v);
        }
        if let Ok(v) = std::env::var("DROVER_HEARTBEAT_LANE") {
            v.trim().clone_into(&mut s.heartbeat_lane);
        }
        env_duration("DROVER_SCHEDULER_INTERVAL", &mut s.scheduler_interval)?;
        Ok(s)
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
        for l in &self.lanes {
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

/// `on` or `off` as a setting is written.
fn on_off(b: bool) -> String {
    if b { "on" } else { "off" }.to_owned()
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
}
