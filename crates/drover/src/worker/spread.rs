//! Fair spread at light load: which worker of a lane claims at once when a
//! wake-up arrives, and which waits its fallback delay.
//!
//! Every worker on a lane hears the same wake-up. Left to arrival order, the
//! first to claim takes everything the wake-up announced, nearly always the
//! same worker. The rule: each worker knows the sorted ids of the live
//! workers serving each of its lanes (read from the workers table on every
//! heartbeat, off the claim path) and its own rank among them; a wake-up's
//! nonce, identical for every listener ([`Wake`](crate::store::Wake)),
//! designates `mix(nonce) % k`. The designated worker claims at once; the
//! others claim after [`SPREAD_FALLBACK_DEFAULT`](super::SPREAD_FALLBACK_DEFAULT)
//! so the work still starts when the designated one is full, slow or gone.
//! A worker alone on its lane (or not yet seeing itself in the table)
//! always claims at once, so a single worker pays nothing.

use crate::store::WorkerRow;

/// Where a worker stands among the live workers of one lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    /// Its position in the sorted ids.
    pub(crate) rank: usize,
    /// How many live workers serve the lane, itself included.
    pub(crate) of: usize,
}

/// A worker's places, one per lane it drains (in its lane order); `None`
/// where it does not (yet) see itself among the lane's workers, which it
/// treats as being alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Peers {
    places: Vec<Option<Place>>,
}

/// What a worker does with one wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Claim now.
    Now,
    /// Claim once the fallback delay has passed (unless a claim on the lane
    /// runs before).
    Later,
}

impl Peers {
    /// The places of worker `me` on `lanes`, from the workers table: only
    /// rows `running` (not draining, offline or lost) count.
    pub(crate) fn from_rows(me: &str, lanes: &[String], rows: &[WorkerRow]) -> Peers {
        let places = lanes
            .iter()
            .map(|lane| {
                let mut ids: Vec<&str> = rows
                    .iter()
                    .filter(|r| r.state == "running" && r.lanes.iter().any(|l| l == lane))
                    .map(|r| r.id.as_str())
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                ids.iter().position(|id| *id == me).map(|rank| Place {
                    rank,
                    of: ids.len(),
                })
            })
            .collect();
        Peers { places }
    }

    /// How many live workers (this one included) share lane `i`, as last
    /// read; 1 when alone or not yet known.
    pub(crate) fn count(&self, i: usize) -> usize {
        self.places.get(i).copied().flatten().map_or(1, |p| p.of)
    }

    /// The turn of this worker on lane `i` for a wake-up with `nonce`.
    pub(crate) fn turn(&self, i: usize, nonce: Option<u64>) -> Turn {
        match self.places.get(i).copied().flatten() {
            None => Turn::Now,
            Some(p) if p.of <= 1 => Turn::Now,
            Some(p) => match nonce {
                Some(n) if designated(n, p) => Turn::Now,
                // Another's turn, or a hint no one is designated for.
                _ => Turn::Later,
            },
        }
    }
}

/// Whether the worker at `place` is the one `nonce` designates.
pub(crate) fn designated(nonce: u64, place: Place) -> bool {
    let k = u64::try_from(place.of.max(1)).unwrap_or(u64::MAX);
    let rank = u64::try_from(place.rank).unwrap_or(u64::MAX);
    mix(nonce) % k == rank
}

/// SplitMix64's finaliser: consecutive nonces (transaction ids, a counter)
/// land on well-spread values, and every process computes the same one
/// (std's hashers promise no stable output across builds).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;

    fn row(id: &str, lanes: &[&str], state: &str) -> WorkerRow {
        WorkerRow {
            id: id.into(),
            host: "h".into(),
            pid: 1,
            lanes: lanes.iter().map(|l| (*l).to_owned()).collect(),
            capacity: 1,
            started_at: Utc::now(),
            last_beat_at: Utc::now(),
            state: state.into(),
            beat_interval_ms: 1000,
            kinds: vec![],
            version: String::new(),
        }
    }

    /// Exactly one of the k workers is designated for each nonce, and over
    /// consecutive nonces (as transaction ids and counters come) each gets
    /// close to 1/k of them.
    #[test]
    fn each_nonce_designates_exactly_one_worker_and_the_share_is_even() {
        for k in 1..=5usize {
            let mut share = vec![0usize; k];
            for n in 1_000u64..11_000 {
                let chosen: Vec<usize> = (0..k)
                    .filter(|&rank| designated(n, Place { rank, of: k }))
                    .collect();
                assert_eq!(chosen.len(), 1, "nonce {n}, k {k}: {chosen:?}");
                share[chosen[0]] += 1;
            }
            let even = 10_000 / k;
            for s in &share {
                // ±10 % of an even share over 10,000 nonces.
                assert!(s.abs_diff(even) <= even / 10, "k {k}: {share:?}");
            }
        }
    }

    #[test]
    fn a_worker_alone_or_unknown_always_claims_at_once() {
        let lanes = vec!["a".to_owned()];
        let alone = Peers::from_rows("w1", &lanes, &[row("w1", &["a"], "running")]);
        assert_eq!(alone.count(0), 1);
        let unknown = Peers::from_rows("w1", &lanes, &[row("w2", &["a"], "running")]);
        assert_eq!(unknown.count(0), 1);
        for n in [None, Some(0), Some(1), Some(2), Some(u64::MAX)] {
            assert_eq!(alone.turn(0, n), Turn::Now);
            assert_eq!(unknown.turn(0, n), Turn::Now);
            assert_eq!(Peers::default().turn(0, n), Turn::Now);
        }
    }

    /// Two workers reading the same table agree: for every nonce one claims
    /// at once and the other waits; a hint makes both wait.
    #[test]
    fn two_workers_agree_on_whose_turn_it_is() {
        let lanes = vec!["a".to_owned(), "b".to_owned()];
        let rows = [
            row("w2", &["a", "b"], "running"),
            row("w1", &["a"], "running"),
            // Not live: never designated.
            row("w0", &["a"], "draining"),
            row("w3", &["a"], "lost"),
            row("w4", &["a"], "offline"),
        ];
        let p1 = Peers::from_rows("w1", &lanes, &rows);
        let p2 = Peers::from_rows("w2", &lanes, &rows);
        assert_eq!((p1.count(0), p2.count(0)), (2, 2));
        // Lane b: w2 alone; w1 does not drain it.
        assert_eq!(p2.count(1), 1);
        let mut first = 0;
        for n in 0..1000u64 {
            let (t1, t2) = (p1.turn(0, Some(n)), p2.turn(0, Some(n)));
            assert_ne!(t1, t2, "nonce {n}: exactly one claims at once");
            if t1 == Turn::Now {
                first += 1;
            }
            assert_eq!(p2.turn(1, Some(n)), Turn::Now);
        }
        assert!((400..=600).contains(&first), "w1 first for {first} of 1000");
        assert_eq!(p1.turn(0, None), Turn::Later);
        assert_eq!(p2.turn(0, None), Turn::Later);
    }
}
