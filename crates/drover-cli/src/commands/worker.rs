//! `drover worker`: drain lanes until SIGTERM or SIGINT, then shut down
//! drain-first and exit 0.
//!
//! The flags are built from the settings table
//! ([`drover::worker::SETTINGS`]): each row with a flag is one `--field`
//! flag falling back to the row's variable (clap reads it, so `--help`
//! shows it), with the row's meaning and default as its help. Settings come
//! in two steps: [`WorkerSettings::from_env`] (every `DROVER_*` variable
//! over the documented defaults), then each flag, row by row, with the
//! flag's own checks; a variable read from the environment only is applied
//! again after the flags, so an explicit one wins over what a `--lease`
//! brings along.
//!
//! The pool is sized before the connection: the store opens `--pool-size`
//! connections, and a capacity that pool cannot serve is refused before
//! anything connects (exit 1, naming the pool size that would fit).

use std::time::Duration;

use drover::store::ConnectOptions;
use drover::worker::{FlagCheck, SETTINGS, SettingDef, SettingKind, SettingValue, WorkerSettings};

use crate::{CliError, Context, parse};

/// The largest `--capacity` accepted (the settings table's bound).
pub use drover::worker::CAPACITY_MAX;

/// Declares [`WorkerArgs`]: one field per flagged row of
/// [`SETTINGS`] (a unit test holds the two together), and clap's
/// argument set built from the rows.
macro_rules! worker_args {
    ($($field:ident),* $(,)?) => {
        /// Arguments of `drover worker`. Every flag falls back to its
        /// `DROVER_*` variable, then to the [`WorkerSettings`] default
        /// shown; each holds the text given, parsed by
        /// [`WorkerArgs::settings`].
        #[derive(Debug, Clone, Default)]
        pub struct WorkerArgs {
            $(
                #[doc = concat!("The `", stringify!($field), "` row's flag or variable, as given.")]
                pub $field: Option<String>,
            )*
        }

        impl WorkerArgs {
            /// The fields, each a flagged row of [`SETTINGS`].
            #[cfg(test)]
            const FIELDS: &[&str] = &[$(stringify!($field)),*];

            /// The text given for a row's flag (or its variable).
            fn given(&self, field: &str) -> Option<&str> {
                match field {
                    $(stringify!($field) => self.$field.as_deref(),)*
                    _ => None,
                }
            }
        }

        impl clap::FromArgMatches for WorkerArgs {
            fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
                let mut args = WorkerArgs::default();
                args.update_from_arg_matches(m)?;
                Ok(args)
            }

            fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
                $(
                    if let Some(v) = m.try_get_one::<String>(stringify!($field)).ok().flatten() {
                        self.$field = Some(v.clone());
                    }
                )*
                Ok(())
            }
        }
    };
}

worker_args!(
    lanes,
    drained_elsewhere,
    capacity,
    lease,
    renew_interval,
    heartbeat_interval,
    poll_interval,
    sweep_interval,
    item_retention,
    vacuum,
    vacuum_threshold,
    shutdown_grace,
    pool_size,
    db_timeout,
    heartbeat_cron,
    heartbeat_lane,
    metrics_addr,
);

impl clap::Args for WorkerArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        SETTINGS
            .iter()
            .fold(cmd, |cmd, row| match (row.flag, row.long()) {
                (Some(flag), Some(long)) => cmd.arg(
                    clap::Arg::new(row.field)
                        .long(long)
                        .env(row.env)
                        .value_name(flag.value_name)
                        .value_parser(clap::value_parser!(String))
                        .action(clap::ArgAction::Set)
                        .help(help(row)),
                ),
                _ => cmd,
            })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// The variable naming the listener's address.
const METRICS_ADDR_ENV: &str = "DROVER_METRICS_ADDR";

/// Where `drover worker` listens when neither `--metrics-addr` nor
/// `DROVER_METRICS_ADDR` says: [`METRICS_ADDR_DEFAULT`](drover::worker::METRICS_ADDR_DEFAULT)
/// when the listener is compiled in (feature `listener`, on by default),
/// none otherwise (a lean build serves no HTTP).
pub fn default_metrics_addr() -> Option<std::net::SocketAddr> {
    if cfg!(feature = "listener") {
        drover::worker::METRICS_ADDR_DEFAULT.parse().ok()
    } else {
        None
    }
}

/// A flag's help: the row's meaning, capitalised, with its default unless
/// the meaning states one.
fn help(row: &SettingDef) -> String {
    let mut chars = row.doc.chars();
    let mut text: String = chars
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    text.push_str(chars.as_str());
    if !row.doc.contains("(default:") {
        text.push_str(&format!(" [default: {}]", row.default_text()));
    }
    text
}

impl WorkerArgs {
    /// The settings: `DROVER_*` variables over the defaults, then the flags
    /// in table order. A lease given without a renewal interval brings the
    /// interval (a third) and the renewal timeout (a fifteenth, unless
    /// `DROVER_RENEW_TIMEOUT` is set) along.
    ///
    /// # Errors
    /// [`CliError`] with exit code 2 naming the flag or variable that does
    /// not parse.
    pub fn settings(&self) -> Result<WorkerSettings, CliError> {
        let mut s = WorkerSettings::from_env()?;
        // The library serves no listener unless asked; the command serves
        // its default unless told otherwise (a flag or the variable, below
        // and in `from_env`).
        if std::env::var_os(METRICS_ADDR_ENV).is_none() {
            s.metrics_addr = default_metrics_addr();
        }
        for row in SETTINGS {
            match row.flag {
                Some(flag) => {
                    if let Some(v) = self.given(row.field) {
                        (row.set)(&mut s, parse_flag(row, flag.check, v)?);
                    }
                }
                // Read from the environment only: applied again, so a set
                // variable wins over what a flag brought along.
                None => {
                    if let Some(v) = row.env_text().filter(|_| !row.store_reads) {
                        (row.set)(&mut s, row.parse_env(&v)?);
                    }
                }
            }
        }
        Ok(s)
    }
}

