//! `drover show ID`: one item, every field (its result and its progress
//! among them), with its audit entries, its runs (the last 20 ended
//! claims, newest first) and,
//! while it is pending, why it has not started (run_at ahead, lane paused,
//! a limit full and who holds it, no live worker for its lane).

use drover::Item;
use drover::store::AuditEntry;
use uuid::Uuid;

use crate::table::json_err;
use crate::{CliError, Context, parse};

/// Arguments of `drover show`.
#[derive(Debug, Clone, clap::Args)]
pub struct ShowArgs {
    /// The item's id.
    pub id: String,
    /// The item's tenant (default: the nil tenant of single-tenant use).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Print the item as one JSON object, its audit entries under `audit`.
    #[arg(long)]
    pub json: bool,
}

/// Prints the item.
///
/// # Errors
/// Invalid id or tenant (exit 2); not found (exit 1).
///
/// # Cancel safety
/// Read only.
pub async fn run(args: &ShowArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let id = parse::uuid("id", &args.id)?;
    let tenant = parse::tenant(args.tenant.as_deref())?;
    let queue = cx.queue().await?;
    let item = queue
        .get(tenant, id)
        .await
        .map_err(|e| hint_tenant(e, tenant))?;
    let audit = queue.audit(tenant, id).await?;
    let links = queue.links(tenant, id).await?;
    let runs = queue.runs(tenant, id).await?;
    let waiting = if item.status == drover::Status::Pending {
        queue.why_waiting(&item).await?
    } else {
        Vec::new()
    };
    if args.json {
        let mut v = serde_json::to_value(&item).map_err(json_err)?;
        if let serde_json::Value::Object(m) = &mut v {
            m.insert(
                "audit".into(),
                serde_json::to_value(&audit).map_err(json_err)?,
            );
            m.insert(
                "runs".into(),
                serde_json::to_value(&runs).map_err(json_err)?,
            );
            m.insert(
                "links".into(),
                serde_json::to_value(&links).map_err(json_err)?,
            );
            m.insert(
                "waiting".into(),
                serde_json::to_value(&waiting).map_err(json_err)?,
            );
        }
        writeln!(cx.out, "{v}")?;
    } else {
        write_item(cx.out, &item, &audit)?;
        write_runs(cx.out, &item, &runs)?;
        write_links(cx.out, &links)?;
        for w in &waiting {
            writeln!(cx.out, "waiting: {w}")?;
        }
    }
    Ok(())
}

/// The item's runs, newest first: one line each (claim number, outcome,
/// worker, start, duration, error). An item done on its first claim keeps
/// no run row: that run is the item itself, and is said so.
fn write_runs(
    out: &mut dyn std::io::Write,
    item: &Item,
    runs: &[drover::store::runs::ItemRun],
) -> Result<(), CliError> {
    if runs.is_empty() {
        let line = if item.status == drover::Status::Done && item.claim_seq == 1 {
            "1 (done on its first claim: the item is that run)"
        } else {
            "-"
        };
        writeln!(out, "{:<17} {line}", "runs")?;
        return Ok(());
    }
    writeln!(out, "{:<17} {}", "runs", runs.len())?;
    for r in runs {
        let ms = (r.finished_at - r.started_at).num_milliseconds();
        writeln!(
            out,
            "  #{:<3} {:<10}  on {}  at {}  {ms} ms{}",
            r.claim_seq,
            r.outcome.as_str(),
            r.worker.as_deref().unwrap_or("-"),
            r.started_at.to_rfc3339(),
            r.error
                .as_deref()
                .map(|e| format!("  {e}"))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

/// The item's dependencies, dependants and batch, when it has any.
fn write_links(
    out: &mut dyn std::io::Write,
    links: &drover::store::links::ItemLinks,
) -> Result<(), CliError> {
    if !links.after.is_empty() {
        let ids: Vec<String> = links.after.iter().map(Uuid::to_string).collect();
        writeln!(
            out,
            "after:           {} ({} open, on failure: {})",
            ids.join(","),
            links.waiting_on,
            links.after_policy.map_or("fail", |p| p.as_str())
        )?;
    }
    if !links.dependants.is_empty() {
        let ids: Vec<String> = links.dependants.iter().map(Uuid::to_string).collect();
        writeln!(out, "dependants:      {}", ids.join(","))?;
    }
    if let Some(b) = links.batch {
        writeln!(out, "batch:           {b}")?;
    }
    Ok(())
}

/// Adds a hint to a not-found error when the default tenant was used: the
/// item may belong to another tenant.
pub(crate) fn hint_tenant(e: drover::Error, tenant: Uuid) -> drover::Error {
    match e {
        drover::Error::NotFound(m) if tenant.is_nil() => drover::Error::NotFound(format!(
            "{m} (in the nil tenant; pass --tenant for another)"
        )),
        drover::Error::NotFound(m) => drover::Error::NotFound(format!("{m} (in tenant {tenant})")),
        other => other,
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// A progress report on one line: `40 %  {"cursor":7}`, either half alone.
fn progress(p: Option<&drover::item::Progress>) -> String {
    let Some(p) = p else { return "-".into() };
    match (p.value, &p.data) {
        (Some(v), Some(d)) => format!("{v} %  {d}"),
        (Some(v), None) => format!("{v} %"),
        (None, Some(d)) => d.to_string(),
        (None, None) => "-".into(),
    }
}

fn write_item(
    out: &mut dyn std::io::Write,
    item: &Item,
    audit: &[AuditEntry],
) -> std::io::Result<()> {
    let rows: [(&str, String); 26] = [
        ("id", item.id.to_string()),
        ("tenant", item.tenant_id.to_string()),
        ("kind", item.kind.clone()),
        ("lane", item.lane.clone()),
        ("group", opt(item.group.as_deref())),
        ("status", item.status.to_string()),
        ("priority", item.priority.to_string()),
        // Two numbers: how often it was claimed to run, and how many of
        // its allowed failures it spent ("attempts 0 of 5" on a done item
        // read as "never ran").
        ("claims", item.claim_seq.to_string()),
        (
            "failures",
            format!("{} of {} allowed", item.attempts, item.max_attempts),
        ),
        ("available_at", item.available_at.to_rfc3339()),
        ("idempotency_key", opt(item.idempotency_key.as_deref())),
        ("active_key", opt(item.active_key.as_deref())),
        ("claimed_by", opt(item.claimed_by.as_deref())),
        ("claim_seq", item.claim_seq.to_string()),
        (
            "lease_expires_at",
            opt(item.lease_expires_at.map(|t| t.to_rfc3339())),
        ),
        ("last_error", opt(item.last_error.as_deref())),
        ("created_by", item.created_by.to_string()),
        ("request_id", opt(item.request_id.as_deref())),
        ("traceparent", opt(item.traceparent.as_deref())),
        ("created_at", item.created_at.to_rfc3339()),
        ("updated_at", item.updated_at.to_rfc3339()),
        ("updated_by", item.updated_by.to_string()),
        ("payload", item.payload.to_string()),
        ("progress", progress(item.progress.as_ref())),
        ("result", opt(item.result.as_ref())),
        (
            "audit",
            if audit.is_empty() {
                "-".into()
            } else {
                String::new()
            },
        ),
    ];
    for (name, value) in rows {
        writeln!(out, "{name:<17} {value}")?;
    }
    for a in audit {
        writeln!(
            out,
            "  {}  {:<11}  by {}{}",
            a.at.to_rfc3339(),
            a.action,
            a.actor,
            a.detail
                .as_deref()
                .map(|d| format!("  {d}"))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}
