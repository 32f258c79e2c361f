//! End-to-end tests of `drover worker` and `drover demo` (`drover handlers`:
//! `handlers_cli.rs`),
//! driving the real binary (`CARGO_BIN_EXE_drover`).
//!
//! - `memory::*` run on `memory:` and need nothing else.
//! - `sqlite::*` run on a fresh SQLite file per test.
//! - `postgres::*` run on a fresh database per test (`CREATE DATABASE
//!   drover_w_<random>` on the server `DATABASE_URL` names, default
//!   `postgres://postgres@127.0.0.1:5432/test`), dropped after. Several
//!   `drover` processes share it, as workers on many hosts would.
//!
//! The `postgres::*` tests need a reachable server; the kill test prints
//! the measured recovery time (`-- --nocapture`).

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::{Run, from_output};

const BIN: &str = env!("CARGO_BIN_EXE_drover");

// ---------------------------------------------------------------- helpers

/// `drover <args>` with a clean environment (no `DROVER_*`, no
/// `DATABASE_URL`, no `RUST_LOG`), the database named by `url` if any.
fn command(url: Option<&str>, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("DROVER_") || k == "DATABASE_URL" || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    if let Some(url) = url {
        c.env("DROVER_DATABASE_URL", url);
    }
    // Tests that count items count their own; the periodic tests turn the
    // heartbeat back on.
    c.env("DROVER_HEARTBEAT_CRON", "off");
    c
}

fn drover(url: Option<&str>, args: &[&str]) -> Run {
    from_output(command(url, args).output().expect("spawn drover"))
}

