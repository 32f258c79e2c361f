//! `POST /v1/work/claim`: a batch of items with a lease, long-polling up
//! to `wait_ms` on the store's wake-ups; and `POST /v1/work/workers/{id}/stop`,
//! a worker's goodbye.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use drover::store::WorkerRow;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use utoipa::ToSchema;
use uuid::Uuid;

use super::settle::{self, CompleteEntry};
use super::*;
use crate::AppState;
use crate::api::parse;
use crate::auth::ApiPrincipal;

/// What a claim asks for.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// The worker's id, stable for the process's life (its row in the
    /// workers table): 1 to 128 bytes of `[A-Za-z0-9_.:-]`.
    #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub worker_id: String,
    /// The lanes to claim from, in order (1 to 32).
    #[schema(value_type = Vec<LaneName>, min_items = 1, max_items = 32)]
    pub lanes: Vec<String>,
    /// The kinds it handles (at most 100); absent or empty, every kind
    /// (the token then needs a `<lane>:*` grant on each lane).
    #[serde(default)]
    #[schema(value_type = Option<Vec<KindName>>, nullable = false, max_items = 100)]
    pub kinds: Option<Vec<String>>,
    /// The most items to hand out (1 to 1000).
    #[serde(default = "one", deserialize_with = "parse::whole")]
    #[schema(minimum = 1, maximum = 1000, default = 1)]
    pub max: u32,
    /// The lease in milliseconds (1000 to 3600000).
    #[serde(default = "lease_default", deserialize_with = "parse::whole")]
    #[schema(minimum = 1000, maximum = 3600000, default = 30000)]
    pub lease_ms: u64,
    /// How long to wait for work when none is ready, in milliseconds
    /// (0 to 60000; 0 answers at once).
    #[serde(default, deserialize_with = "parse::whole")]
    #[schema(minimum = 0, maximum = 60000, default = 0)]
    pub wait_ms: u64,
    /// How many items the worker runs at once, for the workers table
    /// (default `max`).
    #[serde(default, deserialize_with = "parse::whole_opt")]
    #[schema(minimum = 1, maximum = 100000, nullable = false)]
    pub capacity: Option<i32>,
    /// Items this worker finished, written done before the claim (0 to
    /// 1000, each fenced on its own claim, exactly as `POST
    /// /v1/work/complete` writes them): a busy worker's completions ride
    /// on its next claim, one request a round instead of two. The answer's
    /// `completed` and `stale` say which landed. A claim refused (4xx) or
    /// answered 503 while draining wrote none of them.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub complete: Vec<CompleteEntry>,
}

fn one() -> u32 {
    1
}

fn lease_default() -> u64 {
    LEASE_DEFAULT_MS
}

/// What a claim hands out.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClaimResponse {
    /// The items, each under its own claim (empty when the wait ran out).
    pub items: Vec<ClaimedItem>,
    /// Of the request's `complete`, the ids marked done (empty when it
    /// carried none).
    pub completed: Vec<Uuid>,
    /// Of the request's `complete`, the ids whose claim was stale: nothing
    /// changed for them.
    pub stale: Vec<Uuid>,
}

/// A claim checked against the token's grants.
struct Asked {
    worker_id: String,
    lanes: Vec<String>,
    kinds: Vec<String>,
    max: u32,
    lease: Duration,
    wait: Duration,
    capacity: i32,
    complete: Vec<CompleteEntry>,
}

