//! What a bench found: one [`Report`] per run, printed as one JSON object
//! (`--json`) or as a readable table ([`Report::write_table`]); and the
//! rows of a soak run ([`SoakRow`]) its CSV and chart are made of.
//!
//! Rates are items per second, durations seconds, latencies milliseconds.

use std::io::Write;

use serde::Serialize;

use crate::workers::Rss;

pub mod bounds;
pub mod depth;
pub mod limits;

/// Percentiles of a set of latencies, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// How many samples.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `samples` (milliseconds); all zero when
    /// empty.
    pub fn of(mut samples: Vec<f64>) -> Self {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| {
            let rank = (q * samples.len() as f64).ceil() as usize;
            samples[rank.clamp(1, samples.len()) - 1]
        };
        Percentiles {
            count: samples.len() as u64,
            p50: at(0.50),
            p95: at(0.95),
            p99: at(0.99),
            max: samples[samples.len() - 1],
        }
    }
}

/// One window of a sustained run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Window {
    /// Start of the window, seconds since the producers started.
    pub start_s: f64,
    /// Items enqueued in the window, per second.
    pub enqueued_rate: f64,
    /// Handler entries in the window, per second.
    pub achieved_rate: f64,
    /// End-to-end latency (enqueue to handler entry) of the items whose
    /// handler was entered in the window.
    pub lat_p50: f64,
    /// Its 99th percentile.
    pub lat_p99: f64,
}

/// Claim timings of one measurement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ClaimStats {
    /// The claim (one statement claiming up to the batch), ms.
    pub claim: Percentiles,
    /// The batched completion of what was claimed, ms.
    pub complete: Percentiles,
    /// Items the claims returned on average.
    pub mean_claimed: f64,
}

/// One claim timed during the churn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Probe {
    /// Seconds since the churn started.
    pub t_s: f64,
    /// That claim's time, ms.
    pub claim_ms: f64,
}

/// What a soak run found, besides its CSV rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SoakSummary {
    /// The CSV file written.
    pub csv: String,
    /// The PNG chart written, if it could be drawn.
    pub png: Option<String>,
    /// Why the chart was not drawn.
    pub chart_error: Option<String>,
    /// Rows (5 s samples) in the CSV.
    pub samples: usize,
    /// The workers' item retention, s.
    pub retention_s: f64,
    /// The held snapshot: start and length, s.
    pub hold_xmin: Option<(f64, f64)>,
    /// Largest `n_dead_tup` of the items table over the samples.
    pub items_dead_peak: i64,
    /// Largest sum of `n_dead_tup` over every drover table.
    pub dead_total_peak: i64,
    /// `pg_total_relation_size` of the items table at the last sample.
    pub items_bytes_last: i64,
    /// Its largest value over the samples.
    pub items_bytes_peak: i64,
    /// Largest per-window claim p99 of the probe, ms.
    pub claim_p99_max_ms: f64,
    /// The probe's claim p99 over each 5-minute span of the run (the last
    /// one may be shorter), ms: every claim of the span counted, not a
    /// statistic of the 5 s rows.
    pub claim_p99_by_5min_ms: Vec<f64>,
    /// The file of every probe claim (seconds into the run, ms).
    pub claims_csv: Option<String>,
    /// Largest per-window end-to-end p99, ms.
    pub e2e_p99_max_ms: f64,
    /// Smallest per-window handled rate, items/s.
    pub throughput_min_per_s: f64,
    /// The stall line: 10 x the run's median claim p50, ms
    /// ([`crate::stalls`]); `None` without probe claims.
    pub stall_line_ms: Option<f64>,
    /// Windows whose claim p99 passed the stall line.
    pub stalled_windows: usize,
    /// The stalled windows by whose they were (`machine`, `drover`,
    /// `process`) and what was seen, with their counts.
    pub stalls_by_place: Vec<(String, usize)>,
    /// `stalls.txt`: what every session waited on in each stalled window.
    pub stalls_txt: Option<String>,
    /// `waits.csv`: the probes' and counters' figures of every window.
    pub waits_csv: Option<String>,
}

/// One row of a soak run's CSV: the window ending at one sample. The soak
/// run makes them; its CSV and chart are drawn from them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SoakRow {
    /// End of the window, seconds since the producers started.
    pub t_s: f64,
    /// Items offered in the window, per second.
    pub enqueued_per_s: f64,
    /// Handlers entered in the window, per second.
    pub throughput_per_s: f64,
    /// Enqueue-to-handler latency of those, ms.
    pub e2e: Percentiles,
    /// The probe's claims in the window, ms.
    pub claim: Percentiles,
    /// Pending and available at the sample.
    pub ready: i64,
    /// The held snapshot was open at the sample.
    pub xmin_held: bool,
    /// `(table, live, dead, bytes)`.
    pub tables: Vec<(String, i64, i64, i64)>,
}