/// A port nobody listens on now: bind port 0, read it, release it.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// `GET path` over plain HTTP/1.1: the status and body, or `None` when
/// nothing answers.
fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// Polls `f` every 50 ms until it holds or `limit` passes.
fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `drover worker` child process, its stderr kept in a file (a pipe
/// nobody reads could fill and stall it).
struct WorkerProc {
    child: Child,
    addr: Option<SocketAddr>,
    log: tempfile::NamedTempFile,
}

impl WorkerProc {
    fn spawn(url: Option<&str>, args: &[&str]) -> Self {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let log = tempfile::NamedTempFile::new().expect("log file");
        let mut all = vec!["worker", "--metrics-addr"];
        let a = addr.to_string();
        all.push(&a);
        all.extend_from_slice(args);
        let child = command(url, &all)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log.reopen().expect("reopen log")))
            .spawn()
            .expect("spawn drover worker");
        WorkerProc {
            child,
            addr: Some(addr),
            log,
        }
    }

    fn addr(&self) -> SocketAddr {
        self.addr.expect("metrics address")
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    fn wait_healthy(&mut self) {
        let addr = self.addr();
        let start = Instant::now();
        loop {
            if let Some((200, _)) = http_get(addr, "/healthz") {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("worker exited early ({status}): {}", self.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "worker never became healthy: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig).expect("kill");
    }

    fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                start.elapsed() < limit,
                "worker did not exit within {limit:?}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then: `/healthz` turns 503 or stops answering, and the
    /// process exits 0.
    fn terminate(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        let addr = self.addr();
        let mut drained_or_gone = false;
        let start = Instant::now();
        let status = loop {
            match http_get(addr, "/healthz") {
                Some((503, _)) | None => drained_or_gone = true,
                Some(_) => {}
            }
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(40),
                "worker did not stop after SIGTERM: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(drained_or_gone || http_get(addr, "/healthz").is_none());
        assert_eq!(status.code(), Some(0), "exit after SIGTERM: {}", self.log());
    }
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        // A test that failed midway must not leave workers behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Writes `n` items of `kind` with `payload` as JSON Lines.
fn jsonl(n: usize, kind: &str, payload: &Value) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    let line = serde_json::json!({ "kind": kind, "payload": payload }).to_string();
    let mut text = String::with_capacity(n * (line.len() + 1));
    for _ in 0..n {
        text.push_str(&line);
        text.push('\n');
    }
    f.write_all(text.as_bytes()).expect("write");
    f
}

/// Enqueues `n` items of `kind` through `enqueue --from-file`.
fn enqueue_file(url: &str, n: usize, kind: &str, payload: &Value) {
    let f = jsonl(n, kind, payload);
    let path = f.path().to_str().expect("utf-8 path");
    let r = drover(Some(url), &["enqueue", "--from-file", path, "--json"]).ok();
    assert_eq!(r.json()["inserted"], n as u64, "{r:?}");
}

/// `stats --json`'s total count of `status`.
fn total(url: &str, status: &str) -> u64 {
    drover(Some(url), &["stats", "--json"]).ok().json()["total"][status]
        .as_u64()
        .unwrap_or(0)
}

fn assert_demo_summary(r: &Run) {
    assert_eq!(r.code, 0, "demo failed: {r:?}");
    for kind in ["drover.noop", "drover.sleep", "drover.fail", "drover.panic"] {
        assert!(
            r.stdout.contains(kind),
            "summary lacks {kind}: {}",
            r.stdout
        );
    }
    assert!(r.stdout.contains("dead letters: 2"), "{}", r.stdout);
    assert!(r.stdout.contains("KeyExists"), "{}", r.stdout);
    assert!(r.stdout.contains("items/s"), "{}", r.stdout);
    assert!(
        r.stdout.contains("100 ms"),
        "the short backoff is said: {}",
        r.stdout
    );
    // The totals row: 228 items, 226 done, 2 failed.
    let totals = r
        .stdout
        .lines()
        .find(|l| l.starts_with("(total)"))
        .unwrap_or_else(|| panic!("no totals row: {}", r.stdout));
    let cells: Vec<&str> = totals.split_whitespace().collect();
    assert_eq!(&cells[1..4], ["228", "226", "2"], "{totals}");
}

// ---------------------------------------------------------------- periodic

/// Each tick (Unix seconds) of `drover.heartbeat` items with its number of
/// items, from their keys `periodic:drover.heartbeat:<RFC 3339 UTC tick>`.
fn heartbeat_ticks(keys: &[String]) -> std::collections::BTreeMap<i64, usize> {
    let mut out = std::collections::BTreeMap::new();
    for key in keys {
        let tick = key
            .strip_prefix("periodic:drover.heartbeat:")
            .unwrap_or_else(|| panic!("not a heartbeat tick key: {key}"));
        let t = chrono::DateTime::parse_from_rfc3339(tick)
            .unwrap_or_else(|e| panic!("{key}: {e}"))
            .timestamp();
        *out.entry(t).or_insert(0) += 1;
    }
    out
}

/// The 1-second heartbeat through `n` worker processes, one SIGKILLed and
/// restarted mid-way: every tick of the 30 s window has exactly one item.
/// `now` reads the database clock (Unix seconds), `keys` every heartbeat
/// item's key.
fn one_item_per_tick_through_a_kill(
    url: &str,
    n: usize,
    now: impl Fn() -> i64,
    keys: impl Fn() -> Vec<String>,
) {
    const WINDOW: i64 = 30;
    let args = [
        "--heartbeat-cron",
        "* * * * * *",
        "--lease",
        "3s",
        "--sweep-interval",
        "1s",
        "--poll-interval",
        "200ms",
    ];
    let mut workers: Vec<WorkerProc> = (0..n)
        .map(|_| WorkerProc::spawn(Some(url), &args))
        .collect();
    for w in &mut workers {
        w.wait_healthy();
    }
    // The window opens at the first tick: a schedule is in force from its
    // scheduler's first pass, which may come seconds after the workers
    // answer healthy on a loaded machine (one suite run missed the 5 ticks
    // before it when the window opened at "healthy").
    wait_until(Duration::from_secs(60), "the first tick", || {
        !keys().is_empty()
    });
    let t0 = heartbeat_ticks(&keys())
        .keys()
        .next()
        .copied()
        .unwrap_or_else(&now);
    let latest = |keys: &[String]| {
        heartbeat_ticks(keys)
            .keys()
            .next_back()
            .copied()
            .unwrap_or(0)
    };
    wait_until(
        Duration::from_secs(60),
        "ticks a third into the window",
        || latest(&keys()) >= t0 + WINDOW / 3,
    );
    workers[0].signal(nix::sys::signal::Signal::SIGKILL);
    let status = workers[0].wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), None, "killed by a signal");
    let killed_at = now();
    workers[0] = WorkerProc::spawn(Some(url), &args);
    workers[0].wait_healthy();
    wait_until(Duration::from_secs(90), "ticks past the window", || {
        latest(&keys()) > t0 + WINDOW
    });
    for w in &mut workers {
        w.terminate();
    }
    let ticks = heartbeat_ticks(&keys());
    let window: Vec<(i64, usize)> = ((t0 + 1)..=(t0 + WINDOW))
        .map(|t| (t, ticks.get(&t).copied().unwrap_or(0)))
        .collect();
    let missing: Vec<i64> = window
        .iter()
        .filter(|(_, c)| *c == 0)
        .map(|(t, _)| t - t0)
        .collect();
    let doubled: Vec<i64> = window
        .iter()
        .filter(|(_, c)| *c > 1)
        .map(|(t, _)| t - t0)
        .collect();
    assert!(
        missing.is_empty(),
        "ticks with no item (s after start): {missing:?}"
    );
    assert!(doubled.is_empty(), "ticks with two items: {doubled:?}");
    let all_keys = keys();
    let distinct: std::collections::BTreeSet<&String> = all_keys.iter().collect();
    assert_eq!(distinct.len(), all_keys.len(), "no key twice");
    eprintln!(
        "{n} workers, one killed {} s into the window and restarted: {} ticks, one item each",
        killed_at - t0,
        window.len()
    );
}

// ---------------------------------------------------------------- memory

mod memory {
    use super::*;

    #[test]
    fn demo_runs_end_to_end_on_memory() {
        let r = drover(None, &["demo", "--database-url", "memory:"]);
        assert_demo_summary(&r);
        assert!(
            !r.stderr.contains("panicked at"),
            "planned panics stay quiet: {}",
            r.stderr
        );
    }

    #[test]
    fn worker_refuses_capacity_beyond_pool() {
        // From the flags …
        let r = drover(
            Some("memory:"),
            &[
                "worker",
                "--capacity",
                "100",
                "--pool-size",
                "10",
                "--metrics-addr",
                "off",
            ],
        );
        assert_eq!(r.code, 1, "{r:?}");
        assert!(r.stderr.contains("capacity 100"), "{}", r.stderr);
        assert!(
            r.stderr.contains("pool size to 30 (--pool-size"),
            "{}",
            r.stderr
        );
        assert_eq!(r.stderr.trim().lines().count(), 1, "one line: {}", r.stderr);

        // … and from the environment, the same refusal.
        let r = from_output(
            command(Some("memory:"), &["worker", "--metrics-addr", "off"])
                .env("DROVER_CAPACITY", "100")
                .output()
                .expect("spawn"),
        );
        assert_eq!(r.code, 1, "{r:?}");
        assert!(
            r.stderr.contains("pool size to 30 (--pool-size"),
            "{}",
            r.stderr
        );

        // A bad flag is a usage error naming it.
        let r = drover(Some("memory:"), &["worker", "--lease", "soon"]);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains("lease"), "{}", r.stderr);
    }

    #[test]
    fn worker_serves_health_and_metrics_and_stops_on_sigterm() {
        let mut w = WorkerProc::spawn(Some("memory:"), &["--poll-interval", "100ms"]);
        w.wait_healthy();
        let (code, body) = http_get(w.addr(), "/metrics").expect("metrics answers");
        assert_eq!(code, 200, "{body}");
        let log = w.log();
        assert!(
            log.contains(&w.addr().to_string()),
            "the bound address is logged: {log}"
        );
        w.terminate();
        assert!(w.log().contains("stopped"), "{}", w.log());
    }

    /// Issue 31, point 7: a library worker serves no listener unless asked,
    /// but `drover worker` keeps its default, 127.0.0.1:9464, with no flag
    /// and no variable. Either it binds that address and serves `/metrics`
    /// there, or (another process holds the port) it refuses to start
    /// naming that address: both show the command's default is on.
    #[test]
    fn worker_serves_metrics_on_its_default_address_without_a_flag() {
        let default: SocketAddr = drover::worker::METRICS_ADDR_DEFAULT.parse().unwrap();
        let log = tempfile::NamedTempFile::new().expect("log file");
        let child = command(Some("memory:"), &["worker", "--poll-interval", "100ms"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log.reopen().expect("reopen log")))
            .spawn()
            .expect("spawn drover worker");
        let mut w = WorkerProc {
            child,
            addr: Some(default),
            log,
        };
        let serving = format!("serving http://{default}/healthz");
        let refused = format!("cannot listen on {default}");
        let start = Instant::now();
        loop {
            let log = w.log();
            if log.contains(&serving) {
                let (code, body) = http_get(default, "/metrics").expect("metrics answers");
                assert_eq!(code, 200, "{body}");
                w.terminate();
                return;
            }
            if let Ok(Some(status)) = w.child.try_wait() {
                assert_eq!(status.code(), Some(1), "{log}");
                assert!(w.log().contains(&refused), "{}", w.log());
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "neither served nor refused {default}: {log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn worker_stops_on_sigint() {
        let mut w = WorkerProc::spawn(Some("memory:"), &[]);
        w.wait_healthy();
        w.signal(nix::sys::signal::Signal::SIGINT);
        let status = w.wait_exit(Duration::from_secs(30));
        assert_eq!(status.code(), Some(0), "{}", w.log());
        assert!(w.log().contains("SIGINT"), "{}", w.log());
    }
}

// ---------------------------------------------------------------- sqlite

mod sqlite {
    use super::*;

    fn sqlite_keys(path: &Path) -> Vec<String> {
        let url = format!("sqlite://{}?mode=ro", path.display());
        block_on(async {
            use sqlx::Connection;
            let mut c = sqlx::SqliteConnection::connect(&url).await.expect("open");
            sqlx::query_scalar::<_, String>(
                "SELECT idempotency_key FROM items WHERE kind = 'drover.heartbeat'",
            )
            .fetch_all(&mut c)
            .await
            .unwrap_or_default()
        })
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn two_workers_enqueue_one_item_per_tick_of_a_1s_schedule_through_a_kill() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("periodic.db");
        let url = format!("sqlite://{}", path.display());
        drover(Some(&url), &["migrate"]).ok();
        one_item_per_tick_through_a_kill(
            &url,
            2,
            || chrono::Utc::now().timestamp(),
            || sqlite_keys(&path),
        );
    }

    #[test]
    fn a_fresh_worker_logs_a_heartbeat_within_the_first_minute() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("beat.db").display());
        drover(Some(&url), &["migrate"]).ok();
        let mut w = WorkerProc::spawn(Some(&url), &["--heartbeat-cron", "*/2 * * * * *"]);
        w.wait_healthy();
        wait_until(Duration::from_secs(60), "a heartbeat in the log", || {
            w.log().lines().any(|l| l.contains(": heartbeat worker="))
        });
        let log = w.log();
        let line = log
            .lines()
            .find(|l| l.contains(": heartbeat worker="))
            .expect("the line");
        assert!(
            line.contains(&format!(":{}:", w.pid())),
            "the beat names this worker (host:pid:run): {line}"
        );
        assert!(line.contains("tick="), "{line}");
        let list = drover(Some(&url), &["schedules", "--json"]).ok().json();
        let beat = list
            .as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == "drover.heartbeat"))
            .cloned()
            .expect("the heartbeat is listed");
        assert!(
            beat["last_tick"].is_string(),
            "its last tick is recorded: {beat}"
        );
        w.terminate();
    }

    /// `drover enqueue`, another process on the worker's file, wakes the
    /// worker through the file's watch: with the poll at 10 minutes, each
    /// item done within the wait shows the wake-up reached it.
    #[test]
    fn items_enqueued_by_another_process_start_without_waiting_for_the_poll() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("wake.db").display());
        drover(Some(&url), &["migrate"]).ok();
        let mut w = WorkerProc::spawn(Some(&url), &["--poll-interval", "10m"]);
        w.wait_healthy();
        // The first item may go with the worker's first claim round; each
        // later one is enqueued after the one before is done, when the
        // lane's last claim came back short and only a wake-up (or the
        // 10-minute poll) claims again.
        for n in 0..4 {
            let payload = format!("{{\"n\": {n}}}");
            let r = drover(
                Some(&url),
                &["enqueue", "drover.noop", "--payload", &payload, "--json"],
            )
            .ok();
            let id = r.json()["id"].as_str().expect("the item's id").to_owned();
            wait_until(
                Duration::from_secs(60),
                &format!("item {n} done (the poll is 10 min)"),
                || drover(Some(&url), &["show", &id, "--json"]).ok().json()["status"] == "done",
            );
        }
        w.terminate();
    }

    #[test]
    fn demo_runs_end_to_end_on_sqlite() {
        let dir = tempfile::tempdir().expect("temp dir");
        // The default database: sqlite://drover-demo.db in the working
        // directory, recreated fresh on each run.
        for _ in 0..2 {
            let out = command(None, &["demo"])
                .current_dir(dir.path())
                .output()
                .expect("spawn");
            assert_demo_summary(&from_output(out));
        }
        assert!(Path::new(&dir.path().join("drover-demo.db")).exists());

        // A named file.
        let url = format!("sqlite://{}", dir.path().join("named.db").display());
        let r = drover(None, &["demo", "--database-url", &url]);
        assert_demo_summary(&r);
    }
}

