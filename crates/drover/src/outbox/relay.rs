//! The relay: the service that turns committed outbox rows into work items
//! and events.
//!
//! Each run claims a batch of pending rows, enqueues the `work.*` rows as
//! items in one bulk insert (the item's id and idempotency key are the
//! row's id, `created_by` its actor, its request and trace context kept,
//! the lane, priority and attempt budget from the row's own columns, the
//! payload as written; a legacy row's lane from its payload's `lane`
//! entry, see [`relayed_item`]), appends the `event.*`
//! rows to the event log under the row's id, then marks the rows done. A
//! row that cannot be relayed is failed with backoff and parked after its
//! budget.
//!
//! On PostgreSQL the claim, the inserts and the marks are one transaction
//! ([`OutboxStore::outbox_relay_atomic`](super::OutboxStore::outbox_relay_atomic)):
//! the claim is the rows' lock, so a run cut off anywhere (SIGKILL, a lost
//! connection, a server restart) leaves nothing, not even a claim, and the
//! next run takes the rows at once.
//!
//! Elsewhere the steps run one by one under a claim token and a lease, and
//! it is safe without a transaction spanning the item and the row: the
//! item or event carries the row's id, so a relay that dies after the
//! insert and before the row is marked done leaves a row whose next relay
//! (once the lease passed) meets its own item (`IdExists`) or event
//! (already there) and changes nothing; the row is then marked done. Any
//! number of relays run at once: the claim hands each row to one of them,
//! and a relay whose lease passed meets the fence when it marks its rows
//! done.
//!
//! It runs on two paths: the fast path (woken by the outbox insert:
//! `NOTIFY` on PostgreSQL, the in-process signal on SQLite and memory, with
//! a jittered poll as the fallback) and the sweep step
//! [`RelaySweep`](super::RelaySweep) (publishes `drover_outbox_lag_seconds`,
//! purges done rows past the retention, relays what a crash left within a
//! budget).
//!
//! An item the relay inserts counts in `drover_enqueued_total` (by lane and
//! kind) exactly as a direct enqueue's does; an item a second relay meets
//! (`IdExists`) does not.
//!
//! **Event order.** A claim never takes an `event.*` row of a tenant while
//! another live claim holds an `event.*` row of that tenant (on PostgreSQL's
//! one-transaction batch: while another batch holds the tenant's event
//! advisory lock), and a batch appends its rows oldest first. So one
//! tenant's events are relayed by one batch at a time, in the order of their
//! rows (`created_at`, then id) among the rows committed when the batch
//! claimed; a row committed later, or one retried after a failed relay, is
//! appended after the events relayed meanwhile.

use std::time::Duration;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{
    OUTBOX_WAKE, OutboxClaim, OutboxClaimParams, OutboxFailOutcome, OutboxFailParams, RelayBatch,
};
use crate::error::{Error, Result};
use crate::events::{EventAppended, NewEvent};
use crate::item::{InsertResult, NewItem};
use crate::queue::Queue;
use crate::rules::RetryPolicy;
use crate::store::outbox::{RelayWrites, relay_rows};
use crate::store::wake::ANY_LANE;
use crate::store::{Store, Wake};
use crate::worker::{RoleInfo, Strategy};

