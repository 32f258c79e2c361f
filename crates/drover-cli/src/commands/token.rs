//! `drover token create|list|revoke`: the HTTP API's bearer tokens. A
//! token is printed once, at creation; only its hash is stored.

use drover_http::Role;
use drover_http::tokens::{self, TokenGrant};

use crate::{CliError, Context, parse, table};

/// Arguments of `drover token`.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: TokenAction,
}

/// The token actions.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum TokenAction {
    /// Mint a token and print it (once).
    Create {
        /// viewer (reads), operator (also retries, cancels, pauses),
        /// admin (also manages tokens), or worker (claims and settles
        /// items of its --work grants over /v1/work, nothing else).
        #[arg(long)]
        role: String,
        /// Confine the token to one tenant (RLS enforces it).
        #[arg(long)]
        tenant: Option<String>,
        /// The kinds it may enqueue: names, `prefix.*` or `*`,
        /// comma-separated [default: none].
        #[arg(long, value_delimiter = ',')]
        enqueue: Vec<String>,
        /// A label for people.
        #[arg(long, default_value = "")]
        label: String,
        /// A worker token's grants: `<lane>:<kind>` (lane or `*`; kind,
        /// `prefix.*` or `*`), comma-separated. Only with --role worker.
        #[arg(long, value_delimiter = ',')]
        work: Vec<String>,
    },
    /// List tokens (ids and grants; never a token).
    List,
    /// Revoke a token by id.
    Revoke {
        /// The token's id.
        id: String,
    },
}

/// Runs the action.
///
/// # Errors
/// Bad role, tenant or id (exit 2); storage errors; revoking an unknown
/// or revoked token (exit 1).
///
/// # Cancel safety
/// Each action is one statement.
pub async fn run(args: &TokenArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    match &args.action {
        TokenAction::Create {
            role,
            tenant,
            enqueue,
            label,
            work,
        } => {
            let role: Role = role
                .parse()
                .map_err(|e: String| CliError::invalid("role", e))?;
            let tenant = match tenant {
                Some(t) => Some(parse::uuid("tenant", t)?),
                None => None,
            };
            let grant = TokenGrant {
                role,
                tenant,
                enqueue: enqueue.iter().filter(|e| !e.is_empty()).cloned().collect(),
                label: label.clone(),
                work: work.iter().filter(|w| !w.is_empty()).cloned().collect(),
            };
            let queue = cx.queue().await?;
            let (secret, row) = tokens::create(&queue, &grant).await?;
            writeln!(
                cx.err,
                "token {} created; it is shown once, keep it now:",
                row.id
            )?;
            writeln!(cx.out, "{}", secret.expose())?;
        }
        TokenAction::List => {
            let queue = cx.queue().await?;
            let rows = queue.token_list().await?;
            table::listing(
                cx.out,
                false,
                &rows,
                None,
                &[
                    "ID", "ROLE", "TENANT", "ENQUEUE", "WORK", "LABEL", "CREATED", "REVOKED",
                ],
                |r| {
                    vec![
                        r.id.to_string(),
                        r.role.clone(),
                        r.scope_tenant
                            .map_or_else(|| "*".to_owned(), |u| u.to_string()),
                        r.enqueue.join(","),
                        r.work.join(","),
                        r.label.clone(),
                        r.created_at.to_rfc3339(),
                        r.revoked_at.map_or_else(String::new, |t| t.to_rfc3339()),
                    ]
                },
            )?;
        }
        TokenAction::Revoke { id } => {
            let id = parse::uuid("id", id)?;
            let queue = cx.queue().await?;
            if !queue.token_revoke(id).await? {
                return Err(CliError::Drover(drover::Error::NotFound(format!(
                    "live token {id}"
                ))));
            }
            writeln!(cx.out, "revoked {id}")?;
        }
    }
    Ok(())
}
