//! `drover limits close|reopen`: closing a kind, or one group of it (of a
//! tenant), until a time, and reopening it (docs/flow-control.md, "Closing
//! a group"); and the closures' part of `drover limits list`. The CLI acts
//! as the system principal.

use drover::queue::Principal;
use drover::store::closures::Closure;

use crate::{CliError, Context, parse, table};

/// Which kind, or group of a kind, a `close` or `reopen` names.
#[derive(Debug, Clone, clap::Args)]
pub struct ClosureArgs {
    /// The kind.
    #[arg(long)]
    pub kind: String,
    /// One group of the kind (of `--tenant`); without it, the whole kind.
    #[arg(long)]
    pub group: Option<String>,
    /// With `--group`: the group's tenant (default: the nil tenant).
    #[arg(long, requires = "group")]
    pub tenant: Option<String>,
}

/// The time a `--until` names: an RFC 3339 time, or a duration from the
/// database's now.
async fn until_of(
    cx: &mut Context<'_>,
    text: &str,
) -> Result<chrono::DateTime<chrono::Utc>, CliError> {
    if let Ok(t) = parse::timestamp("until", text) {
        return Ok(t);
    }
    let d = parse::duration("until", text).map_err(|_| {
        CliError::invalid(
            "until",
            "is neither an RFC 3339 time nor a duration like 30s, 5m or 1h 30m",
        )
    })?;
    let d = chrono::Duration::from_std(d)
        .map_err(|_| CliError::invalid("until", "is too far ahead"))?;
    let now = cx.queue().await?.db_now().await?;
    now.checked_add_signed(d)
        .ok_or_else(|| CliError::invalid("until", "is too far ahead"))
}

/// Runs `drover limits close`.
pub(super) async fn close(
    cx: &mut Context<'_>,
    target: &ClosureArgs,
    until: &str,
    json: bool,
) -> Result<(), CliError> {
    let tenant = parse::tenant(target.tenant.as_deref())?;
    let until = until_of(cx, until).await?;
    let queue = cx.queue().await?;
    let c = queue
        .close_until(
            &Principal::system(),
            &target.kind,
            tenant,
            target.group.as_deref(),
            until,
        )
        .await?;
    if json {
        let v = serde_json::to_string(&c).map_err(table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else {
        writeln!(cx.out, "{c}")?;
    }
    Ok(())
}

/// Runs `drover limits reopen`.
pub(super) async fn reopen(cx: &mut Context<'_>, target: &ClosureArgs) -> Result<(), CliError> {
    let tenant = parse::tenant(target.tenant.as_deref())?;
    let queue = cx.queue().await?;
    let had = queue
        .reopen(
            &Principal::system(),
            &target.kind,
            tenant,
            target.group.as_deref(),
        )
        .await?;
    let what = match &target.group {
        Some(g) => format!("group {g} of kind {}", target.kind),
        None => format!("kind {}", target.kind),
    };
    if had {
        writeln!(cx.out, "{what} reopened")?;
    } else {
        writeln!(cx.out, "{what} was not closed")?;
    }
    Ok(())
}

/// The closures in force: kind, group, tenant, until, by (the item, or
/// `operator`); nothing when there is none. `gap`: a blank line first.
pub(super) fn list(cx: &mut Context<'_>, closures: &[Closure], gap: bool) -> Result<(), CliError> {
    if closures.is_empty() {
        return Ok(());
    }
    if gap {
        writeln!(cx.out)?;
    }
    let rows: Vec<Vec<String>> = closures
        .iter()
        .map(|c| {
            vec![
                c.kind.clone(),
                c.group.clone().unwrap_or_else(|| "*".to_owned()),
                c.tenant_id.to_string(),
                c.until.to_rfc3339(),
                c.closed_by_item
                    .map_or_else(|| "operator".to_owned(), |i| format!("item {i}")),
            ]
        })
        .collect();
    table::write(
        cx.out,
        &["CLOSED_KIND", "GROUP", "TENANT", "UNTIL", "BY"],
        &rows,
    )?;
    Ok(())
}