/// Rows one relay run claims at most.
pub const RELAY_BATCH_DEFAULT: u32 = 1000;
/// The largest batch [`RelayConfig::validate`] accepts: one batch is one
/// transaction on PostgreSQL, and its rows, items and events are held in
/// memory at once.
pub const RELAY_BATCH_MAX: u32 = 10_000;
/// Relay batches one pass of the sweep step runs at most.
pub const RELAY_SWEEP_BATCHES_DEFAULT: u32 = 10;
/// The largest [`RelayConfig::sweep_batches`] accepted.
pub const RELAY_SWEEP_BATCHES_MAX: u32 = 1000;
/// The wall time after which one pass of the sweep step starts no further
/// batch: well below the sweep's step timeout (10 s by default), and the
/// gauge and purge run before it anyway.
pub const RELAY_SWEEP_BUDGET_DEFAULT: Duration = Duration::from_secs(3);
/// How long a relay's claim on its batch holds: a relay that dies leaves
/// its rows to the next one after this.
pub const RELAY_LEASE_DEFAULT: Duration = Duration::from_secs(30);
/// The longest wait between two runs when no wake-up arrives.
pub const RELAY_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);
/// The wait after a failed run (a lost connection, a restarting server);
/// it doubles per failure in a row, up to the interval.
pub const RELAY_RETRY_MIN: Duration = Duration::from_millis(50);
/// Each wait varies by this fraction either way.
pub const RELAY_JITTER: f64 = 0.2;
/// Failed relays of one row before it is parked as `failed`.
pub const RELAY_MAX_ATTEMPTS_DEFAULT: i32 = 10;
/// The wait after a row's first failed relay.
pub const RELAY_BACKOFF_BASE_DEFAULT: Duration = Duration::from_secs(1);
/// No wait between two relays of one row exceeds this.
pub const RELAY_BACKOFF_CAP_DEFAULT: Duration = Duration::from_secs(300);
/// Done rows are kept this long before the purge may remove them.
pub const RELAY_RETENTION_DEFAULT: Duration = Duration::from_secs(3600);
/// Relay loops one worker runs at once.
pub const RELAY_CONCURRENCY_DEFAULT: usize = 1;

/// What the relay declares, as `drover handlers` prints it.
pub const RELAY_STRATEGY: Strategy = Strategy {
    idempotency: "the item's id and idempotency key (an event's id) are the outbox row's id: a \
                  second relay of a row meets its own item or event and inserts nothing",
    retry: "a row that cannot be relayed is retried with exponential backoff, then parked as \
            failed with its error (counted, listed by drover outbox stats); never dropped",
    checkpoint: "the row's status: pending until its item or event exists, then done (on \
                 PostgreSQL in the transaction that wrote the item or event; elsewhere in a \
                 statement fenced on the relay's claim token and lease)",
    recovery: "on PostgreSQL a relay that dies rolls its whole batch back and the next run takes \
               the rows at once; elsewhere its rows stay claimed until the lease passes, then \
               the next relay (fast path or sweep step) takes them and meets what was already \
               inserted",
};

/// The relay's role row for `drover handlers`: all four strategies of
/// [`RELAY_STRATEGY`].
pub fn relay_role() -> RoleInfo {
    RoleInfo {
        role: "outbox relay".into(),
        name: "outbox".into(),
        strategies: vec![
            ("idempotency".into(), RELAY_STRATEGY.idempotency.into()),
            ("retry".into(), RELAY_STRATEGY.retry.into()),
            ("checkpoint".into(), RELAY_STRATEGY.checkpoint.into()),
            ("recovery".into(), RELAY_STRATEGY.recovery.into()),
        ],
    }
}

/// The relay's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayConfig {
    /// Rows per run. Default [`RELAY_BATCH_DEFAULT`].
    pub batch: u32,
    /// The claim's lease. Default [`RELAY_LEASE_DEFAULT`].
    pub lease: Duration,
    /// Longest wait between runs. Default [`RELAY_INTERVAL_DEFAULT`].
    pub interval: Duration,
    /// Failed relays before a row is parked. Default [`RELAY_MAX_ATTEMPTS_DEFAULT`].
    pub max_attempts: i32,
    /// First backoff. Default [`RELAY_BACKOFF_BASE_DEFAULT`].
    pub backoff_base: Duration,
    /// Backoff cap. Default [`RELAY_BACKOFF_CAP_DEFAULT`].
    pub backoff_cap: Duration,
    /// How long done rows are kept. Default [`RELAY_RETENTION_DEFAULT`].
    pub retention: Duration,
    /// Relay loops run at once by [`Relay::run`]. Default
    /// [`RELAY_CONCURRENCY_DEFAULT`].
    pub concurrency: usize,
    /// Batches one pass of the sweep step relays at most. Default
    /// [`RELAY_SWEEP_BATCHES_DEFAULT`].
    pub sweep_batches: u32,
    /// Wall time after which a pass of the sweep step starts no further
    /// batch. Default [`RELAY_SWEEP_BUDGET_DEFAULT`].
    pub sweep_budget: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            batch: RELAY_BATCH_DEFAULT,
            lease: RELAY_LEASE_DEFAULT,
            interval: RELAY_INTERVAL_DEFAULT,
            max_attempts: RELAY_MAX_ATTEMPTS_DEFAULT,
            backoff_base: RELAY_BACKOFF_BASE_DEFAULT,
            backoff_cap: RELAY_BACKOFF_CAP_DEFAULT,
            retention: RELAY_RETENTION_DEFAULT,
            concurrency: RELAY_CONCURRENCY_DEFAULT,
            sweep_batches: RELAY_SWEEP_BATCHES_DEFAULT,
            sweep_budget: RELAY_SWEEP_BUDGET_DEFAULT,
        }
    }
}

