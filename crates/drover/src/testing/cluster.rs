//! A throwaway PostgreSQL cluster (feature `pg-cluster`): `initdb` into a
//! temporary directory, started on a free port, stopped and removed on
//! drop. What the fault suite (which restarts and stops its server) and the
//! soak benchmark (which needs stock settings: autovacuum on, durable
//! commits) run on instead of a shared server.
//!
//! Invariants: a cluster listens on 127.0.0.1 and a socket in its own
//! directory only, on a port free when it started; it never outlives its
//! [`Cluster`] (dropped, it is stopped `-m immediate` and its directory
//! removed); only the settings its [`Tuning`] names are changed from
//! PostgreSQL's defaults.
//!
//! `initdb` refuses to run as root, so as root every PostgreSQL command runs
//! as the `postgres` OS user (`runuser`), in a directory it owns.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a cluster could not be started or driven: the step, and what the
/// tool or the system said.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {detail}")]
pub struct ClusterError {
    /// What was being done (the command line, for a PostgreSQL tool).
    pub step: String,
    /// What went wrong.
    pub detail: String,
}

fn fail(step: impl Into<String>, detail: impl std::fmt::Display) -> ClusterError {
    ClusterError {
        step: step.into(),
        detail: detail.to_string(),
    }
}

/// The settings a cluster runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tuning {
    /// PostgreSQL's defaults (autovacuum on, `fsync` and
    /// `synchronous_commit` on): for sustained and soak figures. Only the
    /// log says more: checkpoints, lock waits and statements over a
    /// second, so a stall in the figures can be read against the server.
    Stock,
    /// `max_connections` 300, `fsync`, `full_page_writes` and
    /// `synchronous_commit` off: a test of drover, not of the disk. Not for
    /// restarts: an immediate restart loses acknowledged commits.
    Fast,
    /// As [`Tuning::Fast`] with `synchronous_commit` on, for scenarios that
    /// restart or stop the server: no commit acknowledged before the
    /// restart is lost (`fsync` stays off: only the server dies, the
    /// operating system keeps what was written).
    FastDurable,
}

impl Tuning {
    /// The `-c` options passed to the server, beyond port, socket and
    /// listen address.
    fn options(self) -> &'static str {
        match self {
            Tuning::Stock => {
                " -c log_checkpoints=on -c log_lock_waits=on \
                 -c log_min_duration_statement=1000"
            }
            Tuning::Fast => {
                " -c max_connections=300 -c fsync=off -c synchronous_commit=off \
                 -c full_page_writes=off"
            }
            Tuning::FastDurable => {
                " -c max_connections=300 -c fsync=off -c synchronous_commit=on \
                 -c full_page_writes=off"
            }
        }
    }
}

/// A running throwaway cluster.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    port: u16,
    bin: PathBuf,
    as_root: bool,
    tuning: Tuning,
}

/// The newest PostgreSQL installation's `bin` directory under
/// `/usr/lib/postgresql`, or `DROVER_PG_BIN` when set.
fn pg_bin() -> Result<PathBuf, ClusterError> {
    if let Some(dir) = std::env::var_os("DROVER_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| fail("reading /usr/lib/postgresql", e))?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").is_file())
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        fail(
            "finding initdb",
            "no PostgreSQL under /usr/lib/postgresql (set DROVER_PG_BIN)",
        )
    })
}

/// Whether this process runs as root (the effective uid, from
/// `/proc/self/status`, without a libc dependency).
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn free_port() -> Result<u16, ClusterError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| fail("finding a free port", e))
}

impl Cluster {
    /// Initialises and starts a cluster tuned for tests
    /// ([`Tuning::Fast`]). Blocking (`initdb` takes a few seconds): from
    /// async code, call it in `spawn_blocking`.
    ///
    /// # Errors
    /// What `initdb` or `pg_ctl` said.
    pub fn start() -> Result<Cluster, ClusterError> {
        Self::start_tuned(Tuning::Fast)
    }

    /// A cluster for scenarios that restart the server
    /// ([`Tuning::FastDurable`]).
    ///
    /// # Errors
    /// What `initdb` or `pg_ctl` said.
    pub fn start_durable() -> Result<Cluster, ClusterError> {
        Self::start_tuned(Tuning::FastDurable)
    }

    /// A cluster with PostgreSQL's stock settings ([`Tuning::Stock`]).
    ///
    /// # Errors
    /// What `initdb` or `pg_ctl` said.
    pub fn start_stock() -> Result<Cluster, ClusterError> {
        Self::start_tuned(Tuning::Stock)
    }

