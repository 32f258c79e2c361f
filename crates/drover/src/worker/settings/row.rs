//! The row type of the worker settings table
//! ([`SETTINGS`](super::SETTINGS)): one setting's field, environment
//! variable, command-line flag, default, parser and meaning.
//!
//! Every reader of worker settings walks that table —
//! [`WorkerSettings::from_env`], `drover worker`'s flags, `.env.example`
//! and `drover env-example` — so a setting is added, renamed or given a new
//! default in one place.
//!
//! Invariant: a row's `get` returns, and its `set` takes, the [`SettingValue`]
//! variant its [`SettingKind`] names (a unit test round-trips every row); `set`
//! ignores any other variant.

use std::net::SocketAddr;
use std::time::Duration;

use super::{WorkerSettings, parse_heartbeat_cron, parse_on_off};
use crate::error::{Error, Result};

/// What a setting holds, so its text is parsed and rendered one way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingKind {
    /// Comma-separated lane names.
    Lanes,
    /// A `usize` count.
    Usize,
    /// A `u32` count.
    U32,
    /// A `u64` count.
    U64,
    /// A humantime duration (`500ms`, `30s`, `1h 30m`).
    Duration,
    /// `on` or `off` ([`parse_on_off`]).
    Switch,
    /// A count, unset meaning adaptive.
    Prefetch,
    /// `host:port`, or `off` (or empty) for none.
    Addr,
    /// A cron expression, or `off` ([`parse_heartbeat_cron`]).
    Cron,
    /// One lane name.
    Lane,
}

/// A parsed setting: the variant its row's [`SettingKind`] names.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingValue {
    /// [`SettingKind::Lanes`].
    Lanes(Vec<String>),
    /// [`SettingKind::Usize`].
    Usize(usize),
    /// [`SettingKind::U32`].
    U32(u32),
    /// [`SettingKind::U64`].
    U64(u64),
    /// [`SettingKind::Duration`].
    Duration(Duration),
    /// [`SettingKind::Switch`].
    Switch(bool),
    /// [`SettingKind::Prefetch`].
    Prefetch(Option<usize>),
    /// [`SettingKind::Addr`].
    Addr(Option<SocketAddr>),
    /// [`SettingKind::Cron`].
    Cron(Option<String>),
    /// [`SettingKind::Lane`].
    Lane(String),
}

/// What the command line refuses beyond what the environment does (the
/// flag is checked before anything starts; the environment's value is
/// left to [`WorkerSettings::validate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagCheck {
    /// Nothing more.
    None,
    /// A count within `min..=max` (each within the count's type).
    Range {
        /// The smallest accepted.
        min: u64,
        /// The largest accepted.
        max: u64,
    },
    /// A duration longer than zero.
    NonZero,
}

/// A setting's `drover worker` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingFlag {
    /// The flag without `--`: the field's name with `-` for `_` (a unit
    /// test holds them together).
    pub long: &'static str,
    /// The value's placeholder in `--help` (`N`, `DURATION`).
    pub value_name: &'static str,
    /// What the flag refuses beyond the environment's parser.
    pub check: FlagCheck,
}

/// One worker setting: a row of [`SETTINGS`](super::SETTINGS).
#[derive(Debug, Clone, Copy)]
pub struct SettingDef {
    /// The [`WorkerSettings`] field (`pool_size`); also the name a refused
    /// flag is reported under.
    pub field: &'static str,
    /// The environment variable (`DROVER_POOL_SIZE`).
    pub env: &'static str,
    /// What it holds, and so how its text parses and its default renders.
    pub kind: SettingKind,
    /// Its `drover worker` flag; `None`: read from the environment only.
    pub flag: Option<SettingFlag>,
    /// One line of meaning (`.env.example`, `--help`).
    pub doc: &'static str,
    /// Read by the store's `ConnectOptions::from_env` (which
    /// `Queue::connect` uses), so the variable is read in that one place.
    pub store_reads: bool,
    /// The field's value.
    pub get: fn(&WorkerSettings) -> SettingValue,
    /// Sets the field (and whatever follows it: the lease brings the
    /// renewal interval and timeout along).
    pub set: fn(&mut WorkerSettings, SettingValue),
}

