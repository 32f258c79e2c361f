//! `drover cancel ID`: an operator cancels a pending or claimed item, or
//! discards a dead letter (so an ordered group that holds on it goes on).
//! A worker still holding it loses its claim: its next write is refused.

use drover::queue::Principal;

use crate::{CliError, Context, parse};

/// Arguments of `drover cancel`.
#[derive(Debug, Clone, clap::Args)]
pub struct CancelArgs {
    /// The item's id.
    pub id: String,
    /// The item's tenant (default: the nil tenant of single-tenant use).
    #[arg(long)]
    pub tenant: Option<String>,
}

/// Cancels the item and prints `cancelled <id>`.
///
/// # Errors
/// Invalid id or tenant (exit 2); not found, or already final (conflict),
/// exit 1.
///
/// # Cancel safety
/// One statement: a dropped run either cancelled the item or did not.
pub async fn run(args: &CancelArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let id = parse::uuid("id", &args.id)?;
    let tenant = parse::tenant(args.tenant.as_deref())?;
    let queue = cx.queue().await?;
    let item = queue
        .cancel(&Principal::system(), tenant, id)
        .await
        .map_err(|e| super::show::hint_tenant(e, tenant))?;
    writeln!(cx.out, "cancelled {}", item.id)?;
    Ok(())
}
