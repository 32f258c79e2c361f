//! The rate checker: reads the claims of a rate-limited kind from the
//! `transitions` log (each claim's transaction clock, `tx_now`: the
//! database's clock the claim admitted on) and counts the windows in which
//! a group started more than its rate allows.
//!
//! A rate of `count` per `period` with `burst` allows, in any window of
//! length `W`, at most `count · W / period + burst` starts of one scope
//! key (docs/flow-control.md, "Rate limits"). The checker slides a window
//! of each length in [`WINDOWS_MS`] (and one emission interval) from every
//! start of every group, half-open `[s, s + W)`, and counts each window
//! over the bound as one violation. It also measures utilisation: the
//! share of the starts the rate allowed that a group took while its work
//! waited (from its first to its last claim, every item queued
//! throughout), after its burst.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// The window lengths checked, in milliseconds (one emission interval is
/// added by [`check`]).
pub const WINDOWS_MS: [i64; 7] = [1, 10, 100, 500, 1_000, 5_000, 60_000];

/// A rate as the checker takes it.
#[derive(Debug, Clone, Copy)]
pub struct RateSpec {
    /// Starts per period.
    pub count: u32,
    /// The period in milliseconds.
    pub period_ms: u64,
    /// The burst.
    pub burst: u32,
}

impl RateSpec {
    /// The most starts the rate allows in a window of `w_us` microseconds.
    pub fn bound(&self, w_us: i64) -> f64 {
        f64::from(self.count) * w_us as f64 / (self.period_ms as f64 * 1_000.0)
            + f64::from(self.burst)
    }

    /// The emission interval in microseconds.
    pub fn interval_us(&self) -> i64 {
        let (p, c) = (self.period_ms as i64 * 1_000, i64::from(self.count.max(1)));
        (p + c - 1) / c
    }
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct RateFigures {
    /// Claims read.
    pub starts: usize,
    /// Groups read.
    pub groups: usize,
    /// Windows checked (one per start and window length).
    pub windows: usize,
    /// Windows with more starts than the bound.
    pub violations: usize,
    /// The worst window: (starts, bound, length in ms), by starts over
    /// bound.
    pub worst: Option<(usize, f64, f64)>,
    /// Starts taken over starts allowed after the burst while work waited,
    /// the lowest of the groups (1.0: every allowed start taken).
    pub utilisation_min: f64,
    /// The same, over all groups together.
    pub utilisation: f64,
}

impl RateFigures {
    /// One line for the report.
    pub fn summary(&self) -> String {
        format!(
            "starts {} over {} groups, windows checked {}, violations {}, worst {:?}, utilisation {:.3} (lowest group {:.3})",
            self.starts,
            self.groups,
            self.windows,
            self.violations,
            self.worst,
            self.utilisation,
            self.utilisation_min
        )
    }
}

/// Checks the claim times of each group (microseconds on the database
/// clock, any order) against `rate`.
pub fn check(groups: &BTreeMap<String, Vec<i64>>, rate: &RateSpec) -> RateFigures {
    let mut f = RateFigures {
        groups: groups.len(),
        utilisation_min: f64::INFINITY,
        ..RateFigures::default()
    };
    let mut windows: Vec<i64> = WINDOWS_MS.iter().map(|ms| ms * 1_000).collect();
    windows.push(rate.interval_us());
    let (mut taken, mut allowed) = (0.0, 0.0);
    for starts in groups.values() {
        let mut s = starts.clone();
        s.sort_unstable();
        f.starts += s.len();
        for (i, at) in s.iter().enumerate() {
            for w in &windows {
                let n = s[i..].partition_point(|t| *t < at + w);
                let bound = rate.bound(*w);
                f.windows += 1;
                if n as f64 > bound + 1e-9 {
                    f.violations += 1;
                }
                let over = n as f64 - bound;
                if f.worst.is_none_or(|(wn, wb, _)| over > wn as f64 - wb) {
                    f.worst = Some((n, bound, *w as f64 / 1_000.0));
                }
            }
        }
        if let (Some(first), Some(last)) = (s.first(), s.last())
            && last > first
        {
            let may = (last - first) as f64 / rate.interval_us() as f64;
            let took = s.len().saturating_sub(rate.burst as usize) as f64;
            taken += took;
            allowed += may;
            f.utilisation_min = f.utilisation_min.min(took / may);
        }
    }
    f.utilisation = if allowed > 0.0 { taken / allowed } else { 0.0 };
    if !f.utilisation_min.is_finite() {
        f.utilisation_min = 0.0;
    }
    f
}

/// The claim times of `kind`'s items per group, from `transitions` in
/// `schema` (a claim: a write to `claimed` that moved the claim's fencing
/// number), each the claim transaction's clock.
///
/// # Errors
/// Database errors.
pub async fn pg_claims(
    pool: &PgPool,
    schema: &str,
    kind: &str,
) -> sqlx::Result<BTreeMap<String, Vec<i64>>> {
    let sql = format!(
        r#"SELECT coalesce(i.group_key, ''), t.tx_now
           FROM "{schema}".transitions t JOIN "{schema}".items i ON i.id = t.item_id
           WHERE i.kind = $1 AND t.new_status = 'claimed' AND t.new_seq IS DISTINCT FROM t.old_seq"#
    );
    let rows: Vec<(String, DateTime<Utc>)> =
        sqlx::query_as(&sql).bind(kind).fetch_all(pool).await?;
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (g, at) in rows {
        out.entry(g).or_default().push(at.timestamp_micros());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paced_group_passes_and_a_burst_past_the_rate_is_caught() {
        let rate = RateSpec {
            count: 10,
            period_ms: 1_000,
            burst: 3,
        };
        // Three at once (the burst), then one every 100 ms.
        let mut paced: Vec<i64> = vec![0, 0, 0];
        paced.extend((1..100).map(|i| i * 100_000));
        let ok = check(&BTreeMap::from([("g".to_owned(), paced.clone())]), &rate);
        assert_eq!(ok.violations, 0, "{ok:?}");
        assert!(ok.utilisation > 0.95, "{ok:?}");
        // A fourth start 1 us after the burst: one too many in 1 ms.
        let mut broken = paced;
        broken.push(1);
        let bad = check(&BTreeMap::from([("g".to_owned(), broken)]), &rate);
        assert!(bad.violations > 0, "{bad:?}");
        // Half the allowed starts: utilisation about 0.5.
        let slow: Vec<i64> = (0..50).map(|i| i * 200_000).collect();
        let half = check(&BTreeMap::from([("g".to_owned(), slow)]), &rate);
        assert!((half.utilisation - 0.48).abs() < 0.03, "{half:?}");
    }
}
