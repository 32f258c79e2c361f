//! Draws the scaling study's charts from the JSON reports under a results
//! directory (default `docs/perf`), as PNG files next to them.
//!
//! `cargo run --release -p drover-bench --example plot -- docs/perf`
//!
//! Text is drawn with the DejaVu Sans font file (`fonts-dejavu-core`; set
//! `DROVER_PLOT_FONT` to use another file): no system font discovery.

#![allow(clippy::print_stdout)]

use std::error::Error;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

type Series = (String, Vec<(f64, f64)>);

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

fn main() -> Result<(), Box<dyn Error>> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "docs/perf".into()),
    );
    let font = std::env::var("DROVER_PLOT_FONT")
        .unwrap_or_else(|_| "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
    let bytes: &'static [u8] = Box::leak(std::fs::read(&font)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| format!("{font} is not a font plotters can read"))?;

    drain_by_capacity(&dir)?;
    drain_by_processes(&dir)?;
    claim_by_backlog(&dir)?;
    claim_under_churn(&dir)?;
    sustained(&dir)
}

/// The median of `field` over the reports `files` (those that cannot be
/// read or lack the field drop out).
fn med(files: &[PathBuf], field: &str) -> Option<f64> {
    let mut v: Vec<f64> = files
        .iter()
        .filter_map(|f| read(f).ok())
        .filter_map(|j| j[field].as_f64())
        .collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The JSON reports in `dir` whose name starts with `stem`, sorted.
fn runs(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(stem) && n.ends_with(".json"))
        })
        .collect();
    v.sort();
    v
}

/// Drain rate by capacity (median of the runs of each).
fn drain_by_capacity(dir: &Path) -> Result<(), Box<dyn Error>> {
    let caps: Vec<(f64, f64)> = [1, 5, 20, 100]
        .iter()
        .filter_map(|c| {
            med(&runs(dir, &format!("pg_capacity_{c}_")), "drain_rate").map(|r| (f64::from(*c), r))
        })
        .collect();
    line_chart(
        &dir.join("drain_by_capacity.png"),
        "PostgreSQL drain rate by worker capacity (1 process)",
        "capacity (log scale)",
        "items/s",
        &[("drain items/s".into(), caps)],
        true,
    )
}

/// Drain rate by processes.
fn drain_by_processes(dir: &Path) -> Result<(), Box<dyn Error>> {
    // One process: the processes runs and the memory run (`pg_rss_20`, the
    // same drain with one child process of capacity 20); runs that did not
    // finish have no rate and drop out of the median.
    let procs: Vec<(f64, f64)> = [1, 2, 4]
        .iter()
        .filter_map(|p| {
            let mut files = runs(dir, &format!("pg_processes_{p}_"));
            if *p == 1 {
                files.extend(runs(dir, "pg_rss_20."));
            }
            med(&files, "drain_rate").map(|r| (f64::from(*p), r))
        })
        .collect();
    line_chart(
        &dir.join("drain_by_processes.png"),
        "PostgreSQL drain rate by worker processes (total capacity 20)",
        "worker processes",
        "items/s",
        &[("drain items/s".into(), procs)],
        false,
    )
}

/// Claim latency by backlog.
fn claim_by_backlog(dir: &Path) -> Result<(), Box<dyn Error>> {
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    for b in [10_000u64, 100_000, 1_000_000, 10_000_000] {
        if let Some(j) = runs(dir, &format!("pg_claim_backlog_{b}."))
            .first()
            .and_then(|f| read(f).ok())
        {
            let c = &j["claim_before"]["claim"];
            if let (Some(a), Some(z)) = (c["p50"].as_f64(), c["p99"].as_f64()) {
                p50.push((b as f64, a));
                p99.push((b as f64, z));
            }
        }
    }
    line_chart(
        &dir.join("claim_by_backlog.png"),
        "Claim of 20 (PostgreSQL) by pending backlog",
        "pending items (log scale)",
        "ms",
        &[("claim p50".into(), p50), ("claim p99".into(), p99)],
        true,
    )
}

