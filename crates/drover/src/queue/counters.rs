//! The per-item counters, labelled by lane and kind.
//!
//! Metric conventions (docs/operations.md): every item counter carries
//! `lane` and `kind`, both bounded by code (lanes and kinds are declared,
//! not data), so the series count grows with the handlers a fleet runs and
//! never with its tenants or items. A tenant label is never added here.
//! Counts the sweep reports in aggregate (lease-expired hand-backs, their
//! dead letters) carry no per-item labels: one pass spans every lane.

use std::collections::HashMap;

/// Adds `n` to the counter `name` for one lane and kind.
pub(crate) fn count(name: &'static str, lane: &str, kind: &str, n: u64) {
    if n == 0 {
        return;
    }
    metrics::counter!(name, "lane" => lane.to_owned(), "kind" => kind.to_owned()).increment(n);
}

/// Adds one to `name` for every `(lane, kind)` pair given, one counter
/// update per distinct pair (a batch is usually of one lane and few kinds).
pub(crate) fn count_each<'a>(
    name: &'static str,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) {
    let mut tally: HashMap<(&str, &str), u64> = HashMap::new();
    for pair in pairs {
        *tally.entry(pair).or_default() += 1;
    }
    for ((lane, kind), n) in tally {
        count(name, lane, kind, n);
    }
}
