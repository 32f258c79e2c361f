//! `drover handlers` through the real binary (`CARGO_BIN_EXE_drover`): the
//! table, and the JSON a deploy check reads, where every kind and every
//! role (relay, scheduler, sweep, vacuum, …) declares the four strategies.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::process::{Command, Stdio};

use crate::common;
use common::{Run, from_output};

const BIN: &str = env!("CARGO_BIN_EXE_drover");

/// `drover <args>` with a clean environment (no `DROVER_*`, no
/// `DATABASE_URL`, no `RUST_LOG`) and the heartbeat off, as
/// `worker_cli.rs` runs it.
fn command(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("DROVER_") || k == "DATABASE_URL" || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    c.env("DROVER_HEARTBEAT_CRON", "off");
    c
}

fn drover(args: &[&str]) -> Run {
    from_output(command(args).output().expect("spawn drover"))
}

#[test]
fn handlers_lists_builtin_strategies() {
    let r = drover(&["handlers"]).ok();
    let header = r.stdout.lines().next().expect("header");
    for col in [
        "KIND",
        "IDEMPOTENCY",
        "RETRY",
        "CHECKPOINT",
        "RECOVERY",
        "PERMISSION",
        "REQUIRES",
    ] {
        assert!(header.contains(col), "{header}");
    }
    for kind in [
        "drover.noop",
        "drover.sleep",
        "drover.echo",
        "drover.fail",
        "drover.panic",
    ] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(kind))
            .unwrap_or_else(|| panic!("{kind} missing: {}", r.stdout));
        assert!(line.contains("running twice is harmless"), "{line}");
        assert!(line.contains("swept after its lease"), "{line}");
        assert!(line.contains("a rerun starts over"), "{line}");
        assert!(line.contains("drover.enqueue"), "{line}");
    }

    let v = drover(&["handlers", "--json"]).ok().json();
    let rows = v["handlers"].as_array().expect("handlers");
    // The five diagnostic kinds only: the test environment turns the
    // heartbeat off (DROVER_HEARTBEAT_CRON=off), as `drover worker`
    // would read it.
    assert_eq!(rows.len(), 5, "{v}");
    for row in rows {
        for field in [
            "kind",
            "idempotency",
            "retry",
            "checkpoint",
            "recovery",
            "permission",
            "requires",
        ] {
            assert!(row.get(field).is_some(), "{field} missing: {row}");
        }
        assert!(!row["retry"].as_str().unwrap_or("").is_empty());
    }
    assert!(
        !v["roles"]
            .as_array()
            .expect("roles")
            .iter()
            .any(|r| r["role"] == "scheduler"),
        "no schedule, no scheduler: {v}"
    );
}

/// What `drover handlers --json` lists under a worker configuration
/// that runs the relay, a schedule (the heartbeat) and the vacuum: every
/// kind and every role, each with the four strategies non-empty.
#[test]
fn handlers_json_lists_every_kind_and_role_with_four_strategies() {
    let mut c = command(&["handlers", "--json"]);
    c.env("DROVER_HEARTBEAT_CRON", "*/5 * * * *")
        .env("DROVER_HEARTBEAT_LANE", "beats")
        // The heartbeat's lane drained here: a worker that would strand
        // its own heartbeat is refused at build (`drover handlers` too).
        .env("DROVER_LANES", "default,beats")
        .env("DROVER_VACUUM", "on");
    let v = from_output(c.output().expect("spawn drover")).ok().json();
    let four = ["idempotency", "retry", "checkpoint", "recovery"];
    let kinds = v["handlers"].as_array().expect("handlers");
    let names: Vec<&str> = kinds.iter().filter_map(|h| h["kind"].as_str()).collect();
    for want in [
        "drover.noop",
        "drover.sleep",
        "drover.echo",
        "drover.fail",
        "drover.panic",
        "drover.heartbeat",
    ] {
        assert!(names.contains(&want), "{want} missing: {names:?}");
    }
    for h in kinds {
        for what in four {
            let says = h[what].as_str().unwrap_or("");
            assert!(!says.trim().is_empty(), "{} has no {what}: {h}", h["kind"]);
        }
    }
    let roles = v["roles"].as_array().expect("roles");
    let listed: Vec<&str> = roles.iter().filter_map(|r| r["role"].as_str()).collect();
    for want in ["outbox relay", "scheduler", "sweep", "paced vacuum"] {
        assert!(listed.contains(&want), "{want} missing: {listed:?}");
    }
    for r in roles {
        let strategies = r["strategies"].as_object().expect("an object");
        for what in four {
            let says = strategies.get(what).and_then(|s| s.as_str()).unwrap_or("");
            assert!(
                !says.trim().is_empty(),
                "the {} {} has no {what}: {r}",
                r["role"],
                r["name"]
            );
        }
    }
    let sched = roles
        .iter()
        .find(|r| r["role"] == "scheduler")
        .expect("the scheduler");
    let schedules = sched["strategies"]["schedules"].as_str().unwrap_or("");
    assert!(
        schedules.contains("drover.heartbeat (*/5 * * * *") && schedules.contains("lane beats"),
        "the heartbeat as configured: {sched}"
    );
    assert!(
        sched["strategies"]["idempotency"]
            .as_str()
            .unwrap_or("")
            .contains("periodic:<name>:<tick>"),
        "{sched}"
    );
}
