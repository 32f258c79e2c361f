//! End-to-end tests of the `drover` command line.
//!
//! Every scenario is written once, against a [`Drover`] runner, and run
//! three ways:
//!
//! - `memory_inproc::*` — the commands in process over one shared
//!   in-memory queue (`drover_cli::execute`). These pass today.
//! - `sqlite_e2e::*` — the real binary (`CARGO_BIN_EXE_drover`) on a fresh
//!   SQLite file per test.
//! - `postgres_e2e::*` — the real binary on a fresh PostgreSQL database per
//!   test (`CREATE DATABASE drover_cli_<random>` on the server `DATABASE_URL`
//!   names, default `postgres://postgres@127.0.0.1:5432/test`), dropped after.
//!
//! The SQLite and PostgreSQL backends are merged separately: until then the
//! `*_e2e` tests fail with "the … backend is being merged". That is
//! expected.
//!
//! `memory_binary::*` drives the real binary on `memory:` for what one
//! process can show: exit codes and one-line errors.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common;
use common::{Run, from_output};

/// Runs `drover <args>` somewhere.
trait Drover {
    fn run(&self, args: &[&str]) -> Run;
}

// ---------------------------------------------------------------- runners

/// The real binary against a database URL.
struct Binary {
    url: String,
}

impl Drover for Binary {
    fn run(&self, args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args(args)
            .env("DROVER_DATABASE_URL", &self.url)
            .env_remove("DATABASE_URL")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output()
            .expect("spawn drover");
        from_output(out)
    }
}

/// The commands in process over one shared in-memory queue.
struct InProcess {
    queue: drover::Queue,
    rt: tokio::runtime::Runtime,
}

impl InProcess {
    fn new() -> Self {
        InProcess {
            queue: drover::Queue::memory(),
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime"),
        }
    }
}

impl Drover for InProcess {
    fn run(&self, args: &[&str]) -> Run {
        use clap::Parser;
        let cli = match drover_cli::Cli::try_parse_from(
            std::iter::once("drover").chain(args.iter().copied()),
        ) {
            Ok(c) => c,
            Err(e) => {
                return Run {
                    code: 2,
                    stdout: String::new(),
                    stderr: e.to_string(),
                };
            }
        };
        let mut out: Vec<u8> = Vec::new();
        let mut err: Vec<u8> = Vec::new();
        let code = {
            let mut cx = drover_cli::Context::with_queue(self.queue.clone(), &mut out, &mut err);
            match self.rt.block_on(drover_cli::execute(&cli.command, &mut cx)) {
                Ok(()) => 0,
                Err(e) => {
                    writeln!(cx.err, "error: {e}").expect("write");
                    i32::from(e.exit_code())
                }
            }
        };
        Run {
            code,
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        }
    }
}

/// A fresh SQLite file, deleted with its directory.
struct SqliteDb {
    _dir: tempfile::TempDir,
    bin: Binary,
}

impl SqliteDb {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("drover.db").display());
        SqliteDb {
            _dir: dir,
            bin: Binary { url },
        }
    }
}

/// The PostgreSQL server tests use: `DATABASE_URL`, else the local default,
/// else a throwaway cluster (see `drover::testing::pg_url`).
fn pg_url() -> String {
    block_on(drover::testing::pg_url())
}

/// `url` with its database name replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    format!("{base}/{db}{query}")
}

/// A fresh PostgreSQL database, dropped after the test.
struct PgDb {
    admin: String,
    name: String,
    bin: Binary,
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

impl PgDb {
    fn new() -> Self {
        use sqlx::Connection;
        let admin = pg_url();
        let name = format!("drover_cli_{}", uuid::Uuid::new_v4().simple());
        block_on(async {
            let mut c = sqlx::PgConnection::connect(&admin)
                .await
                .expect("connect to PostgreSQL (DATABASE_URL)");
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut c)
                .await
                .expect("create database");
        });
        let url = with_database(&admin, &name);
        PgDb {
            admin,
            name,
            bin: Binary { url },
        }
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        use sqlx::Connection;
        let (admin, name, url) = (self.admin.clone(), self.name.clone(), self.bin.url.clone());
        block_on(async move {
            // The installation's roles are cluster-wide: read them before the
            // database goes, drop them after.
            let roles = drover::testing::pg_installation_roles(&url, "drover").await;
            if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut c)
                    .await;
            }
            drover::testing::pg_drop_roles(&admin, &roles).await;
        });
    }
}

// -------------------------------------------------------------- scenarios

fn list_all(d: &dyn Drover) -> Vec<Value> {
    let r = d.run(&["list", "--json", "--limit", "100000"]).ok();
    r.json().as_array().cloned().expect("array")
}

fn migrate_twice(d: &dyn Drover) {
    let a = d.run(&["migrate"]).ok();
    assert!(a.stdout.starts_with("migrated"), "{a:?}");
    d.run(&["migrate"]).ok();
    assert!(list_all(d).is_empty());
}

fn same_key_three_times_gives_one_id(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let args = [
        "enqueue",
        "send_email",
        "--key",
        "welcome:1",
        "--payload",
        r#"{"to":"a@example.com"}"#,
    ];
    let first = d.run(&args).ok();
    assert!(first.stderr.is_empty(), "{first:?}");
    let id = first.stdout.trim().to_owned();
    assert!(uuid::Uuid::parse_str(&id).is_ok(), "{first:?}");
    for _ in 0..2 {
        let again = d.run(&args).ok();
        assert_eq!(again.stdout.trim(), id);
        assert!(again.stderr.contains("already exists"), "{again:?}");
    }
    let items = list_all(d);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["id"], Value::String(id));
}

