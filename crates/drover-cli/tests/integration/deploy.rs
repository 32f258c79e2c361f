//! The deployment files as tested code:
//!
//! - `deploy/prometheus/drover-rules.yaml` passes `promtool check rules` and
//!   its unit tests (`promtool test rules`: every alert firing and not);
//! - `deploy/compose.yaml` passes `docker-compose config` (schema and
//!   references, no engine needed), with and without the observability
//!   profile;
//! - the Grafana dashboard is valid JSON over the provisioned datasource;
//! - **no drift**: a real worker on PostgreSQL runs work, and every
//!   `drover_*` metric the rules or the dashboard name is in its `/metrics`.
//!
//! `promtool` (Debian `prometheus`) and `docker-compose` (Debian
//! `docker-compose`) must be installed: `.ci/run` installs them, and a
//! missing tool fails the test instead of skipping it.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::pg::FreshDb;
use common::{Run, from_output};

const BIN: &str = env!("CARGO_BIN_EXE_drover");

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn tool(name: &str, package: &str) -> Command {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{name} is not installed: `apt-get install -y {package}` (.ci/run does)"
    );
    Command::new(name)
}

fn run(mut c: Command) -> Run {
    from_output(c.stdin(Stdio::null()).output().expect("spawn"))
}

#[test]
fn prometheus_rules_pass_promtool_check_and_their_unit_tests() {
    let dir = deploy().join("prometheus");
    let mut check = tool("promtool", "prometheus");
    check
        .current_dir(&dir)
        .args(["check", "rules", "drover-rules.yaml"]);
    let r = run(check);
    assert_eq!(r.code, 0, "{r:?}");
    let mut test = tool("promtool", "prometheus");
    test.current_dir(&dir)
        .args(["test", "rules", "drover-rules.test.yaml"]);
    let r = run(test);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("SUCCESS"), "{r:?}");
    // Each alert has a test that expects it to fire and one that expects
    // it quiet (an empty exp_alerts).
    let rules = std::fs::read_to_string(dir.join("drover-rules.yaml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("drover-rules.test.yaml")).unwrap();
    for alert in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        let blocks: Vec<&str> = tests
            .split("alertname: ")
            .skip(1)
            .filter(|b| b.starts_with(alert))
            .collect();
        assert!(
            blocks.iter().any(|b| b.contains("exp_alerts: []")),
            "{alert}: no not-firing case"
        );
        assert!(
            blocks.iter().any(|b| b.contains("exp_labels")),
            "{alert}: no firing case"
        );
    }
}

#[test]
fn compose_file_passes_docker_compose_config_and_keeps_observability_in_its_profile() {
    let compose = |args: &[&str]| {
        let mut c = tool("docker-compose", "docker-compose");
        c.current_dir(deploy())
            .args(["-f", "compose.yaml"])
            .args(args);
        run(c)
    };
    // Schema and references (depends_on conditions, anchors, volumes).
    let r = compose(&["config", "-q"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = compose(&["config", "--services"]);
    assert_eq!(r.code, 0, "{r:?}");
    let services: Vec<&str> = r.stdout.lines().collect();
    for s in [
        "postgres",
        "migrate",
        "worker-1",
        "worker-2",
        "prometheus",
        "grafana",
    ] {
        assert!(services.contains(&s), "{s} missing: {services:?}");
    }
    // docker-compose 1.29 lists every service whatever the profile: read
    // the normalised file for which ones carry the profile.
    let r = compose(&["config"]);
    assert_eq!(r.code, 0, "{r:?}");
    for s in services {
        // The service's lines: from `  name:` to the next two-space key.
        let block: Vec<&str> = r
            .stdout
            .lines()
            .skip_while(|l| *l != format!("  {s}:"))
            .skip(1)
            .take_while(|l| l.starts_with("    ") || l.starts_with("  - "))
            .collect();
        assert!(!block.is_empty(), "{s} block");
        let block = block.join("\n");
        let in_profile = block.contains("profiles:\n    - observability");
        assert_eq!(
            in_profile,
            s == "prometheus" || s == "grafana",
            "{s}: {block}"
        );
    }
}

#[test]
fn grafana_dashboard_is_json_over_the_provisioned_datasource() {
    let text = std::fs::read_to_string(deploy().join("grafana/dashboards/drover.json")).unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let provisioned =
        std::fs::read_to_string(deploy().join("grafana/provisioning/datasources/prometheus.yaml"))
            .unwrap();
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 8);
    for p in panels {
        let uid = p["datasource"]["uid"].as_str().expect("datasource uid");
        assert!(provisioned.contains(&format!("uid: {uid}")), "{uid}");
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{}", p["title"]);
        for t in targets {
            assert!(!t["expr"].as_str().unwrap_or("").is_empty());
        }
    }
}

/// Every `drover_*` token in `text` (metric names; `drover:` recording
/// rules and `drover-` file names are not tokens of this form).
fn metric_names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("drover_") {
        let start = i + at;
        let before = start.checked_sub(1).map(|b| bytes[b]);
        let mut end = start;
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'_')
        {
            end += 1;
        }
        let word_start = before.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_'));
        if word_start {
            out.push(text[start..end].to_owned());
        }
        i = end.max(start + 1);
    }
    out.sort();
    out.dedup();
    out
}

fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_owned()))
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn drover(url: &str, args: &[&str]) -> Run {
    let mut c = Command::new(BIN);
    c.args(args).env_clear().env("DROVER_DATABASE_URL", url);
    run(c)
}

#[test]
fn every_metric_in_the_rules_and_the_dashboard_is_exported_by_a_real_worker() {
    let mut named = metric_names(
        &std::fs::read_to_string(deploy().join("prometheus/drover-rules.yaml")).unwrap(),
    );
    named.extend(metric_names(
        &std::fs::read_to_string(deploy().join("grafana/dashboards/drover.json")).unwrap(),
    ));
    named.sort();
    named.dedup();
    assert!(named.len() >= 10, "{named:?}");
    let runner = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../drover/src/projector/runner.rs"),
    )
    .unwrap();
    for name in EXPORTED_ONLY_WITH_A_PROJECTOR {
        assert!(
            runner.contains(&format!("gauge!(\"{name}\"")),
            "{name} is not set by the projector runner"
        );
    }

    let db = FreshDb::new("drover_drift");
    drover(&db.url, &["migrate"]).ok();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut c = Command::new(BIN);
    c.args([
        "worker",
        "--metrics-addr",
        &addr.to_string(),
        "--sweep-interval",
        "200ms",
        "--poll-interval",
        "100ms",
    ])
    .env_clear()
    .env("DROVER_DATABASE_URL", &db.url)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let _w = Killed(c.spawn().expect("spawn worker"));

    // Work of every outcome: done, retried then done, dead-lettered.
    for _ in 0..5 {
        drover(&db.url, &["enqueue", "drover.noop"]).ok();
    }
    drover(
        &db.url,
        &["enqueue", "drover.fail", "--payload", r#"{"times":1}"#],
    )
    .ok();
    drover(&db.url, &["enqueue", "drover.panic", "--max-attempts", "1"]).ok();
    let start = Instant::now();
    let missing = loop {
        let text = http_get(addr, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let exported: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
            .collect();
        let missing: Vec<&String> = named
            .iter()
            .filter(|n| !EXPORTED_ONLY_WITH_A_PROJECTOR.contains(&n.as_str()))
            .filter(|n| !exported.iter().any(|e| e == n))
            .collect();
        let done =
            db.scalar_i64("SELECT count(*) FROM drover.items WHERE status IN ('done', 'failed')");
        if missing.is_empty() && done == 7 {
            break missing.into_iter().cloned().collect::<Vec<_>>();
        }
        if start.elapsed() > Duration::from_secs(60) {
            break missing.into_iter().cloned().collect::<Vec<_>>();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        missing.is_empty(),
        "named in deploy/ but not exported by a worker: {missing:?}"
    );
}

/// Metrics a plain `drover worker` cannot export because it runs no
/// projector: each is checked against the code that sets it instead.
const EXPORTED_ONLY_WITH_A_PROJECTOR: &[&str] = &[
    "drover_projector_lag_seconds",
    "drover_projector_lag_events",
];
