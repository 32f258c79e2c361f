//! The drover command line as a library.
//!
//! The `drover` binary is a thin `main` over [`main`]; a service that wants
//! the same commands in its own binary (with its own kinds registered, its
//! own tenant directory) calls [`run`] from its async `main`, or builds a
//! [`Context`] over its own [`Queue`] and calls [`execute`].
//!
//! A service's own handlers reach `drover worker`, `drover handlers`,
//! `drover schedules`, `drover projector list` and `drover demo` through a
//! [`WorkerSetup`]: a function that adds them to the [`WorkerBuilder`] the
//! command starts from (the built-in kinds are always there), and may
//! capture the service's state to give it to the builder
//! ([`WorkerBuilder::state`], read by `drover::register!(state: …)`
//! setups). Pass it to [`run_with`] or [`Context::with_worker_setup`]:
//!
//! ```no_run
//! use drover::queue::{JobContext, Kind};
//! use drover::worker::{Done, Handler, Outcome, Strategy};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct SendEmail { to: String }
//! impl Kind for SendEmail { const NAME: &'static str = "email.send"; }
//!
//! struct Mailer;
//! impl Handler for Mailer {
//!     type Job = SendEmail;
//!     const STRATEGY: Strategy = Strategy {
//!         idempotency: "the provider dedupes on the item id",
//!         retry: "default backoff, 5 attempts",
//!         checkpoint: "none: one send, a rerun sends again (deduped)",
//!         recovery: "a crashed send is swept and sent again (deduped)",
//!     };
//!     async fn handle(&self, _cx: &JobContext, _job: SendEmail) -> Outcome {
//!         Ok(Done::Completed)
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::process::ExitCode {
//!     // `my-service worker --capacity 40`, `my-service handlers`, …
//!     drover_cli::run_with(std::env::args_os(), |b| b.handler(Mailer)).await
//! }
//! ```
//!
//! Each command is one variant of [`Command`] and one module under
//! `commands/`: it turns its raw clap arguments into checked values first
//! (bad input is refused before any connection, so nothing is written), then
//! asks the [`Context`] for the queue and writes its output to
//! [`Context::out`].
//!
//! | exit code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | failure at run time: not found, conflict, forbidden, storage, I/O |
//! | 2 | invalid input or usage: one line on stderr names the field; nothing written |

// The CLI's whole purpose is to print results to stdout; logs go through
// `tracing` to stderr. `print_stdout` is denied elsewhere in the workspace.
#![allow(clippy::print_stdout)]

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use drover::Queue;
use drover::store::ConnectOptions;
use drover::worker::{Worker, WorkerBuilder};

pub mod commands;
mod error;
mod parse;
mod table;

pub use error::{CliError, EXIT_FAILURE, EXIT_INVALID, EXIT_OK};

/// The database a command uses when neither `--database-url`,
/// `DROVER_DATABASE_URL` nor `DATABASE_URL` names one: the embedded default.
pub const DATABASE_URL_DEFAULT: &str = "sqlite://drover.db";

/// The database `drover demo` uses when `--database-url` (or
/// `DROVER_DATABASE_URL`) names none; the file is recreated on every run.
pub const DEMO_DATABASE_URL_DEFAULT: &str = "sqlite://drover-demo.db";

/// What a host binary adds to the worker the CLI builds: its handlers,
/// sweep steps, its state ([`WorkerBuilder::state`]), anything
/// [`WorkerBuilder`] offers. It is applied after the built-in kinds and
/// before the command's own settings, once per worker a command builds
/// (hence `Fn`: a closure capturing state clones what it hands on).
pub type WorkerSetup = Arc<dyn Fn(WorkerBuilder) -> WorkerBuilder + Send + Sync>;

/// The command line: global options and one command.
#[derive(Debug, Parser)]
#[command(
    name = "drover",
    version,
    about = "Durable background work: migrate, enqueue, inspect and operate a drover queue."
)]
pub struct Cli {
    /// The options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// Where the queue lives: postgres://…, sqlite://path, or memory: (a
    /// fresh in-process store). Falls back to DATABASE_URL, then to
    /// sqlite://drover.db.
    #[arg(
        long,
        global = true,
        env = "DROVER_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// PostgreSQL: a second login for the cross-tenant operations (claim,
    /// sweep, counts, gauges, unscoped listing, workers), granted only the
    /// installation's system role, while --database-url's login holds only
    /// the runtime role. Unset: the one login runs both.
    #[arg(
        long,
        global = true,
        env = "DROVER_SYSTEM_DATABASE_URL",
        hide_env_values = true
    )]
    pub system_database_url: Option<String>,
}

