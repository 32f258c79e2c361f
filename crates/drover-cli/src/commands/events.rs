//! `drover events tail`: print a tenant's event log from a position and keep
//! following it as events are appended.
//!
//! Follows by polling the log (the event log publishes no wake-up); each
//! read is gap-safe, so a followed tail never skips an event that commits
//! late.

use std::time::Duration;

use drover::events::Event;

use crate::{CliError, Context, parse};

/// How many of the newest events `tail` prints first when `--from` is not
/// given.
pub const TAIL_BACKLOG_DEFAULT: i64 = 10;
/// How often a following tail polls the log.
pub const TAIL_POLL_DEFAULT: Duration = Duration::from_millis(250);
/// Events per read.
const TAIL_BATCH: u32 = 500;

/// Arguments of `drover events`.
#[derive(Debug, Clone, clap::Args)]
pub struct EventsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `events` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// Print the newest events, then follow the log (Ctrl-C stops).
    Tail {
        /// Only this topic (repeat for several).
        #[arg(long)]
        topic: Vec<String>,
        /// The tenant's log (default: the nil tenant).
        #[arg(long)]
        tenant: Option<String>,
        /// Start after this position (default: the last 10 events).
        #[arg(long)]
        from: Option<String>,
        /// Stop after printing this many events (default: follow forever).
        #[arg(long)]
        limit: Option<String>,
        /// Print each event as one line of JSON.
        #[arg(long)]
        json: bool,
    },
}

fn line(e: &Event) -> Vec<String> {
    vec![
        e.position.to_string(),
        e.created_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        e.topic.clone(),
        e.id.to_string(),
        e.payload.to_string(),
    ]
}

/// Runs the subcommand.
///
/// # Errors
/// Invalid arguments (exit 2); storage errors (exit 1).
///
/// # Cancel safety
/// Read-only: cancel at any point.
pub async fn run(args: &EventsArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let Action::Tail {
        topic,
        tenant,
        from,
        limit,
        json,
    } = &args.action;
    for t in topic {
        drover::item::validate_kind(t).map_err(|_| {
            drover::Error::invalid("topic", format!("{t:?} is not a valid topic name"))
        })?;
    }
    let tenant = parse::tenant(tenant.as_deref())?;
    let from = from
        .as_deref()
        .map(|f| parse::int("from", f, 0i64, i64::MAX))
        .transpose()?;
    let mut left = limit
        .as_deref()
        .map(|l| parse::int("limit", l, 1u64, u64::MAX))
        .transpose()?;
    let queue = cx.queue().await?;
    let mut after = match from {
        Some(f) => f,
        None => (queue.event_head(tenant).await?.position - TAIL_BACKLOG_DEFAULT).max(0),
    };
    loop {
        let batch = queue.event_read(tenant, after, topic, TAIL_BATCH).await?;
        if let Some(last) = batch.last() {
            after = last.position;
        }
        for e in &batch {
            if *json {
                let v = serde_json::to_string(e).map_err(crate::table::json_err)?;
                writeln!(cx.out, "{v}")?;
            } else {
                writeln!(cx.out, "{}", line(e).join("  "))?;
            }
            if let Some(n) = left.as_mut() {
                *n -= 1;
                if *n == 0 {
                    cx.out.flush()?;
                    return Ok(());
                }
            }
        }
        cx.out.flush()?;
        if batch.len() < TAIL_BATCH as usize {
            tokio::time::sleep(TAIL_POLL_DEFAULT).await;
        }
    }
}
