//! `drover list`: items newest first, filtered by status, lane, kind and
//! tenant; a table, or a JSON array with `--json`.

use drover::store::ListFilter;

use crate::{CliError, Context, parse, table};

/// How many items `list` shows when `--limit` is not given.
pub const LIST_LIMIT_DEFAULT: u32 = 50;
/// The most items one `list` may ask for.
pub const LIST_LIMIT_MAX: u32 = 100_000;

/// Arguments of `drover list`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Only items in this status: pending, claimed, done, failed, cancelled.
    #[arg(long)]
    pub status: Option<String>,
    /// Only items in this lane.
    #[arg(long)]
    pub lane: Option<String>,
    /// Only items of this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only items of this flow-control group.
    #[arg(long)]
    pub group: Option<String>,
    /// At most this many items (default 50, at most 100000).
    #[arg(long)]
    pub limit: Option<String>,
    /// Only this tenant's items (default: every tenant).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Print a JSON array of items.
    #[arg(long)]
    pub json: bool,
}

/// Lists the items.
///
/// # Errors
/// Invalid filter (exit 2); storage errors (exit 1).
///
/// # Cancel safety
/// Read only.
pub async fn run(args: &ListArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let status = args.status.as_deref().map(parse::status).transpose()?;
    if let Some(l) = &args.lane {
        drover::item::validate_lane(l)?;
    }
    if let Some(k) = &args.kind {
        drover::item::validate_kind(k)?;
    }
    if let Some(g) = &args.group {
        drover::item::validate_group(g)?;
    }
    let limit = match &args.limit {
        Some(l) => parse::int("limit", l, 1, LIST_LIMIT_MAX)?,
        None => LIST_LIMIT_DEFAULT,
    };
    let tenant_id = args
        .tenant
        .as_deref()
        .map(|t| parse::uuid("tenant", t))
        .transpose()?;
    let queue = cx.queue().await?;
    let items = queue
        .list(&ListFilter {
            tenant_id,
            status,
            lane: args.lane.clone(),
            kind: args.kind.clone(),
            group: args.group.clone(),
            limit,
            ..Default::default()
        })
        .await?;
    table::listing(
        cx.out,
        args.json,
        &items,
        Some("no items"),
        &[
            "ID",
            "KIND",
            "LANE",
            "GROUP",
            "STATUS",
            "PRI",
            // Runs (claims) and failures apart: a done item's "0/5" alone
            // read as "never ran".
            "CLAIMS",
            "FAILURES",
            "AVAILABLE_AT (UTC)",
            "LAST_ERROR",
        ],
        |i| {
            vec![
                i.id.to_string(),
                i.kind.clone(),
                i.lane.clone(),
                i.group.clone().unwrap_or_default(),
                i.status.to_string(),
                i.priority.to_string(),
                i.claim_seq.to_string(),
                format!("{}/{}", i.attempts, i.max_attempts),
                i.available_at.format("%Y-%m-%d %H:%M:%S").to_string(),
                i.last_error.clone().unwrap_or_default(),
            ]
        },
    )
}