impl GlobalArgs {
    /// The database URL to use: `--database-url`, else `DROVER_DATABASE_URL`
    /// (clap reads both), else `DATABASE_URL`, else [`DATABASE_URL_DEFAULT`].
    pub fn resolved_database_url(&self) -> String {
        self.database_url
            .clone()
            .filter(|u| !u.is_empty())
            .or_else(|| std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| DATABASE_URL_DEFAULT.to_owned())
    }
}

/// The commands. Adding one is one variant here, one module under
/// `commands/`, and one arm in [`execute`].
#[derive(Debug, Subcommand)]
#[non_exhaustive]
pub enum Command {
    /// Create or upgrade drover's tables (idempotent).
    Migrate(commands::migrate::MigrateArgs),
    /// Enqueue one item, or many from a JSON Lines file.
    Enqueue(commands::enqueue::EnqueueArgs),
    /// Show one item with its audit entries.
    Show(commands::show::ShowArgs),
    /// List items, newest first.
    List(commands::list::ListArgs),
    /// Counts per lane, kind and status, and the health gauges.
    Stats(commands::stats::StatsArgs),
    /// Make a done, failed or cancelled item pending again with a fresh budget.
    Retry(commands::retry::RetryArgs),
    /// Cancel a pending or claimed item, or discard a dead letter.
    Cancel(commands::cancel::CancelArgs),
    /// Create, seal, list or show batches (one callback once every member
    /// is final).
    Batches(commands::batches::BatchesArgs),
    /// List, show, cancel or resume orchestrations.
    Orchestrations(commands::orchestrations::OrchestrationsArgs),
    /// List the outbox rows or show their counts and the relay lag.
    Outbox(commands::outbox::OutboxArgs),
    /// Follow a tenant's event log.
    Events(commands::events::EventsArgs),
    /// List projectors, show their checkpoints and lag, or rebuild one.
    Projector(commands::projector::ProjectorArgs),
    /// Send a signal to an orchestration.
    Signal(commands::signal::SignalArgs),
    /// PostgreSQL: each table's dead tuples, or one pass of the paced vacuum
    /// now.
    Vacuum(commands::vacuum::VacuumArgs),
    /// Sync reconcilers: checkpoints, records parked for review, resolve one.
    Reconcile(commands::reconcile::ReconcileArgs),
    /// Run a worker: drain lanes until SIGTERM or SIGINT, then drain-first
    /// shutdown.
    Worker(commands::worker::WorkerArgs),
    /// Print every registered handler's declared strategies.
    Handlers(commands::handlers::HandlersArgs),
    /// List the periodic schedules (or trigger one now).
    Schedules(commands::schedules::SchedulesArgs),
    /// Pause, resume or list lanes.
    Lane(commands::lane::LaneArgs),
    /// Set, clear or list concurrency limits (a lane, a kind, a kind per
    /// group).
    Limits(commands::limits::LimitsArgs),
    /// Set, clear or list tenants' weights of fair share, or turn fair
    /// share off or on for a lane.
    Fairness(commands::fairness::FairnessArgs),
    /// Run a self-contained demo end to end on the embedded default (no
    /// server): enqueue a mix, drain it with an in-process worker, summarize.
    Demo(commands::demo::DemoArgs),
    /// Measure enqueue, drain and latency in a sandbox schema or file.
    #[cfg_attr(
        not(feature = "bench"),
        command(about = "Not in this build: `drover bench` needs the `bench` feature \
                         (cargo build --release -p drover-cli --features bench)")
    )]
    Bench(commands::bench::BenchArgs),
    /// Probe a worker's /healthz (or /readyz with --ready): exit 0 on 200,
    /// 1 otherwise. The container image's HEALTHCHECK; opens no database.
    Healthcheck(commands::healthcheck::HealthcheckArgs),
    /// Print .env.example: every setting with its default and meaning.
    EnvExample(commands::env_example::EnvExampleArgs),
    /// Serve the HTTP API until SIGTERM or SIGINT, default-deny.
    #[cfg_attr(
        not(feature = "http"),
        command(about = "Not in this build: `drover serve` needs the `http` feature \
                         (on by default: cargo build --release -p drover-cli)")
    )]
    Serve(commands::serve::ServeArgs),
    /// Create, list or revoke the HTTP API's bearer tokens.
    #[cfg_attr(
        not(feature = "http"),
        command(about = "Not in this build: `drover token` needs the `http` feature \
                         (on by default: cargo build --release -p drover-cli)")
    )]
    Token(commands::token::TokenArgs),
}

