//! The per-tenant failure book of a reconciler: which tenants failed their
//! last run, how often in a row, and when each may run again.
//!
//! Invariants: a tenant's failure never delays another tenant; a failing
//! tenant waits a delay that doubles with each failure in a row (from the
//! base, capped), so a broken source is not hammered every pass; the first
//! success clears it.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

/// One tenant's run that failed: returned by
/// [`Reconciler::run_once`](super::Reconciler::run_once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantFailure {
    /// The tenant.
    pub tenant_id: Uuid,
    /// What failed (the error, or the panic's message).
    pub error: String,
    /// The source panicked (contained: counted as a failed run).
    pub panicked: bool,
    /// Failures of this tenant in a row, this one included.
    pub in_a_row: u32,
    /// How long the tenant waits before its next run.
    pub retry_in: Duration,
}

#[derive(Debug, Clone)]
struct Entry {
    failure: TenantFailure,
    retry_at: Instant,
}

/// The book: tenants whose last run failed.
#[derive(Debug, Default)]
pub(super) struct Backoff {
    failing: BTreeMap<Uuid, Entry>,
}

/// The wait after `in_a_row` failures: `base` doubled per failure after
/// the first, at most `cap`.
pub(super) fn delay(base: Duration, cap: Duration, in_a_row: u32) -> Duration {
    let factor = 2u32.saturating_pow(in_a_row.saturating_sub(1).min(30));
    base.saturating_mul(factor).min(cap)
}

impl Backoff {
    /// True while `tenant` waits out its backoff at `now`.
    pub(super) fn waiting(&self, tenant: Uuid, now: Instant) -> bool {
        self.failing.get(&tenant).is_some_and(|e| e.retry_at > now)
    }

    /// Records a failed run of `tenant` at `now`; returns it as reported.
    pub(super) fn failed(
        &mut self,
        tenant: Uuid,
        error: String,
        panicked: bool,
        (base, cap): (Duration, Duration),
        now: Instant,
    ) -> TenantFailure {
        let in_a_row = self
            .failing
            .get(&tenant)
            .map_or(1, |e| e.failure.in_a_row.saturating_add(1));
        let retry_in = delay(base, cap, in_a_row);
        let failure = TenantFailure {
            tenant_id: tenant,
            error,
            panicked,
            in_a_row,
            retry_in,
        };
        self.failing.insert(
            tenant,
            Entry {
                failure: failure.clone(),
                retry_at: now + retry_in,
            },
        );
        failure
    }

    /// Records a successful run of `tenant`.
    pub(super) fn succeeded(&mut self, tenant: Uuid) {
        self.failing.remove(&tenant);
    }

    /// The tenants whose last run failed, by tenant.
    pub(super) fn failing(&self) -> Vec<TenantFailure> {
        self.failing.values().map(|e| e.failure.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_delay_doubles_and_is_capped() {
        let cap = Duration::from_secs(60);
        let got: Vec<u64> = (1..=8).map(|n| delay(S, cap, n).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(delay(S, cap, u32::MAX), cap);
    }

    #[test]
    fn a_failing_tenant_waits_alone_and_success_clears_it() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let now = Instant::now();
        let mut book = Backoff::default();
        let f = book.failed(a, "down".into(), false, (S, 60 * S), now);
        assert_eq!((f.in_a_row, f.retry_in), (1, S));
        assert!(book.waiting(a, now));
        assert!(!book.waiting(b, now), "another tenant never waits for it");
        assert!(!book.waiting(a, now + S));
        let f = book.failed(a, "down".into(), true, (S, 60 * S), now + S);
        assert_eq!((f.in_a_row, f.retry_in, f.panicked), (2, 2 * S, true));
        assert_eq!(book.failing().len(), 1);
        book.succeeded(a);
        assert!(book.failing().is_empty());
        assert!(!book.waiting(a, now + S));
    }
}
