//! `drover retry ID`: an operator makes a done, failed or cancelled item
//! pending now with a fresh attempt budget.

use drover::queue::Principal;

use crate::{CliError, Context, parse};

/// Arguments of `drover retry`.
#[derive(Debug, Clone, clap::Args)]
pub struct RetryArgs {
    /// The item's id.
    pub id: String,
    /// The item's tenant (default: the nil tenant of single-tenant use).
    #[arg(long)]
    pub tenant: Option<String>,
}

/// Retries the item and prints `retried <id>`.
///
/// # Errors
/// Invalid id or tenant (exit 2); not found, or still pending or claimed
/// (conflict), exit 1.
///
/// # Cancel safety
/// One statement: a dropped run either retried the item or did not.
pub async fn run(args: &RetryArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let id = parse::uuid("id", &args.id)?;
    let tenant = parse::tenant(args.tenant.as_deref())?;
    let queue = cx.queue().await?;
    let item = queue
        .retry(&Principal::system(), tenant, id)
        .await
        .map_err(|e| super::show::hint_tenant(e, tenant))?;
    writeln!(cx.out, "retried {} (pending, attempts reset)", item.id)?;
    Ok(())
}
