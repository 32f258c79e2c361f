//! What `drover bench --limits` found ([`LimitsFigures`], the report's
//! `limits` field) and its rows in the text table.
//!
//! Rates are items per second, durations seconds, latencies milliseconds.

use std::io::Write;

use serde::Serialize;

use super::{ClaimStats, Percentiles};

/// The four measurements of the limits mode; a part not run is `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LimitsFigures {
    /// 1. The cost of limits that never bind, on the standard drain.
    pub overhead: Option<Overhead>,
    /// 2. How busy a binding per-group limit keeps its slots.
    pub busy: Option<Busy>,
    /// 3. Claim latency with a large backlog over many groups, limited and
    ///    not.
    pub scale: Option<ScaleClaims>,
    /// 4. Claim latency of other groups' items behind one very large group.
    pub big_group: Option<BigGroup>,
}

/// One timed drain of the overhead part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drain {
    /// The round it belongs to (0-based).
    pub round: u32,
    /// `none`, `kind` or `lane`: which limit was in force.
    pub variant: String,
    /// Wall time of the drain (worker start-up inside), s.
    pub drain_s: f64,
    /// Items run per second (`ran / drain_s`).
    pub drain_rate: f64,
    /// Items that ran (all of them unless the drain did not finish).
    pub ran: u64,
    /// False when the run's timeout ended the drain first.
    pub finished: bool,
}

/// Part 1: the standard drain without limits and with a kind limit and a
/// lane limit far above the workers' capacity, alternating.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Overhead {
    /// Items per drain.
    pub jobs: u64,
    /// The concurrency of the kind and lane limits (never reached).
    pub concurrency: u32,
    /// Every drain, in the order run.
    pub drains: Vec<Drain>,
    /// Median drain rate (of the rounds) without limits.
    pub none_rate: f64,
    /// Median drain rate with the kind limit.
    pub kind_rate: f64,
    /// Median drain rate with the lane limit.
    pub lane_rate: f64,
    /// `kind_rate / none_rate` (target >= 0.9).
    pub kind_ratio: f64,
    /// `lane_rate / none_rate` (target >= 0.9).
    pub lane_ratio: f64,
    /// PostgreSQL: `EXPLAIN (ANALYZE, BUFFERS)` of the statement a limited
    /// claim reads the held slots with, after the part's drains.
    pub held_plan: Option<String>,
    /// PostgreSQL: `EXPLAIN (ANALYZE, BUFFERS)` of the limited claim's
    /// candidate statement with the first kind drain's backlog waiting,
    /// as a custom plan and as the generic plan a prepared statement may
    /// switch to after five executions.
    pub candidates_plan: Option<String>,
    /// Whether `ANALYZE items` ran after each enqueue (`--analyze`).
    pub analyze: bool,
}

/// Part 2: `groups` groups under a per-group limit of 1, each with more
/// waiting items than the window can run, handlers sleeping `handler_ms`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Busy {
    /// Groups, each with a slot of 1.
    pub groups: u32,
    /// Items enqueued per group (more than the window can run).
    pub items_per_group: u64,
    /// The workers' total capacity (at least `groups`).
    pub capacity: usize,
    /// What each handler does: sleep this long, ms.
    pub handler_ms: f64,
    /// The workers' poll interval, ms (a claim that came back short waits
    /// for a wake-up or this).
    pub poll_interval_ms: f64,
    /// The measured window, s: from the first handler entry until the
    /// window ends or a group's last item is claimed, whichever is first.
    pub window_s: f64,
    /// True when every group still had an item waiting when the window
    /// ended (the fraction then means what it says).
    pub all_groups_waiting: bool,
    /// Handler runs that started in the window.
    pub runs: u64,
    /// Handler-busy time summed over the groups inside the window, s.
    pub busy_s: f64,
    /// `busy_s / (groups x window_s)`: the fraction of slot-time a handler
    /// of the group was running (target >= 0.95). The time a slot is held
    /// without a handler running (claim to handler entry, handler exit to
    /// the completion's commit) counts as idle here.
    pub busy_fraction: f64,
    /// The idle gap of a group between one handler's exit and the next
    /// handler's entry, ms.
    pub gap: Percentiles,
    /// The mean of `gap`, ms (what the busy fraction loses per run).
    pub gap_mean_ms: f64,
    /// The part of each gap before the next run's claim was sent (the
    /// completion waiting its turn in the worker), ms.
    pub gap_to_claim: Percentiles,
    /// The part of each gap from the claim's send to the handler's entry
    /// (the handover's round trip and the dispatch), ms.
    pub claim_to_entry: Percentiles,
}