/// Claim probes during churn, with and without a transaction held open.
fn claim_under_churn(dir: &Path) -> Result<(), Box<dyn Error>> {
    let mut series = Vec::new();
    for (stem, name) in [
        ("pg_claim_churn_plain.", "no open transaction"),
        ("pg_claim_churn_xact.", "transaction held open"),
    ] {
        if let Some(j) = runs(dir, stem).first().and_then(|f| read(f).ok()) {
            let pts = j["probes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| Some((p["t_s"].as_f64()?, p["claim_ms"].as_f64()?)))
                .collect();
            series.push((name.to_owned(), pts));
        }
    }
    line_chart(
        &dir.join("claim_under_churn.png"),
        "Claim of 20 while workers drain the backlog",
        "seconds into the churn",
        "claim ms",
        &series,
        false,
    )
}

/// Sustained run, per 5 s window.
fn sustained(dir: &Path) -> Result<(), Box<dyn Error>> {
    let Some(j) = runs(dir, "pg_sustained.")
        .first()
        .and_then(|f| read(f).ok())
    else {
        return Ok(());
    };
    let w = j["windows"].as_array().cloned().unwrap_or_default();
    let pick = |k: &str| -> Vec<(f64, f64)> {
        w.iter()
            .filter_map(|x| Some((x["start_s"].as_f64()?, x[k].as_f64()?)))
            .collect()
    };
    line_chart(
        &dir.join("sustained_rate.png"),
        &format!(
            "Sustained {} items/s offered (PostgreSQL)",
            j["offered_rate"]
        ),
        "seconds",
        "items/s",
        &[
            ("enqueued/s".into(), pick("enqueued_rate")),
            ("achieved/s".into(), pick("achieved_rate")),
        ],
        false,
    )?;
    line_chart(
        &dir.join("sustained_latency.png"),
        "Sustained run: enqueue-to-handler latency per 5 s window",
        "seconds",
        "ms",
        &[
            ("p50".into(), pick("lat_p50")),
            ("p99".into(), pick("lat_p99")),
        ],
        false,
    )
}

/// An axis label for whole numbers only (a log axis or a padded range
/// also asks for labels in between).
fn whole(x: f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

fn read(path: &Path) -> Result<Value, Box<dyn Error>> {
    Ok(serde_json::from_str(std::fs::read_to_string(path)?.trim())?)
}

fn line_chart(
    out: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> Result<(), Box<dyn Error>> {
    let pts: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    if pts.is_empty() {
        println!("skipped {} (no data)", out.display());
        return Ok(());
    }
    let (x0, x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| {
        (a.min(*x), b.max(*x))
    });
    let y1 = pts.iter().fold(0.0f64, |m, (_, y)| m.max(*y)) * 1.15;
    let root = BitMapBackend::new(out, (900, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    let y_range = 0.0..y1.max(1e-3);
    if log_x {
        let mut chart = builder.build_cartesian_2d((x0 * 0.8..x1 * 1.25).log_scale(), y_range)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .label_style(("sans-serif", 14))
            .light_line_style(RGBColor(238, 238, 238))
            .x_label_formatter(&|x| whole(*x))
            .y_label_formatter(&|y| format!("{y:.1}"))
            .draw()?;
        draw_series(&mut chart, series)?;
    } else {
        let pad = ((x1 - x0) * 0.05).max(0.5);
        let mut chart = builder.build_cartesian_2d(x0 - pad..x1 + pad, y_range)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .label_style(("sans-serif", 14))
            .light_line_style(RGBColor(238, 238, 238))
            .x_label_formatter(&|x| whole(*x))
            .y_label_formatter(&|y| format!("{y:.1}"))
            .draw()?;
        draw_series(&mut chart, series)?;
    }
    root.present()?;
    println!("wrote {}", out.display());
    Ok(())
}

fn draw_series<'a, X>(
    chart: &mut ChartContext<
        'a,
        BitMapBackend<'a>,
        Cartesian2d<X, plotters::coord::types::RangedCoordf64>,
    >,
    series: &[Series],
) -> Result<(), String>
where
    X: Ranged<ValueType = f64> + 'a,
{
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}
