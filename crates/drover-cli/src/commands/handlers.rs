//! `drover handlers`: everything the worker would run — each handler (the
//! built-in kinds and the host's own) and each role beside the claim loop
//! (the outbox relay, the scheduler, the sweep, the paced vacuum,
//! projectors, workflow runners, reconcilers) — with the strategies each
//! declares.
//!
//! No database is opened: the worker is built over an in-memory queue with
//! the settings `drover worker` reads from the environment (`DROVER_*`), so
//! the same strategy checks run and the same roles are listed (the
//! heartbeat's schedule unless `DROVER_HEARTBEAT_CRON=off`, the vacuum
//! unless `DROVER_VACUUM=off`).

use drover::Queue;
use drover::worker::{HandlerInfo, RoleInfo, WorkerSettings};

use crate::{CliError, Context, table};

/// Arguments of `drover handlers`.
#[derive(Debug, Clone, clap::Args)]
pub struct HandlersArgs {
    /// Print a JSON object `{"handlers": [...], "roles": [...]}` instead of
    /// the tables: each handler as `{kind, idempotency, retry, checkpoint,
    /// recovery, permission, requires}`, each role as `{role, name,
    /// strategies: {idempotency, retry, checkpoint, recovery, ...its own}}`.
    #[arg(long)]
    pub json: bool,
}

/// What `drover handlers` lists: the handlers sorted by kind, the roles in
/// the order the worker declares them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Declarations {
    /// Every handler's declared strategies.
    pub handlers: Vec<HandlerInfo>,
    /// Every role's declared strategies (each has the four, and its own).
    pub roles: Vec<RoleInfo>,
    /// The concurrency limits declared in code (`drover limits list` shows
    /// the ones in force, an operator's included).
    pub limits: Vec<DeclaredLimit>,
}

/// One concurrency limit declared in code.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeclaredLimit {
    /// What it applies to (`kind export per group`).
    pub scope: String,
    /// At most this many claimed at once.
    pub concurrency: u32,
    /// Each group runs in enqueue order.
    pub ordered: bool,
    /// What an ordered group does past a dead letter (`continue`, `hold`).
    pub on_dead_letter: &'static str,
}

/// The handlers and roles this binary's worker declares, with the settings
/// `drover worker` would read from the environment.
///
/// # Errors
/// [`CliError`] (exit 2) for a `DROVER_*` variable that does not parse;
/// [`CliError::Drover`] (exit 1) when a handler or role declares no
/// strategy, a handler's `REQUIRES` is not covered by its kind's
/// permission, two handlers claim one kind, or a schedule does not compile.
pub fn describe(cx: &Context<'_>) -> Result<Declarations, CliError> {
    let settings = WorkerSettings {
        // Nothing listens: the worker is built, never started.
        metrics_addr: None,
        ..WorkerSettings::from_env()?
    };
    let worker = cx
        .worker_builder(Queue::memory())
        .settings(settings)
        .build()?;
    Ok(Declarations {
        handlers: worker.registry().describe(),
        roles: worker.registry().roles().to_vec(),
        limits: worker
            .registry()
            .limits()
            .iter()
            .map(|(scope, spec)| DeclaredLimit {
                scope: scope.to_string(),
                concurrency: spec.concurrency,
                ordered: spec.ordered,
                on_dead_letter: spec.on_dead_letter.as_str(),
            })
            .collect(),
    })
}

/// Prints the handlers' and roles' declared strategies.
///
/// # Errors
/// As [`describe`]; output errors.
///
/// # Cancel safety
/// No I/O but the output.
pub async fn run(args: &HandlersArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let d = describe(cx)?;
    if args.json {
        let v = serde_json::to_string(&d).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = d
        .handlers
        .into_iter()
        .map(|h| {
            let requires = if h.requires.is_empty() {
                "-".to_owned()
            } else {
                h.requires.join(",")
            };
            vec![
                h.kind,
                h.idempotency,
                h.retry,
                h.checkpoint,
                h.recovery,
                h.permission,
                requires,
            ]
        })
        .collect();
    table::write(
        cx.out,
        &[
            "KIND",
            "IDEMPOTENCY",
            "RETRY",
            "CHECKPOINT",
            "RECOVERY",
            "PERMISSION",
            "REQUIRES",
        ],
        &rows,
    )?;
    if !d.roles.is_empty() {
        writeln!(cx.out)?;
        let rows: Vec<Vec<String>> = d
            .roles
            .into_iter()
            .flat_map(|r| {
                r.strategies
                    .into_iter()
                    .map(move |(what, says)| vec![r.role.clone(), r.name.clone(), what, says])
            })
            .collect();
        table::write(cx.out, &["ROLE", "NAME", "STRATEGY", "DECLARED"], &rows)?;
    }
    if !d.limits.is_empty() {
        writeln!(cx.out)?;
        let rows: Vec<Vec<String>> = d
            .limits
            .into_iter()
            .map(|l| {
                let order = if l.ordered {
                    format!("ordered, on dead letter {}", l.on_dead_letter)
                } else {
                    "-".to_owned()
                };
                vec![l.scope, l.concurrency.to_string(), order]
            })
            .collect();
        table::write(cx.out, &["LIMIT (CODE)", "CONCURRENCY", "ORDER"], &rows)?;
    }
    Ok(())
}
