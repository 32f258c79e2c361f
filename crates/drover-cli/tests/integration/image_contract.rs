//! The contract `deploy/Dockerfile` relies on, tested without an engine (no
//! image can be built here): the `drover` binary runs as a non-root user,
//! with an empty environment but its settings, from a read-only directory
//! (the binary copied into it, as the image's `/app`), and `drover
//! healthcheck` (the image's `HEALTHCHECK`) exits 0 while `/healthz`
//! answers 200 and 1 once it answers 503 (draining) or nothing listens.
//!
//! Run as root (CI), the processes get uid/gid 65534 (`nobody`, the
//! distroless `nonroot` user is 65532: any unprivileged id proves the same);
//! run as a normal user, they keep that user. Needs PostgreSQL
//! (`DATABASE_URL`): a fresh database per test.

#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::pg::FreshDb;
use common::{Run, from_output};

const BIN: &str = env!("CARGO_BIN_EXE_drover");
const UNPRIVILEGED: u32 = 65534;

fn uid_of(status: &str) -> u32 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
        .expect("Uid line")
}

fn running_as_root() -> bool {
    uid_of(&std::fs::read_to_string("/proc/self/status").unwrap()) == 0
}

/// `/app` of the image: a directory nobody may write, holding the binary.
struct ReadOnlyApp {
    root: tempfile::TempDir,
}

impl ReadOnlyApp {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("temp dir");
        let app = root.path().join("app");
        std::fs::create_dir(&app).unwrap();
        std::fs::copy(BIN, app.join("drover")).unwrap();
        std::fs::set_permissions(app.join("drover"), std::fs::Permissions::from_mode(0o555))
            .unwrap();
        std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o555)).unwrap();
        // The temp dir itself is 0700: let the unprivileged user through.
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        ReadOnlyApp { root }
    }

    fn dir(&self) -> PathBuf {
        self.root.path().join("app")
    }

    fn listing(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// `/app/drover <args>`: empty environment but `env`, cwd `/app`,
    /// unprivileged.
    fn command(&self, env: &[(&str, &str)], args: &[&str]) -> Command {
        let mut c = Command::new(self.dir().join("drover"));
        c.args(args)
            .env_clear()
            .envs(env.iter().copied())
            .current_dir(self.dir())
            .stdin(Stdio::null());
        if running_as_root() {
            c.uid(UNPRIVILEGED).gid(UNPRIVILEGED);
        }
        c
    }

    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Run {
        from_output(self.command(env, args).output().expect("spawn drover"))
    }
}

impl Drop for ReadOnlyApp {
    fn drop(&mut self) {
        // Writable again so the temp dir can be removed.
        let _ = std::fs::set_permissions(self.dir(), std::fs::Permissions::from_mode(0o755));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind")
        .port()
}

fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Proc(Child, PathBuf);

impl Proc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn image_contract_unprivileged_empty_env_read_only_dir_and_healthcheck_exit_codes() {
    let db = FreshDb::new("drover_img");
    let app = ReadOnlyApp::new();
    let before = app.listing();
    let port = free_port();
    // The worker listens on every interface, as in the image; the probe
    // finds it on loopback from the same variable.
    let metrics = format!("0.0.0.0:{port}");
    let env = [
        ("DROVER_DATABASE_URL", db.url.as_str()),
        ("DROVER_METRICS_ADDR", metrics.as_str()),
        ("DROVER_SHUTDOWN_GRACE", "3s"),
        ("DROVER_POLL_INTERVAL", "100ms"),
        // The test counts its own items; the heartbeat job would add one.
        ("DROVER_HEARTBEAT_CRON", "off"),
    ];

    // Nothing listens yet: unhealthy.
    let r = app.run(&env, &["healthcheck", "--timeout", "2s"]);
    assert_eq!(r.code, 1, "{r:?}");

    app.run(&env, &["migrate"]).ok();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("worker.log");
    let child = app
        .command(&env, &["worker"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn worker");
    let mut w = Proc(child, log);
    let pid = w.0.id();

    wait_until(Duration::from_secs(30), "healthcheck exits 0", || {
        assert!(
            w.0.try_wait().unwrap().is_none(),
            "worker died: {}",
            w.log()
        );
        app.run(&env, &["healthcheck"]).code == 0
    });
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    if running_as_root() {
        assert_eq!(
            uid_of(&status),
            UNPRIVILEGED,
            "the worker runs unprivileged"
        );
    } else {
        assert_ne!(uid_of(&status), 0);
    }
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let mut names: Vec<String> = environ
        .split(|b| *b == 0)
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            String::from_utf8_lossy(kv)
                .split('=')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    names.sort();
    let mut want: Vec<String> = env.iter().map(|(k, _)| (*k).to_owned()).collect();
    want.sort();
    assert_eq!(
        names, want,
        "the environment is the settings and nothing else"
    );
    let r = app.run(&env, &["healthcheck", "--ready"]);
    assert_eq!(r.code, 0, "ready once migrated: {r:?}");

    // Work runs through it.
    for _ in 0..5 {
        app.run(&env, &["enqueue", "drover.noop"]).ok();
    }
    wait_until(Duration::from_secs(30), "5 items done", || {
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE status = 'done'") == 5
    });

    // A long item in flight, then SIGTERM: while the worker drains,
    // /healthz answers 503 and the probe exits 1.
    app.run(
        &env,
        &["enqueue", "drover.sleep", "--payload", r#"{"ms":600000}"#],
    )
    .ok();
    wait_until(Duration::from_secs(30), "the sleep is claimed", || {
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE status = 'claimed'") == 1
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let r = app.run(&env, &["healthcheck"]);
    assert_eq!(r.code, 1, "draining is unhealthy: {r:?}");
    assert!(r.stderr.contains("503"), "{r:?}");
    assert!(
        w.0.try_wait().unwrap().is_none(),
        "the 503 came from the draining worker, not from a closed port"
    );
    let start = Instant::now();
    let exit = loop {
        if let Some(s) = w.0.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{}", w.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exit.code(), Some(0), "{}", w.log());
    let r = app.run(&env, &["healthcheck", "--timeout", "2s"]);
    assert_eq!(r.code, 1, "stopped is unhealthy: {r:?}");
    // The released item waits for the next worker; nothing was written
    // beside the binary.
    assert_eq!(
        db.scalar_i64("SELECT count(*) FROM drover.items WHERE status = 'pending'"),
        1
    );
    assert_eq!(app.listing(), before, "the read-only /app is unchanged");
    assert!(Path::new(&app.dir().join("drover")).exists());
}
