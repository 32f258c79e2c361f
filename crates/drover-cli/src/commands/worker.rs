//! `drover worker`: drain lanes until SIGTERM or SIGINT, then shut down
//! drain-first and exit 0.
//!
//! Settings come in two steps: [`WorkerSettings::from_env`] (every
//! `DROVER_*` variable over the documented defaults), then each flag given
//! on the command line. Clap also reads each flag's variable, so `--help`
//! shows them; both read the same variable, so the result is the same.
//!
//! The pool is sized before the connection: the store opens `--pool-size`
//! connections, and a capacity that pool cannot serve is refused before
//! anything connects (exit 1, naming the pool size that would fit).

use std::time::Duration;

use drover::store::ConnectOptions;
use drover::worker::WorkerSettings;

use crate::{CliError, Context, parse};

/// The largest `--capacity` accepted.
pub const CAPACITY_MAX: usize = 100_000;

/// Arguments of `drover worker`. Every flag falls back to its `DROVER_*`
/// variable, then to the [`WorkerSettings`] default shown.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WorkerArgs {
    /// Lanes drained, comma-separated, in claim order [default: default].
    #[arg(long, env = "DROVER_LANES", value_name = "A,B")]
    pub lanes: Option<String>,
    /// Handlers running at once [default: 20].
    #[arg(long, env = "DROVER_CAPACITY", value_name = "N")]
    pub capacity: Option<String>,
    /// How long a claim holds without renewal [default: 30s].
    #[arg(long, env = "DROVER_LEASE", value_name = "DURATION")]
    pub lease: Option<String>,
    /// How often a running item renews its lease [default: a third of the
    /// lease].
    #[arg(long, env = "DROVER_RENEW_INTERVAL", value_name = "DURATION")]
    pub renew_interval: Option<String>,
    /// How often liveness is beaten and published [default: 5s].
    #[arg(long, env = "DROVER_HEARTBEAT_INTERVAL", value_name = "DURATION")]
    pub heartbeat_interval: Option<String>,
    /// The claim poll when no wake-up arrives [default: 1s].
    #[arg(long, env = "DROVER_POLL_INTERVAL", value_name = "DURATION")]
    pub poll_interval: Option<String>,
    /// How often the sweep runs, jittered ±20 % [default: 15s].
    #[arg(long, env = "DROVER_SWEEP_INTERVAL", value_name = "DURATION")]
    pub sweep_interval: Option<String>,
    /// How long done, failed and cancelled items are kept [default: 7days].
    #[arg(long, env = "DROVER_ITEM_RETENTION", value_name = "DURATION")]
    pub item_retention: Option<String>,
    /// PostgreSQL: vacuum drover's tables once their dead tuples pass the
    /// threshold, `on` or `off` [default: on].
    #[arg(long, env = "DROVER_VACUUM", value_name = "on|off")]
    pub vacuum: Option<String>,
    /// PostgreSQL: the dead tuples at which the paced vacuum vacuums a
    /// table [default: 5000].
    #[arg(long, env = "DROVER_VACUUM_THRESHOLD", value_name = "N")]
    pub vacuum_threshold: Option<String>,
    /// How long in-flight items may finish on shutdown [default: 30s].
    #[arg(long, env = "DROVER_SHUTDOWN_GRACE", value_name = "DURATION")]
    pub shutdown_grace: Option<String>,
    /// Database connections the process opens [default: 10].
    #[arg(long, env = "DROVER_POOL_SIZE", value_name = "N")]
    pub pool_size: Option<String>,
    /// The longest a database call waits for a connection before it fails
    /// fast, e.g. while the server restarts [default: 5s].
    #[arg(long, env = "DROVER_DB_TIMEOUT", value_name = "DURATION")]
    pub db_timeout: Option<String>,

    /// When the built-in drover.heartbeat job fires: a cron expression
    /// (seconds optional), or `off` [default: * * * * *, every minute].
    #[arg(long, env = "DROVER_HEARTBEAT_CRON", value_name = "CRON|off")]
    pub heartbeat_cron: Option<String>,
    /// The lane the drover.heartbeat job's items go to, the same on every
    /// worker whatever lanes it drains (some worker must drain it)
    /// [default: default].
    #[arg(long, env = "DROVER_HEARTBEAT_LANE", value_name = "LANE")]
    pub heartbeat_lane: Option<String>,
    /// Where /healthz and /metrics listen, or `off` [default:
    /// 127.0.0.1:9464].
    #[arg(long, env = "DROVER_METRICS_ADDR", value_name = "HOST:PORT|off")]
    pub metrics_addr: Option<String>,
}

