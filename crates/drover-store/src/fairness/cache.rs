//! Per lane, the fair claim's passes as this process last read or wrote
//! them ([`PassCache`]), keyed by the version token of the lane's row
//! ([`pass_version`]), and what a backend learnt about its one-call fair
//! claim (whether the database has it, how often it ran).
//!
//! Invariant: passes are kept only with the token their write stored, so
//! a claim that finds another token in the lane's row never uses them.

use super::{FAIR_CACHE_TTL, Passes};
use uuid::Uuid;

/// Per lane, the passes as this process last read or wrote them, with the
/// version token of the lane's row they are valid at. Every write of a
/// lane's passes (a fair claim's, the sweep's purge) stores a fresh random
/// token in the lane's row, so a claim that reads the token it kept knows
/// no other process (and no purge) has written since, and reads the one
/// row instead of the lane's every pass. A token written by a transaction
/// that rolled back is never seen in the row, so its cache is never hit.
#[derive(Debug, Default)]
pub struct PassCache {
    slot: std::sync::Mutex<std::collections::HashMap<String, (i64, Passes)>>,
    /// When a claim last found the database without a backend's one-call
    /// fair claim (PostgreSQL migration 0057): until [`FAIR_CACHE_TTL`]
    /// after it, claims take the client's own lock instead.
    no_call: std::sync::Mutex<Option<std::time::Instant>>,
    /// How many claims the one call made (for the tests that check it is
    /// the path taken).
    calls: std::sync::atomic::AtomicU64,
}

impl PassCache {
    /// Whether a claim found the database without the one-call fair claim
    /// within the last [`FAIR_CACHE_TTL`] (a schema a migration under way
    /// has not reached yet, which is asked again after it).
    pub fn no_call(&self) -> bool {
        self.no_call
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at.elapsed() < FAIR_CACHE_TTL)
    }

    /// Counts a claim made by the one call.
    pub fn count_call(&self) {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many claims the one call made in this process.
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that the database lacks the one-call fair claim.
    pub fn set_no_call(&self) {
        *self.no_call.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
    }

    /// `lane`'s passes if they were kept at `version`.
    pub fn get(&self, lane: &str, version: i64) -> Option<Passes> {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.get(lane)
            .filter(|(v, _)| *v == version)
            .map(|(_, p)| p.clone())
    }

    /// `lane`'s passes as last kept, with the version token they were kept
    /// at (to be checked against the lane's row before they are used).
    pub fn latest(&self, lane: &str) -> Option<(i64, Passes)> {
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.get(lane).map(|(v, p)| (*v, p.clone()))
    }

    /// Keeps `passes` (settled) as `lane`'s at `version`.
    pub fn put(&self, lane: &str, version: i64, passes: &Passes) {
        self.slot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(lane.to_owned(), (version, passes.settled()));
    }
}

/// A fresh version token for a lane's row of passes ([`PassCache`]).
pub fn pass_version() -> i64 {
    // The random half of a v4 id: collisions are out of reach.
    i64::from_ne_bytes(Uuid::new_v4().as_u64_pair().1.to_ne_bytes())
}