    /// Initialises and starts a cluster with `tuning`.
    ///
    /// # Errors
    /// What `initdb` or `pg_ctl` said.
    pub fn start_tuned(tuning: Tuning) -> Result<Cluster, ClusterError> {
        let bin = pg_bin()?;
        let as_root = is_root();
        let dir = std::env::temp_dir().join(format!("drover-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| fail(format!("creating {}", dir.display()), e))?;
        if as_root {
            run(Command::new("chown").arg("postgres:postgres").arg(&dir))?;
        }
        let c = Cluster {
            dir,
            port: free_port()?,
            bin,
            as_root,
            tuning,
        };
        let data = c.data().display().to_string();
        let mut initdb = vec!["-D", &data, "-U", "postgres", "--auth=trust", "-E", "UTF8"];
        if tuning != Tuning::Stock {
            initdb.push("--no-sync");
        }
        c.pg(&c.bin.join("initdb"), &initdb)?;
        c.ctl("start", &[])?;
        Ok(c)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg(&self, prog: &Path, args: &[&str]) -> Result<(), ClusterError> {
        let mut cmd = if self.as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(prog);
            c
        } else {
            Command::new(prog)
        };
        run(cmd.args(args))
    }

    fn ctl(&self, action: &str, extra: &[&str]) -> Result<(), ClusterError> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1{}",
            self.port,
            self.dir.display(),
            self.tuning.options()
        );
        let data = self.data().display().to_string();
        let log = self.log_path().display().to_string();
        let mut args = vec!["-D", &data, "-w", "-t", "60", "-l", &log, "-o", &opts];
        args.extend_from_slice(extra);
        args.push(action);
        self.pg(&self.bin.join("pg_ctl"), &args)
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's log file (`pg_ctl -l`): gone with the cluster, so copy
    /// it out before the cluster drops.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("log")
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `pg_ctl restart -m immediate`: every connection dies at once, no
    /// checkpoint; returns when the server accepts connections again.
    ///
    /// # Errors
    /// What `pg_ctl` said; refused on a [`Tuning::Fast`] cluster (see
    /// [`Cluster::keeps_acknowledged_commits`]).
    pub fn restart_immediate(&self) -> Result<(), ClusterError> {
        self.keeps_acknowledged_commits("pg_ctl restart -m immediate")?;
        self.ctl("restart", &["-m", "immediate"])
    }

    /// `pg_ctl stop -m immediate`: the server is down until
    /// [`Cluster::start_again`] (an outage of the caller's chosen length).
    ///
    /// # Errors
    /// What `pg_ctl` said; refused on a [`Tuning::Fast`] cluster (see
    /// [`Cluster::keeps_acknowledged_commits`]).
    pub fn stop_immediate(&self) -> Result<(), ClusterError> {
        self.keeps_acknowledged_commits("pg_ctl stop -m immediate")?;
        self.ctl("stop", &["-m", "immediate"])
    }

    /// Refuses an immediate stop of a cluster that runs with
    /// `synchronous_commit` off: the commits it acknowledged in the last
    /// few hundred milliseconds would be gone after it, and a scenario's
    /// checker would charge drover with what the test's server lost (a
    /// handler's effect write acknowledged, lost, and its item completed
    /// by a retried completion read as an effect missing from a done
    /// item). Such scenarios start their cluster with
    /// [`Cluster::start_durable`].
    ///
    /// # Errors
    /// On a [`Tuning::Fast`] cluster.
    pub fn keeps_acknowledged_commits(&self, step: &str) -> Result<(), ClusterError> {
        if self.tuning == Tuning::Fast {
            return Err(fail(
                step,
                "this cluster runs with synchronous_commit off and would lose acknowledged \
                 commits: start it with Cluster::start_durable",
            ));
        }
        Ok(())
    }

    /// Starts the server stopped by [`Cluster::stop_immediate`]; returns
    /// when it accepts connections.
    ///
    /// # Errors
    /// What `pg_ctl` said.
    pub fn start_again(&self) -> Result<(), ClusterError> {
        self.ctl("start", &[])
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.ctl("stop", &["-m", "immediate"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `cmd`; its stdout and stderr are the error when it fails.
pub(crate) fn run(cmd: &mut Command) -> Result<(), ClusterError> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| fail(shown.clone(), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(fail(
            shown,
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ))
    }
}
