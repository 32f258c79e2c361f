//! The soak chart: four panels over the run's time axis (rates, claim and
//! end-to-end p99, dead tuples, table size), drawn with `plotters` into a
//! PNG file.
//!
//! Text is drawn with the DejaVu Sans font file (`fonts-dejavu-core`; set
//! `DROVER_PLOT_FONT` to use another file): no system font discovery. A
//! missing font fails the chart, never the run (the CSV holds the data).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::report::SoakRow;

const COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

type Series = (String, Vec<(f64, f64)>);

fn register_font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let path = std::env::var("DROVER_PLOT_FONT")
            .unwrap_or_else(|_| "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
        let bytes = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
        // plotters keeps the font for the life of the process: leaked once.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{path} is not a font plotters can read"))
    })
    .clone()
}

/// Draws the soak chart of `rows` into `out`, shading `held` (the seconds
/// a snapshot was held open, if one was).
///
/// # Errors
/// The font cannot be read, or drawing or writing the file failed (as text).
pub fn soak_chart(
    out: &Path,
    title: &str,
    rows: &[SoakRow],
    held: Option<(f64, f64)>,
) -> Result<(), String> {
    register_font()?;
    if rows.is_empty() {
        return Err("no samples to draw".into());
    }
    let pick = |f: &dyn Fn(&SoakRow) -> f64| -> Vec<(f64, f64)> {
        rows.iter().map(|r| (r.t_s, f(r))).collect()
    };
    let tables: Vec<String> = rows[0].tables.iter().map(|t| t.0.clone()).collect();
    let per_table = |col: fn(&(String, i64, i64, i64)) -> i64, scale: f64| -> Vec<Series> {
        tables
            .iter()
            .map(|name| {
                let pts = rows
                    .iter()
                    .map(|r| {
                        let v = r.tables.iter().find(|t| &t.0 == name).map_or(0, col);
                        (r.t_s, v as f64 / scale)
                    })
                    .collect();
                (name.clone(), pts)
            })
            .collect()
    };
    let panels: Vec<(&str, Vec<Series>)> = vec![
        (
            "items/s per 5 s window",
            vec![
                ("offered".into(), pick(&|r| r.enqueued_per_s)),
                ("handled".into(), pick(&|r| r.throughput_per_s)),
                ("ready depth".into(), pick(&|r| r.ready as f64)),
            ],
        ),
        (
            "ms",
            vec![
                ("claim p50".into(), pick(&|r| r.claim.p50)),
                ("claim p99".into(), pick(&|r| r.claim.p99)),
                ("end-to-end p99".into(), pick(&|r| r.e2e.p99)),
            ],
        ),
        ("dead tuples (n_dead_tup)", per_table(|t| t.2, 1.0)),
        (
            "table size, MiB (pg_total_relation_size)",
            per_table(|t| t.3, 1_048_576.0),
        ),
    ];
    let root = BitMapBackend::new(out, (1100, 1400)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| e.to_string())?;
    let areas = root.split_evenly((panels.len(), 1));
    let x1 = rows.iter().map(|r| r.t_s).fold(0.0, f64::max);
    for (area, (y_label, series)) in areas.iter().zip(&panels) {
        let y1 = series
            .iter()
            .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
            .fold(0.0f64, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..x1.max(1.0), 0.0..y1.max(1e-3))
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(*y_label)
            .label_style(("sans-serif", 13))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(|e| e.to_string())?;
        // The band first, so the lines are drawn over it.
        if let Some((a, b)) = held {
            let band = RGBColor(200, 200, 200).mix(0.4);
            let b = if b.is_finite() { b } else { x1 };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(a, 0.0), (b, y1.max(1e-3))],
                    band.filled(),
                )))
                .map_err(|e| e.to_string())?
                .label("snapshot held")
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], band.filled()));
        }
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}
