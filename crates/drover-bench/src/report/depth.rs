//! What `drover bench --depth` found ([`DepthFigures`], the report's
//! `depth` field): one row per cell (a variant in a round) and the median
//! of each variant's rounds, and their rows in the text table.
//!
//! Rates are items (or pgbench transactions) per second, durations
//! seconds, latencies milliseconds.

use std::io::Write;

use serde::Serialize;

use super::Percentiles;

/// The depth mode's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DepthFigures {
    /// Items the producers keep waiting (enqueued minus handled).
    pub depth: u64,
    /// The measured window, s.
    pub window_s: f64,
    /// The warm-up before it, not counted, s.
    pub warmup_s: f64,
    /// Producer tasks topping the depth up.
    pub producers: usize,
    /// Items per producer call at most.
    pub batch: usize,
    /// How long each handler slept, ms.
    pub handler_ms: f64,
    /// Rounds; each runs every variant once, odd rounds in reverse order.
    pub rounds: u32,
    /// `the server given` or `a throwaway stock cluster`, and its
    /// autovacuum, fsync, synchronous_commit and shared_buffers.
    pub server: String,
    /// pgbench's clients (`-c`), when pgbench ran.
    pub pgbench_clients: Option<usize>,
    /// pgbench's run (`-T`), s.
    pub pgbench_s: Option<f64>,
    /// `pgbench -i -s`.
    pub pgbench_scale: Option<u32>,
    /// Every cell, in the order run.
    pub rows: Vec<DepthRow>,
    /// The median over the rounds of each variant, in the first round's
    /// order.
    pub medians: Vec<DepthMedian>,
}

/// One cell: one variant measured once, in a sandbox of its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DepthRow {
    /// The round (0-based).
    pub round: u32,
    /// The variant's name (`base`, `no-vacuum`, `rotation`, `no-spread`).
    pub variant: String,
    /// What the variant changes from the defaults.
    pub settings: String,
    /// Handlers entered in the window.
    pub handled: u64,
    /// `handled / window`, items/s.
    pub throughput: f64,
    /// Enqueue (the producer's call) to handler entry of the items entered
    /// in the window, ms.
    pub e2e: Percentiles,
    /// Waiting depth (enqueued minus handled, in process) sampled every
    /// 100 ms over the window: mean.
    pub depth_mean: f64,
    /// Its smallest sample.
    pub depth_min: u64,
    /// Producer calls over the whole cell.
    pub calls: u64,
    /// Items enqueued over the whole cell (warm-up and the last drain
    /// included).
    pub enqueued: u64,
    /// Handler runs over the whole cell.
    pub executed: u64,
    /// Distinct items among them.
    pub distinct: u64,
    /// `executed - distinct`.
    pub duplicates: u64,
    /// items children dropped by the rotation during the window.
    pub children_dropped: u64,
    /// Dead tuples over the items partitions after the cell.
    pub items_dead: i64,
    /// Manual vacuums of the items partitions (the paced vacuum's) over the
    /// cell.
    pub items_vacuums: i64,
    /// pgbench `-N` TPS, run right after the cell.
    pub pgbench_tps: Option<f64>,
    /// `throughput / pgbench_tps`.
    pub ratio: Option<f64>,
}

/// The median of one variant's rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DepthMedian {
    /// The variant's name.
    pub variant: String,
    /// Median throughput, items/s.
    pub throughput: f64,
    /// Median pgbench TPS of its cells.
    pub pgbench_tps: Option<f64>,
    /// Median ratio of its cells.
    pub ratio: Option<f64>,
    /// `throughput` over the base variant's.
    pub vs_base: Option<f64>,
}

/// The median of `v` (the mean of the middle two for an even count);
/// `None` when empty.
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

