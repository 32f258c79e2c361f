//! The pure rules of the queue: retry arithmetic, the attempt budget, the
//! stale filter and the claim fence.
//!
//! Nothing here touches a clock, a database or a random source of its own:
//! every input is a parameter, so each rule is unit- and property-tested.
//! Rules that a SQL statement also evaluates (the fence, the stale filter,
//! the dead-letter test) are written once more in each backend's SQL; the
//! contract suite holds the two together.

use std::time::Duration;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::item::{Item, Status};

/// Exponential, capped, jittered backoff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Delay before the first retry.
    pub base: Duration,
    /// No delay exceeds this.
    pub cap: Duration,
    /// Growth per attempt (2.0 doubles).
    pub factor: f64,
    /// Fraction of the delay drawn at random, `0.0..=1.0` (0.1 = ±10 %).
    pub jitter: f64,
}

/// The first retry waits this long by default.
pub const RETRY_BASE_DEFAULT: Duration = Duration::from_secs(1);
/// No retry waits longer than this by default.
pub const RETRY_CAP_DEFAULT: Duration = Duration::from_secs(3600);
/// Delays double by default.
pub const RETRY_FACTOR_DEFAULT: f64 = 2.0;
/// Delays vary by ±10 % by default, so a burst of failures does not retry in lockstep.
pub const RETRY_JITTER_DEFAULT: f64 = 0.1;

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            base: RETRY_BASE_DEFAULT,
            cap: RETRY_CAP_DEFAULT,
            factor: RETRY_FACTOR_DEFAULT,
            jitter: RETRY_JITTER_DEFAULT,
        }
    }
}

impl RetryPolicy {
    /// The un-jittered delay after `attempts` failures (`attempts >= 1`):
    /// `base * factor^(attempts-1)`, capped.
    pub fn nominal_delay(&self, attempts: i32) -> Duration {
        let n = attempts.max(1) - 1;
        let secs = self.base.as_secs_f64() * self.factor.powi(n.min(1000));
        let cap = self.cap.as_secs_f64();
        if !secs.is_finite() || secs >= cap {
            self.cap
        } else {
            Duration::from_secs_f64(secs.max(0.0))
        }
    }
}

/// The delay before the next attempt after `attempts` failures.
///
/// `unit` is a number in `[0, 1)` drawn by the caller; it places the delay in
/// `nominal * (1 - jitter) ..= nominal * (1 + jitter)`, never above the cap.
pub fn retry_delay(policy: &RetryPolicy, attempts: i32, unit: f64) -> Duration {
    let nominal = policy.nominal_delay(attempts).as_secs_f64();
    let jitter = policy.jitter.clamp(0.0, 1.0);
    let unit = if unit.is_finite() {
        unit.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let scale = 1.0 + jitter * (2.0 * unit - 1.0);
    let secs = (nominal * scale).min(policy.cap.as_secs_f64()).max(0.0);
    Duration::from_secs_f64(secs)
}

/// True when `attempts` spent has reached the budget: the item goes to the
/// dead letter instead of being requeued. SQL twin: `attempts + 1 >= max_attempts`
/// evaluated before the increment in every backend's fail statement.
pub fn is_exhausted(attempts: i32, max_attempts: i32) -> bool {
    attempts >= max_attempts
}

/// The stale filter: a claimed item whose lease has passed at `now`.
/// SQL twin: `status = 'claimed' AND lease_expires_at <= now()`.
pub fn is_stale(
    status: Status,
    lease_expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    status == Status::Claimed && lease_expires_at.is_some_and(|t| t <= now)
}

/// The first fence: a write after a claim may land only while the item is
/// claimed, under this exact token, and the lease has not passed.
/// SQL twin: `claim_token = $token AND status = 'claimed' AND lease_expires_at > now()`.
pub fn fence_holds(item: &Item, token: Uuid, now: DateTime<Utc>) -> bool {
    item.status == Status::Claimed
        && item.claim_token == Some(token)
        && item.lease_expires_at.is_some_and(|t| t > now)
}

/// Converts a [`Duration`] to a chrono duration, saturating on overflow.
pub fn to_chrono(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nominal_delay_doubles_from_base() {
        let p = RetryPolicy::default();
        assert_eq!(p.nominal_delay(1), Duration::from_secs(1));
        assert_eq!(p.nominal_delay(2), Duration::from_secs(2));
        assert_eq!(p.nominal_delay(5), Duration::from_secs(16));
    }

    #[test]
    fn nominal_delay_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(p.nominal_delay(40), RETRY_CAP_DEFAULT);
        assert_eq!(p.nominal_delay(i32::MAX), RETRY_CAP_DEFAULT);
    }

    #[test]
    fn exhausted_exactly_at_budget() {
        assert!(!is_exhausted(4, 5));
        assert!(is_exhausted(5, 5));
        assert!(is_exhausted(1, 1));
    }

    #[test]
    fn stale_only_when_claimed_and_lease_passed() {
        let now = Utc::now();
        let past = now - chrono::Duration::seconds(1);
        let future = now + chrono::Duration::seconds(1);
        assert!(is_stale(Status::Claimed, Some(past), now));
        assert!(is_stale(Status::Claimed, Some(now), now));
        assert!(!is_stale(Status::Claimed, Some(future), now));
        assert!(!is_stale(Status::Pending, Some(past), now));
        assert!(!is_stale(Status::Done, Some(past), now));
        assert!(!is_stale(Status::Claimed, None, now));
    }

    proptest! {
        #[test]
        fn delay_within_jitter_band_and_cap(attempts in 1i32..64, unit in 0.0f64..1.0) {
            let p = RetryPolicy::default();
            let d = retry_delay(&p, attempts, unit).as_secs_f64();
            let nominal = p.nominal_delay(attempts).as_secs_f64();
            prop_assert!(d >= nominal * (1.0 - p.jitter) - 1e-9);
            prop_assert!(d <= nominal * (1.0 + p.jitter) + 1e-9);
            prop_assert!(d <= p.cap.as_secs_f64() + 1e-9);
        }

        #[test]
        fn nominal_delay_never_shrinks(a in 1i32..200) {
            let p = RetryPolicy::default();
            prop_assert!(p.nominal_delay(a + 1) >= p.nominal_delay(a));
        }

        #[test]
        fn exhausted_is_monotone(a in 0i32..100, m in 1i32..100) {
            if is_exhausted(a, m) { prop_assert!(is_exhausted(a + 1, m)); }
        }
    }
}
