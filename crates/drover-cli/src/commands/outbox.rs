//! `drover outbox list|stats`: the outbox rows the relay turns into work
//! items and events, and their counts and lag (a parked row shows with its
//! error; none is ever dropped).

use drover::outbox::{OutboxFilter, OutboxStatus};

use crate::{CliError, Context, parse, table};

/// How many rows `outbox list` shows when `--limit` is not given.
pub const LIST_LIMIT_DEFAULT: u32 = 50;

/// Arguments of `drover outbox`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutboxArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `outbox` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// List outbox rows, newest first.
    List {
        /// Only in this status: pending, done, failed.
        #[arg(long)]
        status: Option<String>,
        /// Only this tenant's (default: every tenant).
        #[arg(long)]
        tenant: Option<String>,
        /// At most this many (default 50).
        #[arg(long)]
        limit: Option<String>,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Rows per status and the relay lag (age of the oldest pending row).
    Stats {
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the subcommand.
///
/// # Errors
/// Invalid arguments (exit 2); storage errors (exit 1).
///
/// # Cancel safety
/// Read-only.
pub async fn run(args: &OutboxArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    match &args.action {
        Action::List {
            status,
            tenant,
            limit,
            json,
        } => {
            let status = status.as_deref().map(OutboxStatus::parse).transpose()?;
            let limit = match limit {
                Some(l) => parse::int("limit", l, 1, 100_000)?,
                None => LIST_LIMIT_DEFAULT,
            };
            let tenant_id = tenant
                .as_deref()
                .map(|t| parse::uuid("tenant", t))
                .transpose()?;
            let queue = cx.queue().await?;
            let rows = queue
                .outbox_list(&OutboxFilter {
                    tenant_id,
                    status,
                    limit,
                })
                .await?;
            table::listing(
                cx.out,
                *json,
                &rows,
                Some("no outbox rows"),
                &[
                    "ID", "TENANT", "KIND", "STATUS", "ATTEMPTS", "CREATED", "ERROR",
                ],
                |r| {
                    vec![
                        r.id.to_string(),
                        r.tenant_id.to_string(),
                        r.kind.clone(),
                        r.status.to_string(),
                        r.attempts.to_string(),
                        r.created_at
                            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        r.last_error.clone().unwrap_or_else(|| "-".into()),
                    ]
                },
            )?;
        }
        Action::Stats { json } => {
            let queue = cx.queue().await?;
            let stats = queue.outbox_stats().await?;
            if *json {
                let v = serde_json::to_string(&stats).map_err(crate::table::json_err)?;
                writeln!(cx.out, "{v}")?;
                return Ok(());
            }
            table::write(
                cx.out,
                &["PENDING", "DONE", "FAILED", "LAG_SECONDS"],
                &[vec![
                    stats.pending.to_string(),
                    stats.done.to_string(),
                    stats.failed.to_string(),
                    format!("{:.3}", stats.lag_seconds),
                ]],
            )?;
        }
    }
    Ok(())
}