impl SoakRow {
    /// Dead tuples over every drover table.
    pub fn dead_total(&self) -> i64 {
        self.tables.iter().map(|t| t.2).sum()
    }
}

/// What one bench run measured. Fields a mode does not measure are `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// `standard`, `sustained`, `claim_latency`, `soak`, `limits` or
    /// `depth`.
    pub mode: String,
    /// `postgres` or `sqlite`.
    pub backend: String,
    /// Items of the drain phase.
    pub jobs: u64,
    /// Items per bulk call.
    pub batch: usize,
    /// Total capacity.
    pub capacity: usize,
    /// Workers sharing it (in-process workers, or child processes).
    pub workers: usize,
    /// `in-process` or `processes`.
    pub worker_mode: String,
    /// The commit measured, if known.
    pub git_commit: Option<String>,
    /// Bulk enqueue wall time, s.
    pub enqueue_s: Option<f64>,
    /// Bulk enqueue items/s.
    pub enqueue_rate: Option<f64>,
    /// Drain wall time, s.
    pub drain_s: Option<f64>,
    /// Drain items/s.
    pub drain_rate: Option<f64>,
    /// Handler runs of the drain phase (sustained: of the whole run).
    pub executed: Option<u64>,
    /// Distinct items among them.
    pub distinct: Option<u64>,
    /// Runs beyond the first of any item, over the whole run.
    pub duplicates: Option<u64>,
    /// Latency items whose handler ran.
    pub latency_executed: Option<u64>,
    /// Latency percentiles, ms.
    pub lat_p50: Option<f64>,
    /// 95th percentile, ms.
    pub lat_p95: Option<f64>,
    /// 99th percentile, ms.
    pub lat_p99: Option<f64>,
    /// Largest, ms.
    pub lat_max: Option<f64>,
    /// Worker memory at the end of the drain (or run).
    pub rss: Option<Rss>,
    /// Sustained: the offered rate, items/s.
    pub offered_rate: Option<f64>,
    /// Sustained: items enqueued.
    pub enqueued: Option<u64>,
    /// Sustained: the run's length, s.
    pub duration_s: Option<f64>,
    /// Sustained: handler entries per second over the run.
    pub achieved_rate: Option<f64>,
    /// Sustained: per 5 s window.
    pub windows: Option<Vec<Window>>,
    /// Claim latency: pending items waiting.
    pub backlog: Option<u64>,
    /// Claim latency: time to load the backlog, s.
    pub load_s: Option<f64>,
    /// Claim latency: before any churn.
    pub claim_before: Option<ClaimStats>,
    /// Claim latency: after the churn.
    pub claim_after: Option<ClaimStats>,
    /// Claim latency: whether a second session held a transaction open.
    pub hold_xact: Option<bool>,
    /// Claim latency: claims timed during the churn.
    pub probes: Option<Vec<Probe>>,
    /// Claim latency: items the workers ran during the churn.
    pub churned: Option<u64>,
    /// Claim latency: `n_dead_tup` of the items table at the end.
    pub dead_tuples: Option<i64>,
    /// Claim latency: `EXPLAIN (ANALYZE, BUFFERS)` of a claim of 20 and its
    /// batched completion, before and after the churn.
    pub plans: Option<Vec<String>>,
    /// Soak: the summary of the samples (the rows are in the CSV).
    pub soak: Option<SoakSummary>,
    /// Limits: the four measurements of `--limits`.
    pub limits: Option<limits::LimitsFigures>,
    /// Depth: every cell of `--depth` and the medians of its variants.
    pub depth: Option<depth::DepthFigures>,
    /// Standard with `--bounds`: the raw insert and drain bounds and
    /// drover's rates over them.
    pub bounds: Option<bounds::BoundsFigures>,
    /// Why the run did not finish, if it did not (its counts are then
    /// partial and the rates absent).
    pub error: Option<String>,
}

impl Report {
    /// True when every item ran exactly once.
    pub fn is_clean(&self) -> bool {
        if self.error.is_some() {
            return false;
        }
        let dups = self.duplicates.unwrap_or(0) == 0;
        match self.mode.as_str() {
            "standard" => {
                dups && self.executed == Some(self.jobs) && self.distinct == Some(self.jobs)
            }
            "sustained" | "soak" | "depth" => dups && self.executed == self.enqueued,
            _ => dups,
        }
    }