fn check(who: &ApiPrincipal, req: ClaimRequest) -> Result<Asked, Problem> {
    who.require_work()?;
    validate_worker_id(&req.worker_id)?;
    if req.lanes.is_empty() || req.lanes.len() > LANES_MAX {
        return Err(Problem::invalid(
            "lanes",
            format!("must name 1 to {LANES_MAX} lanes"),
        ));
    }
    for (i, l) in req.lanes.iter().enumerate() {
        drover::item::validate_lane(l)
            .map_err(|e| Problem::from(e).field(format!("lanes[{i}]")))?;
    }
    let kinds = req.kinds.unwrap_or_default();
    if kinds.len() > KINDS_MAX {
        return Err(Problem::invalid(
            "kinds",
            format!("must name at most {KINDS_MAX} kinds"),
        ));
    }
    for (i, k) in kinds.iter().enumerate() {
        drover::item::validate_kind(k)
            .map_err(|e| Problem::from(e).field(format!("kinds[{i}]")))?;
    }
    for lane in &req.lanes {
        if kinds.is_empty() {
            if !who.may_work_any_kind(lane) {
                return Err(Problem::forbidden(format!(
                    "the token may not claim every kind on lane {lane:?}: name the kinds"
                ))
                .field("kinds"));
            }
        } else if let Some(k) = kinds.iter().find(|k| !who.may_work(lane, k)) {
            return Err(Problem::forbidden(format!(
                "the token may not claim kind {k:?} on lane {lane:?}"
            ))
            .field("kinds"));
        }
    }
    if !(1..=CLAIM_MAX).contains(&req.max) {
        return Err(Problem::invalid(
            "max",
            format!("must be between 1 and {CLAIM_MAX}"),
        ));
    }
    let capacity = req
        .capacity
        .unwrap_or(i32::try_from(req.max).unwrap_or(i32::MAX));
    if !(1..=100_000).contains(&capacity) {
        return Err(Problem::invalid("capacity", "must be between 1 and 100000"));
    }
    if req.complete.len() > COMPLETE_MAX {
        return Err(Problem::invalid(
            "complete",
            format!("must hold at most {COMPLETE_MAX} items"),
        ));
    }
    Ok(Asked {
        worker_id: req.worker_id,
        lanes: req.lanes,
        kinds,
        max: req.max,
        lease: millis("lease_ms", req.lease_ms, LEASE_MIN_MS, LEASE_MAX_MS)?,
        wait: millis("wait_ms", req.wait_ms, 0, WAIT_MAX_MS)?,
        capacity,
        complete: req.complete,
    })
}

/// 503 with `Retry-After`: the server is draining.
pub fn draining() -> Response {
    let mut res = Problem::unavailable(
        "the server is shutting down; claim again elsewhere or after Retry-After",
    )
    .into_response();
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    res
}

fn row_of(who: &ApiPrincipal, a: &Asked, state: &str) -> WorkerRow {
    let interval = a.lease.max(a.wait);
    let mut kinds = a.kinds.clone();
    kinds.sort();
    WorkerRow {
        id: a.worker_id.clone(),
        host: format!("http:{}", who.token_id),
        pid: 0,
        lanes: a.lanes.clone(),
        capacity: a.capacity,
        started_at: chrono::Utc::now(),
        last_beat_at: chrono::Utc::now(),
        state: state.to_owned(),
        beat_interval_ms: i32::try_from(interval.as_millis())
            .unwrap_or(i32::MAX)
            .max(1),
        kinds,
        version: String::new(),
    }
}

/// One pass over the lanes: up to `max` items in all.
async fn claim_once(state: &AppState, a: &Asked) -> drover::Result<Vec<ClaimedItem>> {
    let mut out = Vec::new();
    for lane in &a.lanes {
        let left = a.max - u32::try_from(out.len()).unwrap_or(a.max);
        if left == 0 {
            break;
        }
        let batch = match state
            .queue
            .claim(lane, &a.kinds, &a.worker_id, a.lease, left)
            .await
        {
            Ok(b) => b,
            // Items of earlier lanes are claimed already: hand them out
            // rather than leave them to wait out their lease.
            Err(e) if !out.is_empty() => {
                tracing::warn!(lane, error = %e, "claim failed on a later lane; answering what was claimed");
                break;
            }
            Err(e) => return Err(e),
        };
        out.extend(batch.items.iter().filter_map(ClaimedItem::of));
    }
    Ok(out)
}

/// Claim a batch of items with a lease (a worker token). With `wait_ms`,
/// a claim that finds nothing waits for a wake-up of one of its lanes (the
/// notifications native workers listen to) and claims again, until the
/// wait runs out (200 with no items) or the server drains (503 with
/// `Retry-After`).
#[utoipa::path(post, path = "/v1/work/claim", tag = "work",
    request_body = ClaimRequest,
    responses(
        (status = 200, description = "the items claimed (none when the wait ran out)", body = ClaimResponse),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token, or a lane or kind outside its grants", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "the server is draining (with Retry-After), or the database does not answer", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "seconds to wait before claiming again")))),
    security(("bearer" = [])))]
