//! The fault worker: a real drover worker process whose handlers write
//! effects, as a service's own binary would run it.
//!
//! `drover-fault-worker worker …` runs the worker below; any other command
//! is drover's own CLI (`drover_cli::run`), so the same binary also enqueues,
//! lists and imports.
//!
//! Kinds (payload `{"op_id": "...", "ms": N}`; `ms` optional):
//!
//! | kind | does |
//! |---|---|
//! | `effects.write` | logs its start, sleeps `ms`, then the fenced effects write |
//! | `effects.fail` | logs its start, fails (retryable) every time |
//! | `effects.panic` | logs its start, panics every time |
//! | `effects.abort` | logs its start, aborts the whole process |
//!
//! | `effects.grouped` | as `effects.write`, recording each run in `runs` ([`grouped`]) |
//!
//! And the workflow `effects.saga` ([`saga`]): five steps that each log their
//! start, sleep, and write an effect keyed on the record's version.
//!
//! `--break-limits` (or `DROVER_FAULT_BREAK_LIMITS=true`) makes every claim
//! of the process admit past the concurrency limits
//! (`drover::store::limits::break_limits`): the limits scenario's proof that
//! its checker sees a broken limit.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use drover::maintenance::{SweepConfig, SweepStep, Sweeper};
use drover::orchestration::{Next, StepContext, StepError, Workflow, WorkflowStrategy, Workflows};
use drover::queue::{JobContext, Kind, QueueConfig};
use drover::rules::RetryPolicy;
use drover::store::ConnectOptions;
use drover::worker::{Done, Handler, JobError, Outcome, Strategy, WorkerSettings};
use drover::{Queue, Worker};
use serde::{Deserialize, Serialize};

use crate::effects::{EffectsDb, Op};

pub mod grouped;

/// The retry policy of every fault kind and of the fault worker's queue (so
/// sweep rescues follow it too): 200 ms doubling, capped at 10 s, ±10 %.
pub const FAULT_POLICY: RetryPolicy = RetryPolicy {
    base: Duration::from_millis(200),
    cap: Duration::from_secs(10),
    factor: 2.0,
    jitter: 0.1,
};

/// The payload of every fault kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpArgs {
    /// The unique operation id.
    pub op_id: String,
    /// How long `effects.write` sleeps before writing.
    #[serde(default)]
    pub ms: u64,
}

macro_rules! fault_kind {
    ($ty:ident, $name:literal) => {
        #[doc = concat!("`", $name, "`")]
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $ty(pub OpArgs);
        impl Kind for $ty {
            const NAME: &'static str = $name;
            fn retry_policy() -> Option<RetryPolicy> {
                Some(FAULT_POLICY)
            }
        }
    };
}

fault_kind!(EffectsWrite, "effects.write");
fault_kind!(EffectsFail, "effects.fail");
fault_kind!(EffectsPanic, "effects.panic");
fault_kind!(EffectsAbort, "effects.abort");

const STRATEGY: Strategy = Strategy {
    idempotency: "effects are keyed on op_id and fenced on the claim and its fencing number",
    retry: "200 ms doubling, capped at 10 s, ±10 %; the item's budget",
    checkpoint: "the effects table is the checkpoint: a rerun replays by op_id and skips what is written",
    recovery: "a crashed run is swept after its lease and run again under a higher fencing number",
};

