//! `drover orchestrations list|show|cancel|resume`: read orchestration
//! records, cancel one (its compensations run), resume a stuck one after
//! the code was fixed.

use drover::orchestration::{OrchestrationFilter, OrchestrationStatus};

use crate::{CliError, Context, parse, table};

/// How many records `orchestrations list` shows when `--limit` is not given.
pub const LIST_LIMIT_DEFAULT: u32 = 50;

/// Arguments of `drover orchestrations`.
#[derive(Debug, Clone, clap::Args)]
pub struct OrchestrationsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The `orchestrations` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Action {
    /// List orchestrations, newest first.
    List {
        /// Only in this status: running, parked, stuck, completed,
        /// compensating, compensated, compensation_failed, cancelled.
        #[arg(long)]
        status: Option<String>,
        /// Only of this workflow.
        #[arg(long)]
        kind: Option<String>,
        /// Only this tenant's (default: every tenant).
        #[arg(long)]
        tenant: Option<String>,
        /// At most this many (default 50).
        #[arg(long)]
        limit: Option<String>,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Show one: state, current step, history.
    Show {
        /// The orchestration's id.
        id: String,
        /// Its tenant (default: the nil tenant).
        #[arg(long)]
        tenant: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel one: the completed steps' compensations run, newest first.
    Cancel {
        /// The orchestration's id.
        id: String,
        /// Its tenant (default: the nil tenant).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Resume a stuck one (after deploying code that declares its step).
    Resume {
        /// The orchestration's id.
        id: String,
        /// Its tenant (default: the nil tenant).
        #[arg(long)]
        tenant: Option<String>,
    },
}

fn status(s: &str) -> Result<OrchestrationStatus, CliError> {
    Ok(OrchestrationStatus::parse(s)?)
}

/// Runs the subcommand.
///
/// # Errors
/// Invalid arguments (exit 2); not found, or a state that refuses the
/// action (conflict), exit 1.
///
/// # Cancel safety
/// Each write is one transaction.
pub async fn run(args: &OrchestrationsArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    match &args.action {
        Action::List {
            status: st,
            kind,
            tenant,
            limit,
            json,
        } => {
            list(
                cx,
                st.as_deref(),
                kind.as_deref(),
                tenant.as_deref(),
                limit.as_deref(),
                *json,
            )
            .await
        }
        Action::Show { id, tenant, json } => show(cx, id, tenant.as_deref(), *json).await,
        Action::Cancel { id, tenant } => cancel(cx, id, tenant.as_deref()).await,
        Action::Resume { id, tenant } => resume(cx, id, tenant.as_deref()).await,
    }
}

/// `orchestrations list`: the records the filters name, newest first.
async fn list(
    cx: &mut Context<'_>,
    st: Option<&str>,
    kind: Option<&str>,
    tenant: Option<&str>,
    limit: Option<&str>,
    json: bool,
) -> Result<(), CliError> {
    let status = st.map(status).transpose()?;
    if let Some(k) = kind {
        drover::item::validate_kind(k)?;
    }
    let limit = match limit {
        Some(l) => parse::int("limit", l, 1, 100_000)?,
        None => LIST_LIMIT_DEFAULT,
    };
    let tenant_id = tenant.map(|t| parse::uuid("tenant", t)).transpose()?;
    let queue = cx.queue().await?;
    let recs = queue
        .orchestrations(&OrchestrationFilter {
            tenant_id,
            status,
            kind: kind.map(str::to_owned),
            limit,
        })
        .await?;
    table::listing(
        cx.out,
        json,
        &recs,
        Some("no orchestrations"),
        &["ID", "KIND", "STATUS", "STEP", "VERSION", "ERROR"],
        |r| {
            vec![
                r.id.to_string(),
                r.kind.clone(),
                r.status.to_string(),
                r.step.clone(),
                r.version.to_string(),
                r.error.clone().unwrap_or_else(|| "-".into()),
            ]
        },
    )?;
    Ok(())
}

/// `orchestrations show`: one record's state, current step and history.
async fn show(
    cx: &mut Context<'_>,
    id: &str,
    tenant: Option<&str>,
    json: bool,
) -> Result<(), CliError> {
    let id = parse::uuid("id", id)?;
    let tenant = parse::tenant(tenant)?;
    let queue = cx.queue().await?;
    let r = queue
        .orchestration(tenant, id)
        .await
        .map_err(|e| super::show::hint_tenant(e, tenant))?;
    if json {
        let v = serde_json::to_string(&r).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
        return Ok(());
    }
    writeln!(cx.out, "id:        {}", r.id)?;
    writeln!(cx.out, "kind:      {}", r.kind)?;
    writeln!(cx.out, "tenant:    {}", r.tenant_id)?;
    writeln!(cx.out, "status:    {}", r.status)?;
    writeln!(cx.out, "step:      {}", r.step)?;
    writeln!(cx.out, "version:   {}", r.version)?;
    writeln!(cx.out, "state:     {}", r.state)?;
    if let Some(t) = r.parked_until {
        writeln!(cx.out, "parked:    until {t}")?;
    }
    if let Some(s) = &r.waiting_for {
        writeln!(cx.out, "waiting:   {s}")?;
    }
    if let Some(e) = &r.error {
        writeln!(cx.out, "error:     {e}")?;
    }
    if let Some(v) = &r.result {
        writeln!(cx.out, "result:    {v}")?;
    }
    let rows: Vec<Vec<String>> = r
        .history
        .iter()
        .map(|h| {
            vec![
                h.step.clone(),
                h.attempt.to_string(),
                h.started.to_rfc3339(),
                h.ended.to_rfc3339(),
                h.outcome.clone(),
            ]
        })
        .collect();
    writeln!(cx.out, "history:")?;
    table::write(
        cx.out,
        &["STEP", "ATTEMPT", "STARTED", "ENDED", "OUTCOME"],
        &rows,
    )?;
    Ok(())
}

/// `orchestrations cancel`: requests the cancel and says when compensation
/// starts.
async fn cancel(cx: &mut Context<'_>, id: &str, tenant: Option<&str>) -> Result<(), CliError> {
    let id = parse::uuid("id", id)?;
    let tenant = parse::tenant(tenant)?;
    let queue = cx.queue().await?;
    let r = queue
        .cancel_orchestration(&drover::queue::Principal::system(), tenant, id)
        .await
        .map_err(|e| super::show::hint_tenant(e, tenant))?;
    if r.status == drover::orchestration::OrchestrationStatus::Running {
        // Cooperative: the step in flight lands first.
        writeln!(
            cx.out,
            "cancel requested for {}: compensation starts when its running step {} lands",
            r.id, r.step
        )?;
    } else {
        writeln!(cx.out, "cancelling {} ({})", r.id, r.status)?;
    }
    Ok(())
}

/// `orchestrations resume`: a stuck record carries on at its step.
async fn resume(cx: &mut Context<'_>, id: &str, tenant: Option<&str>) -> Result<(), CliError> {
    let id = parse::uuid("id", id)?;
    let tenant = parse::tenant(tenant)?;
    let queue = cx.queue().await?;
    let r = queue
        .resume_orchestration(&drover::queue::Principal::system(), tenant, id)
        .await
        .map_err(|e| super::show::hint_tenant(e, tenant))?;
    writeln!(cx.out, "resumed {} at step {}", r.id, r.step)?;
    Ok(())
}
