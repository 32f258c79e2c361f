//! Rate limits over HTTP (docs/flow-control.md#rate-limits): the rates in
//! force with when each next allows a start, and an operator's setting and
//! clearing. A rate counts every tenant's items, so every route needs a
//! token not scoped to a tenant; setting and clearing need the operator
//! role.

use axum::extract::{Path, State};
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use drover::store::rates::{Rate, RateSetting, RateUsage};
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
            "a rate counts every tenant's items: use a token not scoped to a tenant",
        )),
    }
}

/// A rate in force and when it next allows a start.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RateView {
    /// `lane`, `kind` or `group` (each group of the kind separately).
    #[schema(value_type = super::contract::LimitScopeName)]
    pub scope: String,
    /// The lane or kind.
    pub name: String,
    /// Starts allowed per period.
    pub count: u32,
    /// The period in milliseconds.
    pub period_ms: u64,
    /// Starts an idle scope admits at once.
    pub burst: u32,
    /// The rate as `drover limits list` prints it (`10/1s burst 20`).
    pub rate: String,
    /// When the next start is allowed (the database clock); null when one
    /// is allowed now. For a per-group rate, the latest among the groups
    /// it holds back.
    pub next_start_at: Option<DateTime<Utc>>,
    /// How many scopes (groups, for a per-group rate) it holds back now.
    pub held_back: u64,
    /// `code` or `operator`.
    #[schema(value_type = super::contract::LimitSourceName)]
    pub source: String,
    /// Who set it (a token id; nil for the system, as the code's rates).
    pub set_by: Uuid,
    /// Who set it, as people read it: the token's label, `system` for the
    /// nil actor, else `token <last 8 hex digits>`.
    pub set_by_label: String,
}

impl RateView {
    fn of(
        s: &RateSetting,
        next_start_at: Option<DateTime<Utc>>,
        held_back: u64,
        actors: &crate::actors::Actors,
    ) -> RateView {
        RateView {
            set_by: s.set_by,
            set_by_label: actors.name(s.set_by),
            scope: s.scope.kind_name().to_owned(),
            name: s.scope.name().to_owned(),
            count: s.rate.count,
            period_ms: s.rate.period_ms,
            burst: s.rate.burst,
            rate: s.rate.to_string(),
            next_start_at,
            held_back,
            source: s.source.as_str().to_owned(),
        }
    }
}

impl RateView {
    fn usage(u: RateUsage, actors: &crate::actors::Actors) -> Self {
        RateView::of(&u.setting, u.next_start_at, u.held_back, actors)
    }
}

/// What `PUT /v1/rates/{scope}/{name}` sets.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateRequest {
    /// Starts allowed per period (1 to 1000000).
    #[schema(minimum = 1, maximum = 1000000)]
    #[serde(deserialize_with = "super::parse::whole")]
    pub count: u32,
    /// The period in milliseconds (1 ms to 7 days); at most one start per
    /// microsecond.
    #[schema(minimum = 1, maximum = 604800000)]
    #[serde(deserialize_with = "super::parse::whole")]
    pub period_ms: u64,
    /// Starts an idle scope admits at once (1 to 1000000, default 1).
    #[schema(minimum = 1, maximum = 1000000)]
    #[serde(default = "one", deserialize_with = "super::parse::whole")]
    pub burst: u32,
}

fn one() -> u32 {
    1
}

/// What `DELETE /v1/rates/{scope}/{name}` did.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RateCleared {
    /// Whether an operator's rate was there to clear.
    pub cleared: bool,
}

fn scope_of(scope: &str, name: &str) -> Result<drover::store::limits::LimitScope, Problem> {
    let s = drover::store::limits::LimitScope::from_parts(scope, name)
        .map_err(|e| Problem::from(e).field("scope"))?;
    s.validate().map_err(|e| Problem::from(e).field("name"))?;
    Ok(s)
}

/// Every rate in force, with when each next allows a start.
#[utoipa::path(get, path = "/v1/rates", tag = "operations",
    responses(
        (status = 200, description = "every rate in force", body = [RateView]),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn list_rates(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
) -> ApiResult<Json<Vec<RateView>>> {
    unscoped(&who)?;
    let rates = state.queue.rates().await?;
    let actors = crate::actors::Actors::load(&state.queue).await;
    Ok(Json(
        rates
            .into_iter()
            .map(|u| RateView::usage(u, &actors))
            .collect(),
    ))
}

/// Set the operator's rate for a scope: it wins over the code's until
/// cleared, and every claimer enforces it within one poll interval, on the
/// database clock (operator, unscoped token).
#[utoipa::path(put, path = "/v1/rates/{scope}/{name}", tag = "operations",
    params(
        ("scope" = super::contract::LimitScopeName, Path, description = "lane, kind or group (each group of the kind)"),
        ("name" = String, Path, description = "the lane or kind", pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)),
    request_body = RateRequest,
    responses(
        (status = 200, description = "set", body = RateView),
        (status = 400, description = "invalid scope, name or rate", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn set_rate(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path((scope, name)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> ApiResult<Json<RateView>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let scope = scope_of(&scope, &name)?;
    let req: RateRequest = super::parse::json(&body)?;
    let rate = Rate {
        count: req.count,
        period_ms: req.period_ms,
        burst: req.burst,
    };
    let principal = who.queue_principal(Uuid::nil(), None);
    let s = state.queue.rate_set(&principal, &scope, rate).await?;
    let actors = crate::actors::Actors::load(&state.queue).await;
    Ok(Json(RateView::of(&s, None, 0, &actors)))
}

/// Clear the operator's rate of a scope (the code's is in force again, if
/// any; operator, unscoped token).
#[utoipa::path(delete, path = "/v1/rates/{scope}/{name}", tag = "operations",
    params(
        ("scope" = super::contract::LimitScopeName, Path, description = "lane, kind or group"),
        ("name" = String, Path, description = "the lane or kind", pattern = "^[a-z0-9_.:-]{1,128}$", min_length = 1, max_length = 128)),
    responses(
        (status = 200, description = "cleared, or there was nothing to clear", body = RateCleared),
        (status = 400, description = "invalid scope or name", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "no credentials", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "not an operator, or a tenant-scoped token", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn clear_rate(
    State(state): State<AppState>,
    Extension(who): Extension<ApiPrincipal>,
    Path((scope, name)): Path<(String, String)>,
) -> ApiResult<Json<RateCleared>> {
    who.require(crate::auth::Role::Operator)?;
    unscoped(&who)?;
    let scope = scope_of(&scope, &name)?;
    let principal = who.queue_principal(Uuid::nil(), None);
    let cleared = state.queue.rate_clear(&principal, &scope).await?;
    Ok(Json(RateCleared { cleared }))
}
