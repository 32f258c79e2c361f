//! A throwaway PostgreSQL cluster a test owns: started on a free port in a
//! temporary directory, restartable (`pg_ctl restart -m immediate`), stopped
//! and removed on drop. Never touch the shared server for a restart.
//!
//! `initdb` refuses to run as root, so as root every PostgreSQL command runs
//! as the `postgres` OS user (`runuser`), in a directory it owns.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running throwaway cluster.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    port: u16,
    bin: PathBuf,
    as_root: bool,
    synchronous_commit: bool,
}

fn pg_bin() -> Result<PathBuf, String> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("/usr/lib/postgresql: {e}"))?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").is_file())
        .collect();
    found.sort();
    found
        .pop()
        .ok_or_else(|| "no initdb under /usr/lib/postgresql".into())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

impl Cluster {
    /// Initialises and starts a cluster (trust auth, `max_connections` 300,
    /// fsync and `synchronous_commit` off: the suite tests drover, not the
    /// disk). Not for restarts: see [`Cluster::start_durable`].
    ///
    /// # Errors
    /// What `initdb` or `pg_ctl` said.
    pub fn start() -> Result<Cluster, String> {
        Self::start_with(false)
    }

    /// As [`Cluster::start`] but with `synchronous_commit` on, for scenarios
    /// that restart the server: with it off, an immediate restart loses
    /// commits already acknowledged (WAL still in shared memory), and no
    /// queue can keep its promises over a database that forgets
    /// acknowledged writes. `fsync` stays off: only the server process
    /// dies, the operating system keeps what was written.
    ///
    /// # Errors
    /// What `initdb` or `pg_ctl` said.
    pub fn start_durable() -> Result<Cluster, String> {
        Self::start_with(true)
    }

    fn start_with(synchronous_commit: bool) -> Result<Cluster, String> {
        let bin = pg_bin()?;
        let as_root = is_root();
        let dir =
            std::env::temp_dir().join(format!("drover-fault-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if as_root {
            run(Command::new("chown").arg("postgres:postgres").arg(&dir))?;
        }
        let c = Cluster {
            dir,
            port: free_port()?,
            bin,
            as_root,
            synchronous_commit,
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
                "--no-sync",
            ],
        )?;
        c.ctl("start", &[])?;
        Ok(c)
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg(&self, prog: &Path, args: &[&str]) -> Result<(), String> {
        let mut cmd = if self.as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(prog);
            c
        } else {
            Command::new(prog)
        };
        run(cmd.args(args))
    }

    fn ctl(&self, action: &str, extra: &[&str]) -> Result<(), String> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off \
             -c synchronous_commit={} -c full_page_writes=off",
            self.port,
            self.dir.display(),
            if self.synchronous_commit { "on" } else { "off" }
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

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `pg_ctl restart -m immediate`: every connection dies at once, no
    /// checkpoint; returns when the server accepts connections again.
    ///
    /// # Errors
    /// What `pg_ctl` said.
    pub fn restart_immediate(&self) -> Result<(), String> {
        self.ctl("restart", &["-m", "immediate"])
    }

    /// `pg_ctl stop -m immediate`: the server is down until
    /// [`Cluster::start_again`] (an outage of the test's chosen length).
    ///
    /// # Errors
    /// What `pg_ctl` said.
    pub fn stop_immediate(&self) -> Result<(), String> {
        self.ctl("stop", &["-m", "immediate"])
    }

    /// Starts the server stopped by [`Cluster::stop_immediate`]; returns
    /// when it accepts connections.
    ///
    /// # Errors
    /// What `pg_ctl` said.
    pub fn start_again(&self) -> Result<(), String> {
        self.ctl("start", &[])
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.ctl("stop", &["-m", "immediate"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{shown}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