    /// Writes the report as a readable table.
    ///
    /// # Errors
    /// Output errors.
    pub fn write_table(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "drover bench ({}) on {}: {} workers ({}), capacity {}, commit {}",
            self.mode,
            self.backend,
            self.workers,
            self.worker_mode,
            self.capacity,
            self.git_commit.as_deref().unwrap_or("?")
        )?;
        if let Some(e) = &self.error {
            row(out, "DID NOT FINISH", e.clone())?;
        }
        match self.mode.as_str() {
            "standard" => self.write_standard(out)?,
            "sustained" => self.write_sustained(out)?,
            "soak" => self.write_soak(out)?,
            "limits" => {
                if let Some(l) = &self.limits {
                    l.write_table(out)?;
                }
            }
            "depth" => {
                if let Some(d) = &self.depth {
                    d.write_table(out)?;
                }
            }
            _ => self.write_claim_latency(out)?,
        }
        if let Some(b) = &self.bounds {
            b.write_table(out)?;
        }
        if let Some(r) = self.rss {
            row(
                out,
                "worker RSS / peak",
                format!("{} / {} KiB", r.rss_kb, r.hwm_kb),
            )?;
        }
        for (i, p) in self.plans.iter().flatten().enumerate() {
            let when = if i == 0 { "before" } else { "after churn" };
            writeln!(out, "\nplans {when}:\n{p}")?;
        }
        Ok(())
    }

    /// The standard mode's rows: enqueue, drain, counts, latency.
    fn write_standard(&self, out: &mut dyn Write) -> std::io::Result<()> {
        row(
            out,
            "jobs / batch",
            format!("{} / {}", self.jobs, self.batch),
        )?;
        row(out, "enqueue items/s", fixed(self.enqueue_rate, 0))?;
        row(out, "enqueue s", fixed(self.enqueue_s, 3))?;
        row(out, "drain items/s", fixed(self.drain_rate, 0))?;
        row(out, "drain s", fixed(self.drain_s, 3))?;
        row(
            out,
            "executed/distinct/dups",
            format!(
                "{} / {} / {}",
                count(self.executed),
                count(self.distinct),
                count(self.duplicates)
            ),
        )?;
        row(
            out,
            "latency p50/p95/p99/max",
            format!(
                "{} / {} / {} / {} ms ({} items)",
                fixed(self.lat_p50, 2),
                fixed(self.lat_p95, 2),
                fixed(self.lat_p99, 2),
                fixed(self.lat_max, 2),
                count(self.latency_executed)
            ),
        )
    }

    /// The sustained mode's rows and its table of windows.
    fn write_sustained(&self, out: &mut dyn Write) -> std::io::Result<()> {
        row(out, "offered items/s", fixed(self.offered_rate, 0))?;
        row(out, "achieved items/s", fixed(self.achieved_rate, 0))?;
        row(
            out,
            "enqueued / executed",
            format!("{} / {}", count(self.enqueued), count(self.executed)),
        )?;
        row(out, "duplicates", count(self.duplicates))?;
        row(
            out,
            "latency p50/p95/p99/max",
            format!(
                "{} / {} / {} / {} ms",
                fixed(self.lat_p50, 2),
                fixed(self.lat_p95, 2),
                fixed(self.lat_p99, 2),
                fixed(self.lat_max, 2)
            ),
        )?;
        writeln!(
            out,
            "  {:>8} {:>12} {:>12} {:>10} {:>10}",
            "t (s)", "enqueued/s", "achieved/s", "p50 ms", "p99 ms"
        )?;
        for w in self.windows.iter().flatten() {
            writeln!(
                out,
                "  {:>8.0} {:>12.0} {:>12.0} {:>10.2} {:>10.2}",
                w.start_s, w.enqueued_rate, w.achieved_rate, w.lat_p50, w.lat_p99
            )?;
        }
        Ok(())
    }

    /// The soak mode's rows: the run's counts, then its summary's.
    fn write_soak(&self, out: &mut dyn Write) -> std::io::Result<()> {
        row(out, "offered items/s", fixed(self.offered_rate, 0))?;
        row(out, "achieved items/s", fixed(self.achieved_rate, 0))?;
        row(
            out,
            "enqueued / executed",
            format!("{} / {}", count(self.enqueued), count(self.executed)),
        )?;
        row(out, "duplicates", count(self.duplicates))?;
        row(
            out,
            "e2e p50/p99/max",
            format!(
                "{} / {} / {} ms",
                fixed(self.lat_p50, 2),
                fixed(self.lat_p99, 2),
                fixed(self.lat_max, 2)
            ),
        )?;
        match &self.soak {
            Some(s) => write_soak_summary(out, s),
            None => Ok(()),
        }
    }

    /// The claim-latency mode's rows: the backlog, the claim and completion
    /// timings before and after the churn, and what the churn left.
    fn write_claim_latency(&self, out: &mut dyn Write) -> std::io::Result<()> {
        row(out, "backlog", count(self.backlog))?;
        row(out, "load s", fixed(self.load_s, 1))?;
        row(
            out,
            "hold xact",
            format!("{:?}", self.hold_xact.unwrap_or(false)),
        )?;
        for (name, s) in [
            ("before", &self.claim_before),
            ("after churn", &self.claim_after),
        ] {
            if let Some(s) = s {
                row(
                    out,
                    &format!("claim {name} p50/p99"),
                    format!(
                        "{:.3} / {:.3} ms ({:.1} items each)",
                        s.claim.p50, s.claim.p99, s.mean_claimed
                    ),
                )?;
                row(
                    out,
                    &format!("complete {name} p50/p99"),
                    format!("{:.3} / {:.3} ms", s.complete.p50, s.complete.p99),
                )?;
            }
        }
        row(out, "churned items", count(self.churned))?;
        row(
            out,
            "dead tuples at end",
            self.dead_tuples.map_or("-".into(), |d| d.to_string()),
        )
    }
}

