//! Progress from an HTTP worker: `POST /v1/work/items/{id}/progress`, a
//! fenced write of the item's progress (a number and/or a small JSON note),
//! rate-limited per item so a tight loop cannot flood the database.
//!
//! The limit is this process's: one write per item per
//! [`PROGRESS_INTERVAL`](drover::queue::PROGRESS_INTERVAL); a report inside
//! it answers 429 with `Retry-After` and writes nothing, so the worker keeps
//! its latest value and sends it again later (or with nothing lost at all:
//! the item keeps the last report that was written).

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{ClaimHandle, HttpWorkers, RETRY_AFTER_SECS};
use crate::AppState;
use crate::api::parse;
use crate::auth::ApiPrincipal;
use crate::problem::Problem;

/// How many items' last writes a process remembers before it forgets
/// those past the interval.
const REMEMBERED: usize = 100_000;

/// A progress report.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressRequest {
    /// The item's tenant, as the claim gave it.
    pub tenant_id: Uuid,
    /// The claim token, as the claim gave it.
    pub claim_token: Uuid,
    /// How far, as a finite number (0 to 100 for a percentage, by
    /// convention).
    #[serde(default)]
    #[schema(nullable = false)]
    pub value: Option<f64>,
    /// A small JSON note (at most 8 KiB): a checkpoint the next run of the
    /// item is handed back as `progress` in its claim.
    #[serde(default)]
    #[schema(value_type = Option<Object>, nullable = false)]
    pub data: Option<serde_json::Value>,
}

/// A report that was written.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProgressWritten {
    /// The item.
    pub id: Uuid,
}

impl HttpWorkers {
    /// True when `id`'s progress may be written now (and notes the write).
    fn progress_due(&self, id: Uuid) -> bool {
        let mut last = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let interval = drover::queue::PROGRESS_INTERVAL;
        if last
            .get(&id)
            .is_some_and(|at| now.duration_since(*at) < interval)
        {
            return false;
        }
        if last.len() >= REMEMBERED {
            last.retain(|_, at| now.duration_since(*at) < interval);
        }
        last.insert(id, now);
        true
    }
}

/// Report a claimed item's progress (a worker token; fenced; at most once
/// a second per item).
#[utoipa::path(post, path = "/v1/work/items/{id}/progress", tag = "work",
    request_body = ProgressRequest,
    params(("id" = Uuid, Path, description = "the item's id")),
    responses(
        (status = 200, description = "written", body = ProgressWritten),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not a worker token", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "stale claim: nothing changed", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "this item's last report was written under a second ago: nothing written; send the latest again after Retry-After", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn progress(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let r: Result<ProgressWritten, Response> = async {
        who.require_work().map_err(IntoResponse::into_response)?;
        let id = Uuid::parse_str(&id)
            .map_err(|_| Problem::invalid("id", "is not a UUID").into_response())?;
        let req: ProgressRequest = parse::json(&body).map_err(IntoResponse::into_response)?;
        let report = drover::item::Progress {
            value: req.value,
            data: req.data,
        };
        report
            .validate()
            .map_err(|e| Problem::from(e).into_response())?;
        if !state.work.progress_due(id) {
            let mut r = Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too-many-requests",
                "Too many requests",
            )
            .detail("progress for this item was written under a second ago")
            .into_response();
            r.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(RETRY_AFTER_SECS),
            );
            return Err(r);
        }
        let h = ClaimHandle {
            tenant_id: req.tenant_id,
            claim_token: req.claim_token,
        };
        state
            .queue
            .progress_claim(&h.claim_ref(id), &report)
            .await
            .map_err(|e| super::settle::fenced(e).into_response())?;
        Ok(ProgressWritten { id })
    }
    .await;
    match r {
        Ok(v) => (StatusCode::OK, Json(v)).into_response(),
        Err(resp) => resp,
    }
}
