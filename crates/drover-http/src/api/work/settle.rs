//! The writes after a claim: renew, complete (one or a batch), fail,
//! defer, release. Each presents the item's tenant and claim token and
//! goes through the `Queue` method a native worker uses, fenced in the
//! store's SQL; a stale claim answers 409 and changes nothing.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use drover::store::{FailOutcome, WorkerRow};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::*;
use crate::AppState;
use crate::api::parse;
use crate::auth::ApiPrincipal;

/// A renewal.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewRequest {
    /// The item's tenant, as the claim gave it.
    pub tenant_id: Uuid,
    /// The claim token, as the claim gave it.
    pub claim_token: Uuid,
    /// The new lease from now, in milliseconds (1000 to 3600000).
    #[serde(default = "lease_default", deserialize_with = "parse::whole")]
    #[schema(minimum = 1000, maximum = 3600000, default = 30000)]
    pub lease_ms: u64,
}

fn lease_default() -> u64 {
    LEASE_DEFAULT_MS
}

/// A renewed lease.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Renewed {
    /// When the lease now lapses (the database's clock).
    pub lease_expires_at: DateTime<Utc>,
}

/// A failure.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailRequest {
    /// The item's tenant, as the claim gave it.
    pub tenant_id: Uuid,
    /// The claim token, as the claim gave it.
    pub claim_token: Uuid,
    /// What went wrong (kept as the item's last error, cut to 4 KiB; no
    /// U+0000).
    #[schema(pattern = "^[^\\u0000]*$")]
    pub error: String,
    /// False dead-letters the item now; true (the default) requeues it
    /// after the kind's backoff while its budget lasts.
    #[serde(default = "yes")]
    #[schema(default = true)]
    pub retryable: bool,
}

fn yes() -> bool {
    true
}

/// What a failure did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Failed {
    /// `requeued` or `dead_lettered`.
    #[schema(value_type = FailOutcomeName)]
    pub outcome: String,
    /// When it may run again, if requeued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub available_at: Option<DateTime<Utc>>,
}

/// What a failure did to the item.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
pub enum FailOutcomeName {
    /// Pending again after the backoff; one attempt spent.
    Requeued,
    /// Out of budget, or not retryable: the dead letter.
    DeadLettered,
}

/// A deferral.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DeferRequest {
    /// The item's tenant, as the claim gave it.
    pub tenant_id: Uuid,
    /// The claim token, as the claim gave it.
    pub claim_token: Uuid,
    /// How long from now before it may run again, in milliseconds (0 to
    /// 31 days); no attempt is spent.
    #[serde(deserialize_with = "parse::whole")]
    #[schema(minimum = 0, maximum = 2678400000u64)]
    pub delay_ms: u64,
}

/// When a deferred item runs again.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Deferred {
    /// Not claimable before this.
    pub available_at: DateTime<Utc>,
}

/// A release.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The item's tenant, as the claim gave it.
    pub tenant_id: Uuid,
    /// The claim token, as the claim gave it.
    pub claim_token: Uuid,
    /// Why (kept as the item's last error; at most 4096 bytes, no U+0000).
    #[serde(default)]
    #[schema(nullable = false, max_length = 4096, pattern = "^[^\\u0000]*$")]
    pub note: Option<String>,
}

/// A completion of one item, with the handler's result if it has one.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteRequest {
    /// The item's tenant, as the claim gave it.
    pub tenant_id: Uuid,
    /// The claim token, as the claim gave it.
    pub claim_token: Uuid,
    /// What the handler returned: any JSON value (at most 256 KiB, no
    /// U+0000), stored by the statement that completes the item and read
    /// back by `GET /v1/items/{id}`. Omitted: no result.
    #[serde(default)]
    #[schema(nullable = false)]
    pub result: Option<serde_json::Value>,
}

/// One item of a batch completion.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteEntry {
    /// The item's id.
    pub id: Uuid,
    /// The item's tenant, as the claim gave it.
    pub tenant_id: Uuid,
    /// The claim token, as the claim gave it.
    pub claim_token: Uuid,
    /// What the handler returned (as [`CompleteRequest::result`]).
    #[serde(default)]
    #[schema(nullable = false)]
    pub result: Option<serde_json::Value>,
}

/// Checks a result's size and content, naming `field`.
fn checked_result(field: &str, r: Option<&serde_json::Value>) -> Result<(), Problem> {
    match r {
        Some(v) => drover::item::validate_result(v).map_err(|e| Problem::from(e).field(field)),
        None => Ok(()),
    }
}

/// A batch completion.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBatch {
    /// The items (1 to 1000), each under its own claim.
    #[schema(min_items = 1, max_items = 1000)]
    pub items: Vec<CompleteEntry>,
}

/// What a batch completion did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CompletedBatch {
    /// The ids marked done.
    pub completed: Vec<Uuid>,
    /// The ids whose claim was stale: nothing changed for them.
    pub stale: Vec<Uuid>,
}

