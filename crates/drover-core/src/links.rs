//! What ties an item to other items: the dependencies it waits for
//! (`after`), what a dependency that ends without `done` does to it
//! ([`AfterPolicy`]), and the batch it belongs to.
//!
//! Invariants kept here and in every backend: an item names at most
//! [`MAX_AFTER`] dependencies, none twice and never itself; a dependant is
//! stored `pending` with `available_at` = [`waiting_at`] (a time the claim
//! never reaches, so the claim statement and its partial index are the
//! same as for any scheduled item) until its last dependency is done, and
//! is released (`available_at` set to the database's now) in the
//! transaction that finishes that dependency. See `docs/dependencies.md`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{Error, Result};

/// The most dependencies one item may name.
pub const MAX_AFTER: usize = 1000;

/// The `available_at` a waiting dependant is stored with:
/// 9999-12-31T00:00:00Z, which no claim's `available_at <= now()` reaches.
/// Release sets it to the finishing transaction's now.
pub fn waiting_at() -> DateTime<Utc> {
    DateTime::from_timestamp(WAITING_AT_SECS, 0).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// [`waiting_at`] in seconds since the epoch (the SQL files spell it as a
/// literal: `'9999-12-31 00:00:00+00'` on PostgreSQL,
/// `253402214400000000` microseconds on SQLite).
pub const WAITING_AT_SECS: i64 = 253_402_214_400;

/// True when `at` is the waiting mark: the item waits for dependencies.
pub fn is_waiting_at(at: DateTime<Utc>) -> bool {
    at.timestamp() == WAITING_AT_SECS
}

/// What a dependant does when one of its dependencies ends `failed` or
/// `cancelled` (a dead letter, an operator's cancel, a fatal failure).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, PartialOrd, Ord,
)]
#[serde(rename_all = "snake_case")]
pub enum AfterPolicy {
    /// The dependant is dead-lettered (`failed`, with the dependency named
    /// in `last_error`), which in turn finishes its own dependants.
    #[default]
    Fail,
    /// The dependency counts as finished: the dependant runs once the
    /// others are done or finished.
    Run,
    /// The dependant keeps waiting for an operator: retrying the
    /// dependency (it then runs and, once done, releases the dependant) or
    /// cancelling the dependant.
    Wait,
}

impl AfterPolicy {
    /// Every policy.
    pub const ALL: [AfterPolicy; 3] = [AfterPolicy::Fail, AfterPolicy::Run, AfterPolicy::Wait];

    /// The name stored and accepted on every surface.
    pub fn as_str(self) -> &'static str {
        match self {
            AfterPolicy::Fail => "fail",
            AfterPolicy::Run => "run",
            AfterPolicy::Wait => "wait",
        }
    }
}

impl std::fmt::Display for AfterPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AfterPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        AfterPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| Error::invalid("after_policy", "is not one of fail, run, wait"))
    }
}

/// Checks one item's dependency list: at most [`MAX_AFTER`], no id twice,
/// never the item itself.
///
/// # Errors
/// [`Error::InvalidInput`] on `after`.
pub fn validate_after(id: Uuid, after: &[Uuid]) -> Result<()> {
    if after.len() > MAX_AFTER {
        return Err(Error::invalid(
            "after",
            format!("names {} items, the limit is {MAX_AFTER}", after.len()),
        ));
    }
    if after.contains(&id) {
        return Err(Error::invalid("after", "an item cannot wait for itself"));
    }
    let mut seen = std::collections::HashSet::with_capacity(after.len());
    if let Some(d) = after.iter().find(|d| !seen.insert(**d)) {
        return Err(Error::invalid("after", format!("names {d} twice")));
    }
    Ok(())
}
