//! drover's benchmark, the engine behind `drover bench`.
//!
//! Three modes, each against a database it is given and inside a sandbox it
//! creates and drops itself (a fresh schema `drover_bench_<random>` on
//! PostgreSQL, a temporary file on SQLite), so it never touches user data:
//!
//! | mode | what it measures |
//! |---|---|
//! | [`Mode::Standard`] | the workload of `BENCH.md`: bulk enqueue, drain, latency |
//! | [`Mode::Sustained`] | a fixed offered rate for a duration: achieved rate and end-to-end latency per 5 s window |
//! | [`Mode::ClaimLatency`] | the claim statement itself with a large backlog waiting, optionally while another session holds a transaction open |
//! | [`run_http`] | `--http`: single-item enqueues (gathered) and the batch route over HTTP on loopback, against `pgbench -N` in the same run |
//! | [`Mode::Limits`] | `--limits`: what concurrency limits cost (a limit that never binds, on the standard drain), how busy a binding per-group limit keeps its slots, and claim latency with 1M items over 100k groups and behind one group of 1M ([`limits`]) |
//! | [`Mode::Soak`] | a fixed offered rate for a long duration on a throwaway stock-settings cluster, sampled every 5 s (rates, claim and end-to-end p50/p99, ready depth, live and dead tuples and size of every table) into CSV and PNG, with a wait record that places every stalled window ([`stalls`]) |
//! | [`Mode::Depth`] | `--depth N`: producers keep N items waiting while the workers drain for a window; throughput, end-to-end latency and `pgbench -N` per cell, optionally with parts of the items redesign switched off ([`depth`]) |
//! | [`run_chain`] | `--chain N`: a chain of `N` items, each after the one before, run end to end: its rate and the gap from each start to the next against the poll interval ([`chain`]) |
//! | [`BenchConfig::bounds`] | `--bounds` on the standard mode (PostgreSQL): the raw insert and drain bounds of plain SQL on rows shaped like drover's, and drover's rates over them ([`report::bounds`]) |
//!
//! Workers run in this process ([`BenchConfig::workers`], sharing the
//! capacity) or as child processes ([`BenchConfig::processes`], PostgreSQL
//! only), which re-execute the binary in [`child`] mode and report every
//! execution back over their stdout, so duplicates across processes are
//! counted by one [`recorder::Recorder`].
//!
//! Invariants: the clock of a phase covers exactly what `BENCH.md` says
//! (worker start-up is inside the drain clock; the drain ends only when the
//! handler ran for every item *and* the database holds none pending or
//! claimed); the sandbox is dropped whether the run succeeded or not.

use std::path::PathBuf;
use std::time::Duration;

mod bounds;
pub mod chain;
pub mod chart;
pub mod child;
mod claim;
pub mod depth;
pub mod fairness;
pub mod http;
pub mod limits;
pub mod outbox;
mod pgbench;
pub mod progress;
pub mod projector;
pub mod recorder;
pub mod report;
pub mod soak;
pub mod stalls;
mod standard;
mod sustained;
mod target;
pub mod waits;
mod workers;

pub use depth::{DepthSpec, DepthVariant};
pub use limits::LimitsSpec;
pub use progress::Progress;
pub use projector::{ProjectorFigures, projector_apply_rate};
pub use report::Report;
pub use soak::{HoldXmin, SoakSpec};

/// The kind every bench item has.
pub const KIND: &str = "drover_bench.noop";
/// The lane every bench item waits in.
pub const LANE: &str = "default";
/// `--jobs`: items in the drain phase.
pub const JOBS_DEFAULT: u64 = 100_000;
/// `--batch`: items per bulk-insert call.
pub const BATCH_DEFAULT: usize = 1_000;
/// `--capacity`: total handlers running at once, over all workers.
pub const CAPACITY_DEFAULT: usize = 20;
/// `--latency-jobs`: items of the latency phase.
pub const LATENCY_JOBS_DEFAULT: u64 = 1_000;
/// The spacing of latency items.
pub const LATENCY_SPACING: Duration = Duration::from_millis(5);
/// How long the workers idle before the latency phase.
pub const IDLE_BEFORE_LATENCY: Duration = Duration::from_secs(2);
/// The width of a sustained-mode window.
pub const WINDOW: Duration = Duration::from_secs(5);
/// The producer's tick in sustained mode: one bulk call per tick.
pub const SUSTAINED_TICK: Duration = Duration::from_millis(10);
/// `--timeout`: the longest a phase may wait for its items.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);
/// `--claims`: timed claims in claim-latency mode.
pub const CLAIMS_DEFAULT: u32 = 200;
/// `--claim-batch`: items per timed claim.
pub const CLAIM_BATCH_DEFAULT: u32 = 20;

