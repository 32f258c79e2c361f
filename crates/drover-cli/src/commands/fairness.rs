//! `drover fairness set|clear|list|on|off`: weighted fair share between
//! tenants inside each lane (docs/flow-control.md, "Fair share"). A
//! tenant's weight (default 1) sets its share of each lane's starts among
//! the tenants with due work; a lane can be taken off fair share (then it
//! claims in priority then age order), or set to share each tenant's
//! starts between its groups too (`on --by-group`). The CLI acts as the system
//! principal (it holds the database login).

use drover::queue::Principal;
use drover::store::fairness::{FairShare, MAX_WEIGHT};

use crate::{CliError, Context, parse, table};

/// Arguments of `drover fairness`.
#[derive(Debug, Clone, clap::Args)]
pub struct FairnessArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: FairnessAction,
}

/// `drover fairness …` actions.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum FairnessAction {
    /// Set a tenant's weight (1 to 1000; default 1).
    Set {
        /// The tenant (a UUID).
        #[arg(long)]
        tenant: String,
        /// Its weight.
        #[arg(long)]
        weight: String,
        /// Print the setting as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Clear a tenant's weight (back to 1).
    Clear {
        /// The tenant (a UUID).
        #[arg(long)]
        tenant: String,
    },
    /// Turn fair share off for a lane (priority then age order).
    Off {
        /// The lane.
        #[arg(long)]
        lane: String,
    },
    /// Turn fair share on again for a lane (the default: by tenant).
    On {
        /// The lane.
        #[arg(long)]
        lane: String,
        /// Inside each tenant's share, share its starts between its groups
        /// too (items with no group are one bucket); without it, by tenant.
        #[arg(long)]
        by_group: bool,
    },
    /// Each tenant's share of each lane: weight, waiting, started; then the
    /// lanes with fair share off.
    List {
        /// Print a JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `drover fairness`.
///
/// # Errors
/// Invalid flags (exit 2, nothing written); storage errors (exit 1).
///
/// # Cancel safety
/// A set or clear is one statement: dropped, it either landed or not.
pub async fn run(args: &FairnessArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let system = Principal::system();
    match &args.action {
        FairnessAction::Set {
            tenant,
            weight,
            json,
        } => {
            let tenant = parse::uuid("tenant", tenant)?;
            let weight = parse::int("weight", weight, 1, MAX_WEIGHT)?;
            let queue = cx.queue().await?;
            let w = queue.fair_weight_set(&system, tenant, weight).await?;
            if *json {
                let v = serde_json::to_string(&w).map_err(table::json_err)?;
                writeln!(cx.out, "{v}")?;
            } else {
                writeln!(cx.out, "weight of tenant {} set to {}", w.tenant, w.weight)?;
            }
        }
        FairnessAction::Clear { tenant } => {
            let tenant = parse::uuid("tenant", tenant)?;
            let queue = cx.queue().await?;
            if queue.fair_weight_clear(&system, tenant).await? {
                writeln!(cx.out, "weight of tenant {tenant} cleared (1)")?;
            } else {
                writeln!(cx.out, "tenant {tenant} had no weight set (1)")?;
            }
        }
        FairnessAction::Off { lane } => {
            let queue = cx.queue().await?;
            queue.fair_lane_set(&system, lane, false).await?;
            writeln!(cx.out, "fair share off for lane {lane}")?;
        }
        FairnessAction::On { lane, by_group } => {
            let queue = cx.queue().await?;
            queue
                .fair_lane_mode_set(&system, lane, true, *by_group)
                .await?;
            let by = if *by_group { "group" } else { "tenant" };
            writeln!(cx.out, "fair share on for lane {lane}, by {by}")?;
        }
        FairnessAction::List { json } => list(cx, *json).await?,
    }
    Ok(())
}

/// `drover fairness list`.
async fn list(cx: &mut Context<'_>, json: bool) -> Result<(), CliError> {
    let queue = cx.queue().await?;
    let shares = queue.fair_shares().await?;
    let settings = queue.fair_settings().await?;
    if json {
        let v = serde_json::json!({ "shares": shares, "settings": settings });
        let v = serde_json::to_string(&v).map_err(table::json_err)?;
        writeln!(cx.out, "{v}")?;
        return Ok(());
    }
    if shares.is_empty() {
        writeln!(cx.out, "no tenant has work or a share in any lane")?;
    } else {
        table::listing(
            cx.out,
            false,
            &shares,
            None,
            &["LANE", "TENANT", "WEIGHT", "WAITING", "STARTED", "FAIR"],
            |s: &FairShare| {
                vec![
                    s.lane.clone(),
                    s.tenant.to_string(),
                    s.weight.to_string(),
                    s.waiting.to_string(),
                    s.started.to_string(),
                    settings.mode(&s.lane).to_owned(),
                ]
            },
        )?;
    }
    let off: Vec<&str> = settings
        .lanes
        .iter()
        .filter(|l| !l.on)
        .map(|l| l.lane.as_str())
        .collect();
    if !off.is_empty() {
        writeln!(cx.out, "fair share off for: {}", off.join(", "))?;
    }
    let by_group: Vec<&str> = settings
        .lanes
        .iter()
        .filter(|l| l.on && l.by_group)
        .map(|l| l.lane.as_str())
        .collect();
    if !by_group.is_empty() {
        writeln!(cx.out, "shared by group: {}", by_group.join(", "))?;
    }
    let weighted = settings.weights.len();
    if weighted > 0 {
        writeln!(cx.out, "{weighted} tenant(s) with a weight set")?;
    }
    Ok(())
}
