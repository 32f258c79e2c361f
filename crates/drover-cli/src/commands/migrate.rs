//! `drover migrate`: create or upgrade drover's tables; running it again
//! changes nothing.

use crate::{CliError, Context};

/// Arguments of `drover migrate` (none besides the global ones).
#[derive(Debug, Clone, clap::Args)]
pub struct MigrateArgs {}

/// Applies the embedded migrations.
///
/// # Errors
/// Connection and storage errors.
///
/// # Cancel safety
/// Each migration runs in its own transaction; a dropped run leaves the
/// schema at some applied version, and the next run continues from there.
pub async fn run(_args: &MigrateArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let queue = cx.queue().await?;
    queue.migrate().await?;
    let backend = queue.store().backend();
    writeln!(cx.out, "migrated ({})", backend_name(backend))?;
    Ok(())
}

pub(crate) fn backend_name(b: drover::Backend) -> &'static str {
    match b {
        drover::Backend::Postgres => "postgres",
        drover::Backend::Sqlite => "sqlite",
        drover::Backend::Memory => "memory",
    }
}
