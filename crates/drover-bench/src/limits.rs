//! Limits mode (`drover bench --limits`): what concurrency limits cost and
//! how well a binding one is served, in one run on one backend.
//!
//! 1. **Limits that never bind** ([`overhead`]): the standard drain of
//!    `jobs` items with no limit, with a kind limit and with a lane limit of
//!    [`NEVER_BINDS`] (far above any capacity), in `rounds` rounds whose
//!    order rotates, so drift over the run falls on every variant alike.
//! 2. **A binding per-group limit** ([`busy`]): G groups with
//!    a per-group limit of 1, more waiting items per group than the window
//!    can run, handlers that sleep; the fraction of slot-time a handler was
//!    running.
//! 3. and 4. **Claim latency at scale** ([`scale`]).
//!
//! Each part uses a lane of its own, so what one leaves pending never
//! stands in another's claim order, and clears the limits it set.

use std::time::{Duration, Instant};

mod busy;
mod scale;

use drover::NewItem;
use drover::queue::Principal;
use drover::store::limits::LimitScope;
use serde_json::json;

use crate::recorder::Recorder;
use crate::report::Report;
use crate::report::limits::{Drain, LimitsFigures, Overhead, ratio};
use crate::standard::{base_report, drain_until_empty};
use crate::target::Target;
use crate::workers::Fleet;
use crate::{BenchConfig, BenchError, KIND, LANE, Mode, Progress};

/// The statement a limited claim reads the held slots with (twice per
/// claim), as the store runs it.
const HELD_SQL: &str = include_str!("../../drover-store/sql/postgres/limit_held.sql");

/// The concurrency of the limits that must never bind (a capacity of 20
/// holds at most a few dozen claims).
pub const NEVER_BINDS: u32 = 10_000;
/// `--rounds`: rounds of the overhead part (each drains once per variant).
pub const ROUNDS_DEFAULT: u32 = 3;
/// `--busy-groups`: groups of the binding part.
pub const BUSY_GROUPS_DEFAULT: u32 = 10;
/// `--busy-for`: the binding part's window.
pub const BUSY_FOR_DEFAULT: Duration = Duration::from_secs(10);
/// `--handler-ms`: what a handler of the binding part does: sleep.
pub const HANDLER_DEFAULT: Duration = Duration::from_millis(20);
/// `--items`: the backlog of the claim-latency parts.
pub const ITEMS_DEFAULT: u64 = 1_000_000;
/// `--groups`: the groups that backlog is spread over.
pub const GROUPS_DEFAULT: u64 = 100_000;
/// `--big-group`: the waiting items of the one large group.
pub const BIG_GROUP_DEFAULT: u64 = 1_000_000;
/// `--claim-budget`: the longest one series of timed claims may take.
pub const CLAIM_BUDGET_DEFAULT: Duration = Duration::from_secs(60);

/// What the limits mode runs; the defaults are the sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitsSpec {
    /// Rounds of the overhead part (0 skips it).
    pub rounds: u32,
    /// Groups of the binding part (0 skips it).
    pub busy_groups: u32,
    /// The binding part's measured window.
    pub busy_for: Duration,
    /// How long a handler of the binding part sleeps.
    pub handler: Duration,
    /// Pending items of the claim-latency parts (0 skips parts 3 and 4).
    pub items: u64,
    /// Groups those items are spread over.
    pub groups: u64,
    /// Waiting items of the one large group (0 skips part 4).
    pub big_group: u64,
    /// Timed claims per series.
    pub claims: u32,
    /// Items per claim.
    pub claim_batch: u32,
    /// The longest one series of timed claims may take: a series stops at
    /// its next claim after this (at least one claim is timed).
    pub claim_budget: Duration,
    /// PostgreSQL: `ANALYZE items` after each enqueue of the overhead part,
    /// as autovacuum's analyze would on a server that runs it.
    pub analyze: bool,
}

impl Default for LimitsSpec {
    fn default() -> Self {
        LimitsSpec {
            rounds: ROUNDS_DEFAULT,
            busy_groups: BUSY_GROUPS_DEFAULT,
            busy_for: BUSY_FOR_DEFAULT,
            handler: HANDLER_DEFAULT,
            items: ITEMS_DEFAULT,
            groups: GROUPS_DEFAULT,
            big_group: BIG_GROUP_DEFAULT,
            claims: crate::CLAIMS_DEFAULT,
            claim_batch: crate::CLAIM_BATCH_DEFAULT,
            claim_budget: CLAIM_BUDGET_DEFAULT,
            analyze: false,
        }
    }
}