impl Command {
    /// The `RUST_LOG` filter used when none is set: `info` for drover in
    /// the long-running worker, the planned failures silenced in the demo,
    /// `warn` elsewhere.
    pub fn default_log_filter(&self) -> &'static str {
        match self {
            Command::Worker(_) | Command::Serve(_) => "warn,drover=info,drover_cli=info",
            Command::Demo(_) => "warn,drover::worker::executor=off,drover::queue=error",
            _ => "warn",
        }
    }
}

/// What a command runs against: the queue (opened on first use) and where
/// its output goes.
pub struct Context<'a> {
    database_url: String,
    system_url: Option<String>,
    queue: Option<Queue>,
    setup: WorkerSetup,
    /// The command's own output (stdout for the binary).
    pub out: &'a mut (dyn Write + Send),
    /// Notes for the user that are not the command's result (stderr for the
    /// binary).
    pub err: &'a mut (dyn Write + Send),
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<'a> Context<'a> {
    /// A context that connects to `database_url` when a command first needs
    /// the queue.
    pub fn connect_lazily(
        database_url: impl Into<String>,
        out: &'a mut (dyn Write + Send),
        err: &'a mut (dyn Write + Send),
    ) -> Self {
        Context {
            database_url: database_url.into(),
            system_url: None,
            queue: None,
            setup: Arc::new(|b| b),
            out,
            err,
        }
    }

    /// A context over a queue the caller already holds (its kinds
    /// registered, its tenant directory set).
    pub fn with_queue(
        queue: Queue,
        out: &'a mut (dyn Write + Send),
        err: &'a mut (dyn Write + Send),
    ) -> Self {
        Context {
            database_url: String::new(),
            system_url: None,
            queue: Some(queue),
            setup: Arc::new(|b| b),
            out,
            err,
        }
    }

    /// Runs the cross-tenant operations on the login of `system_url`
    /// (PostgreSQL; `None` or empty: the main URL's login runs them).
    pub fn with_system_url(mut self, system_url: Option<String>) -> Self {
        self.system_url = system_url.filter(|u| !u.is_empty());
        self
    }

    /// The system login's URL, if one was given.
    pub fn system_url(&self) -> Option<&str> {
        self.system_url.as_deref()
    }

    /// Adds the host's handlers (or any other builder step) to every
    /// worker this context builds.
    pub fn with_worker_setup(
        mut self,
        setup: impl Fn(WorkerBuilder) -> WorkerBuilder + Send + Sync + 'static,
    ) -> Self {
        self.setup = Arc::new(setup);
        self
    }

    /// A worker builder over `queue` with the built-in kinds and the host's
    /// setup applied.
    pub fn worker_builder(&self, queue: Queue) -> WorkerBuilder {
        (self.setup)(Worker::builder(queue).builtins())
    }

    /// The URL this context connects to (empty for [`Context::with_queue`]).
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// The queue, connecting on first use.
    ///
    /// # Errors
    /// [`CliError::Drover`] when the URL is malformed or the database cannot
    /// be reached.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the context unconnected.
    pub async fn queue(&mut self) -> Result<Queue, CliError> {
        self.queue_with(&ConnectOptions::default()).await
    }

    /// The queue, connecting on first use with `options` (the pool size a
    /// worker needs; the context's system URL unless `options` names one).
    /// A queue the context already holds is returned as is.
    ///
    /// # Errors
    /// As [`Context::queue`].
    ///
    /// # Cancel safety
    /// As [`Context::queue`].
    pub async fn queue_with(&mut self, options: &ConnectOptions) -> Result<Queue, CliError> {
        if let Some(q) = &self.queue {
            return Ok(q.clone());
        }
        let mut options = options.clone();
        if options.system_url.is_none() {
            options.system_url.clone_from(&self.system_url);
        }
        // DROVER_DATABASE_POOLER and DROVER_DIRECT_DATABASE_URL, unless the
        // command set the pooler itself.
        if options.pooler == drover::store::pooler::PoolerOptions::default() {
            options.pooler = drover::store::pooler::PoolerOptions::from_env()?;
        }
        tracing::debug!(
            scheme = scheme(&self.database_url),
            pool_size = options.pool_size,
            schema = %options.schema,
            system_login = options.system_url.is_some(),
            pooler = ?options.pooler.mode,
            "connecting"
        );
        let store = drover::store::connect_with(&self.database_url, &options).await?;
        let q = Queue::new(store);
        self.queue = Some(q.clone());
        Ok(q)
    }
}

