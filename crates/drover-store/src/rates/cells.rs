//! The claim's rate rule over the cells it locked ([`Cells`]), and the
//! grace that keeps the sweep's purge of idle cells from resetting a cell
//! a claim still admits against ([`CELL_GRACE`]). Pure, so the three
//! backends admit alike; each backend reads and writes the cells.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Rate, note_rate_limited, scope_label};

/// How long a cell stays once behind the clock before the sweep may
/// delete it, and the oldest a claim's transaction may be when it locks
/// its cells and still admit a rated start.
///
/// Why both: a claim admits on its transaction's clock (the time its
/// starts are recorded at), which is as old as the transaction. A claim
/// that began before a cell's time, and locked the cell only after the
/// purge deleted it, would find it idle and admit a second burst inside
/// the window the deleted cell still guarded. Deleting only cells behind
/// the clock by this grace, and refusing admissions to a claim older than
/// it at the lock, leaves no such claim: its clock is later than every
/// time the purge deleted.
pub const CELL_GRACE: Duration = Duration::from_secs(2);

/// The claim's rate rule: which candidates (in claim order) to admit,
/// given the cells each starts against, as they stood when the claim
/// locked them. Pure so that the three backends admit alike.
#[derive(Debug, Default)]
pub struct Cells {
    now: DateTime<Utc>,
    tats: HashMap<String, DateTime<Utc>>,
    changed: BTreeMap<String, DateTime<Utc>>,
    /// The rate scopes (closures left out) that refused a start.
    refused: std::collections::BTreeSet<String>,
    /// The claim's transaction was older than [`CELL_GRACE`] when it
    /// locked the cells: it admits no rated start (another claim will).
    stale: bool,
}

impl Cells {
    /// Starts from the cells as read (`key`, `tat`) at `now` (the store's
    /// clock in the claim); a key not given is an idle cell.
    pub fn new(
        now: DateTime<Utc>,
        cells: impl IntoIterator<Item = (String, DateTime<Utc>)>,
    ) -> Cells {
        Cells {
            now,
            tats: cells.into_iter().collect(),
            changed: BTreeMap::new(),
            refused: std::collections::BTreeSet::new(),
            stale: false,
        }
    }

    /// Cells read by a claim whose transaction was older than
    /// [`CELL_GRACE`] at the lock: every rated start is refused, for its
    /// clock may be earlier than a cell the purge deleted.
    pub fn stale(now: DateTime<Utc>) -> Cells {
        Cells {
            stale: true,
            ..Cells::new(now, [])
        }
    }

    /// Adds cells read later (a key already known keeps its value here).
    pub fn extend(&mut self, cells: impl IntoIterator<Item = (String, DateTime<Utc>)>) {
        for (k, t) in cells {
            self.tats.entry(k).or_insert(t);
        }
    }

    /// Whether the cell of `key` is known (read or written).
    pub fn knows(&self, key: &str) -> bool {
        self.tats.contains_key(key)
    }

    /// Whether a start against every cell in `keys` would be admitted now
    /// (nothing moves).
    /// A refusal is remembered for [`Cells::note_rate_limited`].
    pub fn would_admit(&mut self, keys: &[(String, Rate)]) -> bool {
        if crate::limits::limits_broken() {
            return true;
        }
        if self.stale && !keys.is_empty() {
            return false;
        }
        for (key, rate) in keys {
            if rate.admit(self.tats.get(key).copied(), self.now).is_none() {
                if let Some(label) = scope_label(key) {
                    self.refused.insert(label);
                }
                return false;
            }
        }
        true
    }

    /// Counts the claim held back by each rate scope that refused a start
    /// ([`note_rate_limited`]).
    pub fn note_rate_limited(&self) {
        note_rate_limited(self.refused.iter().map(String::as_str));
    }

    /// Admits a start against every cell in `keys` when each has room,
    /// moving each one; else moves none.
    pub fn admit(&mut self, keys: &[(String, Rate)]) -> bool {
        if crate::limits::limits_broken() {
            return true;
        }
        if self.stale && !keys.is_empty() {
            return false;
        }
        let mut next = Vec::with_capacity(keys.len());
        for (key, rate) in keys {
            match rate.admit(self.tats.get(key).copied(), self.now) {
                // A closure admits without moving: its cell is its time.
                Some(_) if rate.is_closure() => {}
                Some(t) => next.push((key, t)),
                None => {
                    if let Some(label) = scope_label(key) {
                        self.refused.insert(label);
                    }
                    return false;
                }
            }
        }
        for (key, t) in next {
            self.tats.insert(key.clone(), t);
            self.changed.insert(key.clone(), t);
        }
        true
    }

    /// The cells moved by admissions, to write back with the claim.
    pub fn changed(&self) -> &BTreeMap<String, DateTime<Utc>> {
        &self.changed
    }
}