impl LimitsSpec {
    /// Checks the settings together.
    pub(crate) fn validate(&self, config: &BenchConfig) -> Result<(), BenchError> {
        let bad = |field: &'static str, why: &str| Err(drover::Error::invalid(field, why).into());
        if self.rounds > 0 && config.jobs == 0 {
            return bad("jobs", "must be at least 1 for the overhead part");
        }
        if self.busy_groups as usize > config.capacity {
            return bad(
                "busy_groups",
                "must not exceed the capacity: every group's slot needs a handler",
            );
        }
        if self.busy_groups > 0 && (self.busy_for.is_zero() || self.handler.is_zero()) {
            return bad(
                "busy_for",
                "the window and the handler must be longer than zero",
            );
        }
        if self.items > 0 && (self.groups == 0 || self.groups > self.items) {
            return bad("groups", "must be between 1 and --items");
        }
        if self.claims == 0 || self.claim_batch == 0 {
            return bad("claims", "claims and claim batch must be at least 1");
        }
        Ok(())
    }
}

/// The principal the bench sets limits as.
pub(crate) fn operator() -> Principal {
    Principal::system()
}

pub(crate) async fn run(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
) -> Result<Report, BenchError> {
    let Mode::Limits(spec) = &config.mode else {
        return Err(drover::Error::invalid("mode", "not limits").into());
    };
    let mut report = base_report(config, target, "limits");
    let mut figures = LimitsFigures::default();
    if spec.rounds > 0 {
        figures.overhead = Some(overhead(config, spec, target, progress).await?);
    }
    if spec.busy_groups > 0 {
        figures.busy = Some(busy::run(config, spec, target, progress).await?);
    }
    if spec.items > 0 {
        let (scale, big) = scale::run(config, spec, target, progress).await?;
        figures.scale = Some(scale);
        figures.big_group = big;
    }
    report.limits = Some(figures);
    Ok(report)
}

/// The variants of the overhead part, in the order of round `r`: rotated
/// by one each round.
fn order(round: u32) -> [&'static str; 3] {
    let v = ["none", "kind", "lane"];
    let k = round as usize % 3;
    [v[k], v[(k + 1) % 3], v[(k + 2) % 3]]
}

/// The limit a variant sets (none for `none`).
fn scope_of(variant: &str) -> Option<LimitScope> {
    match variant {
        "kind" => Some(LimitScope::Kind(KIND.into())),
        "lane" => Some(LimitScope::Lane(LANE.into())),
        _ => None,
    }
}

/// Part 1: `rounds` x (none, kind, lane) drains of `config.jobs` items,
/// each exactly as the standard drain (worker start-up inside the clock,
/// the end when every item ran and none is pending or claimed). A drain
/// still running at `config.timeout` is reported with the items it ran by
/// then (`finished: false`), and the rest is drained without a limit,
/// untimed, so the next drain starts from an empty lane.
async fn overhead(
    config: &BenchConfig,
    spec: &LimitsSpec,
    target: &Target,
    progress: &Progress,
) -> Result<Overhead, BenchError> {
    let producer = target.queue(2).await?;
    let mut drains = Vec::new();
    let mut candidates_plan = None;
    for round in 0..spec.rounds {
        for variant in order(round) {
            let scope = scope_of(variant);
            if let Some(s) = &scope {
                producer.limit_set(&operator(), s, NEVER_BINDS).await?;
            }
            enqueue_plain(&producer, config, progress).await?;
            if let (true, Some(admin)) = (spec.analyze, &target.admin) {
                sqlx::query("ANALYZE items").execute(admin).await?;
            }
            if variant == "kind" && candidates_plan.is_none() {
                // With the backlog waiting, as the first claim meets it.
                candidates_plan = scale::explain_both(
                    target,
                    scale::CANDIDATES_SQL,
                    &format!(
                        "'{LANE}', '{{}}', {}, '{{}}', '{{}}', '{{}}', '{{}}'",
                        config.capacity * 4 + 32
                    ),
                )
                .await;
            }
            let d = drain_once(config, target, progress, &format!("{variant} #{round}")).await;
            if let Some(s) = &scope {
                producer.limit_clear(&operator(), s).await?;
            }
            let d = d?;
            if !d.finished {
                // The rest, without the limit: the next drain starts empty.
                drain_rest(config, target).await?;
            }
            let drain_rate = d.ran as f64 / d.drain_s;
            progress.note(&format!(
                "round {round} {variant}: ran {} of {} in {:.2} s ({drain_rate:.0}/s){}",
                d.ran,
                config.jobs,
                d.drain_s,
                if d.finished { "" } else { ", did not finish" }
            ));
            drains.push(Drain {
                round,
                variant: variant.to_owned(),
                drain_s: d.drain_s,
                drain_rate,
                ran: d.ran,
                finished: d.finished,
            });
        }
    }
    // The median of each variant's rounds: one drain stalled by the
    // machine (a checkpoint, a neighbour) moves a mean by a third and the
    // ratio with it; the median holds.
    let median = |v: &str| {
        let mut rates: Vec<f64> = drains
            .iter()
            .filter(|d| d.variant == v)
            .map(|d| d.drain_rate)
            .collect();
        rates.sort_by(f64::total_cmp);
        match rates.len() {
            0 => 0.0,
            n if n % 2 == 1 => rates[n / 2],
            n => (rates[n / 2 - 1] + rates[n / 2]) / 2.0,
        }
    };
    let (none_rate, kind_rate, lane_rate) = (median("none"), median("kind"), median("lane"));
    // What a limited claim reads twice, after every drain of the part.
    let held_plan =
        scale::explain_statement(target, HELD_SQL, &format!("'{LANE}', '{{{KIND}}}'"), None).await;
    Ok(Overhead {
        held_plan,
        candidates_plan,
        analyze: spec.analyze && target.admin.is_some(),
        jobs: config.jobs,
        concurrency: NEVER_BINDS,
        none_rate,
        kind_rate,
        lane_rate,
        kind_ratio: ratio(kind_rate, none_rate),
        lane_ratio: ratio(lane_rate, none_rate),
        drains,
    })
}

