//! `drover projector list|status|rebuild`: the projectors this binary
//! registers and those the database has checkpoints of, each tenant's
//! checkpoint against its log's head, and a rebuild request the runner
//! holding the lease carries out (reset, then replay from the start while
//! new events keep arriving).

use std::collections::BTreeMap;

use drover::Queue;
use serde::Serialize;

use crate::{CliError, Context, parse, table};

/// Arguments of `drover projector`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProjectorArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `projector` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// List projectors: registered in this binary, or with checkpoints.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Each tenant's checkpoint against the head, lag and lease holder.
    Status {
        /// The projector.
        name: String,
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Ask the runners to reset the projection and replay the log.
    Rebuild {
        /// The projector.
        name: String,
        /// Only this tenant (default: every tenant it has a checkpoint for).
        #[arg(long)]
        tenant: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// One row of `projector list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProjectorRow {
    /// The projector.
    pub name: String,
    /// Registered in this binary (its strategies are in `drover handlers`).
    pub registered: bool,
    /// Tenants it has a checkpoint for.
    pub tenants: usize,
    /// Events behind the heads, summed over tenants.
    pub behind_events: i64,
}

fn name_ok(name: &str) -> Result<(), CliError> {
    drover::item::validate_kind(name).map_err(|_| {
        drover::Error::invalid(
            "projector",
            format!("{name:?} is not a valid projector name"),
        )
    })?;
    Ok(())
}

/// Notes on stderr the projectors the database has checkpoints of that
/// this binary does not register: a service's own binary declares them.
fn note_unregistered(cx: &mut Context<'_>, rows: &[ProjectorRow]) -> Result<(), CliError> {
    let elsewhere: Vec<&str> = rows
        .iter()
        .filter(|r| !r.registered)
        .map(|r| r.name.as_str())
        .collect();
    if elsewhere.is_empty() {
        return Ok(());
    }
    let (verb, pronoun) = if elsewhere.len() == 1 {
        ("is", "it")
    } else {
        ("are", "them")
    };
    writeln!(
        cx.err,
        "note: {} {verb} not registered in this binary: a service binary declares {pronoun}; \
         its own binary (drover_cli::run_with) lists {pronoun} as registered",
        elsewhere.join(", "),
    )?;
    Ok(())
}

/// Runs the subcommand.
///
/// # Errors
/// Invalid arguments (exit 2); storage errors (exit 1).
///
/// # Cancel safety
/// `rebuild` is one statement; the others only read.
pub async fn run(args: &ProjectorArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    match &args.action {
        Action::List { json } => {
            let registered: Vec<String> = cx
                .worker_builder(Queue::memory())
                .build()?
                .registry()
                .roles()
                .iter()
                .filter(|r| r.role == "projector")
                .map(|r| r.name.clone())
                .collect();
            let queue = cx.queue().await?;
            let mut names: BTreeMap<String, bool> =
                registered.into_iter().map(|n| (n, true)).collect();
            for r in queue.projector_checkpoints(None).await? {
                names.entry(r.projector).or_insert(false);
            }
            let mut rows = Vec::with_capacity(names.len());
            for (name, registered) in names {
                let st = queue.projector_status(&name).await?;
                rows.push(ProjectorRow {
                    tenants: st
                        .iter()
                        .filter(|t| t.position > 0 || t.holder.is_some())
                        .count(),
                    behind_events: st.iter().map(|t| t.behind_events).sum(),
                    name,
                    registered,
                });
            }
            table::listing(
                cx.out,
                *json,
                &rows,
                Some("no projectors"),
                &["PROJECTOR", "REGISTERED", "TENANTS", "BEHIND"],
                |r| {
                    vec![
                        r.name.clone(),
                        if r.registered { "yes" } else { "no" }.into(),
                        r.tenants.to_string(),
                        r.behind_events.to_string(),
                    ]
                },
            )?;
            note_unregistered(cx, &rows)?;
        }
        Action::Status { name, tenant, json } => {
            name_ok(name)?;
            let tenant = tenant
                .as_deref()
                .map(|t| parse::uuid("tenant", t))
                .transpose()?;
            let queue = cx.queue().await?;
            let mut st = queue.projector_status(name).await?;
            if let Some(t) = tenant {
                st.retain(|s| s.tenant == t);
            }
            let empty = format!("no events and no checkpoints for {name}");
            table::listing(
                cx.out,
                *json,
                &st,
                Some(&empty),
                &[
                    "TENANT", "POSITION", "HEAD", "BEHIND", "LAG_S", "HOLDER", "REBUILD",
                    "REBUILDS",
                ],
                |s| {
                    vec![
                        s.tenant.to_string(),
                        s.position.to_string(),
                        s.head.to_string(),
                        s.behind_events.to_string(),
                        format!("{:.1}", s.behind_seconds),
                        s.holder.clone().unwrap_or_else(|| "-".into()),
                        if s.rebuild_requested {
                            "requested"
                        } else {
                            "-"
                        }
                        .into(),
                        s.rebuilds.to_string(),
                    ]
                },
            )?;
        }
        Action::Rebuild { name, tenant, json } => {
            name_ok(name)?;
            let tenant = tenant
                .as_deref()
                .map(|t| parse::uuid("tenant", t))
                .transpose()?;
            let queue = cx.queue().await?;
            let n = queue.projector_request_rebuild(name, tenant).await?;
            if *json {
                writeln!(
                    cx.out,
                    "{}",
                    serde_json::json!({ "projector": name, "tenants_flagged": n })
                )?;
            } else {
                writeln!(
                    cx.out,
                    "rebuild of {name} requested for {n} tenant(s); the runner holding each lease resets and replays"
                )?;
            }
        }
    }
    Ok(())
}
