//! The throwaway PostgreSQL cluster a soak runs on: `initdb` into a
//! temporary directory, started on a free port with **stock settings**
//! (autovacuum on, fsync and synchronous commit on, default
//! `max_connections`), stopped and removed on drop.
//!
//! Why not the server the bench is pointed at: sustained figures depend on
//! vacuum, and a shared server may run with autovacuum off (CI configs do)
//! or carry other sessions' held transactions. Only the socket directory,
//! the port and the listen address are set here.
//!
//! `initdb` refuses to run as root, so as root every PostgreSQL command runs
//! as the `postgres` OS user (`runuser`), in a directory it owns. The same
//! approach as the fault suite's clusters (`drover-faults`), which tune
//! their cluster for speed instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::BenchError;

/// A running throwaway cluster with stock settings.
#[derive(Debug)]
pub struct StockCluster {
    dir: PathBuf,
    port: u16,
    bin: PathBuf,
    as_root: bool,
}

fn fail(context: &str, detail: impl std::fmt::Display) -> BenchError {
    BenchError::io(
        context.to_owned(),
        std::io::Error::other(detail.to_string()),
    )
}

/// The newest PostgreSQL installation's `bin` directory under
/// `/usr/lib/postgresql` (or `DROVER_PG_BIN` when set).
fn pg_bin() -> Result<PathBuf, BenchError> {
    if let Some(dir) = std::env::var_os("DROVER_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| BenchError::io("reading /usr/lib/postgresql", e))?
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

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> Result<u16, BenchError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| BenchError::io("finding a free port", e))
}

impl StockCluster {
    /// Initialises and starts the cluster. Blocking (`initdb` takes a few
    /// seconds): call it from `spawn_blocking`.
    ///
    /// # Errors
    /// What `initdb` or `pg_ctl` said.
    pub fn start() -> Result<StockCluster, BenchError> {
        let bin = pg_bin()?;
        let as_root = is_root();
        let dir =
            std::env::temp_dir().join(format!("drover-soak-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
        if as_root {
            run(Command::new("chown").arg("postgres:postgres").arg(&dir))?;
        }
        let c = StockCluster {
            dir,
            port: free_port()?,
            bin,
            as_root,
        };
        c.pg(
            &c.bin.join("initdb"),
            &[
                "-D",
                &c.data().display().to_string(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
        )?;
        c.ctl("start", &[])?;
        Ok(c)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg(&self, prog: &Path, args: &[&str]) -> Result<(), BenchError> {
        let mut cmd = if self.as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(prog);
            c
        } else {
            Command::new(prog)
        };
        run(cmd.args(args))
    }

    fn ctl(&self, action: &str, extra: &[&str]) -> Result<(), BenchError> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.display()
        );
        let data = self.data().display().to_string();
        let log = self.dir.join("log").display().to_string();
        let mut args = vec!["-D", &data, "-w", "-t", "60", "-l", &log, "-o", &opts];
        args.extend_from_slice(extra);
        args.push(action);
        self.pg(&self.bin.join("pg_ctl"), &args)
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for StockCluster {
    fn drop(&mut self) {
        let _ = self.ctl("stop", &["-m", "immediate"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(cmd: &mut Command) -> Result<(), BenchError> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| BenchError::io(shown.clone(), e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(fail(
            &shown,
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ))
    }
}