fn from_file_5000_then_stats(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let mut file = tempfile::NamedTempFile::new().expect("tempfile");
    let mut ids = Vec::new();
    for i in 0..5000 {
        let id = uuid::Uuid::now_v7();
        ids.push(id);
        let (kind, lane) = if i % 5 == 0 {
            ("report.build", "slow")
        } else {
            ("send_email", "default")
        };
        // status and claim fields are ignored: the store stamps them.
        writeln!(
            file,
            r#"{{"id":"{id}","kind":"{kind}","lane":"{lane}","payload":{{"n":{i}}},"priority":{p},"status":"done","attempts":3}}"#,
            p = i % 3
        )
        .expect("write");
    }
    file.flush().expect("flush");
    let path = file.path().to_str().expect("utf-8 path");
    let r = d.run(&["enqueue", "--from-file", path, "--json"]).ok();
    let s = r.json();
    assert_eq!(s["inserted"], 5000, "{r:?}");
    assert_eq!(s["id_exists"], 0);
    assert_eq!(s["key_exists"], 0);

    let stats = d.run(&["stats", "--json"]).ok().json();
    assert_eq!(stats["total"]["pending"], 5000, "{stats}");
    assert_eq!(stats["total"]["total"], 5000);
    assert_eq!(stats["lanes"]["default"]["pending"], 4000);
    assert_eq!(stats["lanes"]["slow"]["pending"], 1000);
    assert_eq!(stats["kinds"]["report.build"]["total"], 1000);
    assert_eq!(stats["gauges"]["failed"], 0);
    assert!(
        stats["gauges"]["oldest_age_seconds"]["default"].is_number(),
        "{stats}"
    );
    let text = d.run(&["stats"]).ok();
    assert!(
        text.stdout.contains("slow") && text.stdout.contains("report.build"),
        "{text:?}"
    );

    // The same file again: every id collides, nothing doubles.
    let again = d
        .run(&["enqueue", "--from-file", path, "--json"])
        .ok()
        .json();
    assert_eq!(again["inserted"], 0);
    assert_eq!(again["id_exists"], 5000);
    let stats = d.run(&["stats", "--json"]).ok().json();
    assert_eq!(stats["total"]["total"], 5000);
}

