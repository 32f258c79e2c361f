//! Bulk retry and cancel by filter: the matched count is previewed first
//! (`preview: true` changes nothing), every request is capped
//! ([`BULK_MAX`]), the writes go in batches of [`BULK_BATCH`] concurrent
//! single-item operations, and each one is audited with the token as the
//! actor, exactly as a single retry or cancel is.
//!
//! Invariant: a request matches only items in a status its action acts on
//! ([`BulkAction::acts_on`]), whatever the filter says, so `matched`
//! counts what the action can change and a client that repeats the request
//! while `more` is true ends: each call moves what it matched out of the
//! match (only an item changed by someone else meanwhile is `skipped`).

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::idempotency::{self, Answer};
use super::items::ListQuery;
use super::parse;
use crate::AppState;
use crate::auth::{ApiPrincipal, Role};
use crate::problem::Problem;

/// The most items one bulk request touches.
pub const BULK_MAX: u32 = 10_000;
/// The cap when the request names none.
pub const BULK_DEFAULT: u32 = 1_000;
/// How many single-item writes run at once.
pub use crate::bulk::{BULK_BATCH, BulkAction};
use crate::bulk::{actionable, apply};

/// The items a bulk request matches.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkFilter {
    /// Status.
    #[schema(value_type = Option<super::contract::ItemStatus>)]
    pub status: Option<String>,
    /// Lane.
    #[schema(pattern = "^[a-z0-9_-]{1,64}$", min_length = 1, max_length = 64)]
    pub lane: Option<String>,
    /// Kind.
    #[schema(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub kind: Option<String>,
    /// Flow-control group.
    #[schema(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub group: Option<String>,
    /// Tenant (unscoped tokens; omitted: every tenant).
    pub tenant: Option<Uuid>,
    /// Idempotency key.
    pub key: Option<String>,
    /// Created at or after.
    pub created_after: Option<DateTime<Utc>>,
    /// Created before.
    pub created_before: Option<DateTime<Utc>>,
    /// Text in the last error.
    pub error: Option<String>,
}

/// A bulk request.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// Retry or cancel.
    pub action: BulkAction,
    /// Which items.
    #[serde(default)]
    pub filter: BulkFilter,
    /// Only count what would be touched.
    #[serde(default)]
    pub preview: bool,
    /// The most items to touch (1 to 10000; default 1000).
    #[serde(default, deserialize_with = "super::parse::whole_opt")]
    #[schema(minimum = 1, maximum = 10000)]
    pub max: Option<u32>,
}

/// What a bulk request matched and did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BulkResponse {
    /// Items matched (at most `max`): those the filter names that are in a
    /// status the action changes (a retry: done, failed, cancelled; a
    /// cancel: pending, claimed, failed).
    pub matched: u64,
    /// True when more items match than `max`: repeating the request acts
    /// on the next ones, and ends.
    pub more: bool,
    /// Items changed (0 for a preview).
    pub applied: u64,
    /// Matched items whose state refused the change by the time it ran.
    pub skipped: u64,
    /// True for a preview.
    pub preview: bool,
}

/// Retry or cancel every item a filter matches, or preview the count.
#[utoipa::path(post, path = "/v1/items/bulk", tag = "items",
    request_body = BulkRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "makes a retry of this request safe")),
    responses(
        (status = 200, description = "matched and applied", body = BulkResponse),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or another tenant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "same Idempotency-Key in flight", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Idempotency-Key reused", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn bulk(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let prepared = (|| {
        who.require(Role::Operator)?;
        let key = idempotency::key_of(&headers)?;
        let req: BulkRequest = parse::json(&body)?;
        let max = req.max.unwrap_or(BULK_DEFAULT);
        if !(1..=BULK_MAX).contains(&max) {
            return Err(Problem::invalid("max", format!("must be 1 to {BULK_MAX}")));
        }
        let f = &req.filter;
        let q = ListQuery {
            status: f.status.clone(),
            lane: f.lane.clone(),
            kind: f.kind.clone(),
            group: f.group.clone(),
            tenant: f.tenant,
            key: f.key.clone(),
            created_after: f.created_after,
            created_before: f.created_before,
            error: f.error.clone(),
            cursor: None,
            limit: None,
        };
        let filter = q.filter(&who, max + 1).map_err(|p| match p.field.clone() {
            Some(fl) => p.field(format!("filter.{fl}")),
            None => p,
        })?;
        let tenant = who.tenant.or(f.tenant).unwrap_or_else(Uuid::nil);
        Ok::<_, Problem>((key, req, filter, tenant, max))
    })();
    let (key, req, filter, tenant, max) = match prepared {
        Ok(p) => p,
        Err(p) => return p.into_response(),
    };
    idempotency::once(&state, key, tenant, who.token_id, "POST /v1/items/bulk", &body, || async {
        let mut matched = match actionable(&state, &filter, req.action).await {
            Ok(m) => m,
            Err(e) => return Answer::from(Problem::from(e)),
        };
        let more = matched.len() > max as usize;
        matched.truncate(max as usize);
        let mut out = BulkResponse {
            matched: matched.len() as u64,
            more,
            applied: 0,
            skipped: 0,
            preview: req.preview,
        };
        if req.preview {
            return Answer::json(StatusCode::OK, &out);
        }
        match apply(&state, &who, &matched, req.action).await {
            Ok((applied, skipped)) => {
                out.applied = applied;
                out.skipped = skipped;
            }
            Err(e) => return Answer::from(Problem::from(e)),
        }
        tracing::info!(actor = %who.token_id, action = ?req.action, applied = out.applied, skipped = out.skipped, "bulk operation");
        Answer::json(StatusCode::OK, &out)
    })
    .await
}