// ---------------------------------------------------------------- postgres

mod postgres {
    use super::*;
    use sqlx::Connection;

    /// The PostgreSQL server tests use (`DATABASE_URL`, else the local
    /// default), as `drover::testing::pg_url()` does.
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

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    /// A fresh database, migrated through the binary, dropped after.
    struct PgDb {
        admin: String,
        name: String,
        url: String,
    }

    impl PgDb {
        fn new() -> Self {
            let admin = pg_url();
            let name = format!("drover_w_{}", uuid::Uuid::new_v4().simple());
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
            drover(Some(&url), &["migrate"]).ok();
            PgDb { admin, name, url }
        }

        /// Every item: id, status, claim_seq, attempts, last_error.
        fn items(&self) -> Vec<ItemRow> {
            block_on(async {
                let mut c = sqlx::PgConnection::connect(&self.url)
                    .await
                    .expect("connect");
                sqlx::query_as::<_, ItemRow>(
                    "SELECT id, status, claim_seq, attempts, last_error FROM drover.items",
                )
                .fetch_all(&mut c)
                .await
                .expect("read items")
            })
        }

        /// The ids a worker process holds claimed now.
        fn claimed_by_pid(&self, pid: i32) -> Vec<uuid::Uuid> {
            block_on(async {
                let mut c = sqlx::PgConnection::connect(&self.url)
                    .await
                    .expect("connect");
                sqlx::query_scalar::<_, uuid::Uuid>(
                    "SELECT id FROM drover.items WHERE status = 'claimed' AND claimed_by LIKE $1",
                )
                .bind(format!("%:{pid}:%"))
                .fetch_all(&mut c)
                .await
                .expect("read claims")
            })
        }
    }

