//! Fair share over HTTP (docs/flow-control.md#fair-share-between-tenants):
//! each tenant's share of each lane, an operator's weight per tenant and
//! its clearing, and turning fair share off or on per lane (on: by tenant,
//! or by group inside each tenant's share). A weight moves
//! every other tenant's share, so every route needs a token not scoped to
//! a tenant; changes need the operator role (as the limits routes).

use axum::extract::{Path, State};
use axum::{Extension, Json};
use drover::store::fairness::{FairShare, MAX_WEIGHT};
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
            "fair share spans every tenant: use a token not scoped to a tenant",
        )),
    }
}

/// One tenant's share of one lane.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FairShareView {
    /// The lane.
    pub lane: String,
    /// The tenant.
    pub tenant: Uuid,
    /// Its weight (default 1).
    pub weight: u32,
    /// Its items pending and due in the lane, counted up to 1,000 (a
    /// tenant at 1,000 has at least that many).
    pub waiting: u64,
    /// The starts fair share gave it in the lane (since its pass row was
    /// made; an idle row is collected by the sweep).
    pub started: u64,
    /// Whether fair share is on for the lane.
    pub fair: bool,
    /// Whether the lane shares each tenant's starts between its groups.
    pub by_group: bool,
}

/// Every tenant's share, and the lanes with fair share off. The shares
/// are at most one live interval old (2 s by default): one read serves
/// every caller and the dashboard's lanes page meanwhile, and a change of
/// a weight or a lane through this server is seen at once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FairnessView {
    /// Each tenant's share of each lane where it has work or a pass.
    pub shares: Vec<FairShareView>,
    /// The lanes an operator turned fair share off for.
    pub lanes_off: Vec<String>,
    /// The lanes an operator set to share by group.
    pub lanes_by_group: Vec<String>,
}

/// What `PUT /v1/fairness/tenants/{tenant}` sets.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WeightRequest {
    /// The tenant's weight (1 to 1000).
    #[schema(minimum = 1, maximum = 1000)]
    #[serde(deserialize_with = "super::parse::whole")]
    pub weight: u32,
}

/// A tenant's weight as set.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WeightView {
    /// The tenant.
    pub tenant: Uuid,
    /// Its weight.
    pub weight: u32,
}

/// What `DELETE /v1/fairness/tenants/{tenant}` did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WeightCleared {
    /// Whether the tenant had a weight to clear.
    pub cleared: bool,
}

/// What `PUT /v1/fairness/lanes/{lane}` sets.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LaneFairRequest {
    /// Fair share on (the default) or off (priority then age order).
    pub fair: bool,
    /// On: inside each tenant's share, share its starts between its groups
    /// too (default false: by tenant). Only with `fair`.
    #[serde(default)]
    pub by_group: bool,
}

/// Every tenant's share of every lane, at most one live interval old (a
/// change through this server shows at once).
#[utoipa::path(get, path = "/v1/fairness", tag = "operations",
    responses(
        (status = 200, description = "the shares", body = FairnessView),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn list_fairness(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
) -> ApiResult<Json<FairnessView>> {
    unscoped(&who)?;
    let settings = state.queue.fair_settings().await?;
    // Shared per live interval with the lanes page (the count of each
    // tenant's due items is most of the read); a change through this
    // server forgets it.
    let shares = state.live.fair_shares().await?;
    let view = |s: &FairShare| FairShareView {
        fair: settings.on(&s.lane),
        by_group: settings.by_group(&s.lane),
        lane: s.lane.clone(),
        tenant: s.tenant,
        weight: s.weight,
        waiting: s.waiting,
        started: s.started,
    };
    let lanes_off = settings
        .lanes
        .iter()
        .filter(|l| !l.on)
        .map(|l| l.lane.clone())
        .collect();
    let lanes_by_group = settings
        .lanes
        .iter()
        .filter(|l| l.on && l.by_group)
        .map(|l| l.lane.clone())
        .collect();
    Ok(Json(FairnessView {
        shares: shares.iter().map(view).collect(),
        lanes_off,
        lanes_by_group,
    }))
}

fn tenant_of(text: &str) -> Result<Uuid, Problem> {
    Uuid::parse_str(text).map_err(|_| {
        Problem::from(drover::Error::invalid("tenant", "is not a UUID")).field("tenant")
    })
}

/// Set a tenant's weight: inside each lane its starts are in proportion to
/// it among the tenants with due work (operator, unscoped token).
#[utoipa::path(put, path = "/v1/fairness/tenants/{tenant}", tag = "operations",
    params(("tenant" = Uuid, Path, description = "the tenant")),
    request_body = WeightRequest,
    responses(
        (status = 200, description = "set", body = WeightView),
        (status = 400, description = "invalid tenant or weight", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn set_weight(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(tenant): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<WeightView>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let tenant = tenant_of(&tenant)?;
    let req: WeightRequest = super::parse::json(&body)?;
    if !(1..=MAX_WEIGHT).contains(&req.weight) {
        return Err(Problem::from(drover::Error::invalid(
            "weight",
            format!("must be 1 to {MAX_WEIGHT}"),
        ))
        .field("weight"));
    }
    let principal = who.queue_principal(Uuid::nil(), None);
    let w = state
        .queue
        .fair_weight_set(&principal, tenant, req.weight)
        .await?;
    state.live.fair_shares_stale().await;
    Ok(Json(WeightView {
        tenant: w.tenant,
        weight: w.weight,
    }))
}

/// Clear a tenant's weight (back to 1; operator, unscoped token).
#[utoipa::path(delete, path = "/v1/fairness/tenants/{tenant}", tag = "operations",
    params(("tenant" = Uuid, Path, description = "the tenant")),
    responses(
        (status = 200, description = "cleared, or there was nothing to clear", body = WeightCleared),
        (status = 400, description = "invalid tenant", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn clear_weight(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(tenant): Path<String>,
) -> ApiResult<Json<WeightCleared>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let tenant = tenant_of(&tenant)?;
    let principal = who.queue_principal(Uuid::nil(), None);
    let cleared = state.queue.fair_weight_clear(&principal, tenant).await?;
    state.live.fair_shares_stale().await;
    Ok(Json(WeightCleared { cleared }))
}

/// Turn fair share on or off for a lane (off: priority then age order;
/// on: by tenant, or with `by_group` by group inside each tenant's share;
/// operator, unscoped token).
#[utoipa::path(put, path = "/v1/fairness/lanes/{lane}", tag = "operations",
    params(("lane" = String, Path, description = "the lane", pattern = "^[a-z0-9_-]{1,64}$", min_length = 1, max_length = 64)),
    request_body = LaneFairRequest,
    responses(
        (status = 200, description = "set", body = LaneFairRequest),
        (status = 400, description = "invalid lane, or by_group with fair off", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn set_lane(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path(lane): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<LaneFairRequest>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let req: LaneFairRequest = super::parse::json(&body)?;
    let principal = who.queue_principal(Uuid::nil(), None);
    let l = state
        .queue
        .fair_lane_mode_set(&principal, &lane, req.fair, req.by_group)
        .await?;
    state.live.fair_shares_stale().await;
    Ok(Json(LaneFairRequest {
        fair: l.on,
        by_group: l.by_group,
    }))
}