impl WorkerArgs {
    /// The settings: `DROVER_*` variables over the defaults, then the flags.
    /// A lease given without a renewal interval brings the interval (a
    /// third) and the renewal timeout (a fifteenth, unless
    /// `DROVER_RENEW_TIMEOUT` is set) along.
    ///
    /// # Errors
    /// [`CliError`] with exit code 2 naming the flag or variable that does
    /// not parse.
    pub fn settings(&self) -> Result<WorkerSettings, CliError> {
        let mut s = WorkerSettings::from_env()?;
        if let Some(v) = &self.lanes {
            s.lanes = v.split(',').map(|l| l.trim().to_owned()).collect();
        }
        if let Some(v) = &self.capacity {
            s.capacity = parse::int("capacity", v, 1usize, CAPACITY_MAX)?;
        }
        if let Some(v) = &self.lease {
            s.lease = duration("lease", v)?;
            if self.renew_interval.is_none() {
                s.renew_interval = s.lease / 3;
            }
            if std::env::var_os("DROVER_RENEW_TIMEOUT").is_none() {
                s.renew_timeout = s.lease / 15;
            }
        }
        if let Some(v) = &self.renew_interval {
            s.renew_interval = duration("renew_interval", v)?;
        }
        if let Some(v) = &self.heartbeat_interval {
            s.heartbeat_interval = duration("heartbeat_interval", v)?;
        }
        if let Some(v) = &self.poll_interval {
            s.poll_interval = duration("poll_interval", v)?;
        }
        if let Some(v) = &self.sweep_interval {
            s.sweep_interval = duration("sweep_interval", v)?;
        }
        if let Some(v) = &self.item_retention {
            s.item_retention = duration("item_retention", v)?;
        }
        if let Some(v) = &self.vacuum {
            s.vacuum = drover::worker::parse_on_off("vacuum", v)?;
        }
        if let Some(v) = &self.vacuum_threshold {
            s.vacuum_threshold = parse::int("vacuum_threshold", v, 1u64, u64::MAX)?;
        }
        if let Some(v) = &self.shutdown_grace {
            s.shutdown_grace = parse::duration("shutdown_grace", v)?;
        }
        if let Some(v) = &self.pool_size {
            s.pool_size = parse::int("pool_size", v, 1u32, u32::MAX)?;
        }
        if let Some(v) = &self.db_timeout {
            s.db_timeout = duration("db_timeout", v)?;
        }
        if let Some(v) = &self.heartbeat_cron {
            s.heartbeat_cron = drover::worker::parse_heartbeat_cron(v);
        }
        if let Some(v) = &self.heartbeat_lane {
            v.trim().clone_into(&mut s.heartbeat_lane);
        }
        if let Some(v) = &self.metrics_addr {
            let v = v.trim();
            s.metrics_addr = if v.is_empty() || v.eq_ignore_ascii_case("off") {
                None
            } else {
                Some(v.parse().map_err(|_| {
                    CliError::invalid(
                        "metrics_addr",
                        format!("{v:?} is not host:port (e.g. 127.0.0.1:9464) or off"),
                    )
                })?)
            };
        }
        Ok(s)
    }
}

/// A duration that must be longer than zero.
fn duration(field: &'static str, text: &str) -> Result<Duration, CliError> {
    let d = parse::duration(field, text)?;
    if d.is_zero() {
        return Err(CliError::invalid(field, "must be longer than zero"));
    }
    Ok(d)
}