/// A settled item's new state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Settled {
    /// The item.
    pub id: Uuid,
    /// Its status now.
    #[schema(value_type = crate::api::contract::ItemStatus)]
    pub status: String,
}

/// The common opening of a write after a claim: a worker token, an item
/// id, a strict body.
fn open<T: DeserializeOwned>(
    who: &ApiPrincipal,
    id: &str,
    body: &[u8],
) -> Result<(Uuid, T), Problem> {
    who.require_work()?;
    let id = Uuid::parse_str(id).map_err(|_| Problem::invalid("id", "is not a UUID"))?;
    Ok((id, parse::json(body)?))
}

fn answer<T: Serialize>(r: Result<T, Problem>) -> Response {
    match r {
        Ok(v) => (StatusCode::OK, Json(v)).into_response(),
        Err(p) => p.into_response(),
    }
}

const STALE: &str = "stale claim: the claim token no longer holds the item (its lease passed and it was handed back, or it was settled); nothing changed";

pub(super) fn fenced(e: drover::Error) -> Problem {
    // An unknown item is no claim of the caller's either: stale, as a
    // claim whose token moved on.
    if e.is_conflict() || e.kind() == drover::ErrorKind::NotFound {
        Problem::conflict(STALE)
    } else {
        Problem::from(e)
    }
}