impl SettingDef {
    /// The flag's name without `--` (`pool-size`), if it has one.
    pub fn long(&self) -> Option<&'static str> {
        self.flag.map(|f| f.long)
    }

    /// The variable's text when it is set (and Unicode).
    pub fn env_text(&self) -> Option<String> {
        std::env::var(self.env).ok()
    }

    /// The default, in the form the variable takes (`20`, `30s`; empty
    /// for an unset adaptive value).
    pub fn default_text(&self) -> String {
        (self.get)(&WorkerSettings::default()).text()
    }

    /// Parses the variable's text.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the variable.
    pub fn parse_env(&self, v: &str) -> Result<SettingValue> {
        let name = self.env;
        let number = || Error::invalid(name, format!("{v:?} is not a number"));
        Ok(match self.kind {
            SettingKind::Lanes => SettingValue::Lanes(parse_lanes(v)),
            SettingKind::Usize => SettingValue::Usize(v.trim().parse().map_err(|_| number())?),
            SettingKind::U32 => SettingValue::U32(v.trim().parse().map_err(|_| number())?),
            SettingKind::U64 => SettingValue::U64(v.trim().parse().map_err(|_| number())?),
            SettingKind::Prefetch => {
                SettingValue::Prefetch(Some(v.trim().parse().map_err(|_| number())?))
            }
            SettingKind::Duration => SettingValue::Duration(
                humantime::parse_duration(v.trim())
                    .map_err(|e| Error::invalid(name, format!("{v:?} is not a duration: {e}")))?,
            ),
            SettingKind::Switch => SettingValue::Switch(parse_on_off(name, v)?),
            SettingKind::Addr => SettingValue::Addr(if v.trim().is_empty() || v.trim() == "off" {
                None
            } else {
                Some(
                    v.trim()
                        .parse()
                        .map_err(|_| Error::invalid(name, format!("{v:?} is not host:port")))?,
                )
            }),
            SettingKind::Cron => SettingValue::Cron(parse_heartbeat_cron(v)),
            SettingKind::Lane => SettingValue::Lane(v.trim().to_owned()),
        })
    }
}

impl SettingValue {
    /// The value in the form its variable takes.
    pub fn text(&self) -> String {
        match self {
            SettingValue::Lanes(l) => l.join(","),
            SettingValue::Usize(n) | SettingValue::Prefetch(Some(n)) => n.to_string(),
            SettingValue::U32(n) => n.to_string(),
            SettingValue::U64(n) => n.to_string(),
            SettingValue::Prefetch(None) => String::new(),
            SettingValue::Duration(d) => humantime::format_duration(*d).to_string(),
            SettingValue::Switch(b) => if *b { "on" } else { "off" }.to_owned(),
            SettingValue::Addr(a) => a.map_or_else(|| "off".to_owned(), |a| a.to_string()),
            SettingValue::Cron(c) => c.clone().unwrap_or_else(|| "off".to_owned()),
            SettingValue::Lane(l) => l.clone(),
        }
    }
}

/// One table row; `set = f` names a setter for a field that brings others
/// along (the lease).
macro_rules! setting {
    ($field:ident: $kind:ident, $env:literal, $flag:expr, $doc:literal $(, set = $set:path)?) => {
        $crate::worker::settings::row::SettingDef {
            field: stringify!($field),
            env: $env,
            kind: $crate::worker::settings::row::SettingKind::$kind,
            flag: $flag,
            doc: $doc,
            store_reads: false,
            get: |s| $crate::worker::settings::row::SettingValue::$kind(Clone::clone(&s.$field)),
            set: setting!(@set $field $kind $($set)?),
        }
    };
    (@set $field:ident $kind:ident) => {
        |s, v| {
            if let $crate::worker::settings::row::SettingValue::$kind(x) = v {
                s.$field = x;
            }
        }
    };
    (@set $field:ident $kind:ident $set:path) => {
        |s, v| {
            if let $crate::worker::settings::row::SettingValue::$kind(x) = v {
                $set(s, x);
            }
        }
    };
}
pub(crate) use setting;

/// A comma-separated list of lanes; blank entries are dropped, so an empty
/// text is no lane (what an empty list renders as).
pub fn parse_lanes(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A flag with no check beyond the environment's.
pub const fn flag(long: &'static str, value_name: &'static str) -> Option<SettingFlag> {
    Some(SettingFlag {
        long,
        value_name,
        check: FlagCheck::None,
    })
}

/// A duration flag that must be longer than zero.
pub const fn nonzero(long: &'static str, value_name: &'static str) -> Option<SettingFlag> {
    Some(SettingFlag {
        long,
        value_name,
        check: FlagCheck::NonZero,
    })
}

/// A count flag within `min..=max`.
pub const fn range(
    long: &'static str,
    value_name: &'static str,
    min: u64,
    max: u64,
) -> Option<SettingFlag> {
    Some(SettingFlag {
        long,
        value_name,
        check: FlagCheck::Range { min, max },
    })
}
