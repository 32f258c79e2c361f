//! Batches over HTTP (docs/dependencies.md): create one (its callback's
//! kind, lane, payload and `when`), seal it, list the tenant's batches and
//! read one with its members per status. Members join through
//! `POST /v1/items` (`"batch": id`). Every route is confined to the
//! token's tenant when it has one. An item's dependencies, with their
//! results, are read here too (`GET /v1/items/{id}/dependencies`).

use axum::extract::{Path, RawQuery, State};
use axum::{Extension, Json};
use drover::queue::BatchSpec;
use drover::store::links::{BatchRow, BatchWhen};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::items::TenantQuery;
use super::parse;
use crate::AppState;
use crate::auth::{ApiPrincipal, Role};
use crate::problem::{ApiResult, Problem};

/// When a batch's callback is enqueued.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BatchWhenName {
    /// Whatever the members ended as.
    #[default]
    Always,
    /// Only when every member is done.
    Success,
    /// Only when at least one member failed or was cancelled.
    Failure,
}

impl From<BatchWhenName> for BatchWhen {
    fn from(w: BatchWhenName) -> Self {
        match w {
            BatchWhenName::Always => BatchWhen::Always,
            BatchWhenName::Success => BatchWhen::Success,
            BatchWhenName::Failure => BatchWhen::Failure,
        }
    }
}

impl From<BatchWhen> for BatchWhenName {
    fn from(w: BatchWhen) -> Self {
        match w {
            BatchWhen::Always => BatchWhenName::Always,
            BatchWhen::Success => BatchWhenName::Success,
            BatchWhen::Failure => BatchWhenName::Failure,
        }
    }
}

/// What `POST /v1/batches` creates.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchCreate {
    /// The callback item's kind.
    #[schema(pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)]
    pub callback: String,
    /// The batch's id (default minted).
    #[serde(default)]
    pub id: Option<Uuid>,
    /// The callback's lane (default `default`).
    #[serde(default)]
    #[schema(pattern = "^[a-z0-9_-]{1,64}$", min_length = 1, max_length = 64)]
    pub lane: Option<String>,
    /// Carried in the callback's payload under `payload`.
    #[serde(default)]
    pub payload: serde_json::Value,
    /// When the callback is enqueued (default `always`).
    #[serde(default)]
    pub when: BatchWhenName,
    /// The tenant (default the token's, else the nil tenant).
    #[serde(default)]
    pub tenant: Option<Uuid>,
}

/// A batch and its progress.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchView {
    /// Its id.
    pub id: Uuid,
    /// Its tenant.
    pub tenant: Uuid,
    /// `open` (members may join), `sealed` (waiting for members) or
    /// `finished` (every member final; the callback decision taken).
    pub state: String,
    /// The callback's kind.
    pub callback: String,
    /// The callback's lane.
    pub lane: String,
    /// When the callback is enqueued.
    pub when: BatchWhenName,
    /// The callback item's id (it exists once finished, when `when` held).
    pub callback_id: Uuid,
    /// Members enqueued.
    pub total: i64,
    /// Members not final yet.
    pub open: i64,
    /// Members done.
    pub done: i64,
    /// Members dead-lettered.
    pub failed: i64,
    /// Members cancelled.
    pub cancelled: i64,
    /// When it was created.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Members per current status (in `GET /v1/batches/{id}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<std::collections::BTreeMap<String, i64>>,
}

impl From<BatchRow> for BatchView {
    fn from(b: BatchRow) -> Self {
        BatchView {
            state: b.state().to_owned(),
            open: b.open(),
            id: b.id,
            tenant: b.tenant_id,
            callback: b.callback_kind,
            lane: b.callback_lane,
            when: b.when.into(),
            callback_id: b.callback_id,
            total: b.total,
            done: b.counts.done,
            failed: b.counts.failed,
            cancelled: b.counts.cancelled,
            created_at: b.created_at,
            members: None,
        }
    }
}

/// The tenant's batches, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BatchPage {
    /// The batches.
    pub batches: Vec<BatchView>,
}

/// Which batches `GET /v1/batches` lists.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BatchListQuery {
    /// The tenant (default the token's, else the nil tenant).
    pub tenant: Option<Uuid>,
    /// At most this many (default 50, at most 500).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

fn batch_id(text: &str) -> Result<Uuid, Problem> {
    Uuid::parse_str(text).map_err(|_| Problem::invalid("id", "is not a UUID"))
}

