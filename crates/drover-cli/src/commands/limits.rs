//! `drover limits set|clear|close|reopen|list`: fleet-exact concurrency limits and
//! rate limits (a generic cell rate on the database clock) on a lane, a
//! kind, or a kind per group, and ordered groups (a per-group
//! limit of 1 whose items run in enqueue order; docs/flow-control.md). An operator's
//! setting wins over the one declared in code until cleared; every claimer
//! enforces a change within one poll interval. The CLI acts as the system
//! principal (it holds the database login).

use drover::queue::Principal;
use drover::store::limits::{LimitScope, LimitSpec, LimitUsage, OnDeadLetter};
use drover::store::rates::{MAX_RATE_COUNT, Rate, RateUsage};

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
        #[arg(long, required_unless_present = "rate")]
        concurrency: Option<String>,
        /// At most this rate of starts, on the database clock: COUNT/PERIOD
        /// such as `10/1s`, `500/1m`, `3/250ms`, `100/1d` (a generic cell
        /// rate: starts are spaced PERIOD/COUNT apart, `--burst` at once).
        #[arg(long, value_name = "COUNT/PERIOD")]
        rate: Option<String>,
        /// With `--rate`: how many starts an idle scope admits at once
        /// (default 1). In any window W at most COUNT*W/PERIOD + BURST
        /// start.
        #[arg(long, requires = "rate")]
        burst: Option<String>,
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
    /// again, if any): its concurrency, or with `--rate` its rate.
    Clear {
        /// The scope.
        #[command(flatten)]
        scope: ScopeArgs,
        /// Clear the operator's rate instead of its concurrency.
        #[arg(long)]
        rate: bool,
    },
    /// Close a kind (every group, every tenant), or one group of it,
    /// until a time: no worker claims an item it holds before then, on the
    /// database clock. Replaces a closure in force.
    Close {
        /// What to close.
        #[command(flatten)]
        target: super::closures::ClosureArgs,
        /// Until when: an RFC 3339 time, or a duration from the database's
        /// now (`30s`, `5m`, `1h 30m`).
        #[arg(long, value_name = "RFC3339|DURATION")]
        until: String,
        /// Print the closure as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reopen a closed kind or group at once.
    Reopen {
        /// What to reopen.
        #[command(flatten)]
        target: super::closures::ClosureArgs,
    },
    /// Every limit in force: scope, limit, in use, waiting, source; then
    /// the closures in force.
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
        LimitsAction::Set { .. } => set(&args.action, cx).await?,
        LimitsAction::Clear { scope, rate: true } => {
            let scope = scope.scope()?;
            scope.validate()?;
            let queue = cx.queue().await?;
            if queue.rate_clear(&system, &scope).await? {
                writeln!(cx.out, "operator rate on {scope} cleared")?;
            } else {
                writeln!(cx.out, "no operator rate on {scope}")?;
            }
        }
        LimitsAction::Clear { scope, .. } => {
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
        LimitsAction::Close {
            target,
            until,
            json,
        } => super::closures::close(cx, target, until, *json).await?,
        LimitsAction::Reopen { target } => super::closures::reopen(cx, target).await?,
        LimitsAction::List { json } => {
            let queue = cx.queue().await?;
            let limits = queue.limits().await?;
            let rates = queue.rates().await?;
            let closures = queue.closures().await?;
            if *json {
                // One array: the concurrency limits as before, then the
                // rates (each with `setting.rate`).
                let mut all: Vec<serde_json::Value> = Vec::new();
                for l in &limits {
                    all.push(serde_json::to_value(l).map_err(table::json_err)?);
                }
                for r in &rates {
                    all.push(serde_json::to_value(r).map_err(table::json_err)?);
                }
                for c in &closures {
                    let v = serde_json::json!({ "closure": c });
                    all.push(v);
                }
                let v = serde_json::to_string(&all).map_err(table::json_err)?;
                writeln!(cx.out, "{v}")?;
                return Ok(());
            }
            if limits.is_empty() && rates.is_empty() && closures.is_empty() {
                writeln!(cx.out, "no limits")?;
                return Ok(());
            }
            if limits.is_empty() {
                if !rates.is_empty() {
                    list_rates(cx, &rates)?;
                }
                return super::closures::list(cx, &closures, !rates.is_empty());
            }
            table::listing(
                cx.out,
                false,
                &limits,
                None,
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
            if !rates.is_empty() {
                writeln!(cx.out)?;
                list_rates(cx, &rates)?;
            }
            super::closures::list(cx, &closures, true)?;
        }
    }
    Ok(())
}

/// Sets the operator's rate of `scope` and says so.
async fn set_rate(
    cx: &mut Context<'_>,
    scope: &LimitScope,
    rate: Rate,
    json: bool,
) -> Result<(), CliError> {
    let queue = cx.queue().await?;
    let s = queue.rate_set(&Principal::system(), scope, rate).await?;
    if json {
        let v = serde_json::to_string(&s).map_err(table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else {
        writeln!(cx.out, "rate on {} set to {}", s.scope, s.rate)?;
    }
    Ok(())
}

/// The rates in force: scope, rate, when the next start is allowed (the
/// database clock; `now` when one is), groups held back, source.
fn list_rates(cx: &mut Context<'_>, rates: &[RateUsage]) -> Result<(), CliError> {
    let rows: Vec<Vec<String>> = rates
        .iter()
        .map(|u| {
            vec![
                u.setting.scope.to_string(),
                u.setting.rate.to_string(),
                u.next_start_at
                    .map_or_else(|| "now".to_owned(), |t| t.to_rfc3339()),
                u.held_back.to_string(),
                u.setting.source.as_str().to_owned(),
            ]
        })
        .collect();
    table::write(
        cx.out,
        &["SCOPE", "RATE", "NEXT_START", "HELD_BACK", "SOURCE"],
        &rows,
    )?;
    Ok(())
}

/// Runs `drover limits set`: the concurrency, the rate, or both.
async fn set(action: &LimitsAction, cx: &mut Context<'_>) -> Result<(), CliError> {
    let LimitsAction::Set {
        scope,
        concurrency,
        rate,
        burst,
        ordered,
        on_dead_letter,
        json,
    } = action
    else {
        return Ok(());
    };
    let system = Principal::system();
    let scope = scope.scope()?;
    let rate = match rate {
        Some(r) => {
            let mut rate = Rate::parse(r)?;
            if let Some(b) = burst {
                rate = rate.with_burst(parse::int("burst", b, 1, MAX_RATE_COUNT)?);
            }
            scope.validate()?;
            rate.validate()?;
            Some(rate)
        }
        None => None,
    };
    let Some(concurrency) = concurrency else {
        // A rate alone: `required_unless_present` saw `--rate`.
        let rate = rate.ok_or_else(|| {
            CliError::invalid("rate", "name --concurrency N or --rate COUNT/PERIOD")
        })?;
        return set_rate(cx, &scope, rate, *json).await;
    };
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
    if *json && rate.is_none() {
        let v = serde_json::to_string(&s).map_err(table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else if !*json {
        writeln!(cx.out, "limit on {} set to {}", s.scope, s.spec())?;
    }
    if let Some(rate) = rate {
        set_rate(cx, &scope, rate, *json).await?;
    }
    Ok(())
}