/// The URL's scheme, for logs that must never show a password.
fn scheme(url: &str) -> &str {
    url.split(':').next().unwrap_or("")
}

/// Runs one parsed command.
///
/// # Errors
/// The command's [`CliError`]; its [`CliError::exit_code`] says how the
/// process should exit.
///
/// # Cancel safety
/// As the command's: each write it makes is one statement, so a dropped
/// run leaves every item either written or not, never half-written.
pub async fn execute(command: &Command, cx: &mut Context<'_>) -> Result<(), CliError> {
    match command {
        Command::Migrate(a) => commands::migrate::run(a, cx).await,
        Command::Enqueue(a) => commands::enqueue::run(a, cx).await,
        Command::Show(a) => commands::show::run(a, cx).await,
        Command::List(a) => commands::list::run(a, cx).await,
        Command::Stats(a) => commands::stats::run(a, cx).await,
        Command::Retry(a) => commands::retry::run(a, cx).await,
        Command::Cancel(a) => commands::cancel::run(a, cx).await,
        Command::Batches(a) => commands::batches::run(a, cx).await,
        Command::Orchestrations(a) => commands::orchestrations::run(a, cx).await,
        Command::Outbox(a) => commands::outbox::run(a, cx).await,
        Command::Signal(a) => commands::signal::run(a, cx).await,
        Command::Reconcile(a) => commands::reconcile::run(a, cx).await,
        Command::Vacuum(a) => commands::vacuum::run(a, cx).await,
        Command::Events(a) => commands::events::run(a, cx).await,
        Command::Projector(a) => commands::projector::run(a, cx).await,
        Command::Worker(a) => commands::worker::run(a, cx).await,
        Command::Handlers(a) => commands::handlers::run(a, cx).await,
        Command::Schedules(a) => commands::schedules::run(a, cx).await,
        Command::Lane(a) => commands::lane::run(a, cx).await,
        Command::Limits(a) => commands::limits::run(a, cx).await,
        Command::Fairness(a) => commands::fairness::run(a, cx).await,
        Command::Demo(a) => commands::demo::run(a, cx).await,
        Command::Bench(a) => commands::bench::run(a, cx).await,
        Command::Healthcheck(a) => commands::healthcheck::run(a, cx).await,
        Command::EnvExample(a) => commands::env_example::run(a, cx).await,
        Command::Serve(a) => commands::serve::run(a, cx).await,
        Command::Token(a) => commands::token::run(a, cx).await,
    }
}