pub async fn claim(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    body: Bytes,
) -> Response {
    let asked = parse::json::<ClaimRequest>(&body).and_then(|r| check(&who, r));
    let a = match asked {
        Ok(a) => a,
        Err(p) => return p.into_response(),
    };
    let shutdown = state.config.shutdown.clone();
    if shutdown.is_cancelled() {
        return draining();
    }
    beat(&state, row_of(&who, &a, "running")).await;
    // The carried completions first: each frees its slot of any limit
    // before this worker claims again, and is written before a long poll
    // begins, so a finished item never waits on the wait. (Written beside
    // the claim instead, a completion refused by the database after the
    // claim had taken items would strand those items until their lease
    // passed; the one commit it would save a round was not measured.)
    let settled = match settle::complete_entries(&state, "complete", &a.complete).await {
        Ok(s) => s,
        Err(p) => return p.into_response(),
    };
    // Subscribed before the first claim, so work that lands between an
    // empty claim and the wait still wakes it.
    let mut wake = if a.wait.is_zero() {
        None
    } else {
        match state.queue.wakeups().await {
            Ok(rx) => Some(rx),
            Err(e) => {
                tracing::warn!(error = %e, "no wake-ups for a long poll; it polls");
                None
            }
        }
    };
    let deadline = tokio::time::Instant::now() + a.wait;
    loop {
        let items = match claim_once(&state, &a).await {
            Ok(items) => items,
            Err(e) => return Problem::from(e).into_response(),
        };
        let now = tokio::time::Instant::now();
        if !items.is_empty() || now >= deadline {
            let answer = ClaimResponse {
                items,
                completed: settled.completed,
                stale: settled.stale,
            };
            return (StatusCode::OK, Json(answer)).into_response();
        }
        let until = deadline.min(now + POLL_FALLBACK);
        let woken = async {
            match wake.as_mut() {
                None => std::future::pending::<()>().await,
                Some(rx) => loop {
                    match rx.recv().await {
                        Ok(w) if w.is_any() || a.lanes.contains(&w.lane) => return,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => return,
                        // The store's channel closed: poll from now on.
                        Err(RecvError::Closed) => std::future::pending::<()>().await,
                    }
                },
            }
        };
        tokio::select! {
            // A 503 could not say which completions it carried landed, so
            // such a claim ends with 200 and no items instead; the
            // worker's next claim meets the 503.
            () = shutdown.cancelled() => {
                if settled.completed.is_empty() && settled.stale.is_empty() {
                    return draining();
                }
                let answer = ClaimResponse {
                    items: vec![],
                    completed: settled.completed,
                    stale: settled.stale,
                };
                return (StatusCode::OK, Json(answer)).into_response();
            }
            () = tokio::time::sleep_until(until) => {}
            () = woken => {}
        }
    }
}

/// A worker's goodbye: its row reads `offline` (it stopped cleanly; what
/// it still holds it should have settled or released first).
#[utoipa::path(post, path = "/v1/work/workers/{id}/stop", tag = "work",
    params(("id" = String, Path, description = "the worker's id", pattern = "^[A-Za-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)),
    responses(
        (status = 204, description = "marked offline"),
        (status = 400, description = "invalid id", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token, or the row is another's", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn stop(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
) -> Response {
    if let Err(p) = who.require_work().and_then(|()| validate_worker_id(&id)) {
        return p.into_response();
    }
    // Only a row this token's workers beat: a worker token cannot mark a
    // native worker, or another token's, offline.
    let host = format!("http:{}", who.token_id);
    let stored = match state.queue.workers().await {
        Ok(rows) => rows.into_iter().find(|r| r.id == id),
        Err(e) => return Problem::from(e).into_response(),
    };
    if stored.as_ref().is_some_and(|r| r.host != host) {
        return Problem::forbidden("the worker's row is not this token's").into_response();
    }
    let mut row = stored
        .or_else(|| state.work.known(&id))
        .unwrap_or_else(|| WorkerRow {
            id: id.clone(),
            host,
            pid: 0,
            lanes: vec![],
            capacity: 1,
            started_at: chrono::Utc::now(),
            last_beat_at: chrono::Utc::now(),
            state: String::new(),
            beat_interval_ms: i32::try_from(LEASE_DEFAULT_MS).unwrap_or(i32::MAX),
            kinds: vec![],
            version: String::new(),
        });
    row.state = "offline".to_owned();
    state.work.forget(&id);
    match state.queue.worker_beat(&row).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => Problem::from(e).into_response(),
    }
}
