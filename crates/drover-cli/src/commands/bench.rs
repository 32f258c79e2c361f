//! `drover bench`: the benchmark workload of `BENCH.md` (bulk enqueue,
//! drain, latency), a sustained-rate mode, and claim-latency probes, each in
//! a sandbox it creates and drops (a fresh schema on PostgreSQL, a temporary
//! file on SQLite); and a soak (`--soak`) on a throwaway stock-settings
//! cluster it starts and removes itself; `--http` enqueues over the HTTP
//! API against `pgbench -N`; `--limits` measures what concurrency limits
//! cost; `--depth` keeps a depth of items waiting while the workers drain
//! (against `pgbench -N`, per variant); `--bounds` adds the raw SQL bounds
//! to the standard run. The engine is the `drover-bench` crate.
//!
//! Exit code 1 when any item did not run or ran twice (the report is still
//! printed first).

use std::time::Duration;

use drover_bench::{BenchConfig, BenchError, ChildCommand, HoldXmin, Mode, Progress, SoakSpec};

use crate::{CliError, Context};

/// Arguments of `drover bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Items bulk-enqueued, then drained.
    #[arg(long, default_value_t = drover_bench::JOBS_DEFAULT)]
    pub jobs: u64,
    /// Items per bulk-enqueue call (calls in sequence).
    #[arg(long, default_value_t = drover_bench::BATCH_DEFAULT)]
    pub batch: usize,
    /// Total handlers running at once, shared by all workers.
    #[arg(long, default_value_t = drover_bench::CAPACITY_DEFAULT)]
    pub capacity: usize,
    /// In-process workers sharing the capacity.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Child worker processes sharing the capacity instead (PostgreSQL).
    #[arg(long, default_value_t = 0)]
    pub processes: usize,
    /// Items of the latency phase, one every 5 ms (0 skips the phase).
    #[arg(long, default_value_t = drover_bench::LATENCY_JOBS_DEFAULT)]
    pub latency_jobs: u64,
    /// Sustained mode: offer this many items/s (one bulk call every 10 ms)
    /// for --duration while the workers drain.
    #[arg(long, value_name = "RATE")]
    pub sustained: Option<f64>,
    /// How long sustained and soak modes offer items; depth mode's
    /// measured window (after --warmup).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// Depth mode (PostgreSQL): 4 producers keep N items waiting
    /// (enqueued minus handled, counted in process; bulk calls of up to
    /// --batch) while the workers drain; throughput = items handled in
    /// --duration after --warmup, then the rest drains, exactly once is
    /// checked, and `pgbench -i -s 10` and `pgbench -N -c 20 -j 2 -T 20`
    /// run for the ratio. A fresh sandbox schema per cell.
    #[arg(long, value_name = "N")]
    pub depth: Option<u64>,
    /// Depth mode: variants measured beside the defaults (`base`), each a
    /// cell of its own: no-vacuum, rotation (a 2 s retention and 1 s
    /// sweep, so the items partitions rotate within the run), no-spread
    /// (spread_fallback 0), or all.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub depth_variants: Vec<String>,
    /// Depth mode: rounds over the variants, odd rounds in reverse order.
    #[arg(long, default_value_t = 1)]
    pub depth_rounds: u32,
    /// Depth mode: the warm-up before the window, not counted.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub warmup: Duration,
    /// Depth mode: run on a throwaway PostgreSQL cluster with stock
    /// settings (autovacuum on) started and removed by the run; ignores
    /// the database URL.
    #[arg(long)]
    pub stock_cluster: bool,
    /// Depth mode: pgbench's run (`-T`) after each cell.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub pgbench_duration: Duration,
    /// Standard mode (PostgreSQL): after the phases, the raw insert bound
    /// (--jobs rows, 1,000 per INSERT … SELECT FROM unnest, one session)
    /// and the raw drain bound (2 sessions: claim 500 … FOR UPDATE SKIP
    /// LOCKED, then mark them done) on a plain table shaped like items,
    /// and drover's rates over them.
    #[arg(long)]
    pub bounds: bool,
    /// Soak mode: offer --rate items/s for --duration on a throwaway
    /// PostgreSQL cluster with stock settings (autovacuum on), sampling
    /// every 5 s into <--out>/soak.csv and <--out>/soak.png. Needs the
    /// PostgreSQL server binaries (initdb, pg_ctl); ignores the database URL.
    #[arg(long)]
    pub soak: bool,
    /// Fair-share mode: a small tenant behind a big backlog (B's p99 wait
    /// against its fair-share time, Jain's index per window), weights
    /// 3:1, a lone tenant's drain with fair share on and off, and claim
    /// p99 at many tenants on and off.
    #[arg(long)]
    pub fairness: bool,
    /// Fair-share mode: tenant A's backlog (spread over 1,000 groups).
    #[arg(long, default_value_t = 100_000)]
    pub fair_a_items: u64,
    /// Fair-share mode: tenant B's items.
    #[arg(long, default_value_t = 1_000)]
    pub fair_b_items: u64,
    /// Fair-share mode: tenants of the claim-cost part.
    #[arg(long, default_value_t = 1_000)]
    pub fair_tenants: u64,
    /// Fair-share mode: items per tenant of the claim-cost part.
    #[arg(long, default_value_t = 20)]
    pub fair_per_tenant: u64,
    /// Chain mode: N items enqueued in one call, each after the one before,
    /// run end to end by an idle worker of --capacity: the chain's rate
    /// and the gap from each start to the next against the poll interval.
    #[arg(long, value_name = "N")]
    pub chain: Option<u64>,
    /// The outbox path instead (PostgreSQL): producer transactions writing
    /// a business row and an outbox row, relay rows/s, outbox commit →
    /// handler start latency, and the projector apply rate.
    #[arg(long)]
    pub outbox: bool,
    /// Producer transactions of the outbox relay phase.
    #[arg(long, default_value_t = drover_bench::outbox::OUTBOX_ROWS_DEFAULT)]
    pub outbox_rows: u64,
    /// Relay loops over the outbox backlog.
    #[arg(long, default_value_t = drover_bench::outbox::RELAY_LOOPS_DEFAULT)]
    pub relay_loops: usize,
    /// Outbox mode: events the projector apply-rate phase applies (0 skips it).
    #[arg(long, default_value_t = drover_bench::outbox::PROJECTOR_EVENTS_DEFAULT)]
    pub projector_events: u64,
    /// Outbox mode: events per projector batch (one transaction each).
    #[arg(long, default_value_t = drover_bench::outbox::PROJECTOR_BATCH_DEFAULT)]
    pub projector_batch: u32,
    /// The HTTP path instead (PostgreSQL): `drover serve`'s router on
    /// loopback in this process, --http-clients keep-alive connections
    /// enqueueing one item per request (each with an Idempotency-Key) for
    /// --http-duration, then the batch route (--jobs items, --batch per
    /// request), then `pgbench -N` for the ratio.
    #[arg(long)]
    pub http: bool,
    /// HTTP mode: concurrent keep-alive connections of the single phase.
    #[arg(long, default_value_t = drover_bench::http::CLIENTS_DEFAULT)]
    pub http_clients: usize,
    /// HTTP mode: how long the single phase and pgbench run.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub http_duration: Duration,
    /// HTTP mode: pgbench's clients (default: --http-clients; 0 skips
    /// pgbench). Depth mode: the same (default 20).
    #[arg(long)]
    pub pgbench_clients: Option<usize>,
    /// HTTP mode: batches the server's request gatherer writes at once.
    #[arg(long, default_value_t = drover_http::api::gather::GATHER_BATCHES_DEFAULT)]
    pub http_gather_batches: usize,
    /// HTTP mode: the most requests per gathered batch (0: no gathering).
    #[arg(long, default_value_t = drover_http::api::gather::GATHER_MAX_BATCH_DEFAULT)]
    pub http_gather_max: usize,
    /// HTTP mode: `pgbench -i -s`.
    #[arg(long, default_value_t = drover_bench::http::PGBENCH_SCALE_DEFAULT)]
    pub pgbench_scale: u32,
    /// Soak mode: offered items/s.
    #[arg(long, default_value_t = 800.0)]
    pub rate: f64,
    /// Soak mode: the workers' item retention (short, so the purge runs
    /// during the soak).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub retention: Duration,
    /// Soak mode: a second session holds a snapshot (`BEGIN ISOLATION
    /// LEVEL REPEATABLE READ; SELECT 1;`) from this far into the run...
    #[arg(long, value_parser = humantime::parse_duration, requires = "hold_xmin_for")]
    pub hold_xmin_at: Option<Duration>,
    /// ...for this long.
    #[arg(long, value_parser = humantime::parse_duration, requires = "hold_xmin_at")]
    pub hold_xmin_for: Option<Duration>,
    /// Soak mode: the directory the CSV and the chart are written to.
    #[arg(long, default_value = "drover-soak")]
    pub out: std::path::PathBuf,
    /// Claim-latency mode (PostgreSQL): time the claim statement with
    /// --backlog items waiting.
    #[arg(long)]
    pub claim_latency: bool,
    /// Claim-latency mode: pending items loaded (straight in SQL).
    #[arg(long, default_value_t = 100_000)]
    pub backlog: u64,
    /// Claim-latency mode: claims timed per measurement.
    #[arg(long, default_value_t = drover_bench::CLAIMS_DEFAULT)]
    pub claims: u32,
    /// Claim-latency mode: items per claim.
    #[arg(long, default_value_t = drover_bench::CLAIM_BATCH_DEFAULT)]
    pub claim_batch: u32,
    /// Claim-latency mode: run the workers over the backlog this long
    /// between two measurements, probing the claim meanwhile.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub churn: Option<Duration>,
    /// Claim-latency mode: hold a transaction open in a second session
    /// during the churn.
    #[arg(long)]
    pub hold_xact: bool,
    /// Limits mode: what concurrency limits cost and how a binding one is
    /// served: (1) the standard drain (--jobs) with no limit, a kind limit
    /// and a lane limit that never bind, alternating over --rounds; (2)
    /// --busy-groups groups under a per-group limit of 1, the fraction of
    /// slot-time a handler runs; (3) claim p50/p99 with --items items over
    /// --groups groups, per-group limit vs none; (4) the same behind one
    /// group of --big-group items whose slot is full.
    #[arg(long)]
    pub limits: bool,
    /// Limits mode: rounds of the overhead drains (0 skips that part).
    #[arg(long, default_value_t = drover_bench::limits::ROUNDS_DEFAULT)]
    pub rounds: u32,
    /// Limits mode: groups of the binding part, at most --capacity (0
    /// skips it).
    #[arg(long, default_value_t = drover_bench::limits::BUSY_GROUPS_DEFAULT)]
    pub busy_groups: u32,
    /// Limits mode: the binding part's measured window.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub busy_for: Duration,
    /// How long each bench handler sleeps before returning, ms (default 0;
    /// passed on to child processes). Limits mode: its binding part's
    /// handlers (default 20).
    #[arg(long)]
    pub handler_ms: Option<u64>,
    /// Limits mode: pending items of the claim-latency parts (0 skips
    /// parts 3 and 4).
    #[arg(long, default_value_t = drover_bench::limits::ITEMS_DEFAULT)]
    pub items: u64,
    /// Limits mode: the groups --items are spread over.
    #[arg(long, default_value_t = drover_bench::limits::GROUPS_DEFAULT)]
    pub groups: u64,
    /// Limits mode: waiting items of the one large group (0 skips part 4).
    #[arg(long, default_value_t = drover_bench::limits::BIG_GROUP_DEFAULT)]
    pub big_group: u64,
    /// Limits mode: the longest one series of timed claims may take.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub claim_budget: Duration,
    /// Limits mode (PostgreSQL): `ANALYZE items` after each enqueue of the
    /// overhead drains, as autovacuum's analyze would on a server running it.
    #[arg(long)]
    pub analyze: bool,
    /// The longest a phase may wait for its items.
    #[arg(long, default_value = "600s", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Internal: run as a child worker over this bench schema.
    #[arg(long, hide = true)]
    pub child_schema: Option<String>,
}