/// Parses `args` (the program name first), installs the tracing subscriber
/// (unless the host installed one), runs the command against the database
/// the global options name, prints any error as one line on stderr, and
/// returns the exit code. Call it from a service's async `main` to offer
/// drover's CLI from the service binary; [`run_with`] adds its handlers.
///
/// # Cancel safety
/// As [`execute`].
pub async fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    run_with(args, |b| b).await
}

/// As [`run`], with the host's handlers: `setup` is applied to the worker
/// builder of every command that builds one (`worker`, `handlers`,
/// `schedules`, `projector list`, `demo`), after the built-in kinds.
///
/// `setup` may capture the service's state (a `move` closure): it is
/// called once per worker a command builds, so it clones what it hands on.
/// Handing that state to the builder with
/// [`WorkerBuilder::state`](drover::worker::WorkerBuilder::state) is what
/// the service's `drover::register!(state: …)` setups wait for:
///
/// ```no_run
/// # async fn f() {
/// #[derive(Clone)]
/// struct Db(std::sync::Arc<String>); // the service's pool
///
/// let db = Db(std::sync::Arc::new("postgres://…".into()));
/// let code = drover_cli::run_with(std::env::args_os(), move |b| b.state(db.clone())).await;
/// # }
/// ```
///
/// # Cancel safety
/// As [`execute`].
pub async fn run_with<I, T, F>(args: I, setup: F) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
    F: Fn(WorkerBuilder) -> WorkerBuilder + Send + Sync + 'static,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    init_tracing_with(cli.command.default_log_filter());
    let url = match &cli.command {
        // The demo recreates its database: never fall back to DATABASE_URL.
        Command::Demo(_) => cli
            .global
            .database_url
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| DEMO_DATABASE_URL_DEFAULT.to_owned()),
        _ => cli.global.resolved_database_url(),
    };
    let mut out = std::io::stdout();
    let mut err = std::io::stderr();
    let code = {
        let mut cx = Context::connect_lazily(url, &mut out, &mut err)
            .with_system_url(cli.global.system_database_url.clone())
            .with_worker_setup(setup);
        match execute(&cli.command, &mut cx).await {
            Ok(()) => EXIT_OK,
            Err(e) => {
                let _ = writeln!(cx.err, "error: {}", one_line(&e.to_string()));
                e.exit_code()
            }
        }
    };
    let _ = out.flush();
    ExitCode::from(code)
}

