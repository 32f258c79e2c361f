//! Worker processes a test drives: spawn, SIGKILL, SIGSTOP/SIGCONT, SIGTERM.
//! Signals go through `kill(1)` (the workspace forbids `unsafe`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One worker process; killed (SIGKILL) on drop if still running.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// Spawns `bin worker <args>` with its stderr in `log`.
    ///
    /// # Panics
    /// When the process cannot be spawned.
    pub fn spawn(bin: &Path, args: &[String], log: &Path) -> Proc {
        Proc::spawn_env(bin, args, log, &[])
    }

    /// As [`Proc::spawn`], with `env` added to its environment (a skewed
    /// clock through libfaketime, say).
    ///
    /// # Panics
    /// When the process cannot be spawned.
    #[allow(clippy::expect_used)]
    pub fn spawn_env(bin: &Path, args: &[String], log: &Path, env: &[(&str, &str)]) -> Proc {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open the worker log");
        let child = Command::new(bin)
            .arg("worker")
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("FAULT_RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn the fault worker");
        Proc {
            child,
            log: log.to_owned(),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// What the process logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status();
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGSTOP.
    pub fn stop(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT.
    pub fn cont(&self) {
        self.signal("-CONT");
    }

    /// SIGTERM.
    pub fn term(&self) {
        self.signal("-TERM");
    }

    /// Has it exited (reaping it if so)?
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits for the exit, at most `limit`.
    pub fn wait_for(&mut self, limit: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.cont();
            self.kill9();
        }
    }
}
