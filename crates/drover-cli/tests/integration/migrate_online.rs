//! An online upgrade: the database two migrations behind the binary (before
//! ordered groups and workers' kinds), two workers draining under a kind
//! limit the previous release set, `drover migrate` to the newest version
//! in the middle of the drain, and nothing lost or run twice, the limit
//! never exceeded and still in force after (docs/operations.md, "Upgrades":
//! expand, then contract). Also: `/readyz` reports the pending migrations
//! before and turns ready after, with no restart.
//!
//! Needs PostgreSQL (`DATABASE_URL`): a fresh database.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor};

use crate::common;
use common::pg::{FreshDb, block_on};
use common::{Run, from_output};

const BIN: &str = env!("CARGO_BIN_EXE_drover");
const ITEMS: i64 = 3000;
/// The kind limit in force through the upgrade: far below the two workers'
/// capacity of 20 each, so it binds.
const LIMIT: i64 = 6;
/// Migrations the database is behind the binary.
const BEHIND: usize = 2;

fn drover(url: &str, args: &[&str]) -> Run {
    let mut c = Command::new(BIN);
    c.args(args)
        .env_clear()
        .env("DROVER_DATABASE_URL", url)
        .stdin(Stdio::null());
    from_output(c.output().expect("spawn"))
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
    Some((status, text.split_once("\r\n\r\n")?.1.trim().to_owned()))
}

fn wait_until(limit: Duration, what: &str, f: impl FnMut() -> bool) {
    assert!(wait_for(limit, f), "timed out waiting for {what}");
}

/// Polls `f` until it holds (true) or `limit` passes (false).
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

struct Worker(Child, SocketAddr, tempfile::NamedTempFile);

impl Worker {
    fn spawn(url: &str) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(BIN)
            .args(["worker", "--metrics-addr", &addr.to_string()])
            .args(["--poll-interval", "100ms", "--capacity", "20"])
            .env_clear()
            .env("DROVER_DATABASE_URL", url)
            .env("RUST_LOG", "warn,drover=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("spawn worker");
        Worker(child, addr, log)
    }
    fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.2.path()).unwrap_or_default()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Applies every embedded migration but the newest [`BEHIND`], as an
/// earlier release's `drover migrate` would have.
fn migrate_all_but_the_newest(url: &str) -> i64 {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../drover-store/migrations/postgres"
    );
    block_on(async {
        let mut m = sqlx::migrate::Migrator::new(std::path::Path::new(dir))
            .await
            .expect("read migrations");
        let n = m.migrations.len();
        assert!(n > BEHIND, "an upgrade needs migrations to cross");
        m.migrations = std::borrow::Cow::Owned(m.migrations[..n - BEHIND].to_vec());
        let previous = m.migrations[n - BEHIND - 1].version;
        let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
        c.execute("CREATE SCHEMA IF NOT EXISTS drover")
            .await
            .unwrap();
        c.execute("SET search_path TO drover").await.unwrap();
        m.run_direct(&mut c).await.expect("previous migrations");
        previous
    })
}