/// The worker's flags (the same names as `drover worker`).
#[derive(Debug, Parser)]
#[command(name = "drover-fault-worker worker")]
pub struct WorkerArgs {
    /// The database.
    #[arg(long, env = "DROVER_DATABASE_URL")]
    pub database_url: String,
    /// The PostgreSQL schema.
    #[arg(long, default_value = "drover")]
    pub schema: String,
    /// Claim lease.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    pub lease: Duration,
    /// Sweep interval.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    pub sweep_interval: Duration,
    /// Poll interval.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    pub poll_interval: Duration,
    /// Handlers at once.
    #[arg(long, default_value_t = 20)]
    pub capacity: usize,
    /// Drain grace on SIGTERM.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub shutdown_grace: Duration,
    /// drover's pool (default: what the capacity needs).
    #[arg(long)]
    pub pool_size: Option<u32>,
    /// The handler's own pool.
    #[arg(long, default_value_t = 4)]
    pub effects_pool: u32,
    /// Do not sweep in this process.
    #[arg(long)]
    pub no_sweep: bool,
    /// The longest retry delay of the sweep's lease-expired requeues
    /// (default: the fault kinds' 10 s cap).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub retry_cap: Option<Duration>,
    /// Adds a host sweep step that logs `fault sweep step running` and then
    /// sleeps this long, so a test can stop the process mid-pass.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub sweep_step_sleep: Option<Duration>,
    /// The sweep's step timeout (default: scaled to the interval).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub sweep_step_timeout: Option<Duration>,
    /// The sweep lease (default: scaled to the interval).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub sweep_lease: Option<Duration>,
    /// Items held claimed ahead of the free slots (default: adaptive).
    #[arg(long)]
    pub prefetch: Option<usize>,
    /// Every claim admits past the concurrency limits: a deliberately
    /// broken limit (the limits scenario's negative check).
    #[arg(long, env = "DROVER_FAULT_BREAK_LIMITS")]
    pub break_limits: bool,
}

/// The host step of `--sweep-step-sleep`.
struct SleepyStep(Duration);

impl SweepStep for SleepyStep {
    fn name(&self) -> &str {
        "fault.sleep"
    }
    fn run<'a>(
        &'a self,
        _queue: &'a Queue,
    ) -> Pin<Box<dyn Future<Output = drover::Result<u64>> + Send + 'a>> {
        Box::pin(async move {
            tracing::warn!(sleep = ?self.0, "fault sweep step running");
            tokio::time::sleep(self.0).await;
            Ok(1)
        })
    }
}

struct Effects<K> {
    db: EffectsDb,
    _k: std::marker::PhantomData<fn() -> K>,
}

impl<K> Effects<K> {
    fn new(db: EffectsDb) -> Self {
        Effects {
            db,
            _k: std::marker::PhantomData,
        }
    }
}

fn op<'a>(cx: &JobContext, args: &'a OpArgs) -> Op<'a> {
    Op {
        op_id: &args.op_id,
        item_id: cx.id(),
        token: cx.fencing_token(),
        attempt: cx.attempt(),
    }
}

async fn log_start(db: &EffectsDb, op: Op<'_>) -> Result<(), JobError> {
    // Unfenced and first: a start that cannot be recorded is not run.
    db.log_start(op).await.map_err(JobError::retry)
}

impl Handler for Effects<EffectsWrite> {
    type Job = EffectsWrite;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, job: EffectsWrite) -> Outcome {
        let op = op(cx, &job.0);
        log_start(&self.db, op).await?;
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(job.0.ms)) => {}
            () = cx.cancellation().cancelled() => return Err(JobError::Retry("cancelled".into())),
        }
        write_fenced(&self.db, cx, op).await.outcome()
    }
}

/// How [`write_fenced`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// The claim held and the effect is written.
    Accepted,
    /// The claim was no longer the run's: nothing written.
    Refused,
    /// The run was cancelled before the effect landed.
    Cancelled,
}

impl Written {
    /// The handler's outcome for it.
    fn outcome(self) -> Outcome {
        match self {
            Written::Accepted => Ok(Done::Completed),
            Written::Refused => Err(JobError::Retry("effects write refused: stale claim".into())),
            Written::Cancelled => Err(JobError::Retry("cancelled before the effect landed".into())),
        }
    }
}