/// Renew the lease of a claimed item (a worker token; fenced).
#[utoipa::path(post, path = "/v1/work/items/{id}/renew", tag = "work",
    request_body = RenewRequest,
    params(("id" = Uuid, Path, description = "the item's id")),
    responses(
        (status = 200, description = "the lease runs on", body = Renewed),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "stale claim: nothing changed; stop the run", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn renew(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    answer(
        async {
            let (id, req) = open::<RenewRequest>(&who, &id, &body)?;
            let lease = millis("lease_ms", req.lease_ms, LEASE_MIN_MS, LEASE_MAX_MS)?;
            let handle = ClaimHandle {
                tenant_id: req.tenant_id,
                claim_token: req.claim_token,
            };
            let cx = state
                .queue
                .held(handle.claim_ref(id))
                .await
                .map_err(fenced)?;
            let lease_expires_at = state.queue.extend_lease(&cx, lease).await.map_err(fenced)?;
            if let Some(worker) = cx.item().claimed_by.as_deref() {
                let row = state.work.known(worker).unwrap_or_else(|| WorkerRow {
                    id: worker.to_owned(),
                    host: format!("http:{}", who.token_id),
                    pid: 0,
                    lanes: vec![cx.lane().to_owned()],
                    capacity: 1,
                    started_at: Utc::now(),
                    last_beat_at: Utc::now(),
                    state: "running".to_owned(),
                    beat_interval_ms: i32::try_from(lease.as_millis()).unwrap_or(i32::MAX),
                    kinds: vec![],
                    version: String::new(),
                });
                beat(&state, row).await;
            }
            Ok(Renewed { lease_expires_at })
        }
        .await,
    )
}

/// Mark a claimed item done (a worker token; fenced), storing its `result`
/// if given in the same write. Concurrent completions are written
/// together, each row fenced on its own claim.
#[utoipa::path(post, path = "/v1/work/items/{id}/complete", tag = "work",
    request_body = CompleteRequest,
    params(("id" = Uuid, Path, description = "the item's id")),
    responses(
        (status = 200, description = "done", body = Settled),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "stale claim: nothing changed", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn complete(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    answer(
        async {
            let (id, req) = open::<CompleteRequest>(&who, &id, &body)?;
            checked_result("result", req.result.as_ref())?;
            let h = ClaimHandle {
                tenant_id: req.tenant_id,
                claim_token: req.claim_token,
            };
            // Gathered with concurrent completions into one statement.
            if state
                .work
                .complete(&state.queue, h.claim_ref(id), req.result)
                .await?
            {
                Ok(Settled {
                    id,
                    status: "done".into(),
                })
            } else {
                Err(Problem::conflict(STALE))
            }
        }
        .await,
    )
}

/// Mark many claimed items done in one statement (a worker token; each
/// fenced on its own claim): the stale ones are listed, not refused.
#[utoipa::path(post, path = "/v1/work/complete", tag = "work",
    request_body = CompleteBatch,
    responses(
        (status = 200, description = "which landed, which were stale", body = CompletedBatch),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn complete_batch(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    body: Bytes,
) -> Response {
    answer(
        async {
            who.require_work()?;
            let req: CompleteBatch = parse::json(&body)?;
            if req.items.is_empty() {
                return Err(Problem::invalid(
                    "items",
                    format!("must hold 1 to {COMPLETE_MAX} items"),
                ));
            }
            complete_entries(&state, "items", &req.items).await
        }
        .await,
    )
}

/// Writes `entries` done in one statement, each fenced on its own claim,
/// and says which landed and which were stale. Shared by the batch
/// completion and the claim that carries its worker's completions
/// (`field` names the request's list in a refusal).
pub(crate) async fn complete_entries(
    state: &AppState,
    field: &str,
    entries: &[CompleteEntry],
) -> Result<CompletedBatch, Problem> {
    if entries.len() > COMPLETE_MAX {
        return Err(Problem::invalid(
            field,
            format!("must hold at most {COMPLETE_MAX} items"),
        ));
    }
    if entries.is_empty() {
        return Ok(CompletedBatch {
            completed: vec![],
            stale: vec![],
        });
    }
    for (i, e) in entries.iter().enumerate() {
        checked_result(&format!("{field}[{i}].result"), e.result.as_ref())?;
    }
    let claims: Vec<_> = entries
        .iter()
        .map(|e| drover::store::Completion {
            claim: drover::ClaimRef {
                tenant_id: e.tenant_id,
                id: e.id,
                token: e.claim_token,
            },
            result: e.result.clone(),
        })
        .collect();
    let done = state.queue.complete_claims_with(&claims).await?;
    let stale = entries
        .iter()
        .map(|e| e.id)
        .filter(|id| !done.contains(id))
        .collect();
    Ok(CompletedBatch {
        completed: done,
        stale,
    })
}

/// Record a failure of a claimed item (a worker token; fenced): requeued
/// after the kind's backoff with one attempt spent, or dead-lettered when
/// not retryable or out of budget.
#[utoipa::path(post, path = "/v1/work/items/{id}/fail", tag = "work",
    request_body = FailRequest,
    params(("id" = Uuid, Path, description = "the item's id")),
    responses(
        (status = 200, description = "requeued or dead-lettered", body = Failed),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "stale claim: nothing changed", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn fail(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    answer(
        async {
            let (id, req) = open::<FailRequest>(&who, &id, &body)?;
            no_nul("error", &req.error)?;
            let h = ClaimHandle {
                tenant_id: req.tenant_id,
                claim_token: req.claim_token,
            };
            let cx = state.queue.held(h.claim_ref(id)).await.map_err(fenced)?;
            let out = state
                .queue
                .fail(&cx, &req.error, !req.retryable)
                .await
                .map_err(fenced)?;
            Ok(match out {
                FailOutcome::Requeued { available_at } => Failed {
                    outcome: "requeued".into(),
                    available_at: Some(available_at),
                },
                FailOutcome::DeadLettered => Failed {
                    outcome: "dead_lettered".into(),
                    available_at: None,
                },
            })
        }
        .await,
    )
}

/// Put a claimed item back to run after a delay, spending no attempt (a
/// worker token; fenced).
#[utoipa::path(post, path = "/v1/work/items/{id}/defer", tag = "work",
    request_body = DeferRequest,
    params(("id" = Uuid, Path, description = "the item's id")),
    responses(
        (status = 200, description = "pending again from available_at", body = Deferred),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "stale claim: nothing changed", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn defer(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    answer(
        async {
            let (id, req) = open::<DeferRequest>(&who, &id, &body)?;
            let delay = millis("delay_ms", req.delay_ms, 0, DEFER_MAX_MS)?;
            let h = ClaimHandle {
                tenant_id: req.tenant_id,
                claim_token: req.claim_token,
            };
            let cx = state.queue.held(h.claim_ref(id)).await.map_err(fenced)?;
            let available_at = state.queue.defer(&cx, delay).await.map_err(fenced)?;
            Ok(Deferred { available_at })
        }
        .await,
    )
}

/// The longest deferral: 31 days.
pub const DEFER_MAX_MS: u64 = 31 * 24 * 3600 * 1000;

/// Put a claimed item back to run now, spending no attempt (a worker
/// token; fenced): what a worker does with items it will not start.
#[utoipa::path(post, path = "/v1/work/items/{id}/release", tag = "work",
    request_body = ReleaseRequest,
    params(("id" = Uuid, Path, description = "the item's id")),
    responses(
        (status = 200, description = "pending again", body = Settled),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "stale claim: nothing changed", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn release(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    answer(
        async {
            let (id, req) = open::<ReleaseRequest>(&who, &id, &body)?;
            if let Some(n) = &req.note {
                if n.chars().count() > 4096 {
                    return Err(Problem::invalid("note", "must be at most 4096 characters"));
                }
                no_nul("note", n)?;
            }
            let h = ClaimHandle {
                tenant_id: req.tenant_id,
                claim_token: req.claim_token,
            };
            let cx = state.queue.held(h.claim_ref(id)).await.map_err(fenced)?;
            state
                .queue
                .release(&cx, req.note.as_deref())
                .await
                .map_err(fenced)?;
            Ok(Settled {
                id,
                status: "pending".into(),
            })
        }
        .await,
    )
}