/// Runs the worker until SIGTERM or SIGINT, then drains and returns.
///
/// # Errors
/// Invalid flags (exit 2); settings that contradict each other or a
/// capacity the pool cannot serve, a metrics address that cannot be bound,
/// a database that cannot be reached (exit 1).
///
/// # Cancel safety
/// Not cancel safe: dropping it abandons in-flight items to the sweep
/// (after their lease). Send SIGTERM instead.
pub async fn run(args: &WorkerArgs, cx: &mut Context<'_>) -> Result<(), CliError> {
    let settings = args.settings()?;
    // The pool is opened at --pool-size: refuse a capacity it cannot serve
    // before connecting. The builder checks again against the pool the
    // store actually opened.
    settings.validate(Some(settings.pool_size))?;
    // Listen before starting, so a signal during start-up is not lost.
    let mut signals = Signals::install()?;
    let queue = cx
        .queue_with(&ConnectOptions {
            pool_size: settings.pool_size,
            db_timeout: settings.db_timeout,
            ..ConnectOptions::default()
        })
        .await?;
    let worker = cx.worker_builder(queue).settings(settings).build()?;
    let kinds = worker.registry().kinds();
    let running = worker.start().await?;
    match running.metrics_addr() {
        Some(addr) => tracing::info!(
            %addr,
            "serving http://{addr}/healthz and http://{addr}/metrics"
        ),
        None => tracing::info!("metrics listener off"),
    }
    tracing::info!(
        worker = running.id(),
        ?kinds,
        "running; SIGTERM or SIGINT drains and stops"
    );
    let signal = signals.recv().await;
    tracing::info!(signal, "shutting down: draining in-flight items");
    let report = running.shutdown().await;
    tracing::info!(
        in_flight = report.in_flight,
        cancelled = report.cancelled,
        "stopped"
    );
    Ok(())
}

/// SIGTERM and SIGINT (Ctrl-C elsewhere than Unix).
pub(crate) struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    #[cfg(unix)]
    pub(crate) fn install() -> Result<Self, CliError> {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate())
            .map_err(|e| CliError::io("listening for SIGTERM", e))?;
        let int =
            signal(SignalKind::interrupt()).map_err(|e| CliError::io("listening for SIGINT", e))?;
        Ok(Signals { term, int })
    }

    #[cfg(not(unix))]
    pub(crate) fn install() -> Result<Self, CliError> {
        Ok(Signals {})
    }

    /// Waits for the first signal and names it.
    #[cfg(unix)]
    pub(crate) async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }

    #[cfg(not(unix))]
    pub(crate) async fn recv(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;

    fn clear_env() -> bool {
        std::env::vars().all(|(k, _)| !k.starts_with("DROVER_"))
    }

    #[test]
    fn no_flags_give_the_documented_defaults() {
        if !clear_env() {
            return; // the environment sets DROVER_*: nothing to compare
        }
        let s = WorkerArgs::default().settings().expect("defaults parse");
        assert_eq!(s, WorkerSettings::default());
    }

    #[test]
    fn lease_brings_renewal_along_unless_given() {
        if !clear_env() {
            return;
        }
        let s = WorkerArgs {
            lease: Some("3s".into()),
            ..Default::default()
        }
        .settings()
        .expect("parses");
        assert_eq!(s.renew_interval, Duration::from_secs(1));
        assert_eq!(s.renew_timeout, Duration::from_millis(200));
        s.validate(None).expect("consistent");

        let s = WorkerArgs {
            lease: Some("30s".into()),
            renew_interval: Some("5s".into()),
            ..Default::default()
        }
        .settings()
        .expect("parses");
        assert_eq!(s.renew_interval, Duration::from_secs(5));
    }

    #[test]
    fn metrics_off_and_bad_values_name_the_flag() {
        let s = WorkerArgs {
            metrics_addr: Some("off".into()),
            ..Default::default()
        }
        .settings()
        .expect("parses");
        assert_eq!(s.metrics_addr, None);
        for (args, field) in [
            (
                WorkerArgs {
                    capacity: Some("0".into()),
                    ..Default::default()
                },
                "capacity",
            ),
            (
                WorkerArgs {
                    lease: Some("soon".into()),
                    ..Default::default()
                },
                "lease",
            ),
            (
                WorkerArgs {
                    metrics_addr: Some("localhost".into()),
                    ..Default::default()
                },
                "metrics_addr",
            ),
        ] {
            let e = args.settings().expect_err("refused");
            assert_eq!(e.exit_code(), crate::EXIT_INVALID);
            assert!(e.to_string().contains(field), "{e}");
        }
    }
}
