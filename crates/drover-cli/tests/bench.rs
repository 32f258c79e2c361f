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
    let out = Command::new(env!("CARGO_BIN_EXE_drover"))
        .args([
            "bench",
            "--jobs",
            "2000",
            "--latency-jobs",
            "50",
            "--json",
            "--quiet",
        ])
        .args(extra)
        .env("DROVER_DATABASE_URL", url)
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .output()
        .expect("spawn drover");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "drover bench failed: {:?}\nstdout: {stdout}\nstderr: {}",
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
