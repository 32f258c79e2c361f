//! `drover enqueue`: one item from flags, or many from a JSON Lines file
//! (`--from-file`, see the `import` module).
//!
//! Every flag is checked before the database is opened, so a refused
//! enqueue writes nothing. An idempotency key that already exists is not an
//! error: the existing item's id is printed, and a note on stderr says so.

use chrono::Utc;
use drover::item::DEFAULT_MAX_PAYLOAD_BYTES;
use drover::queue::Principal;
use drover::{InsertResult, NewItem};

use crate::{CliError, Context, parse};

/// Arguments of `drover enqueue`.
#[derive(Debug, Clone, clap::Args)]
pub struct EnqueueArgs {
    /// The kind of work (`[a-z0-9_.:-]{1,128}`); names the handler.
    #[arg(required_unless_present = "from_file", conflicts_with = "from_file")]
    pub kind: Option<String>,
    /// The payload, as JSON text (default `{}`; at most 256 KiB).
    #[arg(long, allow_hyphen_values = true)]
    pub payload: Option<String>,
    /// The lane it waits in (default `default`).
    #[arg(long)]
    pub lane: Option<String>,
    /// Its flow-control group (`[a-z0-9_.:-]{1,128}`): per-group limits
    /// and ordered groups count items by kind and group.
    #[arg(long)]
    pub group: Option<String>,
    /// An idempotency key: enqueueing the same key again returns the
    /// existing item.
    #[arg(long)]
    pub key: Option<String>,
    /// The key holds only while the item is pending or claimed: the same
    /// kind and key is refused (the active item's id is printed) while one
    /// is active, and enqueued anew once it is final. Needs `--key`.
    #[arg(long, requires = "key")]
    pub unique_while_active: bool,
    /// Priority, lower runs first (default 0; -32768 to 32767).
    #[arg(long, allow_hyphen_values = true)]
    pub priority: Option<String>,
    /// Run no earlier than this long from now (`30s`, `5m`, `1h 30m`).
    #[arg(long, allow_hyphen_values = true, conflicts_with = "run_at")]
    pub delay: Option<String>,
    /// Run no earlier than this RFC 3339 time.
    #[arg(long)]
    pub run_at: Option<String>,
    /// The attempt budget (default 5, at least 1).
    #[arg(long, allow_hyphen_values = true)]
    pub max_attempts: Option<String>,
    /// The owning tenant (default: the nil tenant of single-tenant use).
    /// With `--from-file`, the tenant of lines that name none.
    #[arg(long)]
    pub tenant: Option<String>,
    /// Print the stored item as JSON (with `--from-file`: the summary).
    #[arg(long)]
    pub json: bool,
    /// Enqueue every line of a JSON Lines file (`-` for stdin) instead.
    #[arg(
        long,
        value_name = "PATH|-",
        conflicts_with_all = ["payload", "lane", "group", "key", "unique_while_active", "priority", "delay", "run_at", "max_attempts"]
    )]
    pub from_file: Option<String>,
}

/// Enqueues and prints the item's id (or the item as JSON).
///
/// # Errors
/// Invalid flags (exit 2, nothing written); storage errors (exit 1).
///
/// # Cancel safety
/// One insert statement: a dropped run either enqueued the item or did not.
/// With `--from-file`, batches before the drop stay written; rerun with the
/// same ids or keys to finish without doubling.
pub async fn run(args: &EnqueueArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    if let Some(path) = &args.from_file {
        let tenant = parse::tenant(args.tenant.as_deref())?;
        return super::import::run(path, tenant, args.json, cx).await;
    }
    let item = build(args)?;
    let queue = cx.queue().await?;
    let out = queue.enqueue_item(&Principal::system(), item).await?;
    match out.result {
        InsertResult::Inserted => {
            tracing::info!(id = %out.item.id, kind = %out.item.kind, "enqueued");
        }
        InsertResult::KeyExists => writeln!(
            cx.err,
            "note: an item with key {:?} already exists ({}); nothing was enqueued",
            out.item
                .idempotency_key
                .as_deref()
                .or(out.item.active_key.as_deref())
                .unwrap_or_default(),
            out.item.status
        )?,
        InsertResult::IdExists => writeln!(
            cx.err,
            "note: an item with this id already exists ({}); nothing was enqueued",
            out.item.status
        )?,
        // A single enqueue answers Conflict for an id another tenant holds;
        // kept for completeness.
        InsertResult::IdTaken => writeln!(
            cx.err,
            "note: this id is already in use; nothing was enqueued"
        )?,
    }
    if args.json {
        let v = serde_json::to_string(&out.item).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else {
        writeln!(cx.out, "{}", out.item.id)?;
    }
    Ok(())
}

/// Builds and checks the item the flags describe, before any connection.
fn build(args: &EnqueueArgs) -> Result<NewItem, CliError> {
    let kind = args
        .kind
        .as_deref()
        .ok_or_else(|| CliError::invalid("kind", "is required"))?;
    let payload = match &args.payload {
        Some(text) => drover::item::parse_payload(text, DEFAULT_MAX_PAYLOAD_BYTES)?,
        None => serde_json::json!({}),
    };
    let mut item = NewItem::new(kind, payload).with_tenant(parse::tenant(args.tenant.as_deref())?);
    if let Some(lane) = &args.lane {
        item = item.with_lane(lane.as_str());
    }
    if let Some(group) = &args.group {
        drover::item::validate_group(group)?;
        item = item.with_group(group.as_str());
    }
    if let Some(key) = &args.key {
        item = item.with_key(key.as_str());
    }
    item.unique_while_active = args.unique_while_active;
    if let Some(p) = &args.priority {
        item = item.with_priority(parse::int("priority", p, i16::MIN, i16::MAX)?);
    }
    if let Some(n) = &args.max_attempts {
        item = item.with_max_attempts(parse::int("max_attempts", n, 1, i32::MAX)?);
    }
    if let Some(d) = &args.delay {
        let delay = parse::duration("delay", d)?;
        let at = chrono::Duration::from_std(delay)
            .ok()
            .and_then(|d| Utc::now().checked_add_signed(d))
            .ok_or_else(|| CliError::invalid("delay", "is too far in the future"))?;
        item = item.with_available_at(at);
    }
    if let Some(t) = &args.run_at {
        item = item.with_available_at(parse::timestamp("run_at", t)?);
    }
    item.validate(DEFAULT_MAX_PAYLOAD_BYTES)?;
    Ok(item)
}
