//! `drover limits set|clear|list`: fleet-exact concurrency limits on a
//! lane, a kind, or a kind per group, and ordered groups (a per-group
//! limit of 1 whose items run in enqueue order; docs/flow-control.md). An operator's
//! setting wins over the one declared in code until cleared; every claimer
//! enforces a change within one poll interval. The CLI acts as the system
//! principal (it holds the database login).

use drover::queue::Principal;
use drover::store::limits::{LimitScope, LimitSpec, LimitUsage, OnDeadLetter};

use crate::{CliError, Context, parse, table};

/// Arguments of `drover limits`.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: LimitsAction,
}

/// Which scope a `set` or `clear` names: exactly one of `--lane` and
/// `--kind` (with `--per-group` for each group of the kind separately).
#[derive(Debug, Clone, clap::Args)]
pub struct ScopeArgs {
    /// Every item of this lane.
    #[arg(long, conflicts_with = "kind")]
    pub lane: Option<String>,
    /// Every item of this kind, in any lane.
    #[arg(long)]
    pub kind: Option<String>,
    /// With `--kind`: each group of the kind separately.
    #[arg(long, requires = "kind")]
    pub per_group: bool,
}

impl ScopeArgs {
    fn scope(&self) -> Result<LimitScope, CliError> {
        match (&self.lane, &self.kind, self.per_group) {
            (Some(l), None, false) => Ok(LimitScope::Lane(l.clone())),
            (None, Some(k), false) => Ok(LimitScope::Kind(k.clone())),
            (None, Some(k), true) => Ok(LimitScope::KindPerGroup(k.clone())),
            _ => Err(CliError::invalid(
                "scope",
                "name one of --lane L, --kind K or --kind K --per-group",
            )),
        }
    }
}

/// `drover limits …` actions.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum LimitsAction {
    /// Set the operator's concurrency for a scope (wins over code).
    Set {
        /// The scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// At most this many of the scope's items claimed at once (1 to
        /// 100000).
        #[arg(long)]
        concurrency: String,
        /// With `--kind K --per-group --concurrency 1`: each group's items
        /// run one at a time in enqueue order.
        #[arg(long, requires = "per_group")]
        ordered: bool,
        /// With `--ordered`: what a dead-lettered item does to the rest of
        /// its group: `continue` (the next runs; the default) or `hold`
        /// (the group waits for an operator's retry or cancel).
        #[arg(long, requires = "ordered", value_name = "continue|hold")]
        on_dead_letter: Option<String>,
        /// Print the setting as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Clear the operator's setting of a scope (the code's is in force
    /// again, if any).
    Clear {
        /// The scope.
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Every limit in force: scope, limit, in use, waiting, source.
    List {
        /// Print a JSON array instead of the table.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `drover limits`.
///
/// # Errors
/// Invalid flags (exit 2, nothing written); storage errors (exit 1).
///
/// # Cancel safety
/// A set or clear is one statement: dropped, it either landed or not.
pub async fn run(args: &LimitsArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let system = Principal::system();
    match &args.action {
        LimitsAction::Set {
            scope,
            concurrency,
            ordered,
            on_dead_letter,
            json,
        } => {
            let scope = scope.scope()?;
            let n = parse::int("concurrency", concurrency, 1, 100_000)?;
            let on_dead_letter = match on_dead_letter {
                Some(name) => OnDeadLetter::from_name(name)?,
                None => OnDeadLetter::Continue,
            };
            let spec = LimitSpec {
                concurrency: n,
                ordered: *ordered,
                on_dead_letter,
            };
            scope.validate()?;
            spec.validate(&scope)?;
            let queue = cx.queue().await?;
            let s = queue.limit_set(&system, &scope, spec).await?;
            if *json {
                let v = serde_json::to_string(&s).map_err(table::json_err)?;
                writeln!(cx.out, "{v}")?;
            } else {
                writeln!(cx.out, "limit on {} set to {}", s.scope, s.spec())?;
            }
        }
        LimitsAction::Clear { scope } => {
            let scope = scope.scope()?;
            scope.validate()?;
            let queue = cx.queue().await?;
            let had = queue.limit_clear(&system, &scope).await?;
            if had {
                writeln!(cx.out, "operator limit on {scope} cleared")?;
            } else {
                writeln!(cx.out, "no operator limit on {scope}")?;
            }
        }
        LimitsAction::List { json } => {
            let queue = cx.queue().await?;
            let limits = queue.limits().await?;
            table::listing(
                cx.out,
                *json,
                &limits,
                Some("no limits"),
                &["SCOPE", "LIMIT", "ORDER", "IN_USE", "WAITING", "SOURCE"],
                |u: &LimitUsage| {
                    vec![
                        u.setting.scope.to_string(),
                        u.setting.concurrency.to_string(),
                        if u.setting.ordered {
                            format!("ordered ({})", u.setting.on_dead_letter.as_str())
                        } else {
                            "-".to_owned()
                        },
                        u.in_use.to_string(),
                        u.waiting.to_string(),
                        u.setting.source.as_str().to_owned(),
                    ]
                },
            )?;
        }
    }
    Ok(())
}