#[test]
fn drover_migrate_to_the_newest_version_while_workers_drain_loses_nothing() {
    let db = FreshDb::new("drover_up");
    let previous = migrate_all_but_the_newest(&db.url);
    let file = tempfile::NamedTempFile::new().unwrap();
    {
        let mut f = std::io::BufWriter::new(file.reopen().unwrap());
        for i in 0..ITEMS {
            writeln!(
                f,
                r#"{{"kind":"drover.sleep","payload":{{"ms":40}},"idempotency_key":"u{i}"}}"#
            )
            .unwrap();
        }
    }
    let r = drover(
        &db.url,
        &["enqueue", "--from-file", file.path().to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{r:?}");

    // The limit as the earlier release wrote it (its `drover limits set`).
    assert_eq!(
        db.scalar_i64(&format!(
            "WITH s AS (INSERT INTO drover.flow_limits (scope, name, source, concurrency, set_by) \
             VALUES ('kind', 'drover.sleep', 'operator', {LIMIT}, \
             '00000000-0000-0000-0000-000000000000') RETURNING 1) SELECT count(*) FROM s"
        )),
        1
    );
    // What holds slots, read from the rows every few milliseconds through
    // the drain and the migration: never above the limit.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        let url = db.url.clone();
        std::thread::spawn(move || {
            block_on(async move {
                let mut c = sqlx::PgConnection::connect(&url).await.expect("connect");
                let (mut most, mut samples) = (0i64, 0u64);
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let n: i64 = sqlx::query_scalar(
                        "SELECT count(*) FROM drover.items \
                         WHERE status = 'claimed' AND kind = 'drover.sleep'",
                    )
                    .fetch_one(&mut c)
                    .await
                    .expect("sample");
                    most = most.max(n);
                    samples += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                (most, samples)
            })
        })
    };

    let mut a = Worker::spawn(&db.url);
    let mut b = Worker::spawn(&db.url);
    wait_until(Duration::from_secs(30), "workers answer", || {
        http_get(a.1, "/healthz").is_some_and(|(c, _)| c == 200)
            && http_get(b.1, "/healthz").is_some_and(|(c, _)| c == 200)
    });
    let (code, body) = http_get(a.1, "/readyz").unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains(&format!("database is at {previous}")),
        "{body}"
    );

    // The test's own items only: the workers' periodic heartbeat (on by
    // default) adds one item a minute, which would keep the count from
    // ever equalling ITEMS.
    let done = || {
        db.scalar_i64(
            "SELECT count(*) FROM drover.items WHERE status = 'done' AND kind = 'drover.sleep'",
        )
    };
    wait_until(Duration::from_secs(60), "the drain under way", || {
        done() >= 200
    });
    let r = drover(&db.url, &["migrate"]);
    assert_eq!(r.code, 0, "{r:?}");
    let left = ITEMS - done();
    assert!(left > 0, "the migration ran while items were still waiting");

    let all_done = wait_for(Duration::from_secs(180), || done() == ITEMS);
    if !all_done {
        // What a stall looks like from outside, so a failure names its cause.
        let states = db.scalar_text(
            "SELECT string_agg(status || ' ' || attempts || ' ' || n, ', ') FROM \
             (SELECT kind || ' ' || status AS status, attempts, count(*) AS n \
             FROM drover.items GROUP BY 1, 2) s",
        );
        let (alive_a, alive_b) = (a.alive(), b.alive());
        panic!(
            "timed out waiting for every item done: items {states}; worker a alive {alive_a}, \
             b alive {alive_b}\n--- worker a\n{}\n--- worker b\n{}",
            a.log(),
            b.log()
        );
    }
    assert_eq!(
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE claim_seq <> 1 OR attempts <> 0"),
        0,
        "every item ran exactly once, no attempt spent"
    );
    for w in [&a, &b] {
        let (code, body) = http_get(w.1, "/readyz").unwrap();
        assert_eq!((code, body.as_str()), (200, "ready"), "{}", w.log());
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (most, samples) = sampler.join().expect("sampler");
    assert!(
        most <= LIMIT,
        "at most {LIMIT} claimed at once through the upgrade, saw {most}"
    );
    assert!(
        most >= 1 && samples > 100,
        "the sampler saw the drain: {most} of {samples}"
    );
    let list = drover(&db.url, &["limits", "list", "--json"]);
    assert_eq!(list.code, 0, "{list:?}");
    let limits: serde_json::Value = serde_json::from_str(&list.stdout).expect("json");
    assert_eq!(
        (
            limits[0]["setting"]["concurrency"].as_i64(),
            limits[0]["setting"]["source"].as_str(),
            limits[0]["setting"]["ordered"].as_bool()
        ),
        (Some(LIMIT), Some("operator"), Some(false)),
        "the limit is still in force after the upgrade: {limits}"
    );
    let failed_claims =
        a.log().matches("claim failed").count() + b.log().matches("claim failed").count();
    let first_failure = a
        .log()
        .lines()
        .chain(b.log().lines())
        .find(|l| l.contains("claim failed"))
        .map(str::to_owned);
    eprintln!(
        "migrated with {left} items waiting; claim errors during the migration: {failed_claims}; \
         most claimed at once {most} of limit {LIMIT} over {samples} samples; \
         the first claim error: {first_failure:?}"
    );
}