impl RelayConfig {
    /// Checks the settings together.
    ///
    /// # Errors
    /// [`Error::Config`] naming the field and the relation broken.
    pub fn validate(&self) -> Result<()> {
        if self.batch == 0 || self.batch > RELAY_BATCH_MAX {
            return Err(Error::Config(format!(
                "the relay batch must be between 1 and {RELAY_BATCH_MAX}, got {}",
                self.batch
            )));
        }
        if self.sweep_batches == 0 || self.sweep_batches > RELAY_SWEEP_BATCHES_MAX {
            return Err(Error::Config(format!(
                "the relay's sweep_batches must be between 1 and {RELAY_SWEEP_BATCHES_MAX}, got {}",
                self.sweep_batches
            )));
        }
        if self.sweep_budget.is_zero() {
            return Err(Error::Config(
                "the relay's sweep_budget must be longer than zero".into(),
            ));
        }
        if self.lease < Duration::from_millis(100) {
            return Err(Error::Config(
                "the relay lease must be at least 100 ms".into(),
            ));
        }
        if self.interval.is_zero() {
            return Err(Error::Config(
                "the relay interval must be longer than zero".into(),
            ));
        }
        if self.max_attempts < 1 {
            return Err(Error::Config(
                "the relay's max_attempts must be at least 1".into(),
            ));
        }
        if self.backoff_cap < self.backoff_base {
            return Err(Error::Config(
                "the relay's backoff cap must be at least its base".into(),
            ));
        }
        if self.concurrency == 0 {
            return Err(Error::Config(
                "the relay concurrency must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// What one relay run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// Rows claimed.
    pub claimed: u64,
    /// Rows marked done (their item or event exists).
    pub relayed: u64,
    /// Items inserted now (the others met their own item: a second relay).
    pub items_inserted: u64,
    /// Events appended now (the others were already in the log).
    pub events_appended: u64,
    /// Rows failed and left for a later attempt.
    pub retried: u64,
    /// Rows parked as failed.
    pub parked: u64,
    /// Rows whose claim had passed to another relay when marked.
    pub stale: u64,
}

/// The relay service.
#[derive(Debug, Clone)]
pub struct Relay {
    pub(super) queue: Queue,
    pub(super) config: RelayConfig,
}

impl Relay {
    /// A relay over `queue`.
    ///
    /// # Errors
    /// As [`RelayConfig::validate`].
    pub fn new(queue: Queue, config: RelayConfig) -> Result<Self> {
        config.validate()?;
        Ok(Relay { queue, config })
    }

    /// Its settings.
    pub fn config(&self) -> &RelayConfig {
        &self.config
    }

    /// Its role row for `drover handlers` (see [`relay_role`]).
    pub fn role_info(&self) -> RoleInfo {
        relay_role()
    }

    /// Claims one batch and relays it.
    ///
    /// # Errors
    /// Storage errors from the claim, the inserts or the marking; the rows
    /// of a run that failed part-way are relayed by a later run (once the
    /// lease passes), meeting whatever this one inserted.
    ///
    /// # Cancel safety
    /// Dropped, the claimed rows wait for their lease to pass; nothing is
    /// relayed twice.
    pub async fn run_once(&self) -> Result<RelayReport> {
        let store = self.queue.store();
        let params = OutboxClaimParams {
            lease: self.config.lease,
            limit: self.config.batch,
        };
        let max_payload = self.queue.config().max_payload_bytes;
        // One transaction where the store has it (PostgreSQL): a run that
        // dies or loses its connection part-way leaves nothing behind, not
        // even a claim, so the next run (after a restart, too) takes the
        // rows at once instead of after their lease.
        let batch = match store.outbox_relay_atomic(&params, max_payload).await? {
            Some(batch) => batch,
            None => self.relay_in_steps(&params, max_payload).await?,
        };
        let mut report = RelayReport {
            claimed: batch.rows.len() as u64,
            relayed: batch.landed,
            items_inserted: batch.tally.items_inserted,
            events_appended: batch.tally.events_appended,
            stale: (batch.tally.done.len() as u64).saturating_sub(batch.landed),
            ..RelayReport::default()
        };
        if report.relayed > 0 {
            metrics::counter!("drover_outbox_relayed_total").increment(report.relayed);
        }
        // Counted as a direct enqueue counts its insert, with the same labels.
        crate::queue::counters::count_each(
            "drover_enqueued_total",
            batch
                .tally
                .inserted
                .iter()
                .map(|(lane, kind)| (lane.as_str(), kind.as_str())),
        );
        for (i, error) in batch.tally.failed {
            let row = &batch.rows[i];
            let Some(claim) = row.claim() else { continue };
            let params = OutboxFailParams {
                error,
                retry_delay: self.backoff(row.attempts + 1),
                max_attempts: self.config.max_attempts,
            };
            match store.outbox_fail(&claim, &params).await {
                Ok(OutboxFailOutcome::Retrying { .. }) => {
                    report.retried += 1;
                    metrics::counter!("drover_outbox_retried_total").increment(1);
                }
                Ok(OutboxFailOutcome::Parked) => {
                    report.parked += 1;
                    metrics::counter!("drover_outbox_failed_total").increment(1);
                    tracing::warn!(row = %row.id, kind = %row.kind, error = %params.error,
                        "outbox row parked as failed after its relay attempts ran out");
                }
                Err(e) if e.kind() == crate::ErrorKind::Conflict => report.stale += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    /// One batch in separate steps (claim, inserts, appends, marks), for a
    /// store without [`OutboxStore::outbox_relay_atomic`]: safe because the
    /// item and the event carry the row's id (see the module docs), at the
    /// price of a claim left to its lease when the run dies part-way.
    async fn relay_in_steps(
        &self,
        params: &OutboxClaimParams,
        max_payload: usize,
    ) -> Result<RelayBatch> {
        let store = self.queue.store();
        let rows = store.outbox_claim(params).await?;
        relay_rows(rows, max_payload, &mut StoreWrites(store.as_ref())).await
    }

    /// The backoff before relay attempt `attempts + 1` of a row.
    fn backoff(&self, attempts: i32) -> Duration {
        let policy = RetryPolicy {
            base: self.config.backoff_base,
            cap: self.config.backoff_cap,
            ..RetryPolicy::default()
        };
        crate::rules::retry_delay(&policy, attempts, rand::random::<f64>())
    }

    /// Relays until `stop` fires: a run per wake-up (the outbox insert's)
    /// or per jittered interval, and at once again after a full batch.
    /// Runs [`RelayConfig::concurrency`] loops side by side.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped run leaves its rows to their lease.
    pub async fn run(&self, stop: CancellationToken) {
        let loops = (0..self.config.concurrency).map(|_| self.run_loop(stop.clone()));
        futures::future::join_all(loops).await;
    }

    async fn run_loop(&self, stop: CancellationToken) {
        let mut wake: Option<broadcast::Receiver<Wake>> = match self.queue.store().wakeups().await {
            Ok(rx) => Some(rx),
            Err(e) => {
                tracing::warn!(error = %e, "outbox relay: no wake-ups, polling");
                None
            }
        };
        let mut failing = Duration::ZERO;
        loop {
            if stop.is_cancelled() {
                return;
            }
            let full = match self.run_once().await {
                Ok(r) => {
                    failing = Duration::ZERO;
                    r.claimed >= u64::from(self.config.batch)
                }
                Err(e) => {
                    // As the claim loop: soon after the first failure, and
                    // never longer than the poll interval, so a relay is
                    // back within about a poll of the database returning.
                    failing = (failing * 2)
                        .clamp(RELAY_RETRY_MIN, self.config.interval.max(RELAY_RETRY_MIN));
                    tracing::warn!(error = %e, "outbox relay run failed; retrying");
                    false
                }
            };
            if full {
                continue;
            }
            let unit = 1.0 + RELAY_JITTER * (2.0 * rand::random::<f64>() - 1.0);
            let wait = if failing.is_zero() {
                self.config.interval.mul_f64(unit)
            } else {
                failing.mul_f64(unit)
            };
            let sleep = tokio::time::sleep(wait);
            tokio::pin!(sleep);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = &mut sleep => break,
                    r = recv(&mut wake), if failing.is_zero() => match r {
                        // Another process's commit to a SQLite file may
                        // have been an outbox row.
                        Some(name) if name != OUTBOX_WAKE && name != ANY_LANE => continue,
                        _ => break,
                    },
                }
            }
            // Coalesce a burst of wake-ups into this one run.
            if let Some(rx) = wake.as_mut() {
                while rx.try_recv().is_ok() {}
            }
        }
    }
}

/// The next wake-up name; `None` when it lagged (anything may be waiting)
/// or there is no channel (then it never resolves).
async fn recv(wake: &mut Option<broadcast::Receiver<Wake>>) -> Option<String> {
    match wake {
        Some(rx) => match rx.recv().await {
            // The relay has one name to hear; the nonce is the workers' business.
            Ok(w) => Some(w.lane),
            Err(broadcast::error::RecvError::Lagged(_)) => None,
            Err(broadcast::error::RecvError::Closed) => {
                *wake = None;
                std::future::pending().await
            }
        },
        None => std::future::pending().await,
    }
}

/// The stepwise relay's writes: each one the store's own call, in its own
/// transaction (safe because the item and the event carry the row's id).
struct StoreWrites<'a>(&'a dyn Store);

#[async_trait::async_trait]
impl RelayWrites for StoreWrites<'_> {
    async fn insert_items(&mut self, items: &[NewItem]) -> Result<Vec<InsertResult>> {
        self.0.item_insert_many(items).await
    }

    async fn append_events(&mut self, events: &[NewEvent]) -> Result<Vec<Result<EventAppended>>> {
        match self.0.event_append_many(events).await {
            Ok(a) => Ok(a.into_iter().map(Ok).collect()),
            // One bad event refuses the batch: find it one by one.
            Err(e) if e.kind() == crate::ErrorKind::InvalidInput => {
                let mut each = Vec::with_capacity(events.len());
                for ev in events {
                    each.push(match self.0.event_append(ev).await {
                        Err(e) if e.kind() == crate::ErrorKind::InvalidInput => Err(e),
                        other => Ok(other?),
                    });
                }
                Ok(each)
            }
            Err(e) => Err(e),
        }
    }

    async fn mark_done(&mut self, done: &[OutboxClaim]) -> Result<u64> {
        Ok(self.0.outbox_complete(done).await?.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_role_declares_all_four_strategies() {
        let role = relay_role();
        let named: Vec<&str> = role.strategies.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            named,
            ["idempotency", "retry", "checkpoint", "recovery"],
            "{role:?}"
        );
        assert!(role.strategies.iter().all(|(_, v)| !v.trim().is_empty()));
    }

    #[test]
    fn every_relay_batch_size_has_a_validated_maximum() {
        let ok = RelayConfig::default();
        assert!(ok.validate().is_ok());
        for bad in [
            RelayConfig {
                batch: RELAY_BATCH_MAX + 1,
                ..ok.clone()
            },
            RelayConfig {
                sweep_batches: RELAY_SWEEP_BATCHES_MAX + 1,
                ..ok.clone()
            },
            RelayConfig {
                sweep_batches: 0,
                ..ok.clone()
            },
            RelayConfig {
                sweep_budget: Duration::ZERO,
                ..ok.clone()
            },
        ] {
            let e = bad.validate().unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Config, "{bad:?}");
        }
    }
}