    impl Drop for PgDb {
        fn drop(&mut self) {
            let (admin, name, url) = (self.admin.clone(), self.name.clone(), self.url.clone());
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

    #[derive(Debug, sqlx::FromRow)]
    struct ItemRow {
        id: uuid::Uuid,
        status: String,
        claim_seq: i64,
        attempts: i32,
        last_error: Option<String>,
    }

    #[test]
    fn worker_drains_and_stops_on_sigterm() {
        let db = PgDb::new();
        enqueue_file(&db.url, 500, "drover.noop", &serde_json::json!({}));
        let mut w = WorkerProc::spawn(Some(&db.url), &[]);
        w.wait_healthy();
        wait_until(Duration::from_secs(60), "500 items done", || {
            total(&db.url, "done") == 500
        });
        let (code, body) = http_get(w.addr(), "/metrics").expect("metrics answers");
        assert_eq!(code, 200);
        assert!(body.contains("drover_completed_total"), "{body}");
        w.terminate();
    }

    #[test]
    fn three_workers_drain_20000_noop_exactly_once() {
        const N: usize = 20_000;
        let db = PgDb::new();
        enqueue_file(&db.url, N, "drover.noop", &serde_json::json!({}));
        let mut workers: Vec<WorkerProc> = (0..3)
            .map(|_| WorkerProc::spawn(Some(&db.url), &["--capacity", "20"]))
            .collect();
        for w in &mut workers {
            w.wait_healthy();
        }
        let start = Instant::now();
        wait_until(Duration::from_secs(300), "20,000 items done", || {
            total(&db.url, "done") == N as u64
        });
        eprintln!(
            "3 workers drained {N} items in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        let items = db.items();
        assert_eq!(items.len(), N);
        let not_done: Vec<&ItemRow> = items.iter().filter(|i| i.status != "done").collect();
        assert!(
            not_done.is_empty(),
            "not done: {:?}",
            &not_done[..not_done.len().min(5)]
        );
        let twice: Vec<&ItemRow> = items.iter().filter(|i| i.claim_seq != 1).collect();
        assert!(
            twice.is_empty(),
            "{} items claimed other than once: {:?}",
            twice.len(),
            &twice[..twice.len().min(5)]
        );
        for w in &mut workers {
            w.terminate();
        }
    }

    #[test]
    fn killed_worker_items_are_requeued_by_the_sweep() {
        const N: usize = 200;
        const LEASE: Duration = Duration::from_secs(3);
        const SWEEP: Duration = Duration::from_secs(1);
        let db = PgDb::new();
        enqueue_file(
            &db.url,
            N,
            "drover.sleep",
            &serde_json::json!({ "ms": 1000 }),
        );
        let args = ["--lease", "3s", "--sweep-interval", "1s"];
        // The victim starts first, so it holds claims whatever the load on
        // the machine (alone it needs about 10 s for the 200 items); then
        // the survivor joins.
        let mut victim = WorkerProc::spawn(Some(&db.url), &args);
        victim.wait_healthy();
        wait_until(Duration::from_secs(30), "the victim to hold claims", || {
            !db.claimed_by_pid(victim.pid()).is_empty()
        });
        let mut survivor = WorkerProc::spawn(Some(&db.url), &args);
        survivor.wait_healthy();
        victim.signal(nix::sys::signal::Signal::SIGKILL);
        let killed_at = Instant::now();
        let status = victim.wait_exit(Duration::from_secs(10));
        assert_eq!(status.code(), None, "killed by a signal");
        // What it held when it died (nobody may touch these before their
        // lease, at least two seconds away, has passed).
        let held = db.claimed_by_pid(victim.pid());
        assert!(!held.is_empty(), "the victim died holding items");

        // The sweep hands every item the victim held back within the lease
        // plus a jittered sweep interval (plus slack for a loaded machine).
        // Their final time is not bounded here: a rescued item is requeued
        // behind the items already waiting, like every retry, so it also
        // measures the backlog.
        wait_until(
            Duration::from_secs(60),
            "the victim's claims handed back",
            || db.claimed_by_pid(victim.pid()).is_empty(),
        );
        let recovery = killed_at.elapsed();
        let bound = LEASE + SWEEP.mul_f64(1.2) + Duration::from_secs(5);
        eprintln!(
            "{} items held by the killed worker handed back {:.2} s after the kill (bound {:.1} s)",
            held.len(),
            recovery.as_secs_f64(),
            bound.as_secs_f64()
        );
        assert!(recovery <= bound, "hand-back took {recovery:?} > {bound:?}");

        wait_until(Duration::from_secs(60), "all items done", || {
            total(&db.url, "done") == N as u64
        });
        let items = db.items();
        assert_eq!(items.len(), N, "none lost");
        assert!(items.iter().all(|i| i.status == "done"));
        for id in &held {
            let i = items.iter().find(|i| i.id == *id).expect("held item");
            assert!(i.claim_seq >= 2, "claimed again after the kill: {i:?}");
            assert!(i.attempts >= 1, "the lost run spent an attempt: {i:?}");
            assert_eq!(i.last_error.as_deref(), Some("lease expired"), "{i:?}");
        }
        // Items the victim never held ran once.
        let others = items.iter().filter(|i| !held.contains(&i.id));
        assert!(
            others.clone().all(|i| i.attempts == 0),
            "no other item failed"
        );
        survivor.terminate();
    }

    /// The state `drover stats` lists for the worker of process `pid`.
    fn listed_state(url: &str, pid: i32) -> Option<String> {
        let v = drover(Some(url), &["stats", "--json"]).ok().json();
        v["workers"]
            .as_array()?
            .iter()
            .find(|w| w["pid"] == pid)
            .and_then(|w| w["state"].as_str().map(str::to_owned))
    }

    #[test]
    fn sigkilled_worker_is_listed_lost_within_two_beat_intervals() {
        const BEAT: Duration = Duration::from_secs(1);
        let db = PgDb::new();
        let mut victim = WorkerProc::spawn(Some(&db.url), &["--heartbeat-interval", "1s"]);
        victim.wait_healthy();
        wait_until(Duration::from_secs(30), "the victim listed running", || {
            listed_state(&db.url, victim.pid()).as_deref() == Some("running")
        });
        victim.signal(nix::sys::signal::Signal::SIGKILL);
        let killed_at = Instant::now();
        let status = victim.wait_exit(Duration::from_secs(10));
        assert_eq!(status.code(), None, "killed by a signal");
        wait_until(Duration::from_secs(30), "the victim listed lost", || {
            listed_state(&db.url, victim.pid()).as_deref() == Some("lost")
        });
        let took = killed_at.elapsed();
        // Two intervals by the database clock, plus the time one `drover
        // stats` run takes to observe it on a loaded machine.
        let bound = BEAT * 2 + Duration::from_secs(3);
        eprintln!(
            "SIGKILLed worker listed lost {:.2} s after the kill (beat {BEAT:?}, bound {bound:?})",
            took.as_secs_f64()
        );
        assert!(took <= bound, "listed lost after {took:?} > {bound:?}");
    }

    #[test]
    fn sigtermed_worker_is_listed_offline_not_lost() {
        let db = PgDb::new();
        let mut w = WorkerProc::spawn(Some(&db.url), &["--heartbeat-interval", "1s"]);
        w.wait_healthy();
        wait_until(Duration::from_secs(30), "the worker listed running", || {
            listed_state(&db.url, w.pid()).as_deref() == Some("running")
        });
        let pid = w.pid();
        w.terminate();
        // A clean shutdown stays offline however long ago its last beat
        // (the contract case worker_silent_two_intervals_is_lost moves a
        // clock past two intervals to show it).
        assert_eq!(listed_state(&db.url, pid).as_deref(), Some("offline"));
    }

    #[test]
    fn three_workers_enqueue_one_item_per_tick_of_a_1s_schedule_through_a_kill() {
        let db = PgDb::new();
        let url = db.url.clone();
        let query = |sql: &'static str| {
            let url = url.clone();
            move || {
                block_on(async {
                    let mut c = sqlx::PgConnection::connect(&url).await.expect("connect");
                    sqlx::query_scalar::<_, String>(sql)
                        .fetch_all(&mut c)
                        .await
                        .expect("query")
                })
            }
        };
        let now = query("SELECT extract(epoch FROM now())::bigint::text");
        let keys =
            query("SELECT idempotency_key FROM drover.items WHERE kind = 'drover.heartbeat'");
        one_item_per_tick_through_a_kill(&db.url, 3, || now()[0].parse().expect("epoch"), keys);
    }
}
