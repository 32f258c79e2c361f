//! Closures over HTTP (docs/flow-control.md#closing-a-group): the kinds and
//! groups closed until a time, an operator's close and reopen. A closure
//! of a kind holds every tenant's items, so every route needs a token not
//! scoped to a tenant; closing and reopening need the operator role.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use drover::store::closures::Closure;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::AppState;
use crate::auth::ApiPrincipal;
use crate::problem::{ApiResult, Problem};

fn unscoped(who: &ApiPrincipal) -> Result<(), Problem> {
    match who.tenant {
        None => Ok(()),
        Some(_) => Err(Problem::forbidden(
            "a closure is an operator's act across tenants: use a token not scoped to a tenant",
        )),
    }
}

/// A kind, or one group of it, closed until a time.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClosureView {
    /// The kind.
    pub kind: String,
    /// The closed group; null: the whole kind.
    pub group: Option<String>,
    /// The group's tenant (the nil UUID for a kind).
    pub tenant_id: Uuid,
    /// When it reopens (the database clock).
    pub until: DateTime<Utc>,
    /// The item whose handler closed it; null: an operator.
    pub closed_by_item: Option<Uuid>,
    /// Who closed it.
    pub closed_by: Uuid,
    /// Who closed it, as people read it: the token's label, `system` for
    /// the nil actor, else `token <last 8 hex digits>`.
    pub closed_by_label: String,
}

impl ClosureView {
    fn of(c: Closure, actors: &crate::actors::Actors) -> Self {
        ClosureView {
            closed_by_label: actors.name(c.closed_by),
            kind: c.kind,
            group: c.group,
            tenant_id: c.tenant_id,
            until: c.until,
            closed_by_item: c.closed_by_item,
            closed_by: c.closed_by,
        }
    }
}

/// What `PUT /v1/closures/{kind}` closes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseRequest {
    /// Until when (RFC 3339).
    pub until: DateTime<Utc>,
    /// One group of the kind; absent: the whole kind.
    #[serde(default)]
    #[schema(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub group: Option<String>,
    /// With `group`: its tenant (default: the nil tenant).
    #[serde(default)]
    pub tenant_id: Option<Uuid>,
}

/// What `POST /v1/closures/{kind}/reopen` reopens.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReopenRequest {
    /// One group of the kind; absent: the kind's own closure.
    #[serde(default)]
    #[schema(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub group: Option<String>,
    /// With `group`: its tenant (default: the nil tenant).
    #[serde(default)]
    pub tenant_id: Option<Uuid>,
}

/// What a reopen did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Reopened {
    /// Whether a closure was in force.
    pub reopened: bool,
}

/// Every closure in force.
#[utoipa::path(get, path = "/v1/closures", tag = "operations",
    responses(
        (status = 200, description = "every closure in force", body = [ClosureView]),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn list_closures(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
) -> ApiResult<Json<Vec<ClosureView>>> {
    unscoped(&who)?;
    let all = state.queue.closures().await?;
    let actors = crate::actors::Actors::load(&state.queue).await;
    Ok(Json(
        all.into_iter()
            .map(|c| ClosureView::of(c, &actors))
            .collect(),
    ))
}

/// Close a kind, or one group of it, until a time: no claim takes an item
/// it holds before then, on the database clock (operator, unscoped token).
#[utoipa::path(put, path = "/v1/closures/{kind}", tag = "operations",
    params(("kind" = String, Path, description = "the kind", pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)),
    request_body = CloseRequest,
    responses(
        (status = 200, description = "closed", body = ClosureView),
        (status = 400, description = "invalid kind, group or time", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn close(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(kind): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<ClosureView>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let req: CloseRequest = super::parse::json(&body)?;
    let principal = who.queue_principal(Uuid::nil(), None);
    let c = state
        .queue
        .close_until(
            &principal,
            &kind,
            req.tenant_id.unwrap_or_default(),
            req.group.as_deref(),
            req.until,
        )
        .await?;
    let actors = crate::actors::Actors::load(&state.queue).await;
    Ok(Json(ClosureView::of(c, &actors)))
}

/// Reopen a closed kind or group at once (operator, unscoped token).
#[utoipa::path(post, path = "/v1/closures/{kind}/reopen", tag = "operations",
    params(("kind" = String, Path, description = "the kind", pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)),
    request_body = ReopenRequest,
    responses(
        (status = 200, description = "reopened, or it was not closed", body = Reopened),
        (status = 400, description = "invalid kind or group", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn reopen(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(kind): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<Reopened>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let req: ReopenRequest = super::parse::json(&body)?;
    let principal = who.queue_principal(Uuid::nil(), None);
    let reopened = state
        .queue
        .reopen(
            &principal,
            &kind,
            req.tenant_id.unwrap_or_default(),
            req.group.as_deref(),
        )
        .await?;
    Ok(Json(Reopened { reopened }))
}
