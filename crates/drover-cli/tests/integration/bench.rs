//! `drover bench` end to end: the real binary on SQLite (a temporary file
//! the bench creates) and on PostgreSQL (a schema the bench creates and
//! drops), checking the JSON report's fields and exactly-once counts. Never
//! asserts on speed.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::process::{Command, Stdio};

use serde_json::Value;

const FIELDS: &[&str] = &[
    "enqueue_rate",
    "drain_rate",
    "drain_s",
    "executed",
    "distinct",
    "duplicates",
    "lat_p50",
    "lat_p95",
    "lat_p99",
    "lat_max",
    "backend",
    "jobs",
    "capacity",
    "workers",
    "git_commit",
];

fn bench(url: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "bench",
        "--jobs",
        "2000",
        "--latency-jobs",
        "50",
        "--json",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    bench_json(url, &args)
}

/// Runs `drover ARGS` with `url` as its database and parses its JSON
/// report; panics with its output when it fails.
fn bench_json(url: &str, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(args)
        .env("DROVER_DATABASE_URL", url)
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("spawn drover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "drover {} failed: {:?}\nstdout: {stdout}\nstderr: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

fn check(v: &Value, backend: &str) {
    for f in FIELDS {
        assert!(v.get(*f).is_some(), "missing field {f}: {v}");
    }
    assert_eq!(v["backend"], backend);
    assert_eq!(v["executed"], 2000);
    assert_eq!(v["distinct"], 2000);
    assert_eq!(v["duplicates"], 0);
    assert_eq!(v["latency_executed"], 50);
    assert!(v["drain_rate"].as_f64().unwrap() > 0.0);
}

fn pg_url() -> String {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

#[test]
fn sqlite_bench_runs_every_item_once() {
    let v = bench("sqlite://unused.db", &[]);
    check(&v, "sqlite");
    assert!(
        !std::path::Path::new("unused.db").exists(),
        "the bench must not touch the URL's file"
    );
}

#[test]
fn postgres_bench_runs_every_item_once() {
    let v = bench(&pg_url(), &[]);
    check(&v, "postgres");
}

#[test]
fn postgres_bench_with_two_processes_counts_across_them() {
    let v = bench(&pg_url(), &["--processes", "2"]);
    check(&v, "postgres");
    assert_eq!(v["worker_mode"], "processes");
    assert_eq!(v["workers"], 2);
}

/// The soak, reduced (15 s at 200/s, a 5 s retention, a 5 s held
/// snapshot): it starts its own stock-settings cluster, writes a CSV with
/// every column and one row per 5 s window, the dead-tuple columns hold
/// numbers (and the updates of a drained queue leave some), and a chart.
#[test]
fn soak_writes_csv_rows_with_dead_tuples_and_a_chart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args([
            "bench",
            "--soak",
            "--rate",
            "200",
            "--duration",
            "15s",
            "--retention",
            "5s",
            "--hold-xmin-at",
            "5s",
            "--hold-xmin-for",
            "5s",
            "--json",
            "--quiet",
            "--out",
        ])
        .arg(dir.path())
        .env_remove("DROVER_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("spawn drover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "drover bench --soak failed: {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).expect("JSON report");
    assert_eq!(v["mode"], "soak");
    assert_eq!(v["duplicates"], 0);
    assert_eq!(v["executed"], v["enqueued"]);

    let text = std::fs::read_to_string(dir.path().join("soak.csv")).expect("soak.csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    for col in [
        "t_s",
        "enqueued_per_s",
        "throughput_per_s",
        "e2e_p50_ms",
        "e2e_p99_ms",
        "claim_p50_ms",
        "claim_p99_ms",
        "ready",
        "xmin_held",
        "dead_total",
        "items_live",
        "items_dead",
        "items_bytes",
        "audit_dead",
        "workers_dead",
    ] {
        assert!(header.contains(&col), "missing column {col}: {header:?}");
    }
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3, "one row per 5 s window of 15 s:\n{text}");
    let at = |name: &str| header.iter().position(|c| *c == name).unwrap();
    let dead: Vec<i64> = rows
        .iter()
        .map(|r| {
            assert_eq!(r.len(), header.len(), "a row with every column: {r:?}");
            r[at("items_dead")].parse().expect("items_dead is a number")
        })
        .collect();
    assert!(
        dead.iter().any(|d| *d > 0),
        "claims and completions update rows in place, so dead tuples appear: {dead:?}"
    );
    assert!(
        rows.iter().any(|r| r[at("xmin_held")] == "1"),
        "the held snapshot shows in its window:\n{text}"
    );
    let png = std::fs::read(dir.path().join("soak.png")).expect("soak.png");
    assert!(png.starts_with(b"\x89PNG"), "a PNG chart");
}

/// `--http` at a tiny size (8 clients for 1 s, 2,000 batch items, pgbench
/// at scale 1): every created answer is an item in the database, and the
/// report carries each figure (rates, latency, gathered batches, pgbench's
/// TPS and the ratio). The table form names them too.
#[test]
fn http_bench_lands_every_item_and_reports_the_figures() {
    let v = bench_http(&["--json"]);
    let single = v["single_requests"].as_u64().expect("single_requests");
    assert!(single > 0, "{v}");
    assert_eq!(v["batch_items"], 2000);
    assert_eq!(v["items_landed"].as_u64(), Some(single + 2000), "{v}");
    assert!(v["gathered_batches"].as_u64().unwrap() >= 1);
    assert!(v["gathered_batches"].as_u64().unwrap() <= single);
    for f in [
        "single_per_sec",
        "batch_items_per_sec",
        "pgbench_tps",
        "ratio",
    ] {
        assert!(v[f].as_f64().unwrap() > 0.0, "{f}: {v}");
    }
    assert_eq!(v["single_latency"]["count"].as_u64(), Some(single));
    assert_eq!(v["pgbench_clients"], 8);
    let out = bench_http_raw(&["--pgbench-clients", "0"]);
    for word in [
        "requests/s",
        "p50",
        "p99",
        "items/s",
        "landed",
        "pgbench  not run",
    ] {
        assert!(out.contains(word), "{word} missing from:\n{out}");
    }
}

fn bench_http_raw(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args([
            "bench",
            "--http",
            "--http-clients",
            "8",
            "--http-duration",
            "1s",
            "--jobs",
            "2000",
            "--batch",
            "500",
            "--pgbench-scale",
            "1",
            "--quiet",
        ])
        .args(extra)
        .env("DROVER_DATABASE_URL", pg_url())
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("spawn drover");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "drover bench --http failed: {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn bench_http(extra: &[&str]) -> Value {
    let stdout = bench_http_raw(extra);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// `drover bench --limits` at a tiny size: its JSON report carries every
/// figure of the four parts (not their values: machines differ), and the
/// counts it can check exactly: every overhead drain ran in its variant,
/// the binding part saw handlers run, and no item of the large group was
/// claimed past its full slot.
fn limits_bench(url: &str) -> Value {
    bench_json(
        url,
        &[
            "bench",
            "--limits",
            "--jobs",
            "300",
            "--rounds",
            "1",
            "--busy-groups",
            "2",
            "--busy-for",
            "1s",
            "--items",
            "2000",
            "--groups",
            "200",
            "--big-group",
            "500",
            "--claims",
            "8",
            "--claim-batch",
            "5",
            "--json",
            "--quiet",
        ],
    )
}

fn check_limits(v: &Value, backend: &str) {
    assert_eq!(v["mode"], "limits");
    assert_eq!(v["backend"], backend);
    let l = &v["limits"];
    let o = &l["overhead"];
    for f in [
        "none_rate",
        "kind_rate",
        "lane_rate",
        "kind_ratio",
        "lane_ratio",
    ] {
        assert!(o[f].is_f64(), "overhead.{f} missing: {o}");
    }
    let variants: Vec<&str> = o["drains"]
        .as_array()
        .expect("drains")
        .iter()
        .map(|d| d["variant"].as_str().expect("variant"))
        .collect();
    assert_eq!(variants, ["none", "kind", "lane"]);
    let b = &l["busy"];
    for f in [
        "busy_fraction",
        "window_s",
        "busy_s",
        "handler_ms",
        "poll_interval_ms",
    ] {
        assert!(b[f].is_f64(), "busy.{f} missing: {b}");
    }
    assert_eq!(b["groups"], 2);
    assert!(b["runs"].as_u64().expect("runs") > 0, "no handler ran: {b}");
    assert!(b["gap"]["p99"].is_f64(), "{b}");
    let s = &l["scale"];
    for f in ["p50_ratio", "p99_ratio", "load_s"] {
        assert!(s[f].is_f64(), "scale.{f} missing: {s}");
    }
    for variant in ["unlimited", "limited"] {
        assert_eq!(s[variant]["claim"]["count"], 8, "{s}");
        assert!(s[variant]["claim"]["p99"].is_f64(), "{s}");
    }
    let g = &l["big_group"];
    for f in ["p50_ratio", "p99_ratio", "load_s"] {
        assert!(g[f].is_f64(), "big_group.{f} missing: {g}");
    }
    assert!(g["with"]["claim"]["p99"].is_f64(), "{g}");
    assert!(g["without"]["claim"]["p99"].is_f64(), "{g}");
    assert_eq!(g["big_items"], 500);
    assert_eq!(
        g["big_claimed"], 0,
        "an item of the full group was claimed: {g}"
    );
}

#[test]
fn sqlite_limits_bench_reports_every_figure() {
    let v = limits_bench("sqlite://unused.db");
    check_limits(&v, "sqlite");
    assert!(v["limits"]["scale"]["plan"].is_null());
}

#[test]
fn postgres_limits_bench_reports_every_figure_and_the_plans() {
    let v = limits_bench(&pg_url());
    check_limits(&v, "postgres");
    for (part, field) in [
        ("scale", "plan"),
        ("big_group", "plan"),
        ("overhead", "held_plan"),
    ] {
        let plan = v["limits"][part][field].as_str().expect("plan");
        assert!(plan.contains("Execution Time"), "{part}: {plan}");
    }
}

/// `--bounds` on the standard run at a tiny size (2,000 rows): the raw
/// insert and drain rates and drover's ratios over them are in the report
/// and positive, every raw row was drained, and the standard phases still
/// ran every item once. SQLite refuses the flag before doing anything.
#[test]
fn postgres_bench_with_bounds_reports_the_raw_rates_and_ratios() {
    let v = bench(&pg_url(), &["--bounds"]);
    check(&v, "postgres");
    let b = &v["bounds"];
    for f in [
        "raw_insert_rate",
        "raw_insert_s",
        "raw_drain_rate",
        "raw_drain_s",
        "enqueue_ratio",
        "drain_ratio",
    ] {
        assert!(b[f].as_f64().unwrap_or(0.0) > 0.0, "bounds.{f}: {v}");
    }
    assert_eq!(b["rows"], 2000);
    assert_eq!(b["rows_done"], 2000, "{b}");
    assert!(b["claims"].as_u64().unwrap() >= 4, "500 per claim: {b}");
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["bench", "--bounds", "--quiet"])
        .env("DROVER_DATABASE_URL", "sqlite://unused.db")
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("spawn drover");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// `--depth` at a tiny size (200 waiting, a 3 s window after a 1 s
/// warm-up, handlers of 1 ms, the base and the no-vacuum variant, pgbench
/// at scale 1 for 1 s): one row per cell with a positive throughput,
/// pgbench TPS and ratio, every item of every cell ran exactly once, and
/// the medians name both variants.
#[test]
fn postgres_depth_bench_reports_throughput_against_pgbench_exactly_once() {
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args([
            "bench",
            "--depth",
            "200",
            "--duration",
            "3s",
            "--warmup",
            "1s",
            "--capacity",
            "8",
            "--handler-ms",
            "1",
            "--depth-variants",
            "no-vacuum",
            "--pgbench-scale",
            "1",
            "--pgbench-duration",
            "1s",
            "--pgbench-clients",
            "4",
            "--json",
            "--quiet",
        ])
        .env("DROVER_DATABASE_URL", pg_url())
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("spawn drover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "drover bench --depth failed: {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).expect("JSON report");
    assert_eq!(v["mode"], "depth");
    assert_eq!(v["duplicates"], 0);
    assert_eq!(v["executed"], v["enqueued"]);
    let d = &v["depth"];
    assert_eq!(d["depth"], 200);
    let rows = d["rows"].as_array().expect("rows");
    let variants: Vec<&str> = rows
        .iter()
        .map(|r| r["variant"].as_str().unwrap())
        .collect();
    assert_eq!(variants, ["base", "no-vacuum"]);
    for r in rows {
        for f in ["throughput", "pgbench_tps", "ratio", "depth_mean"] {
            assert!(r[f].as_f64().unwrap_or(0.0) > 0.0, "{f}: {r}");
        }
        assert!(r["handled"].as_u64().unwrap() > 0, "{r}");
        assert!(r["e2e"]["p99"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["duplicates"], 0, "{r}");
        assert_eq!(r["executed"], r["enqueued"], "{r}");
        assert_eq!(r["distinct"], r["enqueued"], "{r}");
    }
    assert_eq!(d["medians"].as_array().map(Vec::len), Some(2), "{d}");
}

fn chain_bench(url: &str) -> Value {
    bench_json(url, &["bench", "--chain", "60", "--json", "--quiet"])
}

/// Every item of the chain runs once, after the one it waits for, and no
/// start waited for the poll (a second per missed wake-up): each
/// completion's commit woke the worker for the next.
fn check_chain(v: &Value, backend: &str) {
    assert_eq!(v["backend"], backend, "{v}");
    assert_eq!(v["items"], 60, "{v}");
    assert_eq!(v["gap_ms"]["count"], 59, "{v}");
    assert_eq!(v["out_of_order"], 0, "{v}");
    assert_eq!(v["duplicates"], 0, "{v}");
    assert_eq!(v["gaps_at_poll"], 0, "{v}");
    assert!(v["rate"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
fn sqlite_chain_bench_runs_the_chain_in_order_on_wake_ups() {
    check_chain(&chain_bench("sqlite://unused.db"), "sqlite");
}

#[test]
fn postgres_chain_bench_runs_the_chain_in_order_on_wake_ups() {
    check_chain(&chain_bench(&pg_url()), "postgres");
}
