//! The workers a bench drains with: `workers` in-process workers, or
//! `processes` child processes (PostgreSQL), sharing the total capacity.
//!
//! A child is this program re-executed in [`crate::child`] mode: it writes
//! one line per execution on its stdout (read here into the run's
//! [`Recorder`]) and shuts down drain-first when its stdin closes.

use std::process::Stdio;
use std::sync::Arc;

use drover::Worker;
use drover::worker::{RunningWorker, WorkerSettings};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::task::JoinHandle;

use crate::recorder::{BenchHandler, Recorder, parse_line};
use crate::target::Target;
use crate::{BenchConfig, BenchError};

/// Memory of the worker side, in KiB (`VmRSS`, `VmHWM` of `/proc/*/status`),
/// summed over child processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Rss {
    /// Resident set now.
    pub rss_kb: u64,
    /// Peak resident set.
    pub hwm_kb: u64,
}

/// Reads `VmRSS` and `VmHWM` of a process (`"self"` or a pid).
pub fn rss_of(pid: &str) -> Rss {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Rss {
        rss_kb: field("VmRSS:"),
        hwm_kb: field("VmHWM:"),
    }
}

/// Settings of a bench worker of `capacity`: no metrics listener, a pool
/// sized for the capacity, everything else from `DROVER_*` (so a study can
/// vary the prefetch or the claimers) or the defaults.
pub(crate) fn settings(capacity: usize) -> WorkerSettings {
    let base = WorkerSettings::from_env().unwrap_or_default();
    WorkerSettings {
        capacity,
        metrics_addr: None,
        // A benchmark counts its own items only.
        heartbeat_cron: None,
        pool_size: WorkerSettings::pool_needed(capacity, base.claimers),
        ..base
    }
}

/// [`settings`] with the run's overrides (retention, sweep interval,
/// vacuum, spread fallback).
fn settings_for(config: &BenchConfig, capacity: usize) -> WorkerSettings {
    let mut s = settings(capacity);
    if let Some(r) = config.item_retention {
        s.item_retention = r;
    }
    if let Some(i) = config.sweep_interval {
        s.sweep_interval = i;
    }
    if let Some(v) = config.vacuum {
        s.vacuum = v;
    }
    if let Some(f) = config.spread_fallback {
        s.spread_fallback = f;
    }
    s
}

/// Builds and starts one in-process worker of `capacity` over `target`.
pub(crate) async fn start_one(
    config: &BenchConfig,
    target: &Target,
    capacity: usize,
    recorder: &Arc<Recorder>,
) -> Result<RunningWorker, BenchError> {
    let s = settings_for(config, capacity);
    let queue = target.queue(s.pool_size).await?;
    Ok(Worker::builder(queue)
        .settings(s)
        .handler(BenchHandler::new(recorder.clone()).with_sleep(config.handler))
        .build()?
        .start()
        .await?)
}

struct ChildProc {
    child: Child,
    stdin: Option<ChildStdin>,
    reader: JoinHandle<()>,
}

/// The running workers of a bench.
pub(crate) struct Fleet {
    inproc: Vec<RunningWorker>,
    children: Vec<ChildProc>,
}

impl Fleet {
    /// Starts the configured workers.
    pub async fn start(
        config: &BenchConfig,
        target: &Target,
        recorder: &Arc<Recorder>,
    ) -> Result<Fleet, BenchError> {
        let mut fleet = Fleet {
            inproc: Vec::new(),
            children: Vec::new(),
        };
        if config.processes > 0 {
            for i in 0..config.processes {
                let cap = config.share(i, config.processes);
                match spawn_child(config, target, cap, recorder) {
                    Ok(c) => fleet.children.push(c),
                    Err(e) => {
                        fleet.stop().await;
                        return Err(e);
                    }
                }
            }
        } else {
            for i in 0..config.workers {
                let cap = config.share(i, config.workers);
                match start_one(config, target, cap, recorder).await {
                    Ok(w) => fleet.inproc.push(w),
                    Err(e) => {
                        fleet.stop().await;
                        return Err(e);
                    }
                }
            }
        }
        Ok(fleet)
    }

    /// Memory of the workers: this process for in-process workers, the sum
    /// of the children otherwise.
    pub fn rss(&self) -> Rss {
        if self.children.is_empty() {
            return rss_of("self");
        }
        self.children
            .iter()
            .filter_map(|c| c.child.id())
            .map(|pid| rss_of(&pid.to_string()))
            .fold(Rss::default(), |a, b| Rss {
                rss_kb: a.rss_kb + b.rss_kb,
                hwm_kb: a.hwm_kb + b.hwm_kb,
            })
    }

    /// Stops every worker drain-first (children: closes their stdin and
    /// waits for them and their last reports).
    pub async fn stop(self) {
        for w in self.inproc {
            w.shutdown().await;
        }
        let mut children = self.children;
        for c in &mut children {
            drop(c.stdin.take());
        }
        for mut c in children {
            let _ = c.child.wait().await;
            let _ = c.reader.await;
        }
    }
}

fn spawn_child(
    config: &BenchConfig,
    target: &Target,
    capacity: usize,
    recorder: &Arc<Recorder>,
) -> Result<ChildProc, BenchError> {
    let cmd = config
        .child
        .as_ref()
        .ok_or_else(|| drover::Error::invalid("processes", "needs a program to re-execute"))?;
    let schema = target.schema.clone().unwrap_or_default();
    let mut command = tokio::process::Command::new(&cmd.program);
    // The child reads its settings from `DROVER_*`, as every worker does.
    if let Some(r) = config.item_retention {
        command.env("DROVER_ITEM_RETENTION", format!("{}ms", r.as_millis()));
    }
    if let Some(i) = config.sweep_interval {
        command.env("DROVER_SWEEP_INTERVAL", format!("{}ms", i.as_millis()));
    }
    if let Some(v) = config.vacuum {
        command.env("DROVER_VACUUM", if v { "on" } else { "off" });
    }
    if let Some(f) = config.spread_fallback {
        command.env("DROVER_SPREAD_FALLBACK", format!("{}ms", f.as_millis()));
    }
    let handler_ms = config.handler.as_millis().to_string();
    let mut child = command
        .args(&cmd.args)
        .args([
            "--child-schema",
            &schema,
            "--capacity",
            &capacity.to_string(),
            "--handler-ms",
            &handler_ms,
        ])
        .env("DROVER_DATABASE_URL", target.url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| BenchError::io(format!("starting {}", cmd.program.display()), e))?;
    let stdin = child.stdin.take();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| BenchError::io("child stdout", std::io::Error::other("not piped")))?;
    let rec = recorder.clone();
    let reader = tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(exec) = parse_line(&line) {
                rec.record(exec);
            }
        }
    });
    Ok(ChildProc {
        child,
        stdin,
        reader,
    })
}