fn show_list_cancel_retry(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let a = d.run(&["enqueue", "alpha"]).ok().stdout.trim().to_owned();
    let b = d
        .run(&[
            "enqueue",
            "beta",
            "--lane",
            "other",
            "--priority",
            "-1",
            "--group",
            "customer:7",
        ])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let shown = d.run(&["show", &b, "--json"]).ok().json();
    assert_eq!(shown["group"], "customer:7");
    assert!(d.run(&["show", &b]).ok().stdout.contains("customer:7"));
    let grouped = d
        .run(&["list", "--group", "customer:7", "--json"])
        .ok()
        .json();
    assert_eq!(grouped.as_array().map(Vec::len), Some(1), "{grouped}");
    assert_eq!(grouped[0]["id"], b.as_str());
    let table = d.run(&["list", "--group", "customer:7"]).ok().stdout;
    assert!(
        table.contains("GROUP") && table.contains("customer:7"),
        "{table}"
    );
    // Claims and failures are two numbers, not "ATTEMPTS 0/5".
    assert!(
        table.contains("CLAIMS") && table.contains("FAILURES") && !table.contains("ATTEMPTS"),
        "{table}"
    );
    let text = d.run(&["show", &b]).ok().stdout;
    let row = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" "))
    };
    assert_eq!(row("claims").as_deref(), Some("0"), "{text}");
    assert_eq!(row("failures").as_deref(), Some("0 of 5 allowed"), "{text}");
    assert_eq!(row("attempts"), None, "{text}");

    let shown = d.run(&["show", &a, "--json"]).ok().json();
    assert_eq!(shown["status"], "pending");
    assert_eq!(shown["kind"], "alpha");
    assert_eq!(shown["audit"], Value::Array(vec![]));
    let text = d.run(&["show", &a]).ok();
    assert!(
        text.stdout.contains("status") && text.stdout.contains("pending"),
        "{text:?}"
    );

    d.run(&["cancel", &a]).ok();
    let shown = d.run(&["show", &a, "--json"]).ok().json();
    assert_eq!(shown["status"], "cancelled");
    assert_eq!(shown["audit"][0]["action"], "cancel");

    let again = d.run(&["cancel", &a]);
    assert_eq!(
        again.code, 1,
        "cancel of a final item is a conflict: {again:?}"
    );
    assert!(again.stderr.contains("conflict"), "{again:?}");

    d.run(&["retry", &a]).ok();
    let shown = d.run(&["show", &a, "--json"]).ok().json();
    assert_eq!(shown["status"], "pending");
    assert_eq!(shown["attempts"], 0);
    assert_eq!(shown["audit"][1]["action"], "retry");

    let r = d.run(&["retry", &b]);
    assert_eq!(r.code, 1, "retry of a pending item is a conflict: {r:?}");

    assert_eq!(
        d.run(&["list", "--status", "pending", "--json"])
            .ok()
            .json()
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        d.run(&["list", "--status", "cancelled", "--json"])
            .ok()
            .json()
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    let betas = d
        .run(&["list", "--kind", "beta", "--lane", "other", "--json"])
        .ok()
        .json();
    assert_eq!(betas[0]["id"], Value::String(b.clone()));
    let limited = d.run(&["list", "--limit", "1", "--json"]).ok().json();
    assert_eq!(limited.as_array().map(Vec::len), Some(1));
    let table = d.run(&["list"]).ok();
    assert!(
        table.stdout.starts_with("ID") && table.stdout.contains(&b),
        "{table:?}"
    );

    let missing = uuid::Uuid::now_v7().to_string();
    for cmd in ["show", "cancel", "retry"] {
        let r = d.run(&[cmd, &missing]);
        assert_eq!(r.code, 1, "{cmd}: {r:?}");
        assert!(r.stderr.contains("not found"), "{cmd}: {r:?}");
    }

    // Tenants: an item of another tenant is not visible without --tenant.
    let t = uuid::Uuid::new_v4().to_string();
    let c = d
        .run(&["enqueue", "gamma", "--tenant", &t])
        .ok()
        .stdout
        .trim()
        .to_owned();
    assert_eq!(d.run(&["show", &c]).code, 1);
    assert_eq!(
        d.run(&["show", &c, "--tenant", &t, "--json"]).ok().json()["tenant_id"],
        Value::String(t.clone())
    );
    assert_eq!(
        d.run(&["list", "--tenant", &t, "--json"])
            .ok()
            .json()
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    d.run(&["cancel", &c, "--tenant", &t]).ok();
}

fn bad_input_exits_2_names_the_field_and_writes_nothing(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let mut bad_line = tempfile::NamedTempFile::new().expect("tempfile");
    writeln!(bad_line, r#"{{"kind":"ok_one"}}"#).expect("write");
    writeln!(bad_line, r#"{{"kind":"ok_two","lane":"fine"}}"#).expect("write");
    writeln!(bad_line, r#"{{"kind":"bad","lane":"Not Fine"}}"#).expect("write");
    writeln!(bad_line, r#"{{"kind":"ok_four"}}"#).expect("write");
    bad_line.flush().expect("flush");
    // A payload over 256 KiB cannot travel as one argv string (Linux caps one
    // at 128 KiB), so it goes through a file.
    let mut big = tempfile::NamedTempFile::new().expect("tempfile");
    writeln!(
        big,
        r#"{{"kind":"k","payload":{{"blob":"{}"}}}}"#,
        "x".repeat(300 * 1024)
    )
    .expect("write");
    big.flush().expect("flush");
    let bad_path = bad_line.path().to_str().expect("utf-8").to_owned();
    let big_path = big.path().to_str().expect("utf-8").to_owned();
    let some_id = uuid::Uuid::now_v7().to_string();

    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["enqueue", "Send_Email"], "invalid kind"),
        (vec!["enqueue", "k", "--lane", "a b"], "invalid lane"),
        (
            vec!["enqueue", "k", "--group", "Customer 1"],
            "invalid group",
        ),
        (vec!["list", "--group", "Customer 1"], "invalid group"),
        (
            vec!["enqueue", "k", "--payload", "{not json"],
            "invalid payload",
        ),
        (vec!["enqueue", "k", "--delay", "-5s"], "invalid delay"),
        (vec!["enqueue", "k", "--delay", "soon"], "invalid delay"),
        (
            vec!["enqueue", "k", "--run-at", "tomorrow"],
            "invalid run_at",
        ),
        (
            vec!["enqueue", "k", "--max-attempts", "0"],
            "invalid max_attempts",
        ),
        (
            vec!["enqueue", "k", "--priority", "99999"],
            "invalid priority",
        ),
        (
            vec!["enqueue", "k", "--tenant", "not-a-uuid"],
            "invalid tenant",
        ),
        (
            vec!["enqueue", "--from-file", &bad_path],
            "line 3: invalid lane",
        ),
        (
            vec!["enqueue", "--from-file", &big_path],
            "line 1: invalid payload",
        ),
        (vec!["list", "--status", "bogus"], "invalid status"),
        (vec!["list", "--lane", "UP"], "invalid lane"),
        (vec!["list", "--kind", "a b"], "invalid kind"),
        (vec!["list", "--limit", "0"], "invalid limit"),
        (vec!["show", "nope"], "invalid id"),
        (vec!["cancel", "nope"], "invalid id"),
        (
            vec!["retry", &some_id, "--tenant", "nope"],
            "invalid tenant",
        ),
    ];
    for (args, want) in cases {
        let r = d.run(&args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        let lines: Vec<&str> = r.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: one line expected: {r:?}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(want),
            "{args:?}: {r:?}"
        );
        assert!(r.stdout.is_empty(), "{args:?}: {r:?}");
    }
    assert!(list_all(d).is_empty(), "bad input wrote rows");
}

fn lane_pause_resume_list(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let empty = d.run(&["lane", "list", "--json"]).ok().json();
    assert_eq!(empty, serde_json::json!([]));
    let r = d.run(&["lane", "pause", "mail"]).ok();
    assert_eq!(r.stdout.trim(), "lane mail paused");
    let v = d.run(&["lane", "pause", "bulk", "--json"]).ok().json();
    assert_eq!(v["lane"], "bulk");
    assert_eq!(v["paused"], true);
    let r = d.run(&["lane", "resume", "mail"]).ok();
    assert_eq!(r.stdout.trim(), "lane mail running");
    let list = d.run(&["lane", "list", "--json"]).ok().json();
    let got: Vec<(String, bool)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["lane"].as_str().unwrap().to_owned(),
                l["paused"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![("bulk".to_owned(), true), ("mail".to_owned(), false)]
    );
    let table = d.run(&["lane", "list"]).ok();
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(lines[0].starts_with("LANE"), "{table:?}");
    assert!(
        lines[1].starts_with("bulk") && lines[1].contains("paused"),
        "{table:?}"
    );
    let bad = d.run(&["lane", "pause", "Not A Lane"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(bad.stderr.contains("invalid lane"), "{bad:?}");
}

/// `drover limits close|reopen`: a group closed for a duration is listed
/// and named by `show`'s waiting reasons; reopened at once; a kind closed
/// until an RFC 3339 time; bad flags exit 2.
/// `drover fairness`: a weight set, listed with the tenant's waiting work,
/// cleared; a lane turned off, on by group (listed so), on by tenant
/// again; a bad weight exits 2.
fn fairness_set_list_clear(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let t = "00000000-0000-0000-0000-00000000000a";
    d.run(&["enqueue", "call", "--tenant", t]).ok();
    let r = d
        .run(&["fairness", "set", "--tenant", t, "--weight", "3"])
        .ok();
    assert_eq!(r.stdout.trim(), format!("weight of tenant {t} set to 3"));
    let r = d.run(&["fairness", "off", "--lane", "default"]).ok();
    assert_eq!(r.stdout.trim(), "fair share off for lane default");
    let list = d.run(&["fairness", "list", "--json"]).ok().json();
    let share = list["shares"]
        .as_array()
        .expect("shares")
        .iter()
        .find(|s| s["tenant"] == t)
        .unwrap_or_else(|| panic!("the tenant's share: {list}"));
    assert_eq!(
        (share["weight"].as_u64(), share["waiting"].as_u64()),
        (Some(3), Some(1))
    );
    let table = d.run(&["fairness", "list"]).ok().stdout;
    assert!(table.contains("fair share off for: default"), "{table}");
    let r = d
        .run(&["fairness", "on", "--lane", "default", "--by-group"])
        .ok();
    assert_eq!(r.stdout.trim(), "fair share on for lane default, by group");
    let table = d.run(&["fairness", "list"]).ok().stdout;
    assert!(table.contains("by group"), "{table}");
    assert!(table.contains("shared by group: default"), "{table}");
    let list = d.run(&["fairness", "list", "--json"]).ok().json();
    let lane = list["settings"]["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .find(|l| l["lane"] == "default")
        .unwrap_or_else(|| panic!("the lane: {list}"));
    assert_eq!(
        (lane["on"].as_bool(), lane["by_group"].as_bool()),
        (Some(true), Some(true))
    );
    let r = d.run(&["fairness", "on", "--lane", "default"]).ok();
    assert_eq!(r.stdout.trim(), "fair share on for lane default, by tenant");
    let table = d.run(&["fairness", "list"]).ok().stdout;
    assert!(
        table.contains("by tenant") && !table.contains("shared by group"),
        "{table}"
    );
    let r = d.run(&["fairness", "clear", "--tenant", t]).ok();
    assert_eq!(r.stdout.trim(), format!("weight of tenant {t} cleared (1)"));
    for bad in ["0", "1001", "x"] {
        let r = d.run(&["fairness", "set", "--tenant", t, "--weight", bad]);
        assert_eq!(r.code, 2, "{bad}: {r:?}");
    }
}

fn limits_close_reopen(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let id = d
        .run(&["enqueue", "call", "--group", "g1"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let r = d
        .run(&[
            "limits", "close", "--kind", "call", "--group", "g1", "--until", "1h",
        ])
        .ok();
    assert!(
        r.stdout.starts_with("group g1 of kind call closed until "),
        "{r:?}"
    );
    let table = d.run(&["limits", "list"]).ok().stdout;
    assert!(table.contains("CLOSED_KIND"), "{table}");
    assert!(table.contains("operator"), "{table}");
    let list = d.run(&["limits", "list", "--json"]).ok().json();
    let closure = list
        .as_array()
        .expect("an array")
        .iter()
        .find(|r| r["closure"].is_object())
        .unwrap_or_else(|| panic!("the closure: {list}"));
    assert_eq!(
        closure["closure"]["group"].as_str(),
        Some("g1"),
        "{closure}"
    );
    let shown = d.run(&["show", &id, "--json"]).ok().json();
    let closed = shown["waiting"]
        .as_array()
        .expect("waiting")
        .iter()
        .find(|w| w["reason"] == "group_closed")
        .unwrap_or_else(|| panic!("the closure: {shown}"));
    assert_eq!(closed["group"].as_str(), Some("g1"), "{closed}");
    let text = d.run(&["show", &id]).ok().stdout;
    assert!(text.contains("waiting: group g1 closed until "), "{text}");
    let r = d
        .run(&["limits", "reopen", "--kind", "call", "--group", "g1"])
        .ok();
    assert_eq!(r.stdout.trim(), "group g1 of kind call reopened");
    let r = d
        .run(&["limits", "reopen", "--kind", "call", "--group", "g1"])
        .ok();
    assert_eq!(r.stdout.trim(), "group g1 of kind call was not closed");
    let shown = d.run(&["show", &id, "--json"]).ok().json();
    assert!(
        !shown["waiting"]
            .as_array()
            .expect("waiting")
            .iter()
            .any(|w| w["reason"] == "group_closed"),
        "{shown}"
    );
    let r = d
        .run(&[
            "limits",
            "close",
            "--kind",
            "call",
            "--until",
            "2999-01-02T03:04:05Z",
        ])
        .ok();
    assert_eq!(
        r.stdout.trim(),
        "kind call closed until 2999-01-02T03:04:05+00:00"
    );
    let text = d.run(&["show", &id]).ok().stdout;
    assert!(
        text.contains("waiting: kind call closed until 2999-01-02T03:04:05+00:00 by an operator"),
        "{text}"
    );
    d.run(&["limits", "reopen", "--kind", "call"]).ok();
    for bad in [
        vec!["limits", "close", "--kind", "call", "--until", "soon"],
        vec!["limits", "close", "--kind", "Bad Kind", "--until", "1m"],
        vec!["limits", "close", "--kind", "call"],
        vec!["limits", "reopen", "--kind", "call", "--tenant", "x"],
    ] {
        let r = d.run(&bad);
        assert_eq!(r.code, 2, "{bad:?}: {r:?}");
    }
}

/// `drover limits`: set, list with use, clear; bad flags exit 2.
fn limits_set_list_clear(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let r = d
        .run(&["limits", "set", "--kind", "export", "--concurrency", "2"])
        .ok();
    assert_eq!(r.stdout.trim(), "limit on kind export set to 2", "{r:?}");
    d.run(&[
        "limits",
        "set",
        "--kind",
        "sync",
        "--per-group",
        "--concurrency",
        "1",
    ])
    .ok();
    for _ in 0..3 {
        d.run(&["enqueue", "export"]).ok();
    }
    let list = d.run(&["limits", "list", "--json"]).ok().json();
    let rows = list.as_array().expect("an array");
    assert_eq!(rows.len(), 2, "{list}");
    let export = rows
        .iter()
        .find(|r| {
            r["setting"]["scope"]["name"] == "export" && r["setting"]["scope"]["scope"] == "kind"
        })
        .expect("the export limit");
    assert_eq!(export["setting"]["concurrency"], 2);
    assert_eq!(export["setting"]["source"], "operator");
    assert_eq!(
        (export["in_use"].as_u64(), export["waiting"].as_u64()),
        (Some(0), Some(3))
    );
    let table = d.run(&["limits", "list"]).ok().stdout;
    assert!(table.starts_with("SCOPE"), "{table}");
    // A pending export in a lane no worker drains says so; paused, it
    // says that too (a full limit's reason: tests/integration/why_waiting.rs).
    let held = d
        .run(&["enqueue", "export", "--lane", "held"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let shown = d.run(&["show", &held, "--json"]).ok().json();
    let reasons: Vec<&str> = shown["waiting"]
        .as_array()
        .expect("waiting")
        .iter()
        .filter_map(|w| w["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"no_worker"), "{shown}");
    let no_worker = shown["waiting"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["reason"] == "no_worker"))
        .expect("no_worker");
    assert_eq!(
        no_worker,
        &serde_json::json!({"reason": "no_worker", "lane": "held"}),
        "no kind named while no worker drains the lane at all"
    );
    let text = d.run(&["show", &held]).ok().stdout;
    assert!(
        text.contains("waiting: no live worker drains lane held"),
        "{text}"
    );
    d.run(&["lane", "pause", "held"]).ok();
    let text = d.run(&["show", &held]).ok().stdout;
    assert!(text.contains("waiting: lane held paused"), "{text}");
    assert!(table.contains("kind sync per group"), "{table}");
    // An ordered group that holds on a dead letter: the later item of a
    // group says which earlier one it waits behind.
    let r = d
        .run(&[
            "limits",
            "set",
            "--kind",
            "chain",
            "--per-group",
            "--concurrency",
            "1",
            "--ordered",
            "--on-dead-letter",
            "hold",
        ])
        .ok();
    assert_eq!(
        r.stdout.trim(),
        "limit on kind chain per group set to 1 ordered, on dead letter hold",
        "{r:?}"
    );
    let first = d
        .run(&["enqueue", "chain", "--group", "g1"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let second = d
        .run(&["enqueue", "chain", "--group", "g1"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let shown = d.run(&["show", &second, "--json"]).ok().json();
    let earlier = shown["waiting"]
        .as_array()
        .expect("waiting")
        .iter()
        .find(|w| w["reason"] == "earlier_in_group")
        .unwrap_or_else(|| panic!("an earlier item: {shown}"));
    assert_eq!(
        (earlier["item"].as_str(), earlier["status"].as_str()),
        (Some(first.as_str()), Some("pending")),
        "{earlier}"
    );
    let text = d.run(&["show", &second]).ok().stdout;
    assert!(
        text.contains(&format!(
            "waiting: ordered group g1 runs in enqueue order: earlier item {first} is pending"
        )),
        "{text}"
    );
    let table = d.run(&["limits", "list"]).ok().stdout;
    assert!(table.contains("ordered (hold)"), "{table}");
    // A rate beside the concurrency: set, listed with its next start,
    // cleared on its own.
    let r = d
        .run(&[
            "limits", "set", "--kind", "export", "--rate", "10/1s", "--burst", "20",
        ])
        .ok();
    assert_eq!(
        r.stdout.trim(),
        "rate on kind export set to 10/1s burst 20",
        "{r:?}"
    );
    let table = d.run(&["limits", "list"]).ok().stdout;
    assert!(table.contains("NEXT_START"), "{table}");
    assert!(table.contains("10/1s burst 20"), "{table}");
    let list = d.run(&["limits", "list", "--json"]).ok().json();
    let rated = list
        .as_array()
        .expect("an array")
        .iter()
        .find(|r| r["setting"]["rate"].is_object())
        .unwrap_or_else(|| panic!("the rate: {list}"));
    assert_eq!(
        (
            rated["setting"]["rate"]["count"].as_u64(),
            rated["setting"]["rate"]["burst"].as_u64()
        ),
        (Some(10), Some(20))
    );
    let r = d
        .run(&["limits", "clear", "--kind", "export", "--rate"])
        .ok();
    assert_eq!(r.stdout.trim(), "operator rate on kind export cleared");
    let bad = d.run(&["limits", "set", "--kind", "export", "--rate", "10/1w"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    let r = d.run(&["limits", "clear", "--kind", "export"]).ok();
    assert_eq!(r.stdout.trim(), "operator limit on kind export cleared");
    let r = d.run(&["limits", "clear", "--kind", "export"]).ok();
    assert_eq!(r.stdout.trim(), "no operator limit on kind export");
    for bad in [
        vec!["limits", "set", "--kind", "export", "--concurrency", "0"],
        vec!["limits", "set", "--kind", "Bad Kind", "--concurrency", "1"],
        vec![
            "limits",
            "set",
            "--lane",
            "l",
            "--kind",
            "k",
            "--concurrency",
            "1",
        ],
        vec!["limits", "set", "--per-group", "--concurrency", "1"],
        vec![
            "limits",
            "set",
            "--kind",
            "k",
            "--concurrency",
            "1",
            "--ordered",
        ],
        vec![
            "limits",
            "set",
            "--kind",
            "k",
            "--per-group",
            "--concurrency",
            "2",
            "--ordered",
        ],
        vec![
            "limits",
            "set",
            "--kind",
            "k",
            "--per-group",
            "--concurrency",
            "1",
            "--ordered",
            "--on-dead-letter",
            "skip",
        ],
    ] {
        let r = d.run(&bad);
        assert_eq!(r.code, 2, "{bad:?}: {r:?}");
    }
}

fn after_batches_and_show(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let a = d.run(&["enqueue", "step"]).ok().stdout.trim().to_owned();
    let b = d
        .run(&["enqueue", "step", "--after", &a, "--after-policy", "run"])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let shown = d.run(&["show", &b]).ok().stdout;
    assert!(
        shown.contains(&format!("after:           {a} (1 open, on failure: run)")),
        "{shown}"
    );
    assert!(
        shown.contains("waiting for 1 of its 1 dependencies"),
        "{shown}"
    );
    let js = d.run(&["show", &b, "--json"]).ok().json();
    assert_eq!(js["links"]["waiting_on"], 1, "{js}");
    let of_a = d.run(&["show", &a]).ok().stdout;
    assert!(of_a.contains(&format!("dependants:      {b}")), "{of_a}");
    // An unknown dependency: exit 2, the field named, nothing written.
    let unknown = uuid::Uuid::now_v7().to_string();
    let r = d.run(&["enqueue", "step", "--after", &format!("{a},{unknown}")]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("after"), "{r:?}");
    assert_eq!(list_all(d).len(), 2);

    let batch = d
        .run(&[
            "batches",
            "create",
            "--callback",
            "report.ready",
            "--when",
            "always",
        ])
        .ok()
        .stdout
        .trim()
        .to_owned();
    let m = d
        .run(&["enqueue", "step", "--lane", "members", "--batch", &batch])
        .ok()
        .stdout
        .trim()
        .to_owned();
    assert!(
        d.run(&["batches", "seal", &batch])
            .ok()
            .stdout
            .contains("sealed")
    );
    let listed = d.run(&["batches", "list"]).ok().stdout;
    assert!(
        listed.contains(&batch) && listed.contains("sealed"),
        "{listed}"
    );
    let js = d.run(&["batches", "show", &batch, "--json"]).ok().json();
    assert_eq!(js["total"], 1, "{js}");
    assert_eq!(js["members"]["pending"], 1, "{js}");
    d.run(&["cancel", &m]).ok();
    let js = d.run(&["batches", "show", &batch, "--json"]).ok().json();
    assert_eq!(js["state"], "finished", "{js}");
    assert_eq!(js["counts"]["cancelled"], 1, "{js}");
    let cbs = d
        .run(&["list", "--kind", "report.ready", "--json"])
        .ok()
        .json();
    assert_eq!(cbs.as_array().map(Vec::len), Some(1), "{cbs}");
    assert_eq!(cbs[0]["payload"]["cancelled"], 1, "{cbs}");
    let r = d.run(&["enqueue", "step", "--batch", &batch]);
    assert_eq!(r.code, 2, "joining a sealed batch: {r:?}");
}

macro_rules! scenarios {
    ($modname:ident, $make:expr, $get:ident) => {
        mod $modname {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn migrate_twice() {
                let db = $make;
                super::migrate_twice(&db.$get);
            }
            #[test]
            fn same_key_three_times_gives_one_id() {
                let db = $make;
                super::same_key_three_times_gives_one_id(&db.$get);
            }
            #[test]
            fn from_file_5000_then_stats() {
                let db = $make;
                super::from_file_5000_then_stats(&db.$get);
            }
            #[test]
            fn show_list_cancel_retry() {
                let db = $make;
                super::show_list_cancel_retry(&db.$get);
            }
            #[test]
            fn lane_pause_resume_list() {
                let db = $make;
                super::lane_pause_resume_list(&db.$get);
            }
            #[test]
            fn limits_set_list_clear() {
                let db = $make;
                super::limits_set_list_clear(&db.$get);
            }
            #[test]
            fn fairness_set_list_clear() {
                let db = $make;
                super::fairness_set_list_clear(&db.$get);
            }
            #[test]
            fn limits_close_reopen() {
                let db = $make;
                super::limits_close_reopen(&db.$get);
            }
            #[test]
            fn after_batches_and_show() {
                let db = $make;
                super::after_batches_and_show(&db.$get);
            }
            #[test]
            fn bad_input_exits_2_names_the_field_and_writes_nothing() {
                let db = $make;
                super::bad_input_exits_2_names_the_field_and_writes_nothing(&db.$get);
            }
        }
    };
}

struct Mem {
    d: InProcess,
}

scenarios!(
    memory_inproc,
    Mem {
        d: InProcess::new()
    },
    d
);
// Need the SQLite backend (merged separately).
scenarios!(sqlite_e2e, SqliteDb::new(), bin);
// Need the PostgreSQL backend (merged separately) and a server at DATABASE_URL.
scenarios!(postgres_e2e, PgDb::new(), bin);

// ------------------------------------------------------ the paced vacuum

/// Memory and SQLite have no garbage: both subcommands say so and succeed.
fn vacuum_has_nothing_to_do(d: &dyn Drover) {
    d.run(&["migrate"]).ok();
    let r = d.run(&["vacuum", "status"]).ok();
    assert!(r.stdout.contains("no garbage to collect"), "{r:?}");
    assert_eq!(
        d.run(&["vacuum", "status", "--json"]).ok().json(),
        Value::Array(vec![])
    );
    let r = d.run(&["vacuum", "run", "--json"]).ok().json();
    assert_eq!(r["vacuumed"], Value::Array(vec![]), "{r}");
    let bad = d.run(&["vacuum", "run", "--threshold", "0"]);
    assert_eq!(bad.code, 2, "{bad:?}");
}

#[test]
fn vacuum_on_memory_has_nothing_to_do() {
    vacuum_has_nothing_to_do(&InProcess::new());
}

#[test]
fn vacuum_on_sqlite_has_nothing_to_do() {
    vacuum_has_nothing_to_do(&SqliteDb::new().bin);
}

/// PostgreSQL lists drover's tables with their tuples, and a run vacuums
/// every table over the threshold (1: any dead tuple) and prints it.
#[test]
fn vacuum_on_postgres_lists_the_tables_and_runs() {
    let db = PgDb::new();
    db.bin.run(&["migrate"]).ok();
    let tables = db.bin.run(&["vacuum", "status", "--json"]).ok().json();
    let items = tables
        .as_array()
        .expect("array")
        .iter()
        .find(|t| t["table"] == "items")
        .unwrap_or_else(|| panic!("no items in {tables}"));
    assert!(items["live"].is_u64() && items["dead"].is_u64(), "{items}");
    let r = db.bin.run(&["vacuum", "status"]).ok();
    assert!(r.stdout.starts_with("TABLE"), "{r:?}");
    let r = db.bin.run(&["vacuum", "run", "--threshold", "1"]).ok();
    assert!(
        r.stdout.starts_with("TABLE") || r.stdout.starts_with("nothing vacuumed"),
        "{r:?}"
    );
    let r = db.bin.run(&["vacuum", "run", "--json"]).ok().json();
    assert!(
        r["garbage"].as_array().is_some_and(|g| !g.is_empty()),
        "{r}"
    );
}

// ------------------------------------- PostgreSQL: the two logins

/// The binary on `url` with `system_url` as its system login.
fn run_split(url: &str, system_url: Option<&str>, args: &[&str]) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_drover"));
    c.args(args)
        .env("DROVER_DATABASE_URL", url)
        .env_remove("DATABASE_URL")
        .env_remove("DROVER_SYSTEM_DATABASE_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    if let Some(s) = system_url {
        c.env("DROVER_SYSTEM_DATABASE_URL", s);
    }
    from_output(c.output().expect("spawn drover"))
}

/// `drover migrate --runtime-login/--system-login` grants the roles it
/// names; the runtime login alone can enqueue but not read across tenants
/// (`stats`), and with DROVER_SYSTEM_DATABASE_URL it can.
#[test]
fn migrate_grants_the_two_logins_and_the_runtime_login_alone_cannot_cross_tenants() {
    use sqlx::Connection;
    let db = PgDb::new();
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let (rt, sys) = (
        format!("drover_cli_rt_{tag}"),
        format!("drover_cli_sys_{tag}"),
    );
    let admin = db.admin.clone();
    block_on(async {
        let mut c = sqlx::PgConnection::connect(&admin).await.expect("connect");
        for l in [&rt, &sys] {
            sqlx::query(&format!("CREATE ROLE {l} LOGIN"))
                .execute(&mut c)
                .await
                .expect("create login");
        }
    });
    let m = db
        .bin
        .run(&["migrate", "--runtime-login", &rt, "--system-login", &sys])
        .ok();
    assert!(m.stdout.contains("roles: runtime drover_"), "{m:?}");
    assert!(m.stdout.contains(&format!("_runtime to {rt}")), "{m:?}");
    assert!(m.stdout.contains(&format!("_system to {sys}")), "{m:?}");

    let rt_url = drover::testing::url_as(&db.bin.url, &rt);
    let sys_url = drover::testing::url_as(&db.bin.url, &sys);
    run_split(&rt_url, None, &["enqueue", "k", "--payload", "{}"]).ok();
    let alone = run_split(&rt_url, None, &["stats"]);
    assert_eq!(alone.code, 1, "{alone:?}");
    assert!(alone.stderr.contains("permission denied"), "{alone:?}");
    run_split(&rt_url, Some(&sys_url), &["stats", "--json"]).ok();

    drop(db);
    block_on(async {
        let mut c = sqlx::PgConnection::connect(&admin).await.expect("connect");
        for l in [&rt, &sys] {
            let _ = sqlx::query(&format!("DROP ROLE IF EXISTS {l}"))
                .execute(&mut c)
                .await;
        }
    });
}

#[test]
fn migrate_refuses_logins_without_postgres() {
    let r = run_split("memory:", None, &["migrate", "--runtime-login", "x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("runtime_login"), "{r:?}");
}

// ------------------------------------------- the binary on memory: (today)

mod memory_binary {
    use super::*;

    fn mem() -> Binary {
        Binary {
            url: "memory:".into(),
        }
    }

    #[test]
    fn bad_input_is_one_line_and_exit_2() {
        let d = mem();
        for (args, want) in [
            (
                vec!["enqueue", "k", "--lane", "a b"],
                "error: invalid lane: byte 1 is not allowed",
            ),
            (
                vec!["enqueue", "k", "--delay", "-30s"],
                "error: invalid delay",
            ),
            (
                vec!["enqueue", "k", "--max-attempts", "0"],
                "error: invalid max_attempts",
            ),
            (
                vec!["enqueue", "k", "--payload", "[1,"],
                "error: invalid payload",
            ),
            (
                vec!["enqueue"],
                "error: the following required arguments were not provided: <KIND>",
            ),
            (
                vec![
                    "enqueue",
                    "k",
                    "--delay",
                    "1s",
                    "--run-at",
                    "2030-01-01T00:00:00Z",
                ],
                "cannot be used with",
            ),
        ] {
            let r = d.run(&args);
            assert_eq!(r.code, 2, "{args:?}: {r:?}");
            assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {r:?}");
            assert!(
                r.stderr.starts_with("error: ") && r.stderr.contains(want),
                "{args:?}: {r:?}"
            );
        }
    }

    #[test]
    fn enqueue_prints_the_id_or_the_item() {
        let d = mem();
        let r = d
            .run(&[
                "enqueue",
                "send_email",
                "--priority",
                "-2",
                "--delay",
                "30s",
            ])
            .ok();
        assert!(uuid::Uuid::parse_str(r.stdout.trim()).is_ok(), "{r:?}");
        let j = d
            .run(&[
                "enqueue",
                "send_email",
                "--json",
                "--lane",
                "mail",
                "--max-attempts",
                "3",
            ])
            .ok()
            .json();
        assert_eq!(j["lane"], "mail");
        assert_eq!(j["max_attempts"], 3);
        assert_eq!(j["status"], "pending");
    }

    #[test]
    fn from_stdin_reports_collisions() {
        let mut child = Command::new(env!("CARGO_BIN_EXE_drover"))
            .args([
                "--database-url",
                "memory:",
                "enqueue",
                "--from-file",
                "-",
                "--json",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"{\"kind\":\"a\",\"idempotency_key\":\"k\"}\n\n{\"kind\":\"b\",\"idempotency_key\":\"k\"}\n")
            .expect("write");
        let r = from_output(child.wait_with_output().expect("wait")).ok();
        let s = r.json();
        assert_eq!(
            (s["inserted"].as_u64(), s["key_exists"].as_u64()),
            (Some(1), Some(1)),
            "{r:?}"
        );
    }

    #[test]
    fn not_found_exits_1() {
        let r = mem().run(&["show", &uuid::Uuid::now_v7().to_string()]);
        assert_eq!(r.code, 1);
        assert!(r.stderr.starts_with("error: not found"), "{r:?}");
    }

    #[test]
    fn database_url_falls_back_to_database_url_then_sqlite() {
        // DATABASE_URL is used when DROVER_DATABASE_URL is absent.
        let out = Command::new(env!("CARGO_BIN_EXE_drover"))
            .arg("migrate")
            .env_remove("DROVER_DATABASE_URL")
            .env("DATABASE_URL", "memory:")
            .output()
            .expect("spawn");
        let r = from_output(out).ok();
        assert_eq!(r.stdout.trim(), "migrated (memory)");
        // An unknown scheme names the field.
        let r = Binary {
            url: "mysql://x".into(),
        }
        .run(&["migrate"]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.starts_with("error: invalid database_url"), "{r:?}");
    }

    #[test]
    fn with_database_replaces_the_name() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/test", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h/db?sslmode=disable", "y"),
            "postgres://u:p@h/y?sslmode=disable"
        );
    }
}