/// Runs the bench (or, with `--child-schema`, one child worker of it).
///
/// # Errors
/// Invalid settings (exit 2); a database that cannot be reached, a phase
/// that did not finish, or a run with missing or duplicated executions
/// (exit 1).
///
/// # Cancel safety
/// Not cancel safe: a dropped run leaves its `drover_bench_*` schema or
/// temporary file behind.
pub async fn run(args: &BenchArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    if cx.database_url.is_empty() && !args.soak && !(args.depth.is_some() && args.stock_cluster) {
        return Err(CliError::invalid(
            "database_url",
            "drover bench needs a database URL",
        ));
    }
    if let Some(schema) = &args.child_schema {
        let handler = Duration::from_millis(args.handler_ms.unwrap_or(0));
        return drover_bench::child::run_with(&cx.database_url, schema, args.capacity, handler)
            .await
            .map_err(into_cli);
    }
    if args.http {
        return http(args, cx).await;
    }
    if args.outbox {
        return outbox(args, cx).await;
    }
    if args.fairness {
        return fairness(args, cx).await;
    }
    if let Some(items) = args.chain {
        return chain(args, cx, items).await;
    }
    let config = BenchConfig {
        database_url: cx.database_url.clone(),
        jobs: args.jobs,
        batch: args.batch,
        capacity: args.capacity,
        workers: args.workers,
        processes: args.processes,
        child: child_command(args)?,
        latency_jobs: args.latency_jobs,
        timeout: args.timeout,
        mode: match args.depth {
            Some(depth) => depth_mode(args, depth)?,
            None => mode(args),
        },
        item_retention: None,
        sweep_interval: None,
        handler: Duration::from_millis(args.handler_ms.unwrap_or(0)),
        vacuum: None,
        spread_fallback: None,
        bounds: args.bounds,
    };
    let report = drover_bench::run(&config, &Progress::new(!args.quiet))
        .await
        .map_err(into_cli)?;
    if args.json {
        let v = serde_json::to_string(&report).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else {
        report.write_table(cx.out)?;
    }
    if !report.is_clean() {
        return Err(CliError::Drover(drover::Error::Conflict(format!(
            "not exactly once: executed {:?}, distinct {:?}, duplicates {:?} of {} items{}",
            report.executed,
            report.distinct,
            report.duplicates,
            report.jobs,
            report
                .error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ))));
    }
    Ok(())
}

/// `--http`: the HTTP bench, its report printed.
async fn http(args: &BenchArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let spec = drover_bench::http::HttpSpec {
        clients: args.http_clients,
        duration: args.http_duration,
        batch_clients: drover_bench::http::BATCH_CLIENTS_DEFAULT,
        batch: args.batch,
        batch_items: args.jobs,
        pgbench_clients: match args.pgbench_clients {
            Some(0) => None,
            Some(n) => Some(n),
            None => Some(args.http_clients),
        },
        pgbench_scale: args.pgbench_scale,
        gather: drover_http::api::gather::GatherConfig {
            enabled: args.http_gather_max > 0,
            max_batch: args.http_gather_max.max(1),
            batches: args.http_gather_batches.max(1),
            ..drover_http::api::gather::GatherConfig::default()
        },
    };
    let report = drover_bench::run_http(&cx.database_url, &spec, &Progress::new(!args.quiet))
        .await
        .map_err(into_cli)?;
    if args.json {
        let v = serde_json::to_string(&report).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else {
        report.write_table(cx.out)?;
    }
    Ok(())
}

/// `--fairness`: the fair-share bench, its figures printed as JSON (with
/// `--json`, on one line).
async fn fairness(args: &BenchArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let spec = drover_bench::fairness::FairnessSpec {
        a_items: args.fair_a_items,
        b_items: args.fair_b_items,
        tenants: args.fair_tenants,
        per_tenant: args.fair_per_tenant,
        ..Default::default()
    };
    let report = drover_bench::run_fairness(&cx.database_url, &spec, &Progress::new(!args.quiet))
        .await
        .map_err(into_cli)?;
    print_json(args, cx, &report)
}

/// Prints `report` as JSON: on one line with `--json`, else indented.
fn print_json(
    args: &BenchArgs,
    cx: &mut Context<'_>,
    report: &impl serde::Serialize,
) -> Result<(), CliError> {
    let v = if args.json {
        serde_json::to_string(report)
    } else {
        serde_json::to_string_pretty(report)
    }
    .map_err(crate::table::json_err)?;
    writeln!(cx.out, "{v}")?;
    Ok(())
}

/// `--chain N`: the dependency chain bench, its figures printed as JSON
/// (with `--json`, on one line).
async fn chain(args: &BenchArgs, cx: &mut Context<'_>, items: u64) -> Result<(), CliError> {
    let spec = drover_bench::chain::ChainSpec {
        items,
        capacity: args.capacity,
    };
    let report = drover_bench::run_chain(&cx.database_url, &spec, &Progress::new(!args.quiet))
        .await
        .map_err(into_cli)?;
    print_json(args, cx, &report)
}

/// `--outbox`: the outbox bench, its report printed; an error when the
/// relay inserted other than one item per row.
async fn outbox(args: &BenchArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let spec = drover_bench::outbox::OutboxSpec {
        rows: args.outbox_rows,
        producers: drover_bench::outbox::PRODUCERS_DEFAULT,
        relay_loops: args.relay_loops,
        latency_rows: args.latency_jobs,
        relay_batch: u32::try_from(args.batch).unwrap_or(1000),
        projector_events: args.projector_events,
        projector_batch: args.projector_batch,
        timeout: args.timeout,
    };
    let report = drover_bench::run_outbox(&cx.database_url, &spec, &Progress::new(!args.quiet))
        .await
        .map_err(into_cli)?;
    if args.json {
        let v = serde_json::to_string(&report).map_err(crate::table::json_err)?;
        writeln!(cx.out, "{v}")?;
    } else {
        report.write_table(cx.out)?;
    }
    if report.relayed_items != i64::try_from(report.rows).unwrap_or(i64::MAX) {
        return Err(CliError::Drover(drover::Error::Conflict(format!(
            "the relay inserted {} items for {} rows",
            report.relayed_items, report.rows
        ))));
    }
    Ok(())
}

/// The mode the flags name: soak, sustained, claim latency, limits, else
/// standard.
fn mode(args: &BenchArgs) -> Mode {
    if args.limits {
        Mode::Limits(drover_bench::LimitsSpec {
            rounds: args.rounds,
            busy_groups: args.busy_groups,
            busy_for: args.busy_for,
            handler: args
                .handler_ms
                .map_or(drover_bench::limits::HANDLER_DEFAULT, Duration::from_millis),
            items: args.items,
            groups: args.groups,
            big_group: args.big_group,
            claims: args.claims,
            claim_batch: args.claim_batch,
            claim_budget: args.claim_budget,
            analyze: args.analyze,
        })
    } else if args.soak {
        Mode::Soak(SoakSpec {
            rate: args.rate,
            duration: args.duration,
            retention: args.retention,
            hold_xmin: args
                .hold_xmin_at
                .zip(args.hold_xmin_for)
                .map(|(at, hold)| HoldXmin { at, hold }),
            out_dir: args.out.clone(),
        })
    } else if let Some(rate) = args.sustained {
        Mode::Sustained {
            rate,
            duration: args.duration,
        }
    } else if args.claim_latency {
        Mode::ClaimLatency {
            backlog: args.backlog,
            claims: args.claims,
            claim_batch: args.claim_batch,
            churn: args.churn,
            hold_xact: args.hold_xact,
        }
    } else {
        Mode::Standard
    }
}

/// `--depth N`: depth mode as its flags say.
fn depth_mode(args: &BenchArgs, depth: u64) -> Result<Mode, CliError> {
    Ok(Mode::Depth(drover_bench::DepthSpec {
        depth,
        duration: args.duration,
        warmup: args.warmup,
        variants: drover_bench::DepthVariant::parse_list(&args.depth_variants).map_err(into_cli)?,
        rounds: args.depth_rounds,
        pgbench: match args.pgbench_clients {
            Some(0) => None,
            n => Some(drover_bench::depth::PgbenchSpec {
                clients: n.unwrap_or(drover_bench::depth::PGBENCH_CLIENTS_DEFAULT),
                duration: args.pgbench_duration,
                scale: args.pgbench_scale,
            }),
        },
        stock_cluster: args.stock_cluster,
        ..drover_bench::DepthSpec::default()
    }))
}

/// With `--processes`, how to start a child worker: this binary's `bench`.
fn child_command(args: &BenchArgs) -> Result<Option<ChildCommand>, CliError> {
    if args.processes == 0 {
        return Ok(None);
    }
    let program =
        std::env::current_exe().map_err(|e| CliError::io("finding the drover binary", e))?;
    Ok(Some(ChildCommand {
        program,
        args: vec!["bench".into()],
    }))
}

fn into_cli(e: BenchError) -> CliError {
    match e {
        BenchError::Drover(e) => CliError::Drover(e),
        BenchError::Io { context, error } => CliError::io(context, error),
        // A phase that did not finish: reported as the runtime failure it is.
        other => CliError::Drover(drover::Error::Conflict(other.to_string())),
    }
}