/// What to run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Mode {
    /// `BENCH.md` phases 1 to 3.
    Standard,
    /// Producers offer `rate` items/s (one bulk call every
    /// [`SUSTAINED_TICK`]) for `duration` while the workers drain.
    Sustained {
        /// Offered items per second.
        rate: f64,
        /// How long to offer them.
        duration: Duration,
    },
    /// Bulk-loads `backlog` pending items straight in SQL, then times
    /// `claims` claims of `claim_batch` items each (completing each batch).
    ClaimLatency {
        /// Pending items waiting while claims are timed.
        backlog: u64,
        /// Timed claims per measurement.
        claims: u32,
        /// Items per claim.
        claim_batch: u32,
        /// Run the workers over the backlog for this long between the two
        /// measurements, probing the claim every 200 ms meanwhile.
        churn: Option<Duration>,
        /// Hold a transaction open in a second session (`BEGIN; SELECT
        /// txid_current();`) from before the churn until the end.
        hold_xact: bool,
    },
    /// `--limits`: the four measurements of [`limits`], sized by the spec
    /// (the overhead drains use `jobs`, `batch` and the workers).
    Limits(LimitsSpec),
    /// A soak: [`SoakSpec`] on a throwaway cluster the run starts and
    /// removes itself ([`drover::testing::cluster::Cluster`]); the database URL is not
    /// used.
    Soak(SoakSpec),
    /// `--depth`: [`DepthSpec`]'s cells, each in a sandbox of its own (on
    /// the database URL, or a throwaway cluster the run starts itself).
    Depth(DepthSpec),
}

/// How to re-execute the current program as a child worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildCommand {
    /// The program (usually `std::env::current_exe()`).
    pub program: PathBuf,
    /// Arguments before the child's own (`["bench"]` for the CLI); the bench
    /// appends `--child-schema <schema> --capacity <n> --handler-ms <ms>`.
    pub args: Vec<String>,
}

/// Everything one bench run is told.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchConfig {
    /// The database: `postgres://…` (a schema is created in it) or
    /// `sqlite:…` (ignored except for its scheme: a temporary file is used).
    pub database_url: String,
    /// Items in the drain phase. Default [`JOBS_DEFAULT`].
    pub jobs: u64,
    /// Items per bulk call. Default [`BATCH_DEFAULT`].
    pub batch: usize,
    /// Total capacity over all workers. Default [`CAPACITY_DEFAULT`].
    pub capacity: usize,
    /// In-process workers sharing the capacity. Default 1.
    pub workers: usize,
    /// Child worker processes sharing the capacity (0: in-process workers).
    pub processes: usize,
    /// How to start a child (required when `processes > 0`).
    pub child: Option<ChildCommand>,
    /// Items of the latency phase. Default [`LATENCY_JOBS_DEFAULT`].
    pub latency_jobs: u64,
    /// The longest a phase may wait. Default [`TIMEOUT_DEFAULT`].
    pub timeout: Duration,
    /// What to run.
    pub mode: Mode,
    /// The workers' `item_retention` (`None`: from `DROVER_*` or the
    /// default). Soak mode sets it from [`SoakSpec::retention`].
    pub item_retention: Option<Duration>,
    /// The workers' `sweep_interval` (`None`: from `DROVER_*` or the
    /// default).
    pub sweep_interval: Option<Duration>,
    /// `--handler-ms`: how long the bench handler sleeps (a tokio sleep)
    /// after recording its entry, before it returns. Default zero.
    pub handler: Duration,
    /// The workers' paced vacuum (`None`: from `DROVER_VACUUM` or the
    /// default, on).
    pub vacuum: Option<bool>,
    /// The workers' `spread_fallback` (`None`: from `DROVER_*` or the
    /// default).
    pub spread_fallback: Option<Duration>,
    /// `--bounds` (standard mode, PostgreSQL): after the standard phases,
    /// the raw insert and drain bounds in the same sandbox.
    pub bounds: bool,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            database_url: "sqlite://drover-bench.db".into(),
            jobs: JOBS_DEFAULT,
            batch: BATCH_DEFAULT,
            capacity: CAPACITY_DEFAULT,
            workers: 1,
            processes: 0,
            child: None,
            latency_jobs: LATENCY_JOBS_DEFAULT,
            timeout: TIMEOUT_DEFAULT,
            mode: Mode::Standard,
            item_retention: None,
            sweep_interval: None,
            handler: Duration::ZERO,
            vacuum: None,
            spread_fallback: None,
            bounds: false,
        }
    }
}