/// Create a batch (open, empty; creating the same id with the same
/// callback again answers it).
#[utoipa::path(post, path = "/v1/batches", tag = "items",
    request_body = BatchCreate,
    responses(
        (status = 201, description = "created (or the same batch again)", body = BatchView),
        (status = 400, description = "invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "the token may not enqueue the callback's kind or this tenant", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "the id is another batch's", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn create_batch(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    body: axum::body::Bytes,
) -> ApiResult<(axum::http::StatusCode, Json<BatchView>)> {
    let req: BatchCreate = parse::json(&body)?;
    let tenant = who.tenant_for(req.tenant)?;
    drover::item::validate_kind(&req.callback).map_err(|e| Problem::from(e).field("callback"))?;
    if !who.may_enqueue(&req.callback) {
        return Err(Problem::forbidden(format!(
            "the token may not enqueue kind {:?}",
            req.callback
        ))
        .field("callback"));
    }
    let permission = state.queue.kind_permission(&req.callback);
    let principal = who.queue_principal(tenant, Some(&permission));
    let mut spec = BatchSpec::new(req.id.unwrap_or_else(Uuid::now_v7), req.callback)
        .payload(req.payload)
        .when(req.when.into());
    if let Some(l) = req.lane {
        spec = spec.lane(l);
    }
    let row = state.queue.batch_create(&principal, spec).await?;
    Ok((axum::http::StatusCode::CREATED, Json(row.into())))
}

/// Seal a batch: no more members; its callback follows once every member
/// is final (at once when they all are).
#[utoipa::path(post, path = "/v1/batches/{id}/seal", tag = "items",
    params(("id" = Uuid, Path, description = "the batch's id"), TenantQuery),
    responses(
        (status = 200, description = "sealed", body = BatchView),
        (status = 400, description = "invalid id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a viewer token, or another tenant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such batch for this tenant", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn seal_batch(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<BatchView>> {
    if who.enqueue.is_empty() {
        who.require(Role::Operator)?;
    }
    let id = batch_id(&id)?;
    let q: TenantQuery = parse::query(raw.as_deref())?;
    let tenant = who.tenant_for(q.tenant)?;
    let row = state.queue.batch_seal(tenant, id).await?;
    Ok(Json(row.into()))
}

/// The tenant's batches, newest first, with their progress.
#[utoipa::path(get, path = "/v1/batches", tag = "items",
    params(BatchListQuery),
    responses(
        (status = 200, description = "the batches", body = BatchPage),
        (status = 400, description = "invalid query", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "another tenant", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn list_batches(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<BatchPage>> {
    let q: BatchListQuery = parse::query(raw.as_deref())?;
    let tenant = who.tenant_for(q.tenant)?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(Problem::invalid("limit", "must be from 1 to 500"));
    }
    let rows = state.queue.batches(tenant, limit).await?;
    Ok(Json(BatchPage {
        batches: rows.into_iter().map(BatchView::from).collect(),
    }))
}

/// One batch with its members per current status.
#[utoipa::path(get, path = "/v1/batches/{id}", tag = "items",
    params(("id" = Uuid, Path, description = "the batch's id"), TenantQuery),
    responses(
        (status = 200, description = "the batch", body = BatchView),
        (status = 400, description = "invalid id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "another tenant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such batch for this tenant", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn get_batch(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<BatchView>> {
    let id = batch_id(&id)?;
    let q: TenantQuery = parse::query(raw.as_deref())?;
    let tenant = who.tenant_for(q.tenant)?;
    let row = state.queue.batch(tenant, id).await?;
    let members = state.queue.batch_members(tenant, id).await?;
    let mut view = BatchView::from(row);
    view.members = Some(
        members
            .into_iter()
            .map(|(s, n)| (s.as_str().to_owned(), n))
            .collect(),
    );
    Ok(Json(view))
}

/// The items one item waits (or waited) for.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DependenciesView {
    /// Each dependency as it stands (status and result included), by id.
    pub items: Vec<super::views::ItemView>,
}

/// The items one item waits (or waited) for, each with its status and
/// result: what a dependant's worker in any language reads of the work it
/// followed (docs/dependencies.md). One read.
#[utoipa::path(get, path = "/v1/items/{id}/dependencies", tag = "items",
    params(("id" = Uuid, Path, description = "the dependant's id"), TenantQuery),
    responses(
        (status = 200, description = "its dependencies (empty when it has none)", body = DependenciesView),
        (status = 400, description = "invalid id", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "another tenant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "no such item for this tenant", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn get_dependencies(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Json<DependenciesView>> {
    let id = Uuid::parse_str(&id).map_err(|_| Problem::invalid("id", "is not a UUID"))?;
    let q: TenantQuery = parse::query(raw.as_deref())?;
    let tenant = who.tenant_for(q.tenant)?;
    // An unknown item answers 404 (its empty list would read as "none").
    state.queue.get(tenant, id).await?;
    let deps = state.queue.dependencies(tenant, id).await?;
    Ok(Json(DependenciesView {
        items: deps.into_iter().map(Into::into).collect(),
    }))
}