/// The fenced effects write of `op`. Transient errors (a cut connection, a
/// lost commit reply) are retried: the write is idempotent under one token.
async fn write_fenced(db: &EffectsDb, cx: &JobContext, op: Op<'_>) -> Written {
    let mut backoff = Duration::from_millis(20);
    loop {
        if cx.is_cancelled() {
            return Written::Cancelled;
        }
        match db.write(op).await {
            Ok(w) if w.claim_ok => return Written::Accepted,
            Ok(_) => {
                tracing::warn!(item = %cx.id(), token = op.token, "effects write refused: the claim is no longer ours");
                return Written::Refused;
            }
            Err(e) => {
                tracing::warn!(error = %e, "effects write failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}

impl Handler for Effects<EffectsFail> {
    type Job = EffectsFail;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, job: EffectsFail) -> Outcome {
        log_start(&self.db, op(cx, &job.0)).await?;
        Err(JobError::Retry("effects.fail: failing as asked".into()))
    }
}

impl Handler for Effects<EffectsPanic> {
    type Job = EffectsPanic;
    const STRATEGY: Strategy = STRATEGY;
    #[allow(clippy::panic)]
    async fn handle(&self, cx: &JobContext, job: EffectsPanic) -> Outcome {
        log_start(&self.db, op(cx, &job.0)).await?;
        panic!("effects.panic: panicking as asked")
    }
}

impl Handler for Effects<EffectsAbort> {
    type Job = EffectsAbort;
    const STRATEGY: Strategy = STRATEGY;
    async fn handle(&self, cx: &JobContext, job: EffectsAbort) -> Outcome {
        log_start(&self.db, op(cx, &job.0)).await?;
        tracing::error!("effects.abort: aborting the process as asked");
        std::process::abort()
    }
}

/// Adds `application_name=fw-<pid>` so the `transitions` trigger knows
/// which process wrote each queue row.
/// The state of `effects.saga`: how long each step works before its effect.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SagaState {
    /// Milliseconds each step sleeps (where the kills inside steps land).
    pub ms: u64,
}

/// The workflow `effects.saga` runs: the names of its five steps, in order.
pub const SAGA_STEPS: [&str; 5] = ["s1", "s2", "s3", "s4", "s5"];

/// `effects.saga`: five steps, each logging its start (unfenced), working
/// `ms`, then writing its effect keyed on the record's version.
pub fn saga(db: EffectsDb) -> Workflow<SagaState> {
    let mut w = Workflow::<SagaState>::new(
        "effects.saga",
        WorkflowStrategy {
            compensation: "none needed: the steps only record effects",
            resume: "a killed step's item is swept after its lease and runs again at the same version",
        },
    )
    .max_attempts(50);
    for (i, name) in SAGA_STEPS.iter().copied().enumerate() {
        let next = SAGA_STEPS.get(i + 1).copied();
        let db = db.clone();
        w = w.step(name, move |cx: StepContext, s: SagaState| {
            let db = db.clone();
            async move {
                let op_id = format!("{}:{name}", cx.orchestration_id());
                db.log_start(Op {
                    op_id: &op_id,
                    item_id: cx.job().id(),
                    token: cx.fencing_token(),
                    attempt: cx.attempt(),
                })
                .await
                .map_err(StepError::retry)?;
                tokio::time::sleep(Duration::from_millis(s.ms)).await;
                db.saga_effect(cx.orchestration_id(), name, cx.version())
                    .await
                    .map_err(StepError::retry)?;
                Ok(match next {
                    Some(n) => Next::step(n, s),
                    None => Next::complete(serde_json::Value::Null, s),
                })
            }
        });
    }
    w
}

fn tagged(url: &str, suffix: &str) -> String {
    if !url.starts_with("postgres") {
        return url.to_owned();
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    format!(
        "{url}{sep}application_name=fw-{}{suffix}",
        std::process::id()
    )
}

async fn effects_db(args: &WorkerArgs) -> anyhow::Result<EffectsDb> {
    if args.database_url.starts_with("postgres") {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(args.effects_pool)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy(&tagged(&args.database_url, "-h"))?;
        Ok(EffectsDb::Pg {
            pool,
            schema: args.schema.clone(),
        })
    } else {
        let path = args
            .database_url
            .trim_start_matches("sqlite://")
            .trim_start_matches("sqlite:");
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .busy_timeout(Duration::from_secs(10));
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(args.effects_pool)
            .connect_with(opts)
            .await?;
        Ok(EffectsDb::Sqlite(pool))
    }
}

/// Runs the worker until SIGTERM or SIGINT, then drains.
///
/// # Errors
/// Connection and configuration errors.
pub async fn run_worker(args: WorkerArgs) -> anyhow::Result<()> {
    if args.break_limits {
        tracing::warn!("concurrency limits broken on purpose: every claim admits past them");
        drover::store::limits::break_limits(true);
    }
    let capacity = args.capacity;
    let pool = args
        .pool_size
        .unwrap_or_else(|| WorkerSettings::pool_needed(capacity, drover::worker::CLAIMERS_DEFAULT));
    let store = drover::store::connect_with(
        &tagged(&args.database_url, ""),
        &ConnectOptions {
            pool_size: pool,
            schema: args.schema.clone(),
            ..ConnectOptions::default()
        },
    )
    .await?;
    let queue = Queue::new(store).with_config(QueueConfig {
        retry: RetryPolicy {
            cap: args.retry_cap.unwrap_or(FAULT_POLICY.cap),
            ..FAULT_POLICY
        },
        ..QueueConfig::default()
    });
    let db = effects_db(&args).await?;
    let mut settings = WorkerSettings {
        capacity,
        sweep_interval: args.sweep_interval,
        poll_interval: args.poll_interval,
        shutdown_grace: args.shutdown_grace,
        heartbeat_interval: Duration::from_secs(1),
        metrics_addr: None,
        // The checker accounts for the scenario's items only.
        heartbeat_cron: None,
        prefetch: args.prefetch,
        ..WorkerSettings::default()
    };
    // The renewal interval and timeout follow the lease (the lease rule).
    settings.set_lease(args.lease);
    // A sweep with its own timeouts or a host step runs beside the worker,
    // through the sweep's public API, as a host would run its own.
    let own_sweep = (!args.no_sweep
        && (args.sweep_step_sleep.is_some()
            || args.sweep_step_timeout.is_some()
            || args.sweep_lease.is_some()))
    .then(|| {
        let every = SweepConfig::every(args.sweep_interval);
        let config = SweepConfig {
            step_timeout: args.sweep_step_timeout.unwrap_or(every.step_timeout),
            lease: args.sweep_lease.unwrap_or(every.lease),
            ..every
        };
        let sweeper = Sweeper::new(queue.clone(), config)?;
        anyhow::Ok(match args.sweep_step_sleep {
            Some(d) => sweeper.with_step(Box::new(SleepyStep(d))),
            None => sweeper,
        })
    })
    .transpose()?;
    // The built-in kinds too: a batch's callback in the dependency
    // scenario is a `drover.noop`.
    let mut builder = Worker::builder(queue)
        .settings(settings)
        .builtins()
        .handler(Effects::<EffectsWrite>::new(db.clone()))
        .handler(Effects::<EffectsFail>::new(db.clone()))
        .handler(Effects::<EffectsPanic>::new(db.clone()))
        .handler(Effects::<EffectsAbort>::new(db.clone()))
        .handler(grouped::Grouped::new(db.clone()))
        .workflows(Workflows::new().with(saga(db)));
    if args.no_sweep || own_sweep.is_some() {
        builder = builder.without_sweep();
    }
    let worker = builder.build()?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let running = worker.start().await?;
    let sweep_stop = tokio_util::sync::CancellationToken::new();
    let sweep = own_sweep.map(|sw| {
        tracing::warn!(holder = sw.holder(), "fault worker's own sweep");
        let stop = sweep_stop.clone();
        tokio::spawn(async move { sw.run(stop).await })
    });
    tracing::warn!(worker = running.id(), "fault worker ready");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::warn!("SIGTERM: draining");
    sweep_stop.cancel();
    if let Some(s) = sweep {
        let _ = s.await;
    }
    let report = running.shutdown().await;
    tracing::warn!(
        in_flight = report.in_flight,
        cancelled = report.cancelled,
        "fault worker stopped"
    );
    Ok(())
}

/// The binary: `worker` runs [`run_worker`], anything else is drover's CLI.
pub async fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    if args.get(1).is_some_and(|a| a == "worker") {
        let rest = std::iter::once(args[0].clone()).chain(args.into_iter().skip(2));
        let parsed = match WorkerArgs::try_parse_from(rest) {
            Ok(a) => a,
            Err(e) => {
                let _ = e.print();
                return ExitCode::from(2);
            }
        };
        match run_worker(parsed).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "fault worker failed");
                ExitCode::from(1)
            }
        }
    } else {
        drover_cli::run(args).await
    }
}
