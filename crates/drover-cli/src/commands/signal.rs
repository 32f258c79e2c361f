//! `drover signal ID NAME [--payload JSON] [--key KEY]`: sends a signal to
//! an orchestration. Parked for it, the orchestration runs again at once;
//! otherwise the signal is kept for its next park. The CLI holds the
//! database's credentials, so it acts as the system principal (as
//! `drover cancel` does).

use crate::{CliError, Context, parse};

/// Arguments of `drover signal`.
#[derive(Debug, Clone, clap::Args)]
pub struct SignalArgs {
    /// The orchestration's id.
    pub id: String,
    /// The signal's name.
    pub name: String,
    /// The payload, as JSON (default `null`).
    #[arg(long)]
    pub payload: Option<String>,
    /// An idempotency key: a resent signal with it changes nothing.
    #[arg(long)]
    pub key: Option<String>,
    /// The orchestration's tenant (default: the nil tenant).
    #[arg(long)]
    pub tenant: Option<String>,
}

/// Sends the signal and prints `woke`, `kept` or `duplicate`.
///
/// # Errors
/// Invalid id, tenant or payload (exit 2); no such orchestration, or a
/// finished one (conflict), exit 1.
///
/// # Cancel safety
/// One transaction.
pub async fn run(args: &SignalArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let id = parse::uuid("id", &args.id)?;
    let tenant = parse::tenant(args.tenant.as_deref())?;
    let payload = match &args.payload {
        Some(p) => serde_json::from_str(p)
            .map_err(|e| drover::Error::invalid("payload", format!("is not JSON: {e}")))?,
        None => serde_json::Value::Null,
    };
    let queue = cx.queue().await?;
    let out = queue
        .signal(
            &drover::queue::Principal::system(),
            tenant,
            id,
            &args.name,
            payload,
            args.key.as_deref(),
        )
        .await
        .map_err(|e| super::show::hint_tenant(e, tenant))?;
    let word = match out {
        drover::orchestration::SignalOutcome::Woke => "woke",
        drover::orchestration::SignalOutcome::Kept => "kept",
        drover::orchestration::SignalOutcome::Duplicate => "duplicate",
    };
    writeln!(cx.out, "{word} {id}")?;
    Ok(())
}
