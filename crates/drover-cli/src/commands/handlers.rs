//! `drover handlers`: every handler the worker would run (the built-in
//! kinds and the host's own), with the strategies each declares.
//!
//! No database is opened: the handlers are registered on a worker built
//! over an in-memory queue, which runs the same strategy checks `drover
//! worker` does at start.

use drover::Queue;
use drover::worker::HandlerInfo;

use crate::{CliError, Context, table};

/// Arguments of `drover handlers`.
#[derive(Debug, Clone, clap::Args)]
pub struct HandlersArgs {
    /// Print a JSON array of `{kind, idempotency, retry, checkpoint,
    /// recovery, permission, requires}` instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// The name the scheduler's row carries: it is not a kind, but it declares
/// its strategies as a handler does.
pub const SCHEDULER_ROW: &str = "drover.scheduler";

/// The handlers this binary registers, sorted by kind, then the
/// scheduler's declared strategies (as [`SCHEDULER_ROW`]) when the worker
/// runs schedules.
///
/// # Errors
/// [`CliError::Drover`] (exit 1) when a handler declares no strategy, its
/// `REQUIRES` is not covered by its kind's permission, two handlers claim
/// one kind, or a schedule does not compile.
pub fn describe(cx: &Context<'_>) -> Result<Vec<HandlerInfo>, CliError> {
    let worker = cx.worker_builder(Queue::memory()).build()?;
    let mut rows = worker.registry().describe();
    if let Some(s) = worker.scheduler() {
        let names: Vec<&str> = s.schedules().iter().map(|c| c.name()).collect();
        let st = drover::periodic::SCHEDULER_STRATEGY;
        rows.push(HandlerInfo {
            kind: SCHEDULER_ROW.to_owned(),
            idempotency: st.idempotency.to_owned(),
            retry: st.retry.to_owned(),
            checkpoint: st.checkpoint.to_owned(),
            recovery: format!("{} (schedules: {})", st.recovery, names.join(", ")),
            // Not a kind: nobody enqueues the scheduler; its ticks are
            // enqueued as the system principal.
            permission: "-".to_owned(),
            requires: Vec::new(),
        });
    }
    Ok(rows)
}

/// The roles this binary declares (workflow runners, reconcilers) with
/// their strategies.
///
/// # Errors
/// As [`describe`].
pub fn roles(cx: &Context<'_>) -> Result<Vec<drover::worker::RoleInfo>, CliError> {
    let worker = cx.worker_builder(Queue::memory()).build()?;
    Ok(worker.registry().roles().to_vec())
}

/// Prints the handlers' declared strategies.
///
/// # Errors
/// As [`describe`]; output errors.
///
/// # Cancel safety
/// No I/O but the output.
pub async fn run(args: &HandlersArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let handlers = describe(cx)?;
    if args.json {
        let v = serde_json::to_string(&handlers).map_err(super::show::json_err)?;
        writeln!(cx.out, "{v}")?;
        return Ok(());
    }
    let rows: Vec<Vec<String>> = handlers
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
    let roles = roles(cx)?;
    if !roles.is_empty() {
        writeln!(cx.out)?;
        let rows: Vec<Vec<String>> = roles
            .into_iter()
            .flat_map(|r| {
                r.strategies
                    .into_iter()
                    .map(move |(what, says)| vec![r.role.clone(), r.name.clone(), what, says])
            })
            .collect();
        table::write(cx.out, &["ROLE", "NAME", "STRATEGY", "DECLARED"], &rows)?;
    }
    Ok(())
}
