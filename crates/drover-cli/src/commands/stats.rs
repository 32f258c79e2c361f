//! `drover stats`: counts per lane and status, per lane, kind and status,
//! the health gauges (oldest waiting age per lane, dead-letter size), and
//! the workers table (a worker that died without shutting down is listed
//! `lost`, judged by the store from its last beat).

use std::collections::BTreeMap;

use drover::Status;
use drover::store::{CountRow, Gauges, WorkerRow};
use serde::Serialize;

use crate::{CliError, Context, table};

/// Arguments of `drover stats`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatsArgs {
    /// Print one JSON object (`total`, `lanes`, `kinds`, `rows`, `gauges`,
    /// `workers`).
    #[arg(long)]
    pub json: bool,
}

/// Counts per status, every status present (zero when none).
type StatusCounts = BTreeMap<&'static str, i64>;

#[derive(Serialize)]
struct StatsJson {
    total: StatusCounts,
    lanes: BTreeMap<String, StatusCounts>,
    kinds: BTreeMap<String, StatusCounts>,
    rows: Vec<CountRow>,
    gauges: GaugesJson,
    workers: Vec<WorkerRow>,
}

#[derive(Serialize)]
struct GaugesJson {
    oldest_age_seconds: BTreeMap<String, f64>,
    failed: i64,
}

fn zeroes() -> StatusCounts {
    let mut m: StatusCounts = Status::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    m.insert("total", 0);
    m
}

fn add(m: &mut StatusCounts, status: Status, n: i64) {
    *m.entry(status.as_str()).or_default() += n;
    *m.entry("total").or_default() += n;
}

fn summarize(rows: Vec<CountRow>, gauges: Gauges, workers: Vec<WorkerRow>) -> StatsJson {
    let mut total = zeroes();
    let mut lanes: BTreeMap<String, StatusCounts> = BTreeMap::new();
    let mut kinds: BTreeMap<String, StatusCounts> = BTreeMap::new();
    for r in &rows {
        add(&mut total, r.status, r.count);
        add(
            lanes.entry(r.lane.clone()).or_insert_with(zeroes),
            r.status,
            r.count,
        );
        add(
            kinds.entry(r.kind.clone()).or_insert_with(zeroes),
            r.status,
            r.count,
        );
    }
    StatsJson {
        total,
        lanes,
        kinds,
        rows,
        gauges: GaugesJson {
            oldest_age_seconds: gauges.oldest_age_seconds.into_iter().collect(),
            failed: gauges.failed,
        },
        workers,
    }
}

/// Prints the counts and gauges.
///
/// # Errors
/// Storage errors (exit 1).
///
/// # Cancel safety
/// Read only.
pub async fn run(args: &StatsArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let queue = cx.queue().await?;
    let stats = summarize(
        queue.counts().await?,
        queue.gauges().await?,
        queue.workers().await?,
    );
    if args.json {
        let v = serde_json::to_string(&stats).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
        return Ok(());
    }
    let mut header = vec!["LANE"];
    header.extend(Status::ALL.iter().map(|s| s.as_str()));
    header.extend(["total", "oldest_wait_s"]);
    let cells = |c: &StatusCounts| -> Vec<String> {
        Status::ALL
            .iter()
            .map(|s| s.as_str())
            .chain(["total"])
            .map(|k| c.get(k).copied().unwrap_or(0).to_string())
            .collect()
    };
    let mut rows = Vec::new();
    for (lane, c) in &stats.lanes {
        let mut row = vec![lane.clone()];
        row.extend(cells(c));
        let age = stats
            .gauges
            .oldest_age_seconds
            .get(lane)
            .copied()
            .unwrap_or(0.0);
        row.push(format!("{age:.1}"));
        rows.push(row);
    }
    let mut total = vec!["(all)".to_owned()];
    total.extend(cells(&stats.total));
    total.push(String::new());
    rows.push(total);
    table::write(cx.out, &header, &rows)?;

    writeln!(cx.out)?;
    let mut header = vec!["KIND"];
    header.extend(Status::ALL.iter().map(|s| s.as_str()));
    header.push("total");
    let rows: Vec<Vec<String>> = stats
        .kinds
        .iter()
        .map(|(kind, c)| {
            let mut row = vec![kind.clone()];
            row.extend(cells(c));
            row
        })
        .collect();
    table::write(cx.out, &header, &rows)?;
    writeln!(cx.out)?;
    writeln!(cx.out, "dead letter (failed): {}", stats.gauges.failed)?;
    writeln!(cx.out)?;
    let rows: Vec<Vec<String>> = stats
        .workers
        .iter()
        .map(|w| {
            vec![
                w.id.clone(),
                w.state.clone(),
                w.host.clone(),
                w.pid.to_string(),
                w.lanes.join(","),
                w.capacity.to_string(),
                w.last_beat_at.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
            ]
        })
        .collect();
    table::write(
        cx.out,
        &[
            "WORKER",
            "state",
            "host",
            "pid",
            "lanes",
            "capacity",
            "last_beat",
        ],
        &rows,
    )?;
    Ok(())
}
