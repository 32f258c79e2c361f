//! `drover migrate`: create or upgrade drover's tables; running it again
//! changes nothing. On PostgreSQL it also names the installation's two roles
//! and, when asked, grants them to existing logins, so a deployment can run
//! a runtime login holding only the runtime role and a system login holding
//! only the system role.

use drover::store::postgres::{LoginGrants, PgOptions, PgStore};

use crate::{CliError, Context};

/// Arguments of `drover migrate`.
#[derive(Debug, Clone, clap::Args)]
pub struct MigrateArgs {
    /// PostgreSQL: an existing login to grant the installation's runtime
    /// role (repeatable). It must not hold the system role.
    #[arg(long = "runtime-login", value_name = "LOGIN")]
    pub runtime_logins: Vec<String>,
    /// PostgreSQL: an existing login to grant the installation's system
    /// role (repeatable): the login of DROVER_SYSTEM_DATABASE_URL.
    #[arg(long = "system-login", value_name = "LOGIN")]
    pub system_logins: Vec<String>,
}

/// Applies the embedded migrations, then grants the roles asked for.
///
/// # Errors
/// Connection and storage errors; [`drover::Error::InvalidInput`] for
/// logins on a backend without roles, or a runtime login that holds the
/// system role.
///
/// # Cancel safety
/// Each migration runs in its own transaction; a dropped run leaves the
/// schema at some applied version, and the next run continues from there.
/// Each grant is one statement.
pub async fn run(args: &MigrateArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let queue = cx.queue().await?;
    let backend = queue.backend();
    let grants = LoginGrants {
        runtime: args.runtime_logins.clone(),
        system: args.system_logins.clone(),
    };
    let wants_grants = !grants.runtime.is_empty() || !grants.system.is_empty();
    if wants_grants && backend != drover::Backend::Postgres {
        return Err(drover::Error::invalid(
            "runtime_login",
            "logins and roles exist only on PostgreSQL",
        )
        .into());
    }
    queue.migrate().await?;
    writeln!(cx.out, "migrated ({})", backend_name(backend))?;
    if backend == drover::Backend::Postgres && !cx.database_url().is_empty() {
        // The owner's own connection, outside the queue's pools: the
        // grants are the owner's to make. It reaches the server the way the
        // URL says (through a transaction pooler when DROVER_DATABASE_POOLER
        // says so: the grants run in one explicit transaction).
        let owner = PgStore::connect(
            cx.database_url(),
            PgOptions {
                schema: queue
                    .pg_schema()
                    .unwrap_or(drover::store::postgres::SCHEMA_DEFAULT)
                    .to_owned(),
                max_connections: 1,
                pooler: drover::store::pooler::PoolerOptions::from_env()?,
                ..PgOptions::default()
            },
        )
        .await?;
        owner.grant_logins(&grants).await?;
        let roles = owner.roles().await?;
        writeln!(
            cx.out,
            "roles: runtime {}, system {}",
            roles.runtime, roles.system
        )?;
        for login in &grants.runtime {
            writeln!(cx.out, "granted {} to {login}", roles.runtime)?;
        }
        for login in &grants.system {
            writeln!(cx.out, "granted {} to {login}", roles.system)?;
        }
    }
    Ok(())
}

pub(crate) fn backend_name(b: drover::Backend) -> &'static str {
    match b {
        drover::Backend::Postgres => "postgres",
        drover::Backend::Sqlite => "sqlite",
        drover::Backend::Memory => "memory",
    }
}