impl BenchConfig {
    /// Checks the settings together.
    ///
    /// # Errors
    /// [`BenchError::Drover`] with [`drover::Error::InvalidInput`] naming the
    /// field.
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |field: &'static str, why: &str| Err(drover::Error::invalid(field, why).into());
        if let Mode::Limits(spec) = &self.mode {
            spec.validate(self)?;
        }
        if let Mode::Depth(spec) = &self.mode {
            spec.validate(self)?;
        }
        if self.bounds && (self.mode != Mode::Standard || !target::is_postgres(&self.database_url))
        {
            return bad("bounds", "measures the standard mode on PostgreSQL");
        }
        if self.jobs == 0 && self.mode == Mode::Standard {
            return bad("jobs", "must be at least 1");
        }
        if self.batch == 0 {
            return bad("batch", "must be at least 1");
        }
        let units = if self.processes > 0 {
            self.processes
        } else {
            self.workers
        };
        if units == 0 {
            return bad("workers", "must be at least 1");
        }
        if self.capacity < units {
            return bad("capacity", "must be at least one per worker");
        }
        if self.processes > 0 && self.child.is_none() {
            return bad("processes", "needs a program to re-execute");
        }
        let pg = target::is_postgres(&self.database_url)
            || matches!(self.mode, Mode::Soak(_))
            || matches!(&self.mode, Mode::Depth(d) if d.stock_cluster);
        if self.processes > 0 && !pg {
            return bad("processes", "child processes need PostgreSQL");
        }
        if let Mode::Sustained { rate, duration } = &self.mode {
            if !(rate.is_finite() && *rate > 0.0) {
                return bad("sustained", "the rate must be a positive number of items/s");
            }
            if duration.is_zero() {
                return bad("duration", "must be longer than zero");
            }
        }
        if let Mode::Soak(spec) = &self.mode {
            if !(spec.rate.is_finite() && spec.rate > 0.0) {
                return bad("rate", "must be a positive number of items/s");
            }
            if spec.duration < WINDOW {
                return bad("duration", "must be at least one 5 s sample window");
            }
            if spec.retention.is_zero() {
                return bad("retention", "must be longer than zero");
            }
            if let Some(h) = spec.hold_xmin {
                if h.hold.is_zero() {
                    return bad("hold_xmin_for", "must be longer than zero");
                }
                if h.at >= spec.duration {
                    return bad("hold_xmin_at", "must fall inside --duration");
                }
            }
        }
        if let Mode::ClaimLatency {
            claims,
            claim_batch,
            ..
        } = &self.mode
        {
            if !pg {
                return bad("claim_latency", "measures PostgreSQL's claim statement");
            }
            if *claims == 0 || *claim_batch == 0 {
                return bad("claims", "claims and claim batch must be at least 1");
            }
        }
        Ok(())
    }

    /// The capacity of worker `i` of `units`: the total split as evenly as
    /// it goes.
    pub(crate) fn share(&self, i: usize, units: usize) -> usize {
        self.capacity / units + usize::from(i < self.capacity % units)
    }
}