/// Enqueues the standard workload's items: `config.jobs` of `{"n": i}`,
/// `config.batch` per bulk call, calls in sequence.
async fn enqueue_plain(
    producer: &drover::Queue,
    config: &BenchConfig,
    progress: &Progress,
) -> Result<(), BenchError> {
    let bar = progress.bar(config.jobs, "enqueue");
    let mut next = 0u64;
    while next < config.jobs {
        let n = (config.jobs - next).min(config.batch as u64);
        let items: Vec<NewItem> = (next..next + n)
            .map(|i| NewItem::new(KIND, json!({ "n": i })).with_lane(LANE))
            .collect();
        producer.enqueue_many(&operator(), items).await?;
        next += n;
        bar.inc(n);
    }
    bar.finish_and_clear();
    Ok(())
}

/// What one timed drain did.
struct DrainOutcome {
    drain_s: f64,
    ran: u64,
    finished: bool,
}

/// One standard drain: its wall time and the items that ran; unfinished
/// when `config.timeout` passed first. An error when an item ran twice.
async fn drain_once(
    config: &BenchConfig,
    target: &Target,
    progress: &Progress,
    what: &str,
) -> Result<DrainOutcome, BenchError> {
    let recorder = Recorder::new();
    let bar = progress.bar(config.jobs, &format!("drain {what}"));
    let t = Instant::now();
    let fleet = Fleet::start(config, target, &recorder).await?;
    let drained = drain_until_empty(target, &recorder, config.jobs, config.timeout, &bar).await;
    let drain_s = t.elapsed().as_secs_f64();
    // What ran inside the clock (stopping runs the buffered claims too).
    let ran_in_clock = recorder.distinct() as u64;
    bar.finish_and_clear();
    fleet.stop().await;
    let total = recorder.total();
    if total.executed != total.distinct {
        return Err(BenchError::Incomplete(format!(
            "drain {what}: {} duplicate runs",
            total.executed - total.distinct
        )));
    }
    match drained {
        Ok(()) if total.distinct == config.jobs => Ok(DrainOutcome {
            drain_s,
            ran: total.distinct,
            finished: true,
        }),
        Ok(()) => Err(BenchError::Incomplete(format!(
            "drain {what}: ran {} of {} items",
            total.distinct, config.jobs
        ))),
        Err(BenchError::Incomplete(_)) => Ok(DrainOutcome {
            drain_s,
            ran: ran_in_clock,
            finished: false,
        }),
        Err(e) => Err(e),
    }
}

/// Drains what an unfinished drain left, untimed.
async fn drain_rest(config: &BenchConfig, target: &Target) -> Result<(), BenchError> {
    let recorder = Recorder::new();
    let fleet = Fleet::start(config, target, &recorder).await?;
    let bar = indicatif::ProgressBar::hidden();
    // Claims the stopped workers left (if any) come back once their lease
    // lapses: give it room beyond a short timeout.
    let wait = config.timeout.max(Duration::from_secs(300));
    let r = drain_until_empty(target, &recorder, 0, wait, &bar).await;
    fleet.stop().await;
    r
}