/// Part 3: the same backlog claimed with no limit and with a per-group
/// limit of 1, in alternating blocks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ScaleClaims {
    /// Pending items loaded.
    pub items: u64,
    /// Groups they are spread over (item `i` in group `i mod groups`).
    pub groups: u64,
    /// Loading time (and `VACUUM ANALYZE` on PostgreSQL), s.
    pub load_s: f64,
    /// Claims of no limit in force.
    pub unlimited: ClaimStats,
    /// Claims under the per-group limit of 1.
    pub limited: ClaimStats,
    /// `limited.claim.p50 / unlimited.claim.p50`.
    pub p50_ratio: f64,
    /// `limited.claim.p99 / unlimited.claim.p99` (target <= 2).
    pub p99_ratio: f64,
    /// Claims cut at the time budget, either variant (counted as the
    /// budget: a lower bound).
    pub unfinished: u64,
    /// PostgreSQL: `EXPLAIN (ANALYZE, BUFFERS)` of the limited claim's
    /// candidate statement.
    pub plan: Option<String>,
}

/// Part 4: one group holding `big_items` waiting items, ahead of the rest
/// in claim order, one of them claimed (so its slot is full), and the
/// other groups' items claimed under the per-group limit.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BigGroup {
    /// Waiting items of the one large group.
    pub big_items: u64,
    /// Loading time of those, s.
    pub load_s: f64,
    /// Claims of the other groups without the large group (part 3's
    /// limited claims: same items, same limit, same run).
    pub without: ClaimStats,
    /// Claims of the other groups with the large group waiting.
    pub with: ClaimStats,
    /// True when the time budget ended the timed claims before their
    /// number (`with.claim.count` says how many ran).
    pub budget_hit: bool,
    /// `with.claim.p50 / without.claim.p50`.
    pub p50_ratio: f64,
    /// `with.claim.p99 / without.claim.p99`.
    pub p99_ratio: f64,
    /// Claims cut at the time budget (counted as the budget: a lower
    /// bound of their time).
    pub unfinished: u64,
    /// Items of the large group among the claims (0: none leaked past its
    /// limit).
    pub big_claimed: u64,
    /// Items of the large group the sweep's parking passes parked.
    pub parked: u64,
    /// Time of those passes, s.
    pub park_s: f64,
    /// Passes run (the last parked nothing more).
    pub park_passes: u32,
    /// PostgreSQL: time of the `VACUUM items` after parking (the moved
    /// rows' old versions), s.
    pub vacuum_s: f64,
    /// Claims of the other groups with the large group parked.
    pub after: ClaimStats,
    /// `after.claim.p50 / without.claim.p50`.
    pub after_p50_ratio: f64,
    /// `after.claim.p99 / without.claim.p99`.
    pub after_p99_ratio: f64,
    /// PostgreSQL: `EXPLAIN (ANALYZE, BUFFERS)` of the candidate statement
    /// with the large group full.
    pub plan: Option<String>,
}

/// `a / b`, 0 when `b` is 0.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

impl LimitsFigures {
    /// Writes the rows of the text table.
    ///
    /// # Errors
    /// Output errors.
    pub fn write_table(&self, out: &mut dyn Write) -> std::io::Result<()> {
        if let Some(o) = &self.overhead {
            o.write(out)?;
        }
        if let Some(b) = &self.busy {
            b.write(out)?;
        }
        if let Some(s) = &self.scale {
            s.write(out)?;
        }
        if let Some(b) = &self.big_group {
            b.write(out)?;
        }
        for (what, plan) in [
            (
                "the candidates, the first kind drain's backlog waiting",
                self.overhead
                    .as_ref()
                    .and_then(|o| o.candidates_plan.as_ref()),
            ),
            (
                "held slots, after the drains",
                self.overhead.as_ref().and_then(|o| o.held_plan.as_ref()),
            ),
            (
                "the candidates, many groups, per-group limit",
                self.scale.as_ref().and_then(|s| s.plan.as_ref()),
            ),
            (
                "the candidates, one large group full",
                self.big_group.as_ref().and_then(|b| b.plan.as_ref()),
            ),
        ] {
            if let Some(p) = plan {
                writeln!(out, "\nplan of {what}:\n{p}")?;
            }
        }
        Ok(())
    }
}

