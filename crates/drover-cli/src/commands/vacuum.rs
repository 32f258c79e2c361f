//! `drover vacuum status|run`: the dead tuples of drover's tables and the
//! paced vacuum every worker runs (PostgreSQL; see `drover::vacuum`).
//! `status` reads each table's live and dead tuples and its last vacuum;
//! `run` does one pass of the paced vacuum now, as a worker's check does,
//! and prints what it vacuumed. SQLite and memory have no garbage: both
//! print that there is nothing to do.

use drover::vacuum::{
    VACUUM_DEAD_RATIO_DEFAULT, VACUUM_DEAD_THRESHOLD_DEFAULT, VacuumConfig, VacuumReport, Vacuumer,
};

use crate::{CliError, Context, parse, table};

/// Arguments of `drover vacuum`.
#[derive(Debug, Clone, clap::Args)]
pub struct VacuumArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `vacuum` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// Each table's live and dead tuples and when it was last vacuumed.
    Status {
        /// Print a JSON array of `{table, live, dead, last_vacuum}`.
        #[arg(long)]
        json: bool,
    },
    /// Vacuum every table over the threshold now, once, and print what was
    /// done (dead tuples before and after, how long it took).
    Run {
        /// Vacuum tables with at least this many dead tuples [default: 5000].
        #[arg(long, value_name = "N")]
        threshold: Option<String>,
        /// Print the run's report as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

const NOTHING_HERE: &str =
    "no garbage to collect: the paced vacuum is for PostgreSQL (SQLite reuses freed pages)";

/// Runs the subcommand.
///
/// # Errors
/// Invalid arguments (exit 2); storage errors, and a run in which a
/// table's vacuum failed or was refused to this login (exit 1, after the
/// report is printed).
///
/// # Cancel safety
/// `status` is read-only; a dropped `run` leaves its vacuum in flight to
/// PostgreSQL, which finishes or ends it (a vacuum changes no row).
pub async fn run(args: &VacuumArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    match &args.action {
        Action::Status { json } => {
            let queue = cx.queue().await?;
            let garbage = queue.table_garbage().await?;
            table::listing(
                cx.out,
                *json,
                &garbage,
                Some(NOTHING_HERE),
                &["TABLE", "LIVE", "DEAD", "LAST_VACUUM"],
                |g| {
                    vec![
                        g.table.clone(),
                        g.live.to_string(),
                        g.dead.to_string(),
                        g.last_vacuum.map_or_else(
                            || "never".into(),
                            |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                        ),
                    ]
                },
            )?;
        }
        Action::Run { threshold, json } => {
            let dead_threshold = match threshold {
                Some(t) => parse::int("threshold", t, 1u64, u64::MAX)?,
                None => VACUUM_DEAD_THRESHOLD_DEFAULT,
            };
            let queue = cx.queue().await?;
            let vacuumer = Vacuumer::new(
                queue,
                VacuumConfig {
                    dead_threshold,
                    ..VacuumConfig::default()
                },
            )?;
            let report = vacuumer.run_once().await?;
            if *json {
                let v = serde_json::to_string(&report).map_err(crate::table::json_err)?;
                writeln!(cx.out, "{v}")?;
            } else {
                print_report(cx, &report, dead_threshold)?;
            }
            if let Some((t, e)) = report.errors.first() {
                return Err(CliError::Drover(drover::Error::Storage(
                    drover::error::Opaque::msg(format!("vacuum of {t} failed: {e}")),
                )));
            }
            if let Some(t) = report.forbidden.first() {
                return Err(CliError::Drover(drover::Error::Forbidden(format!(
                    "permission denied: this login may not vacuum {t} (connect as the login \
                     that migrated)"
                ))));
            }
        }
    }
    Ok(())
}

fn print_report(
    cx: &mut Context<'_>,
    report: &VacuumReport,
    threshold: u64,
) -> Result<(), CliError> {
    if report.garbage.is_empty() {
        writeln!(cx.out, "{NOTHING_HERE}")?;
        return Ok(());
    }
    if report.vacuumed.is_empty() {
        writeln!(
            cx.out,
            "nothing vacuumed: no table over the threshold ({threshold} dead tuples and {} % of \
             its live rows)",
            VACUUM_DEAD_RATIO_DEFAULT * 100.0
        )?;
    } else {
        let cells: Vec<Vec<String>> = report
            .vacuumed
            .iter()
            .map(|o| {
                vec![
                    o.table.clone(),
                    o.dead_before.to_string(),
                    o.dead_after.to_string(),
                    format!("{:.3}", o.took.as_secs_f64()),
                    if o.reclaimed { "yes" } else { "no" }.into(),
                ]
            })
            .collect();
        table::write(
            cx.out,
            &["TABLE", "DEAD_BEFORE", "DEAD_AFTER", "SECONDS", "RECLAIMED"],
            &cells,
        )?;
        if report.vacuumed.iter().any(|o| !o.reclaimed) {
            writeln!(
                cx.out,
                "a table not reclaimed keeps its dead tuples while an older transaction is \
                 open (see drover_db_oldest_xact_age_seconds)"
            )?;
        }
    }
    for t in &report.skipped {
        writeln!(
            cx.out,
            "skipped {t}: its lock is held (another vacuum running?)"
        )?;
    }
    for t in &report.forbidden {
        writeln!(cx.out, "refused {t}: this login may not vacuum it")?;
    }
    for (t, e) in &report.errors {
        writeln!(cx.out, "failed {t}: {e}")?;
    }
    Ok(())
}
