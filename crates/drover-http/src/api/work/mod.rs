//! Workers over HTTP: the routes under `/v1/work` that make any HTTP
//! client a fenced drover worker (docs/http.md, "Workers over HTTP").
//!
//! A worker token (role `worker`, grants `<lane>:<kind>`) claims a batch
//! with a lease, long-polling up to `wait_ms` on the wake-ups native
//! workers listen to ([`claim`]); then, per item, renews, completes, fails,
//! defers or releases it ([`settle`]), each write presenting the item's
//! tenant and the claim token it was handed.
//!
//! Invariants:
//! - **Fenced like a native worker.** Claims go through `Queue::claim`
//!   (so flow-control limits, paused lanes and the tenant directory apply
//!   exactly as for a native worker) and every write after the claim
//!   through the `Queue` method a native worker settles with, whose SQL is
//!   fenced on the claim token, status `claimed` and the lease. A stale
//!   claim changes nothing and answers 409.
//! - **Grants bound claims.** A claim names lanes and, optionally, kinds;
//!   each lane and kind must be covered by the token's grants (no kinds
//!   named: a `<lane>:*` grant is needed). A write after a claim is
//!   authorised by the claim token itself (122 random bits handed only to
//!   the claimer) together with a worker token.
//! - **Liveness.** Each claim beats the worker's row in the workers table
//!   (throttled), and so does each renewal; the row's beat interval is the
//!   longest silence a live HTTP worker keeps (its lease or its wait,
//!   whichever is longer), so a silent one reads `lost` after two.
//! - **Drain.** Once the server's shutdown token fires, claims answer 503
//!   with `Retry-After` at once and long polls end the same way; writes
//!   after a claim are still served until the listener closes.
//! - **Results with the completion.** A completion may carry a `result`
//!   (any JSON, at most 256 KiB), written by the same fenced statement
//!   that marks the item done; one over the limit is refused with 400 and
//!   nothing is written.
//! - **Progress, rate-limited.** A progress report is a fenced write too;
//!   one item's reports are written at most once a second by this process,
//!   a report inside that second answers 429 with `Retry-After`.

pub mod claim;
pub mod gather;
pub mod progress;
pub mod settle;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use drover::ClaimRef;
use drover::store::WorkerRow;
use serde::{Deserialize, Serialize};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};
use uuid::Uuid;

use crate::problem::Problem;

/// The seconds a draining server tells a worker to wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u64 = 1;
/// The longest long poll a claim may ask for.
pub const WAIT_MAX_MS: u64 = 60_000;
/// The lease a claim gets unless it asks.
pub const LEASE_DEFAULT_MS: u64 = 30_000;
/// The shortest lease a claim may ask for.
pub const LEASE_MIN_MS: u64 = 1_000;
/// The longest lease a claim (or a renewal) may ask for.
pub const LEASE_MAX_MS: u64 = 3_600_000;
/// The most items one claim hands out.
pub const CLAIM_MAX: u32 = 1_000;
/// The most lanes one claim names.
pub const LANES_MAX: usize = 32;
/// The most items one batch completion carries.
pub const COMPLETE_MAX: usize = 1_000;
/// How often a long poll claims again when no wake-up came (a missed
/// notification costs at most this).
pub const POLL_FALLBACK: Duration = Duration::from_millis(1_000);

/// A lane name, as the document states it (`[a-z0-9_-]{1,64}`).
pub struct LaneName;

/// A kind name, as the document states it (`[a-z0-9_.:-]{1,128}`).
pub struct KindName;

fn name_schema(pattern: &str, max: usize) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
        .min_length(Some(1))
        .max_length(Some(max))
        .into()
}

impl PartialSchema for LaneName {
    fn schema() -> RefOr<Schema> {
        name_schema("^[a-z0-9_-]{1,64}$", 64)
    }
}

impl ToSchema for LaneName {}

impl PartialSchema for KindName {
    fn schema() -> RefOr<Schema> {
        name_schema("^[a-z0-9_.:-]{1,128}$", 128)
    }
}

impl ToSchema for KindName {}

/// The most kinds one claim names.
pub const KINDS_MAX: usize = 100;

/// Refuses U+0000 in a text the store keeps (PostgreSQL's `text` cannot
/// hold it): the caller's 400, never a storage error.
///
/// # Errors
/// 400 naming `field`.
fn no_nul(field: &str, text: &str) -> Result<(), Problem> {
    if text.contains('\0') {
        Err(Problem::invalid(field, "must not contain U+0000"))
    } else {
        Ok(())
    }
}

/// Which claim a write belongs to: the item's tenant and the claim token
/// the claim handed out.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimHandle {
    /// The item's tenant, as the claim gave it.
    pub tenant_id: Uuid,
    /// The claim token, as the claim gave it.
    pub claim_token: Uuid,
}

impl ClaimHandle {
    fn claim_ref(&self, id: Uuid) -> ClaimRef {
        ClaimRef {
            tenant_id: self.tenant_id,
            id,
            token: self.claim_token,
        }
    }
}

/// An item handed to an HTTP worker: what its handler needs, and the
/// handle its writes present.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClaimedItem {
    /// The item's id.
    pub id: Uuid,
    /// Its tenant (present it with every write).
    pub tenant_id: Uuid,
    /// Its kind.
    pub kind: String,
    /// Its lane.
    pub lane: String,
    /// Its flow-control group.
    #[schema(nullable = true)]
    pub group: Option<String>,
    /// Its payload: any JSON value, as enqueued.
    pub payload: serde_json::Value,
    /// This run's attempt, from 1.
    pub attempt: i32,
    /// The attempt budget.
    pub max_attempts: i32,
    /// The claim token every write after the claim presents.
    pub claim_token: Uuid,
    /// The fencing number of this claim: grows with every claim of the
    /// item, so an effect keyed on it can refuse a stale run's write.
    pub fencing_token: i64,
    /// When the lease lapses (the database's clock) unless renewed.
    pub lease_expires_at: DateTime<Utc>,
    /// Who enqueued it (the nil UUID: the tenant's service context).
    pub created_by: Uuid,
    /// The W3C `traceparent` of the enqueueing request.
    #[schema(nullable = true)]
    pub traceparent: Option<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// The progress an earlier run last reported (its checkpoint to
    /// resume from); absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub progress: Option<crate::api::views::ProgressView>,
}