/// The rows of a soak run's summary: samples, bloat, worst windows and the
/// files written.
fn write_soak_summary(out: &mut dyn Write, s: &SoakSummary) -> std::io::Result<()> {
    row(out, "samples (5 s)", s.samples.to_string())?;
    row(out, "retention", format!("{:.0} s", s.retention_s))?;
    if let Some((a, d)) = s.hold_xmin {
        row(out, "snapshot held", format!("from {a:.0} s for {d:.0} s"))?;
    }
    row(out, "items dead tuples peak", s.items_dead_peak.to_string())?;
    row(out, "all tables dead peak", s.dead_total_peak.to_string())?;
    row(
        out,
        "items size last / peak",
        format!(
            "{:.1} / {:.1} MiB",
            s.items_bytes_last as f64 / 1_048_576.0,
            s.items_bytes_peak as f64 / 1_048_576.0
        ),
    )?;
    row(
        out,
        "claim p99 worst window",
        format!("{:.2} ms", s.claim_p99_max_ms),
    )?;
    row(
        out,
        "claim p99 per 5 min",
        s.claim_p99_by_5min_ms
            .iter()
            .map(|v| format!("{v:.2}"))
            .collect::<Vec<_>>()
            .join(" / ")
            + " ms",
    )?;
    row(
        out,
        "e2e p99 worst window",
        format!("{:.2} ms", s.e2e_p99_max_ms),
    )?;
    row(
        out,
        "handled/s worst window",
        format!("{:.0}", s.throughput_min_per_s),
    )?;
    if let Some(line) = s.stall_line_ms {
        row(
            out,
            "stalled windows",
            format!("{} (claim p99 over {line:.2} ms)", s.stalled_windows),
        )?;
        for (what, n) in &s.stalls_by_place {
            row(out, "", format!("{n:>3}  {what}"))?;
        }
    }
    row(out, "csv", s.csv.clone())?;
    if let Some(c) = &s.stalls_txt {
        row(out, "stalls", c.clone())?;
    }
    if let Some(c) = &s.waits_csv {
        row(out, "waits csv", c.clone())?;
    }
    if let Some(c) = &s.claims_csv {
        row(out, "probe claims csv", c.clone())?;
    }
    row(
        out,
        "chart",
        s.png
            .clone()
            .or_else(|| s.chart_error.as_ref().map(|e| format!("not drawn: {e}")))
            .unwrap_or_default(),
    )
}

/// `v` with `digits` decimals, `-` when not measured.
fn fixed(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

/// `v`, `-` when not measured.
fn count(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn row(out: &mut dyn Write, k: &str, v: String) -> std::io::Result<()> {
    writeln!(out, "  {k:<24} {v}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!(
            (p.p50, p.p95, p.p99, p.max, p.count),
            (50.0, 95.0, 99.0, 100.0, 100)
        );
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
        assert_eq!(Percentiles::of(vec![3.0]).p99, 3.0);
    }
}