/// A flag's text, parsed by its row's kind with the flag's check; a
/// refusal names the field.
fn parse_flag(row: &SettingDef, check: FlagCheck, v: &str) -> Result<SettingValue, CliError> {
    let field = row.field;
    Ok(match row.kind {
        SettingKind::Lanes => SettingValue::Lanes(drover::worker::parse_lanes(v)),
        SettingKind::Usize => SettingValue::Usize(int(field, v, check)?),
        SettingKind::U32 => SettingValue::U32(int(field, v, check)?),
        SettingKind::U64 => SettingValue::U64(int(field, v, check)?),
        SettingKind::Prefetch => SettingValue::Prefetch(Some(int(field, v, check)?)),
        SettingKind::Duration if check == FlagCheck::NonZero => {
            SettingValue::Duration(duration(field, v)?)
        }
        SettingKind::Duration => SettingValue::Duration(parse::duration(field, v)?),
        SettingKind::Switch => SettingValue::Switch(drover::worker::parse_on_off(field, v)?),
        SettingKind::Cron => SettingValue::Cron(drover::worker::parse_heartbeat_cron(v)),
        SettingKind::Lane => SettingValue::Lane(v.trim().to_owned()),
        SettingKind::Addr => {
            let v = v.trim();
            SettingValue::Addr(if v.is_empty() || v.eq_ignore_ascii_case("off") {
                None
            } else {
                Some(v.parse().map_err(|_| {
                    CliError::invalid(
                        field,
                        format!("{v:?} is not host:port (e.g. 127.0.0.1:9464) or off"),
                    )
                })?)
            })
        }
    })
}

/// A count within the flag's range (the whole type without one).
fn int<T>(field: &'static str, text: &str, check: FlagCheck) -> Result<T, CliError>
where
    T: TryFrom<u64> + std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let (min, max) = match check {
        FlagCheck::Range { min, max } => (min, max),
        FlagCheck::None | FlagCheck::NonZero => (0, u64::MAX),
    };
    match (T::try_from(min), T::try_from(max)) {
        (Ok(min), Ok(max)) => parse::int(field, text, min, max),
        _ => Err(CliError::invalid(
            field,
            "has a range its type cannot hold in the settings table",
        )),
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
        // The library's defaults, with the command's listener on.
        assert_eq!(
            s,
            WorkerSettings {
                metrics_addr: default_metrics_addr(),
                ..WorkerSettings::default()
            }
        );
        assert_eq!(
            s.metrics_addr.map(|a| a.to_string()).as_deref(),
            Some(drover::worker::METRICS_ADDR_DEFAULT)
        );
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

    /// Every flagged row of the settings table is exactly one field of
    /// `WorkerArgs` and one flag of `drover worker` with the row's
    /// variable, and nothing else is.
    #[test]
    fn flags_are_the_flagged_rows_of_the_settings_table() {
        use clap::CommandFactory;
        let rows: Vec<&SettingDef> = SETTINGS.iter().filter(|r| r.flag.is_some()).collect();
        let fields: Vec<&str> = rows.iter().map(|r| r.field).collect();
        assert_eq!(fields, WorkerArgs::FIELDS);
        let cli = crate::Cli::command();
        let worker = cli.find_subcommand("worker").expect("drover worker");
        let flags: Vec<(String, String)> = worker
            .get_arguments()
            .filter(|a| {
                a.get_env()
                    .is_some_and(|e| e.to_string_lossy().starts_with("DROVER_"))
            })
            .filter(|a| !a.is_global_set())
            .map(|a| {
                let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
                (
                    a.get_long().unwrap_or_default().to_owned(),
                    env.unwrap_or_default(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = rows
            .iter()
            .map(|r| (r.long().unwrap_or_default().to_owned(), r.env.to_owned()))
            .collect();
        for e in &expected {
            assert!(flags.contains(e), "{e:?} missing from {flags:?}");
        }
        assert_eq!(flags.len(), expected.len(), "{flags:?}");
    }

    #[test]
    fn flags_parse_from_the_command_line() {
        use clap::Parser;
        let cli =
            crate::Cli::try_parse_from(["drover", "worker", "--pool-size", "30", "--lease", "3s"])
                .expect("parses");
        let crate::Command::Worker(args) = cli.command else {
            panic!("not the worker command");
        };
        assert_eq!(args.pool_size.as_deref(), Some("30"));
        assert_eq!(args.lease.as_deref(), Some("3s"));
    }

    /// README's `drover worker` table has one line per flag, naming the
    /// row's variable, so the documented flags follow the table too.
    #[test]
    fn readme_lists_every_flag_with_its_variable() {
        let readme = include_str!("../../../../README.md");
        for row in SETTINGS {
            let Some(long) = row.long() else { continue };
            let line = readme
                .lines()
                .find(|l| l.starts_with(&format!("| `--{long} ")))
                .unwrap_or_default();
            assert!(
                line.contains(&format!("`{}`", row.env)),
                "--{long}: {line:?}"
            );
        }
    }
}