impl DepthFigures {
    /// Fills [`DepthFigures::medians`] from the rows.
    pub fn summarise(&mut self) {
        let mut names: Vec<String> = Vec::new();
        for r in &self.rows {
            if !names.contains(&r.variant) {
                names.push(r.variant.clone());
            }
        }
        let of = |name: &str, f: &dyn Fn(&DepthRow) -> Option<f64>| {
            median(
                self.rows
                    .iter()
                    .filter(|r| r.variant == name)
                    .filter_map(f)
                    .collect(),
            )
        };
        let mut medians: Vec<DepthMedian> = names
            .iter()
            .map(|name| DepthMedian {
                variant: name.clone(),
                throughput: of(name, &|r| Some(r.throughput)).unwrap_or(0.0),
                pgbench_tps: of(name, &|r| r.pgbench_tps),
                ratio: of(name, &|r| r.ratio),
                vs_base: None,
            })
            .collect();
        let base = medians
            .iter()
            .find(|m| m.variant == "base")
            .map(|m| m.throughput);
        for m in &mut medians {
            m.vs_base = base.filter(|b| *b > 0.0).map(|b| m.throughput / b);
        }
        self.medians = medians;
    }

    /// Writes the figures as rows and a table of cells.
    ///
    /// # Errors
    /// Output errors.
    pub fn write_table(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "  depth {} waiting, window {:.0} s after a {:.0} s warm-up (not counted), {} producers of up to {} items, handler {:.1} ms, {}",
            self.depth,
            self.window_s,
            self.warmup_s,
            self.producers,
            self.batch,
            self.handler_ms,
            self.server
        )?;
        match (self.pgbench_clients, self.pgbench_s, self.pgbench_scale) {
            (Some(c), Some(t), Some(s)) => writeln!(
                out,
                "  pgbench -i -s {s}, then -N -c {c} -j 2 -T {t:.0} after each cell"
            )?,
            _ => writeln!(out, "  pgbench not run")?,
        }
        writeln!(
            out,
            "  {:>2} {:<10} {:>10} {:>9} {:>9} {:>11} {:>9} {:>6} {:>17} {:>7} {:>9} {:>4}",
            "r",
            "variant",
            "handled/s",
            "e2e p50",
            "e2e p99",
            "depth mean",
            "pgbench",
            "ratio",
            "exec/dist/dups",
            "dropped",
            "dead",
            "vac"
        )?;
        for r in &self.rows {
            writeln!(
                out,
                "  {:>2} {:<10} {:>10.0} {:>9.1} {:>9.1} {:>11.0} {:>9} {:>6} {:>17} {:>7} {:>9} {:>4}",
                r.round,
                r.variant,
                r.throughput,
                r.e2e.p50,
                r.e2e.p99,
                r.depth_mean,
                opt(r.pgbench_tps, 0),
                opt(r.ratio, 2),
                format!("{}/{}/{}", r.executed, r.distinct, r.duplicates),
                r.children_dropped,
                r.items_dead,
                r.items_vacuums
            )?;
        }
        if self.rounds > 1 || self.medians.len() > 1 {
            writeln!(out, "  medians:")?;
            for m in &self.medians {
                writeln!(
                    out,
                    "     {:<10} {:>10.0} items/s  pgbench {:>6}  ratio {:>5}  vs base {:>5}",
                    m.variant,
                    m.throughput,
                    opt(m.pgbench_tps, 0),
                    opt(m.ratio, 2),
                    opt(m.vs_base, 3)
                )?;
            }
        }
        Ok(())
    }
}

/// `v` with `digits` decimals, `-` when absent.
fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(variant: &str, throughput: f64, tps: f64) -> DepthRow {
        DepthRow {
            variant: variant.into(),
            throughput,
            pgbench_tps: Some(tps),
            ratio: Some(throughput / tps),
            ..DepthRow::default()
        }
    }

    #[test]
    fn medians_per_variant_against_the_base() {
        let mut f = DepthFigures {
            rows: vec![
                row("base", 100.0, 50.0),
                row("no-vacuum", 90.0, 50.0),
                row("no-vacuum", 70.0, 50.0),
                row("base", 120.0, 60.0),
            ],
            ..DepthFigures::default()
        };
        f.summarise();
        assert_eq!(f.medians.len(), 2);
        assert_eq!(f.medians[0].variant, "base");
        assert_eq!(f.medians[0].throughput, 110.0);
        assert_eq!(f.medians[0].pgbench_tps, Some(55.0));
        assert_eq!(f.medians[1].throughput, 80.0);
        assert_eq!(f.medians[1].vs_base, Some(80.0 / 110.0));
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
    }
}
