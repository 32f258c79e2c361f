//! `drover reconcile checkpoints|reviews|resolve`: where each sync
//! reconciler stands in its source, the records parked for review, and an
//! operator's resolution of one.

use drover::reconcile::{RecordFilter, Resolution};

use crate::{CliError, Context, parse, table};

/// How many records `reconcile reviews` shows when `--limit` is not given.
pub const REVIEW_LIMIT_DEFAULT: u32 = 100;

/// Arguments of `drover reconcile`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReconcileArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `reconcile` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// List every reconciler's checkpoint (cursor) per tenant.
    Checkpoints {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// List the records a reconciler parked for review (park_for_review).
    Reviews {
        /// The reconciler's name.
        name: String,
        /// The tenant (default: the nil tenant).
        #[arg(long)]
        tenant: Option<String>,
        /// At most this many (default 100).
        #[arg(long)]
        limit: Option<String>,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Settle one parked record: take the source's change, or keep the
    /// local value.
    Resolve {
        /// The reconciler's name.
        name: String,
        /// The record's key.
        key: String,
        /// Take the parked source change.
        #[arg(
            long,
            conflicts_with = "keep_local",
            required_unless_present = "keep_local"
        )]
        accept_external: bool,
        /// Keep the local value and drop the parked change.
        #[arg(long)]
        keep_local: bool,
        /// The tenant (default: the nil tenant).
        #[arg(long)]
        tenant: Option<String>,
        /// Print the record as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn json<T: serde::Serialize>(v: &T) -> Result<String, CliError> {
    serde_json::to_string(v).map_err(crate::table::json_err)
}

/// Runs the subcommand.
///
/// # Errors
/// Invalid arguments (exit 2); no such record, or no review pending
/// (conflict), exit 1.
///
/// # Cancel safety
/// Each write is one transaction.
pub async fn run(args: &ReconcileArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    match &args.action {
        Action::Checkpoints { json: as_json } => {
            let queue = cx.queue().await?;
            let all = queue.reconcile_checkpoint_list().await?;
            table::listing(
                cx.out,
                *as_json,
                &all,
                Some("no checkpoints"),
                &[
                    "RECONCILER",
                    "TENANT",
                    "CURSOR",
                    "BATCHES",
                    "CHANGES",
                    "UPDATED",
                ],
                |c| {
                    vec![
                        c.reconciler.clone(),
                        c.tenant_id.to_string(),
                        c.cursor.clone(),
                        c.version.to_string(),
                        c.applied.to_string(),
                        c.updated_at.to_rfc3339(),
                    ]
                },
            )?;
        }
        Action::Reviews {
            name,
            tenant,
            limit,
            json: as_json,
        } => {
            drover::reconcile::validate_name(name)?;
            let tenant_id = parse::tenant(tenant.as_deref())?;
            let limit = match limit {
                Some(l) => parse::int("limit", l, 1, 100_000)?,
                None => REVIEW_LIMIT_DEFAULT,
            };
            let queue = cx.queue().await?;
            let recs = queue
                .reconcile_record_list(&RecordFilter {
                    tenant_id,
                    reconciler: name.clone(),
                    in_review: true,
                    after_key: None,
                    limit,
                })
                .await?;
            table::listing(
                cx.out,
                *as_json,
                &recs,
                Some("no records parked for review"),
                &["KEY", "LOCAL VERSION", "LOCAL", "SOURCE VERSION", "SOURCE"],
                |r| {
                    let (sv, sd) = r.review.as_ref().map_or_else(
                        || ("-".into(), "-".into()),
                        |c| (c.version.to_string(), c.data.to_string()),
                    );
                    vec![
                        r.key.clone(),
                        r.version.to_string(),
                        r.data.to_string(),
                        sv,
                        sd,
                    ]
                },
            )?;
        }
        Action::Resolve {
            name,
            key,
            accept_external,
            keep_local: _,
            tenant,
            json: as_json,
        } => {
            drover::reconcile::validate_name(name)?;
            drover::reconcile::validate_key(key)?;
            let tenant_id = parse::tenant(tenant.as_deref())?;
            let resolution = if *accept_external {
                Resolution::AcceptExternal
            } else {
                Resolution::KeepLocal
            };
            let queue = cx.queue().await?;
            let r = queue
                .reconcile_review_resolve(tenant_id, name, key, resolution)
                .await
                .map_err(|e| super::show::hint_tenant(e, tenant_id))?;
            if *as_json {
                writeln!(cx.out, "{}", json(&r)?)?;
                return Ok(());
            }
            writeln!(
                cx.out,
                "record {} of {}: {} (version {})",
                r.key,
                r.reconciler,
                if *accept_external {
                    "took the source's change"
                } else {
                    "kept the local value"
                },
                r.version
            )?;
        }
    }
    Ok(())
}