impl ClaimedItem {
    fn of(cx: &drover::JobContext) -> Option<ClaimedItem> {
        let i = cx.item();
        Some(ClaimedItem {
            id: i.id,
            tenant_id: i.tenant_id,
            kind: i.kind.clone(),
            lane: i.lane.clone(),
            group: i.group.clone(),
            payload: i.payload.clone(),
            attempt: cx.attempt(),
            max_attempts: i.max_attempts,
            claim_token: i.claim_token?,
            fencing_token: i.claim_seq,
            lease_expires_at: i.lease_expires_at?,
            created_by: i.created_by,
            traceparent: i.traceparent.clone(),
            created_at: i.created_at,
            progress: i.progress.clone().map(|p| crate::api::views::ProgressView {
                value: p.value,
                data: p.data,
            }),
        })
    }
}

/// Checks a worker id: 1 to 128 bytes of `[A-Za-z0-9_.:-]`.
///
/// # Errors
/// 400 naming `worker_id`.
pub fn validate_worker_id(id: &str) -> Result<(), Problem> {
    let ok = (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Problem::invalid(
            "worker_id",
            "must be 1 to 128 bytes of letters, digits, _ . : or -",
        ))
    }
}

/// A milliseconds member within bounds.
///
/// # Errors
/// 400 naming `field`.
fn millis(field: &str, ms: u64, min: u64, max: u64) -> Result<Duration, Problem> {
    if (min..=max).contains(&ms) {
        Ok(Duration::from_millis(ms))
    } else {
        Err(Problem::invalid(
            field,
            format!("must be between {min} and {max}"),
        ))
    }
}

/// How many HTTP workers' rows a process keeps before it forgets the
/// silent ones.
pub const WORKERS_KEPT: usize = 10_000;

/// The HTTP workers this process has heard from: their last published
/// row and when it was beaten, so beats are throttled and a renewal can
/// beat the row its worker's last claim described.
#[derive(Debug, Default)]
pub struct HttpWorkers {
    rows: Mutex<HashMap<String, (WorkerRow, Instant)>>,
    /// The completer task's queue ([`gather`]), started on first use so a
    /// router can be built outside a runtime.
    completer: std::sync::OnceLock<tokio::sync::mpsc::Sender<gather::Job>>,
    /// When each item's progress was last written ([`progress`]).
    progress: Mutex<HashMap<Uuid, Instant>>,
}

impl HttpWorkers {
    /// Completes one claim through the completer ([`gather`]): `true` when
    /// it landed, `false` when it was stale.
    async fn complete(
        &self,
        queue: &drover::Queue,
        claim: ClaimRef,
        result: Option<serde_json::Value>,
    ) -> Result<bool, Problem> {
        let tx = self.completer.get_or_init(|| gather::start(queue.clone()));
        let (reply, answer) = tokio::sync::oneshot::channel();
        tx.send(gather::Job {
            claim,
            result,
            reply,
        })
        .await
        .map_err(|_| Problem::unavailable("the completer stopped"))?;
        answer
            .await
            .map_err(|_| Problem::unavailable("the completer stopped"))?
    }

    /// The row to beat for `row.id` now, or `None` when its last beat is
    /// recent (under a quarter of its interval) and the row unchanged.
    fn due(&self, mut row: WorkerRow) -> Option<WorkerRow> {
        let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        // The row keeps the first claim's start, not each beat's.
        if let Some((old, _)) = rows.get(&row.id) {
            row.started_at = old.started_at;
        }
        let quarter = Duration::from_millis(u64::try_from(row.beat_interval_ms).unwrap_or(1)) / 4;
        if let Some((old, at)) = rows.get(&row.id)
            && now.duration_since(*at) < quarter
            && old.lanes == row.lanes
            && old.kinds == row.kinds
            && old.capacity == row.capacity
            && old.state == row.state
        {
            return None;
        }
        if rows.len() >= WORKERS_KEPT {
            // Bounded whatever ids callers send: forget the silent ones
            // (their rows read `lost` by then; a return beats anew).
            rows.retain(|_, (r, at)| {
                let interval = u64::try_from(r.beat_interval_ms).unwrap_or(1);
                now.duration_since(*at) < Duration::from_millis(interval) * 4
            });
        }
        rows.insert(row.id.clone(), (row.clone(), now));
        Some(row)
    }

    /// The row `worker` last beat, if this process knows it.
    fn known(&self, worker: &str) -> Option<WorkerRow> {
        let rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        rows.get(worker).map(|(r, _)| r.clone())
    }

    /// Forgets a worker (it said it stopped).
    fn forget(&self, worker: &str) {
        let mut rows = self.rows.lock().unwrap_or_else(|p| p.into_inner());
        rows.remove(worker);
    }
}

/// Beats `row` when due; a failed beat is logged, never the request's
/// failure (liveness is a report, the claim already happened).
async fn beat(state: &crate::AppState, row: WorkerRow) {
    if let Some(row) = state.work.due(row) {
        let id = row.id.clone();
        if let Err(e) = state.queue.worker_beat(&row).await {
            tracing::warn!(worker = %id, error = %e, "HTTP worker beat failed");
        }
    }
}
