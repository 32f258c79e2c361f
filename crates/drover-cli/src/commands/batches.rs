//! `drover batches create|seal|list|show`: batches of items with one
//! callback once every member is final (docs/dependencies.md). Members join
//! with `drover enqueue KIND --batch ID` until the batch is sealed; the CLI
//! acts as the system principal in the tenant given (default nil).

use drover::queue::{BatchSpec, Principal};
use drover::store::links::{BatchRow, BatchWhen};
use uuid::Uuid;

use crate::{CliError, Context, parse, table};

/// Arguments of `drover batches`.
#[derive(Debug, Clone, clap::Args)]
pub struct BatchesArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: BatchesAction,
    /// The tenant (default: the nil tenant of single-tenant use).
    #[arg(long, global = true)]
    pub tenant: Option<String>,
}

/// `drover batches …` actions.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum BatchesAction {
    /// Create an open batch and print its id.
    Create {
        /// The callback item's kind.
        #[arg(long)]
        callback: String,
        /// The batch's id (default: a new one).
        #[arg(long)]
        id: Option<String>,
        /// The callback's lane (default `default`).
        #[arg(long)]
        lane: Option<String>,
        /// JSON carried in the callback's payload under `payload`.
        #[arg(long, allow_hyphen_values = true)]
        payload: Option<String>,
        /// When the callback is enqueued: `always` (default), `success`
        /// (every member done) or `failure` (at least one not done).
        #[arg(long, value_name = "always|success|failure")]
        when: Option<String>,
    },
    /// Seal a batch: no more members; the callback follows once every
    /// member is final.
    Seal {
        /// The batch's id.
        id: String,
    },
    /// The tenant's batches, newest first, with their progress.
    List {
        /// At most this many (default 50).
        #[arg(long)]
        limit: Option<String>,
        /// Print a JSON array instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// One batch: its counters and its members per current status.
    Show {
        /// The batch's id.
        id: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `drover batches`.
///
/// # Errors
/// Invalid flags (exit 2, nothing written); not found, storage errors
/// (exit 1).
///
/// # Cancel safety
/// Each write is one transaction: dropped, it either landed or not.
pub async fn run(args: &BatchesArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let tenant = parse::tenant(args.tenant.as_deref())?;
    match &args.action {
        BatchesAction::Create {
            callback,
            id,
            lane,
            payload,
            when,
        } => {
            let id = match id {
                Some(s) => parse::uuid("id", s)?,
                None => Uuid::now_v7(),
            };
            let mut spec = BatchSpec::new(id, callback.as_str());
            if let Some(l) = lane {
                spec = spec.lane(l.as_str());
            }
            if let Some(p) = payload {
                spec = spec.payload(drover::item::parse_payload(
                    p,
                    drover::item::DEFAULT_MAX_PAYLOAD_BYTES,
                )?);
            }
            if let Some(w) = when {
                spec = spec.when(w.parse::<BatchWhen>()?);
            }
            drover::item::validate_kind(callback)?;
            let principal = Principal {
                tenant,
                ..Principal::system()
            };
            let queue = cx.queue().await?;
            let row = queue.batch_create(&principal, spec).await?;
            writeln!(cx.out, "{}", row.id)?;
        }
        BatchesAction::Seal { id } => {
            let id = parse::uuid("id", id)?;
            let queue = cx.queue().await?;
            let row = queue.batch_seal(tenant, id).await?;
            writeln!(cx.out, "batch {} sealed ({})", row.id, row.state())?;
        }
        BatchesAction::List { limit, json } => {
            let limit = match limit {
                Some(l) => parse::int("limit", l, 1, 10_000)?,
                None => 50,
            };
            let queue = cx.queue().await?;
            let rows = queue.batches(tenant, limit).await?;
            table::listing(
                cx.out,
                *json,
                &rows,
                Some("no batches"),
                &[
                    "ID",
                    "STATE",
                    "TOTAL",
                    "OPEN",
                    "DONE",
                    "FAILED",
                    "CANCELLED",
                    "CALLBACK",
                ],
                |b: &BatchRow| {
                    vec![
                        b.id.to_string(),
                        b.state().to_owned(),
                        b.total.to_string(),
                        b.open().to_string(),
                        b.counts.done.to_string(),
                        b.counts.failed.to_string(),
                        b.counts.cancelled.to_string(),
                        format!("{} ({})", b.callback_kind, b.when.as_str()),
                    ]
                },
            )?;
        }
        BatchesAction::Show { id, json } => {
            let id = parse::uuid("id", id)?;
            let queue = cx.queue().await?;
            let row = queue.batch(tenant, id).await?;
            let members = queue.batch_members(tenant, id).await?;
            if *json {
                let mut v = serde_json::to_value(&row).map_err(table::json_err)?;
                if let serde_json::Value::Object(m) = &mut v {
                    let per: serde_json::Map<String, serde_json::Value> = members
                        .iter()
                        .map(|(s, n)| (s.as_str().to_owned(), (*n).into()))
                        .collect();
                    m.insert("members".into(), per.into());
                    m.insert("state".into(), row.state().into());
                }
                writeln!(cx.out, "{v}")?;
            } else {
                writeln!(cx.out, "id:         {}", row.id)?;
                writeln!(cx.out, "state:      {}", row.state())?;
                writeln!(
                    cx.out,
                    "callback:   {} on lane {} ({}), item {}",
                    row.callback_kind,
                    row.callback_lane,
                    row.when.as_str(),
                    row.callback_id
                )?;
                writeln!(cx.out, "members:    {} ({} open)", row.total, row.open())?;
                writeln!(
                    cx.out,
                    "final:      {} done, {} failed, {} cancelled",
                    row.counts.done, row.counts.failed, row.counts.cancelled
                )?;
                for (s, n) in &members {
                    writeln!(cx.out, "  {s:<10} {n}")?;
                }
            }
        }
    }
    Ok(())
}
