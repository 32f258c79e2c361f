//! drover through a real PgBouncer (Debian's 1.18) in transaction pooling
//! mode, with only `ignore_startup_parameters = extra_float_digits`, as most
//! teams run it. The test starts its own `pgbouncer` on a free port in front
//! of the test server (`DATABASE_URL`) and a fresh database:
//!
//! - `drover migrate` goes over `DROVER_DIRECT_DATABASE_URL` (the migrator
//!   needs a session); through the pooler alone it is refused by name;
//! - 10,000 items enqueued through the pooler are drained exactly once by
//!   two workers through the pooler: one with a direct URL (LISTEN there),
//!   one without (polling, one warning) whose system pool (claims, sweep)
//!   also goes through the pooler; both take turns at the sweep lease,
//!   a row taken through the pooler like any other statement;
//! - SIGTERM drains: the worker exits 0, nothing it held is lost or charged;
//! - a SIGKILLed worker's items are handed back by the other worker's sweep.
//!
//! `pgbouncer` must be installed (`apt-get install -y pgbouncer`; .ci/run
//! does); a missing binary fails the test.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::pg::{FreshDb, with_database};
use common::{Run, from_output};

const BIN: &str = env!("CARGO_BIN_EXE_drover");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port()
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        == Some("0")
}

fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A pgbouncer process in front of the test server, killed on drop.
struct Bouncer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Bouncer {
    fn start(server_host: &str, server_port: u16) -> Self {
        let bin = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("pgbouncer is not installed: `apt-get install -y pgbouncer` (.ci/run does)");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let ini = dir.path().join("pgbouncer.ini");
        let users = dir.path().join("userlist.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n").unwrap();
        let mut f = std::fs::File::create(&ini).unwrap();
        write!(
            f,
            "[databases]\n* = host={server_host} port={server_port}\n\n[pgbouncer]\n\
             listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
             auth_type = trust\nauth_file = {}\npool_mode = transaction\n\
             ignore_startup_parameters = extra_float_digits\n\
             max_client_conn = 400\ndefault_pool_size = 20\n",
            users.display()
        )
        .unwrap();
        drop(f);
        for p in [dir.path(), ini.as_path(), users.as_path()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let mut c = Command::new(bin);
        if running_as_root() {
            // PgBouncer refuses to run as root.
            c.arg("-u").arg("nobody");
        }
        let child = c
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn pgbouncer");
        let mut b = Bouncer {
            child,
            port,
            _dir: dir,
        };
        wait_until(Duration::from_secs(10), "pgbouncer listens", || {
            assert!(b.child.try_wait().unwrap().is_none(), "pgbouncer exited");
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        let _ = &mut b;
        b
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Env {
    pooled: String,
    direct: String,
}

impl Env {
    fn command(&self, with_direct: bool, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env_clear()
            .env("DROVER_DATABASE_URL", &self.pooled)
            .env("DROVER_DATABASE_POOLER", "transaction")
            .env("RUST_LOG", "warn,drover=info")
            .stdin(Stdio::null());
        if with_direct {
            c.env("DROVER_DIRECT_DATABASE_URL", &self.direct);
        }
        c
    }

    fn run(&self, with_direct: bool, args: &[&str]) -> Run {
        from_output(self.command(with_direct, args).output().expect("spawn"))
    }
}

struct Worker {
    child: Child,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Worker {
    fn spawn(env: &Env, with_direct: bool, args: &[&str]) -> Self {
        Worker::spawn_with(env, with_direct, &[], args)
    }

    fn spawn_with(env: &Env, with_direct: bool, vars: &[(&str, &str)], args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("worker.log");
        let port = free_port().to_string();
        let mut all = vec!["worker", "--metrics-addr"];
        let addr = format!("127.0.0.1:{port}");
        all.push(&addr);
        all.extend_from_slice(args);
        let mut cmd = env.command(with_direct, &all);
        // The test counts its own items; the heartbeat job (on by default)
        // would add one on each minute.
        cmd.env("DROVER_HEARTBEAT_CRON", "off");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .process_group(0)
            .spawn()
            .expect("spawn worker");
        Worker {
            child,
            log,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                start.elapsed() < limit,
                "worker did not exit: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn server_host_port(url: &str) -> (String, u16) {
    let after = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = after.split('/').next().unwrap();
    let hostport = authority.rsplit('@').next().unwrap();
    match hostport.rsplit_once(':') {
        Some((h, p)) => (h.to_owned(), p.parse().unwrap()),
        None => (hostport.to_owned(), 5432),
    }
}

fn pooled_url(direct: &str, port: u16, db: &str) -> String {
    let (host, server_port) = server_host_port(direct);
    let u = direct.replacen(
        &format!("{host}:{server_port}"),
        &format!("127.0.0.1:{port}"),
        1,
    );
    let u = if u == direct {
        direct.replacen(&host, &format!("127.0.0.1:{port}"), 1)
    } else {
        u
    };
    with_database(&u, db)
}

/// Pointed at a transaction-pooling PgBouncer without
/// `DROVER_DATABASE_POOLER=transaction`, drover does not leave the user with
/// PgBouncer's "unsupported startup parameter" alone: the error names the
/// setting that fixes it.
#[test]
fn through_pgbouncer_without_the_pooler_setting_the_error_names_it() {
    let db = FreshDb::new("drover_pgb_hint");
    let (host, port) = server_host_port(&db.url);
    let bouncer = Bouncer::start(&host, port);
    let pooled = pooled_url(&db.url, bouncer.port, &db.name);
    for args in [&["stats"][..], &["list"][..]] {
        let out = Command::new(BIN)
            .args(args)
            .env_clear()
            .env("DROVER_DATABASE_URL", &pooled)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("spawn");
        let r = from_output(out);
        assert_ne!(r.code, 0, "{r:?}");
        assert!(
            r.stderr.contains("unsupported startup parameter")
                && r.stderr.contains("DROVER_DATABASE_POOLER=transaction")
                && r.stderr.contains("DROVER_DIRECT_DATABASE_URL"),
            "{args:?}: {r:?}"
        );
    }
}

#[test]
fn through_pgbouncer_transaction_pooling_drains_10000_exactly_once_drains_on_sigterm_and_recovers_a_killed_worker()
 {
    let db = FreshDb::new("drover_pgb");
    let (host, port) = server_host_port(&db.url);
    let bouncer = Bouncer::start(&host, port);
    let env = Env {
        pooled: pooled_url(&db.url, bouncer.port, &db.name),
        direct: db.url.clone(),
    };

    // Migrations need a session: refused through the pooler alone, by name.
    let r = env.run(false, &["migrate"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("DROVER_DIRECT_DATABASE_URL"), "{r:?}");
    env.run(true, &["migrate"]).ok();

    // 10,000 items through the pooler.
    let file = tempfile::NamedTempFile::new().unwrap();
    {
        let mut f = std::io::BufWriter::new(file.reopen().unwrap());
        for i in 0..10_000 {
            writeln!(f, r#"{{"kind":"drover.noop","idempotency_key":"n{i}"}}"#).unwrap();
        }
    }
    let r = env.run(
        false,
        &["enqueue", "--from-file", file.path().to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("inserted 10000"), "{r:?}");

    let fast = ["--poll-interval", "100ms", "--sweep-interval", "500ms"];
    let mut a = Worker::spawn(&env, true, &fast);
    // `b` also runs its cross-tenant operations (claims, the sweep, gauges)
    // over a system pool of its own, through the same pooler.
    let mut b = Worker::spawn_with(
        &env,
        false,
        &[("DROVER_SYSTEM_DATABASE_URL", env.pooled.as_str())],
        &fast,
    );
    wait_until(Duration::from_secs(180), "10,000 items done", || {
        assert!(a.child.try_wait().unwrap().is_none(), "{}", a.log());
        assert!(b.child.try_wait().unwrap().is_none(), "{}", b.log());
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE status = 'done'") == 10_000
    });
    assert_eq!(
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE claim_seq <> 1 OR attempts <> 0"),
        0,
        "every item claimed exactly once, no attempt spent"
    );
    let log_b = b.log();
    assert_eq!(
        log_b.matches("no LISTEN, workers poll").count(),
        1,
        "{log_b}"
    );
    assert!(!a.log().contains("no LISTEN"), "{}", a.log());
    for l in [a.log(), log_b.clone()] {
        assert!(!l.contains("prepared statement"), "{l}");
        assert!(!l.contains("claim failed"), "{l}");
    }

    // SIGTERM drain: items in flight on `a` finish or are released unspent.
    for _ in 0..8 {
        env.run(
            false,
            &["enqueue", "drover.sleep", "--payload", r#"{"ms":400}"#],
        )
        .ok();
    }
    wait_until(Duration::from_secs(30), "sleeps claimed", || {
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE status = 'claimed'") > 0
    });
    nix::sys::signal::kill(a.pid(), nix::sys::signal::Signal::SIGTERM).unwrap();
    let exit = a.wait_exit(Duration::from_secs(40));
    assert_eq!(exit.code(), Some(0), "{}", a.log());
    wait_until(Duration::from_secs(30), "sleeps done", || {
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE status = 'done'") == 10_008
    });
    assert_eq!(
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE attempts <> 0"),
        0,
        "a drain spends no attempt"
    );

    // SIGKILL: a worker with a short lease dies holding items; `b` (no
    // direct URL: its sweep lease taken through the pooler) hands them back.
    let mut k = Worker::spawn(&env, true, &["--lease", "3s", "--poll-interval", "100ms"]);
    let kpid = k.child.id();
    nix::sys::signal::kill(b.pid(), nix::sys::signal::Signal::SIGSTOP).unwrap();
    for _ in 0..4 {
        env.run(
            false,
            &["enqueue", "drover.sleep", "--payload", r#"{"ms":600000}"#],
        )
        .ok();
    }
    wait_until(
        Duration::from_secs(30),
        "the killed worker holds the sleeps",
        || {
            db.scalar_i64(&format!(
            "SELECT count(*) FROM drover.items WHERE status = 'claimed' AND claimed_by LIKE '%:{kpid}:%'"
        )) == 4
        },
    );
    nix::sys::signal::kill(k.pid(), nix::sys::signal::Signal::SIGKILL).unwrap();
    let _ = k.wait_exit(Duration::from_secs(10));
    nix::sys::signal::kill(b.pid(), nix::sys::signal::Signal::SIGCONT).unwrap();
    // Lease (3 s) plus a few sweep intervals (0.5 s), with a generous margin.
    wait_until(
        Duration::from_secs(30),
        "the sweep hands the items back",
        || {
            db.scalar_i64(
                "SELECT count(*) FROM drover.items WHERE kind = 'drover.sleep' AND attempts = 1 \
             AND last_error = 'lease expired'",
            ) == 4
        },
    );
    assert!(b.child.try_wait().unwrap().is_none(), "{}", b.log());
    let swept = b.log();
    // The sweep ran through the pooler under its lease row, with no
    // session of its own and no fallback.
    assert!(
        swept.contains("sweep handed back lease-expired items"),
        "{swept}"
    );
    assert!(!swept.contains("sweep step failed"), "{swept}");
    drop(b);
    drop(bouncer);
}

/// Orchestrations and the sync reconciler through the same pooler, with no
/// direct URL at all (the worker polls): a workflow parks for a signal and
/// completes when it arrives, another fails in its third step and
/// compensates its first two in reverse, and a reconciler applies a
/// 1,000-change source in batches with its checkpoint. Every statement of
/// theirs is unnamed and in an explicit transaction, or PgBouncer's
/// transaction pooling would hand a prepared statement to the wrong
/// session.
#[test]
fn orchestrations_and_the_reconciler_through_pgbouncer_transaction_pooling() {
    use std::sync::{Arc, Mutex};

    use drover::orchestration::{
        Next, OrchestrationStatus, Start, StepError, Workflow, WorkflowStrategy, Workflows,
    };
    use drover::reconcile::{
        Change, ConflictStrategy, Reconciler, ReconcilerConfig, ReconcilerStrategy, Source,
        SourceBatch, SourceError,
    };
    use drover::store::pooler::{PoolMode, PoolerOptions};
    use drover::store::{ConnectOptions, connect_with};

    struct Numbers;
    #[async_trait::async_trait]
    impl Source for Numbers {
        async fn pull(
            &self,
            _tenant: uuid::Uuid,
            cursor: Option<&str>,
            limit: u32,
        ) -> Result<SourceBatch, SourceError> {
            let from: usize = cursor.map_or(0, |c| c.parse().unwrap());
            let to = (from + limit as usize).min(1000);
            Ok(SourceBatch {
                changes: (from..to)
                    .map(|i| Change {
                        key: format!("k{}", i % 700),
                        version: i as i64 + 1,
                        data: serde_json::json!(i),
                        deleted: false,
                    })
                    .collect(),
                cursor: (to > from).then(|| to.to_string()),
            })
        }
    }

    let db = FreshDb::new("drover_pgb_orch");
    let (host, port) = server_host_port(&db.url);
    let bouncer = Bouncer::start(&host, port);
    let env = Env {
        pooled: pooled_url(&db.url, bouncer.port, &db.name),
        direct: db.url.clone(),
    };
    env.run(true, &["migrate"]).ok();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = connect_with(
            &env.pooled,
            &ConnectOptions {
                pooler: PoolerOptions {
                    mode: PoolMode::Transaction,
                    direct_url: None,
                },
                ..ConnectOptions::default()
            },
        )
        .await
        .expect("connect through the pooler");
        let queue = drover::Queue::new(store.clone());
        let strategy = WorkflowStrategy {
            compensation: "each completed step's compensation, newest first",
            resume: "a signal, or the sweep",
        };
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let l = log.clone();
        let make_waits = || {
            Workflow::<u32>::new("waits", strategy)
                .step("ask", |_cx, n| async move {
                    Ok(Next::WaitSignal {
                        name: "go",
                        step: "done",
                        timeout: Duration::from_secs(600),
                        on_timeout: "done",
                        state: n + 1,
                    })
                })
                .step("done", |cx, n| async move {
                    Ok(Next::complete(cx.signal().cloned().unwrap_or_default(), n))
                })
        };
        let make_fails = || {
            let mut fails = Workflow::<u32>::new("fails", strategy).max_attempts(1);
            for (name, next) in [("s1", Some("s2")), ("s2", Some("s3")), ("s3", None)] {
                let l2 = l.clone();
                fails = fails
                    .step(name, move |_cx, n| async move {
                        match next {
                            Some(next) => Ok(Next::step(next, n + 1)),
                            None => Err(StepError::Fatal("s3 refused".into())),
                        }
                    })
                    .compensate(name, move |_cx, _n| {
                        let l2 = l2.clone();
                        async move {
                            l2.lock().unwrap().push(format!("undo:{name}"));
                            Ok(())
                        }
                    });
            }
            fails
        };
        let (waits, fails) = (make_waits(), make_fails());
        let reconciler = Reconciler::new(
            queue.clone(),
            "numbers",
            Arc::new(Numbers),
            ReconcilerStrategy {
                conflict: ConflictStrategy::ExternalWins,
                conflict_reason: "the source is authoritative",
                checkpoint: "the source index, committed with each batch",
            },
            ReconcilerConfig {
                interval: Duration::from_millis(100),
                batch_size: 150,
                ..ReconcilerConfig::default()
            },
        )
        .unwrap();
        let worker = drover::Worker::builder(queue.clone())
            .settings(drover::worker::WorkerSettings {
                poll_interval: Duration::from_millis(50),
                sweep_interval: Duration::from_millis(300),
                metrics_addr: None,
                ..drover::worker::WorkerSettings::default()
            })
            .workflows(Workflows::new().with(make_waits()).with(make_fails()))
            .reconciler(reconciler)
            .build()
            .unwrap()
            .start()
            .await
            .unwrap();

        let read = |id| {
            let q = queue.clone();
            async move { q.orchestration(uuid::Uuid::nil(), id).await.unwrap() }
        };
        let w = queue
            .start(&Start::of(&waits, &0).unwrap().key("pgb-waits"))
            .await
            .unwrap()
            .record
            .id;
        let f = queue
            .start(&Start::of(&fails, &0).unwrap())
            .await
            .unwrap()
            .record
            .id;
        let end = Instant::now() + Duration::from_secs(60);
        while read(w).await.status != OrchestrationStatus::Parked {
            assert!(Instant::now() < end, "{:?}", read(w).await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        queue
            .signal(
                &drover::queue::Principal::system(),
                uuid::Uuid::nil(),
                w,
                "go",
                serde_json::json!("yes"),
                Some("k1"),
            )
            .await
            .unwrap();
        for (id, want) in [
            (w, OrchestrationStatus::Completed),
            (f, OrchestrationStatus::Compensated),
        ] {
            while read(id).await.status != want {
                assert!(Instant::now() < end, "{:?}", read(id).await);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        assert_eq!(read(w).await.result, Some(serde_json::json!("yes")));
        assert_eq!(*log.lock().unwrap(), ["undo:s2", "undo:s1"]);
        // The same key meets its own orchestration.
        let again = queue
            .start(&Start::of(&waits, &0).unwrap().key("pgb-waits"))
            .await
            .unwrap();
        assert_eq!(again.record.id, w);
        // The reconciler drains the source through the pooler.
        loop {
            let cp = store
                .reconcile_checkpoint_get(uuid::Uuid::nil(), "numbers")
                .await
                .unwrap();
            if cp.as_ref().is_some_and(|c| c.cursor == "1000") {
                break;
            }
            assert!(Instant::now() < end, "{cp:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let r = store
            .reconcile_record_get(uuid::Uuid::nil(), "numbers", "k5")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.data, serde_json::json!(705));
        worker.shutdown().await;
    });
    drop(bouncer);
}