/// Reports a clap error: help and version print in full (exit 0), any other
/// error is cut to its first line (exit 2), as every other refusal is.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind as K;
    match e.kind() {
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(EXIT_INVALID))
        }
        _ => {
            // clap's message runs until the first blank line (then come
            // tips and the usage); keep that part, on one line.
            let text = e.to_string();
            let head: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let head = head.join(" ");
            let head = head.strip_prefix("error: ").unwrap_or(&head);
            eprintln!("error: {head} (see --help)");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// Keeps an error message to one line, whatever a driver put in it.
fn one_line(s: &str) -> String {
    s.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The log filter `RUST_LOG` names (a default level and `target=level`
/// pairs), else `default_filter`; a value that does not parse is reported
/// on stderr and `default_filter` applies. `Targets` rather than an
/// `EnvFilter`: per-target levels are what drover's logs are filtered by,
/// and they need no regex engine in the binary.
fn log_filter(rust_log: Option<&str>, default_filter: &str) -> tracing_subscriber::filter::Targets {
    if let Some(v) = rust_log.filter(|v| !v.trim().is_empty()) {
        match v.parse() {
            Ok(t) => return t,
            Err(e) => {
                eprintln!("warning: RUST_LOG={v:?} does not parse ({e}); using {default_filter:?}")
            }
        }
    }
    default_filter.parse().unwrap_or_else(|_| {
        tracing_subscriber::filter::Targets::new()
            .with_default(tracing_subscriber::filter::LevelFilter::WARN)
    })
}

/// Sends `tracing` output to stderr, filtered by `RUST_LOG` (default
/// `warn`). Does nothing if a subscriber is already installed.
pub fn init_tracing() {
    init_tracing_with("warn");
}

/// Sends `tracing` output to stderr, filtered by `RUST_LOG`, else by
/// `default_filter`: a default level and `target=level` pairs, such as
/// `warn,drover=info` (a `RUST_LOG` that does not parse is reported on
/// stderr and the default applies). Does nothing if a subscriber is already
/// installed.
///
/// Built with feature `otel`, spans are also exported over OTLP as the
/// `OTEL_*` variables say ([`drover::otel::init`]); an exporter that cannot
/// be built is reported on stderr and logging goes on without it.
pub fn init_tracing_with(default_filter: &str) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref(), default_filter);
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    #[cfg(feature = "otel")]
    if OTEL.get().is_none() {
        match drover::otel::init() {
            Ok(otel) => {
                let layer = otel.layer();
                let _ = OTEL.set(otel);
                let _ = registry.with(layer).try_init();
                return;
            }
            Err(e) => eprintln!("warning: {e}; traces are not exported"),
        }
    }
    let _ = registry.try_init();
}

/// The OTLP exporter [`init_tracing_with`] installed, flushed by
/// [`shutdown_tracing`].
#[cfg(feature = "otel")]
static OTEL: std::sync::OnceLock<drover::otel::Otel> = std::sync::OnceLock::new();

/// Flushes spans not yet exported (feature `otel`; otherwise nothing to do).
pub fn shutdown_tracing() {
    #[cfg(feature = "otel")]
    if let Some(otel) = OTEL.get() {
        let _ = otel.provider().shutdown();
    }
}

/// The whole binary: a Tokio runtime, [`run`] over the process arguments
/// (which installs tracing to stderr once it knows the command).
pub fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let code = runtime.block_on(run(std::env::args_os()));
    shutdown_tracing();
    code
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::filter::{LevelFilter, Targets};

    fn level(t: &Targets, target: &str) -> LevelFilter {
        t.iter()
            .filter(|(prefix, _)| target.starts_with(*prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, l)| l)
            .or_else(|| t.default_level())
            .unwrap_or(LevelFilter::OFF)
    }

    #[test]
    fn rust_log_levels_targets_and_falls_back_to_the_default() {
        let t = super::log_filter(Some("info,drover::worker=debug"), "warn");
        assert_eq!(level(&t, "drover::worker::claim"), LevelFilter::DEBUG);
        assert_eq!(level(&t, "sqlx"), LevelFilter::INFO);

        let unset = super::log_filter(None, "warn,drover=info");
        assert_eq!(level(&unset, "drover::queue"), LevelFilter::INFO);
        assert_eq!(level(&unset, "hyper"), LevelFilter::WARN);

        let blank = super::log_filter(Some("  "), "warn");
        assert_eq!(level(&blank, "drover"), LevelFilter::WARN);

        let bad = super::log_filter(Some("drover=loud"), "error");
        assert_eq!(
            level(&bad, "drover"),
            LevelFilter::ERROR,
            "unparsable: the default"
        );
    }
}
