//! `drover schedules`: every periodic schedule, the ones this binary
//! declares (the host's, the heartbeat) and the ones the state table still
//! holds (removed from code: inactive until purged); `drover schedules
//! trigger NAME` enqueues one item of a declared schedule now.
//!
//! A schedule the state table holds but this binary does not declare was
//! declared by a service's own binary: it is listed (no next fire times,
//! with a note on stderr), and triggering it says so instead of "not
//! found" (the service's binary, through `drover_cli::run_with`, triggers
//! it).
//!
//! The declared schedules come from the worker this binary would build
//! (the same registration `drover worker` runs, with `DROVER_HEARTBEAT_CRON`
//! read); their next fire times are computed from the database clock.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use drover::periodic::{Compiled, ScheduleRow, SchedulerConfig};
use drover::worker::WorkerSettings;
use serde::Serialize;

use crate::{CliError, Context, table};

/// How many next fire times are listed per schedule.
pub const NEXT_TIMES: usize = 3;

/// Arguments of `drover schedules`.
#[derive(Debug, Clone, clap::Args)]
pub struct SchedulesArgs {
    /// Print a JSON array instead of the table.
    #[arg(long)]
    pub json: bool,
    /// What to do; lists the schedules when absent.
    #[command(subcommand)]
    pub action: Option<SchedulesAction>,
}

/// `drover schedules …` actions.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum SchedulesAction {
    /// Enqueue one item of a schedule now (key periodic:<name>:manual:<id>);
    /// its ticks are not affected.
    Trigger {
        /// The schedule's name.
        name: String,
        /// Print the enqueued item as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// One schedule, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScheduleInfo {
    /// The name.
    pub name: String,
    /// The cron expression.
    pub cron: String,
    /// The IANA zone.
    pub zone: String,
    /// The kind its ticks enqueue.
    pub kind: String,
    /// The misfire policy (`skip`, `once`, `all`).
    pub policy: String,
    /// The cap of `all` (0 otherwise).
    pub max_backfill: u32,
    /// The last tick enqueued, if any.
    pub last_tick: Option<DateTime<Utc>>,
    /// The next fire times (none for a schedule this binary does not declare).
    pub next: Vec<DateTime<Utc>>,
    /// Declared by this binary, or seen by a scheduler recently.
    pub active: bool,
    /// Declared by this binary.
    pub declared: bool,
}

/// The schedules: declared ones merged with the state rows, by name.
fn merge(
    declared: &[Compiled],
    rows: Vec<ScheduleRow>,
    now: DateTime<Utc>,
    config: &SchedulerConfig,
) -> Vec<ScheduleInfo> {
    let mut out: BTreeMap<String, ScheduleInfo> = BTreeMap::new();
    for r in rows {
        let active = r.is_active(now, config.inactive_after);
        out.insert(
            r.decl.name.clone(),
            ScheduleInfo {
                name: r.decl.name,
                cron: r.decl.cron,
                zone: r.decl.zone,
                kind: r.decl.kind,
                policy: r.decl.misfire.name().to_owned(),
                max_backfill: r.decl.misfire.max_backfill(),
                last_tick: r.last_tick,
                next: Vec::new(),
                active,
                declared: false,
            },
        );
    }
    for c in declared {
        let last_tick = out.get(c.name()).and_then(|i| i.last_tick);
        let after = last_tick.map_or(now, |t| t.max(now));
        out.insert(
            c.name().to_owned(),
            ScheduleInfo {
                name: c.name().to_owned(),
                cron: c.cron().to_owned(),
                zone: c.zone_name().to_owned(),
                kind: c.kind().to_owned(),
                policy: c.misfire().name().to_owned(),
                max_backfill: c.misfire().max_backfill(),
                last_tick,
                next: c.next_ticks(after, NEXT_TIMES),
                active: true,
                declared: true,
            },
        );
    }
    out.into_values().collect()
}

/// Why `schedules trigger NAME` cannot run here: the state table knows
/// `name` (a service binary's scheduler wrote it) but this binary does not
/// declare it, or nobody ever declared it.
async fn not_declared_here(queue: &drover::Queue, name: &str) -> CliError {
    match queue.schedule_list().await {
        Ok(rows) if rows.iter().any(|r| r.decl.name == name) => {
            CliError::DeclaredElsewhere(format!(
                "schedule {name:?} is declared by a service binary, not this one: run \
                 `<service> schedules trigger {name}` from the binary that declares it \
                 (drover_cli::run_with gives a service this CLI)"
            ))
        }
        Ok(_) => CliError::Drover(drover::Error::NotFound(format!(
            "schedule {name:?}: no binary has declared it (this one declares no schedule of \
             that name, and the state table has no row for it)"
        ))),
        Err(e) => CliError::Drover(e),
    }
}

