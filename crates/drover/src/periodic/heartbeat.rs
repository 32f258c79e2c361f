//! `drover.heartbeat`: the built-in periodic job. Every worker declares it
//! (every minute unless the `heartbeat_cron` setting says otherwise or
//! `off`), so a fresh `drover worker` shows the scheduler working: one item
//! per tick across the fleet, run by whichever worker claims it, which logs
//! its identity and records the beat.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::{MisfirePolicy, Schedule};
use crate::queue::{JobContext, Kind};
use crate::worker::{Done, Handler, Outcome, Strategy};

/// The heartbeat schedule's name (and its kind's).
pub const HEARTBEAT_NAME: &str = "drover.heartbeat";
// The heartbeat's cron is a worker setting (`DROVER_HEARTBEAT_CRON`): its
// default lives with the settings table, below this role.
pub use crate::worker::HEARTBEAT_CRON_DEFAULT;

/// The heartbeat's payload: nothing.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Heartbeat {}

impl Kind for Heartbeat {
    const NAME: &'static str = HEARTBEAT_NAME;
    // A beat that failed is stale by the next one: never retry for long.
    const MAX_ATTEMPTS: i32 = 2;
}

/// Beats this process has run (what `beats()` reads).
static BEATS: AtomicU64 = AtomicU64::new(0);

/// How many heartbeats this process has run.
pub fn beats() -> u64 {
    BEATS.load(Ordering::Relaxed)
}

/// Runs `drover.heartbeat`: logs the worker's identity, the tick and how
/// late it ran; records the beat in the `drover_heartbeat_total` counter
/// and the `drover_heartbeat_last_timestamp_seconds` gauge (the item itself
/// stays in the items table as the durable record until purged).
#[derive(Debug, Default, Clone, Copy)]
pub struct HeartbeatHandler;

impl Handler for HeartbeatHandler {
    type Job = Heartbeat;
    const STRATEGY: Strategy = Strategy {
        idempotency: "one item per tick (periodic:drover.heartbeat:<tick>); a second run only logs again",
        retry: "2 attempts: a beat is stale by the next tick",
        checkpoint: "none: one log line and a counter, a rerun starts over",
        recovery: "a crashed beat is swept after its lease and run again, or superseded by the next tick",
    };

    async fn handle(&self, cx: &JobContext, _job: Heartbeat) -> Outcome {
        let item = cx.item();
        let worker = item.claimed_by.as_deref().unwrap_or("?");
        let tick = item
            .idempotency_key
            .as_deref()
            .and_then(|k| k.strip_prefix("periodic:drover.heartbeat:"))
            .unwrap_or("manual");
        let now = chrono::Utc::now();
        let lag_ms = (now - item.available_at).num_milliseconds();
        BEATS.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("drover_heartbeat_total").increment(1);
        metrics::gauge!("drover_heartbeat_last_timestamp_seconds").set(now.timestamp() as f64);
        tracing::info!(worker, tick, lag_ms, item = %cx.id(), "heartbeat");
        Ok(Done::Completed)
    }
}

/// The heartbeat schedule on `cron`: misfire `skip` (a missed beat means
/// nothing later).
pub fn heartbeat_schedule(cron: &str) -> Schedule {
    Schedule::new(HEARTBEAT_NAME, cron, Heartbeat {}).misfire(MisfirePolicy::Skip)
}