impl Overhead {
    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "1. limits that never bind ({} items per drain, limits of {})",
            self.jobs, self.concurrency
        )?;
        if self.analyze {
            row(out, "statistics", "ANALYZE items after each enqueue".into())?;
        }
        for d in &self.drains {
            let unfinished = if d.finished {
                String::new()
            } else {
                format!(", DID NOT FINISH: ran {} of {}", d.ran, self.jobs)
            };
            row(
                out,
                &format!("round {} {}", d.round, d.variant),
                format!(
                    "{:.0} items/s ({:.2} s){unfinished}",
                    d.drain_rate, d.drain_s
                ),
            )?;
        }
        row(out, "median none", format!("{:.0} items/s", self.none_rate))?;
        row(
            out,
            "median kind limit",
            format!(
                "{:.0} items/s, ratio {:.3} (target >= 0.9)",
                self.kind_rate, self.kind_ratio
            ),
        )?;
        row(
            out,
            "median lane limit",
            format!(
                "{:.0} items/s, ratio {:.3} (target >= 0.9)",
                self.lane_rate, self.lane_ratio
            ),
        )
    }
}

impl Busy {
    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "2. binding per-group limit: {} groups x 1 slot, capacity {}, handler {:.0} ms, poll {:.0} ms",
            self.groups, self.capacity, self.handler_ms, self.poll_interval_ms
        )?;
        row(
            out,
            "window",
            format!(
                "{:.2} s, {} runs, every group waiting: {}",
                self.window_s, self.runs, self.all_groups_waiting
            ),
        )?;
        row(
            out,
            "handler-busy slot-time",
            format!(
                "{:.3} ({:.2} s of {} x {:.2} s; target >= 0.95)",
                self.busy_fraction, self.busy_s, self.groups, self.window_s
            ),
        )?;
        row(
            out,
            "group gap p50/p99/max",
            format!(
                "{:.2} / {:.2} / {:.2} ms ({} gaps), mean {:.2} ms",
                self.gap.p50, self.gap.p99, self.gap.max, self.gap.count, self.gap_mean_ms
            ),
        )?;
        row(
            out,
            "  to claim sent p50/p99",
            format!(
                "{:.2} / {:.2} ms; claim sent to entry {:.2} / {:.2} ms",
                self.gap_to_claim.p50,
                self.gap_to_claim.p99,
                self.claim_to_entry.p50,
                self.claim_to_entry.p99
            ),
        )
    }
}

impl ScaleClaims {
    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "3. claims with {} items over {} groups (loaded in {:.1} s)",
            self.items, self.groups, self.load_s
        )?;
        stats(out, "no limit", &self.unlimited)?;
        stats(out, "per-group limit 1", &self.limited)?;
        if self.unfinished > 0 {
            row(out, "claims cut at the budget", self.unfinished.to_string())?;
        }
        row(
            out,
            "limited / none",
            format!(
                "p50 x{:.2}, p99 x{:.2} (target <= 2)",
                self.p50_ratio, self.p99_ratio
            ),
        )
    }
}

impl BigGroup {
    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "4. one group of {} waiting items ahead of the rest, its slot full (loaded in {:.1} s)",
            self.big_items, self.load_s
        )?;
        stats(out, "other groups, without", &self.without)?;
        stats(out, "other groups, with", &self.with)?;
        if self.budget_hit {
            row(
                out,
                "note",
                "the time budget ended the timed claims early".into(),
            )?;
        }
        if self.unfinished > 0 {
            row(
                out,
                "claims cut at the budget",
                format!(
                    "{} (each counted as the budget: a lower bound)",
                    self.unfinished
                ),
            )?;
        }
        row(
            out,
            "large group's items claimed",
            self.big_claimed.to_string(),
        )?;
        row(
            out,
            "with / without",
            format!("p50 x{:.2}, p99 x{:.2}", self.p50_ratio, self.p99_ratio),
        )?;
        row(
            out,
            "parked by the sweep",
            format!(
                "{} items in {:.1} s ({} passes), then vacuum {:.1} s",
                self.parked, self.park_s, self.park_passes, self.vacuum_s
            ),
        )?;
        stats(out, "other groups, parked", &self.after)?;
        row(
            out,
            "parked / without",
            format!(
                "p50 x{:.2}, p99 x{:.2}",
                self.after_p50_ratio, self.after_p99_ratio
            ),
        )
    }
}

fn stats(out: &mut dyn Write, name: &str, s: &ClaimStats) -> std::io::Result<()> {
    row(
        out,
        &format!("claim {name}"),
        format!(
            "p50 {:.3} / p99 {:.3} / max {:.3} ms ({} claims, {:.1} items each)",
            s.claim.p50, s.claim.p99, s.claim.max, s.claim.count, s.mean_claimed
        ),
    )
}

fn row(out: &mut dyn Write, k: &str, v: String) -> std::io::Result<()> {
    writeln!(out, "  {k:<28} {v}")
}