fn time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Lists the schedules, or triggers one.
///
/// # Errors
/// [`CliError::Drover`]: a schedule that does not compile, an unknown
/// name to trigger (exit 1), storage errors.
///
/// # Cancel safety
/// A trigger is one insert: dropped, it either committed or not.
pub async fn run(args: &SchedulesArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    // The heartbeat as `drover worker` would declare it (cron and lane).
    let env = WorkerSettings::from_env()?;
    let queue = cx.queue().await?;
    let worker = cx
        .worker_builder(queue.clone())
        .settings(WorkerSettings {
            heartbeat_cron: env.heartbeat_cron,
            heartbeat_lane: env.heartbeat_lane,
            metrics_addr: None,
            ..WorkerSettings::default()
        })
        .build()?;
    let scheduler = worker.scheduler().cloned();
    if let Some(SchedulesAction::Trigger { name, json }) = &args.action {
        let declared_here = scheduler
            .as_ref()
            .is_some_and(|s| s.schedules().iter().any(|c| c.name() == name));
        let Some(s) = scheduler.filter(|_| declared_here) else {
            return Err(not_declared_here(&queue, name).await);
        };
        let out = s.trigger(name).await?;
        if *json {
            let v = serde_json::to_string(&out.item).map_err(crate::table::json_err)?;
            writeln!(cx.out, "{v}")?;
        } else {
            writeln!(
                cx.out,
                "enqueued {} ({}, key {})",
                out.item.id,
                out.item.kind,
                out.item.idempotency_key.as_deref().unwrap_or("-")
            )?;
        }
        return Ok(());
    }
    let now = queue.db_now().await?;
    let rows = queue.schedule_list().await?;
    let declared: Vec<Compiled> = scheduler
        .as_ref()
        .map(|s| s.schedules().to_vec())
        .unwrap_or_default();
    let config = scheduler
        .as_ref()
        .map(|s| s.config().clone())
        .unwrap_or_default();
    let list = merge(&declared, rows, now, &config);
    let elsewhere: Vec<&str> = list
        .iter()
        .filter(|i| !i.declared && i.active)
        .map(|i| i.name.as_str())
        .collect();
    if !elsewhere.is_empty() {
        writeln!(
            cx.err,
            "note: {} {} declared by a service binary, not this one: its next fire times \
             and `schedules trigger` are in that binary (drover_cli::run_with)",
            elsewhere.join(", "),
            if elsewhere.len() == 1 { "is" } else { "are" },
        )?;
    }
    table::listing(
        cx.out,
        args.json,
        &list,
        None,
        &[
            "NAME",
            "CRON",
            "ZONE",
            "POLICY",
            "LAST TICK",
            "NEXT",
            "ACTIVE",
        ],
        |i| {
            let policy = if i.policy == "all" {
                format!("all (max {})", i.max_backfill)
            } else {
                i.policy.clone()
            };
            let next: Vec<String> = i.next.iter().map(time).collect();
            vec![
                i.name.clone(),
                i.cron.clone(),
                i.zone.clone(),
                policy,
                i.last_tick.as_ref().map_or_else(|| "-".to_owned(), time),
                if next.is_empty() {
                    "-".to_owned()
                } else {
                    next.join(" ")
                },
                if i.active { "yes" } else { "no" }.to_owned(),
            ]
        },
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;
    use chrono::TimeZone;
    use drover::periodic::{MisfirePolicy, Schedule, ScheduleDecl};

    #[test]
    fn declared_and_removed_schedules_are_listed_with_their_state() {
        let now = Utc.with_ymd_and_hms(2026, 5, 1, 10, 0, 20).unwrap();
        let declared = vec![
            Schedule::new("beat", "* * * * *", drover::periodic::Heartbeat {})
                .compile()
                .expect("compiles"),
        ];
        let row = |name: &str, seen_min_ago: i64, last: Option<DateTime<Utc>>| ScheduleRow {
            decl: ScheduleDecl {
                name: name.into(),
                cron: "0 3 * * *".into(),
                zone: "Europe/Berlin".into(),
                kind: "report".into(),
                lane: "default".into(),
                misfire: MisfirePolicy::All { max_backfill: 9 },
            },
            last_tick: last,
            created_at: now - chrono::Duration::days(3),
            seen_at: now - chrono::Duration::minutes(seen_min_ago),
        };
        let last = Utc.with_ymd_and_hms(2026, 5, 1, 10, 0, 0).unwrap();
        let list = merge(
            &declared,
            vec![row("beat", 0, Some(last)), row("removed", 60, None)],
            now,
            &SchedulerConfig::default(),
        );
        assert_eq!(list.len(), 2);
        let beat = &list[0];
        assert_eq!(
            (beat.name.as_str(), beat.active, beat.declared),
            ("beat", true, true)
        );
        assert_eq!(beat.last_tick, Some(last));
        assert_eq!(beat.next.len(), NEXT_TIMES);
        assert_eq!(
            beat.next[0],
            Utc.with_ymd_and_hms(2026, 5, 1, 10, 1, 0).unwrap()
        );
        let removed = &list[1];
        assert_eq!(
            (removed.name.as_str(), removed.active, removed.declared),
            ("removed", false, false),
            "unseen for an hour: inactive"
        );
        assert!(
            removed.next.is_empty(),
            "a removed schedule has no next time"
        );
        assert_eq!((removed.policy.as_str(), removed.max_backfill), ("all", 9));
    }
}