/// Why a bench run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The queue or the database refused something.
    #[error(transparent)]
    Drover(#[from] drover::Error),
    /// Starting or talking to a child process failed.
    #[error("{context}: {error}")]
    Io {
        /// What the bench was doing.
        context: String,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A phase did not finish: items never ran or never left the queue.
    #[error("{0}")]
    Incomplete(String),
    /// The HTTP bench: a request failed or was refused, or pgbench failed.
    #[error("{0}")]
    Http(String),
}

impl From<sqlx::Error> for BenchError {
    fn from(e: sqlx::Error) -> Self {
        BenchError::Drover(e.into())
    }
}

impl BenchError {
    pub(crate) fn io(context: impl Into<String>, error: std::io::Error) -> Self {
        BenchError::Io {
            context: context.into(),
            error,
        }
    }
}

/// Runs one bench: creates the sandbox, runs the mode, drops the sandbox.
///
/// # Errors
/// [`BenchError`] when the sandbox cannot be created, a statement fails, or
/// a phase does not finish within the timeout. A run that finished with
/// missing or duplicated executions is *not* an error: see
/// [`Report::is_clean`].
///
/// # Cancel safety
/// Not cancel safe: a dropped run leaves its schema or file behind (named
/// `drover_bench_*`; safe to drop by hand).
pub async fn run(config: &BenchConfig, progress: &Progress) -> Result<Report, BenchError> {
    config.validate()?;
    if let Mode::Soak(spec) = &config.mode {
        let mut report = soak::run(config, progress, spec).await?;
        report.git_commit = git_commit();
        return Ok(report);
    }
    if let Mode::Depth(spec) = &config.mode {
        let mut report = depth::run(config, progress, spec).await?;
        report.git_commit = git_commit();
        return Ok(report);
    }
    let target = target::Target::create(&config.database_url).await?;
    progress.note(&format!("sandbox: {}", target.describe()));
    let result = match &config.mode {
        Mode::Standard => standard::run(config, &target, progress).await,
        Mode::Sustained { rate, duration } => {
            sustained::run(config, &target, progress, *rate, *duration).await
        }
        Mode::ClaimLatency { .. } => claim::run(config, &target, progress).await,
        Mode::Limits(_) => limits::run(config, &target, progress).await,
        Mode::Soak(_) => Err(drover::Error::invalid("mode", "soak runs on its own cluster").into()),
        Mode::Depth(_) => {
            Err(drover::Error::invalid("mode", "depth makes a sandbox per cell").into())
        }
    };
    let dropped = target.drop_sandbox().await;
    let mut report = result?;
    dropped?;
    report.git_commit = git_commit();
    Ok(report)
}

/// Runs the outbox bench ([`outbox`]) in a sandbox on `database_url`
/// (PostgreSQL), dropping the sandbox afterwards.
///
/// # Errors
/// As [`run`]; [`drover::Error::InvalidInput`] on `database_url` for a
/// database that is not PostgreSQL.
pub async fn run_outbox(
    database_url: &str,
    spec: &outbox::OutboxSpec,
    progress: &Progress,
) -> Result<outbox::OutboxReport, BenchError> {
    if !target::is_postgres(database_url) {
        return Err(
            drover::Error::invalid("database_url", "the outbox bench runs on PostgreSQL").into(),
        );
    }
    in_sandbox(database_url, progress, async |target| {
        outbox::run(spec, target, progress).await
    })
    .await
}

/// Runs `drover bench --fairness` in a sandbox on `database_url` (either
/// backend; see [`fairness`]), dropping the sandbox afterwards.
///
/// # Errors
/// As [`run`].
pub async fn run_fairness(
    database_url: &str,
    spec: &fairness::FairnessSpec,
    progress: &Progress,
) -> Result<fairness::FairnessReport, BenchError> {
    in_sandbox(database_url, progress, async |target| {
        fairness::run(spec, target, progress).await
    })
    .await
}

/// Runs `drover bench --chain` in a sandbox on `database_url` (either
/// backend; see [`chain`]), dropping the sandbox afterwards.
///
/// # Errors
/// As [`run`].
pub async fn run_chain(
    database_url: &str,
    spec: &chain::ChainSpec,
    progress: &Progress,
) -> Result<chain::ChainReport, BenchError> {
    in_sandbox(database_url, progress, async |target| {
        chain::run(spec, target, progress).await
    })
    .await
}

/// Runs `drover bench --http` (PostgreSQL): single-item enqueues and the
/// batch route over HTTP on loopback, and `pgbench -N` for the ratio; see
/// [`http`].
///
/// # Errors
/// Not PostgreSQL; see [`http`] for the rest.
pub async fn run_http(
    database_url: &str,
    spec: &http::HttpSpec,
    progress: &Progress,
) -> Result<http::HttpReport, BenchError> {
    if !target::is_postgres(database_url) {
        return Err(
            drover::Error::invalid("database_url", "the HTTP bench runs on PostgreSQL").into(),
        );
    }
    in_sandbox(database_url, progress, async |target| {
        http::run(spec, target, progress).await
    })
    .await
}

/// Creates a sandbox on `database_url`, runs `part` in it and drops the
/// sandbox whether `part` succeeded or not.
async fn in_sandbox<T>(
    database_url: &str,
    progress: &Progress,
    part: impl AsyncFnOnce(&target::Target) -> Result<T, BenchError>,
) -> Result<T, BenchError> {
    let target = target::Target::create(database_url).await?;
    progress.note(&format!("sandbox: {}", target.describe()));
    let result = part(&target).await;
    let dropped = target.drop_sandbox().await;
    let report = result?;
    dropped?;
    Ok(report)
}

/// The commit the working directory is at, if `git` answers.
fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!s.is_empty()).then_some(s)
}

/// Unix time in nanoseconds (the clock payloads carry and handlers compare).
pub fn unix_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
